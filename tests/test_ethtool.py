"""Source `ethtool`: the SIOCETHTOOL layer (against a stand-in kernel and this machine's real
interfaces), the stat mapping, interface selection and failure reporting. Through the daemon:
tests/integration/test_ethtool_served.py."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import struct
from pathlib import Path

import pytest

from helpers import render_store, samples_of, value
from infrapulse.simulate.nic_stats import NicStats, mlx5_stat_names, write_stats
from infrapulse.simulate.sysfs_tree import demo_devices, write_tree
from infrapulse.sources.base import SourceContext
from infrapulse.sources.nic.ethtool import (
    EthtoolCollector,
    EthtoolSource,
    FileStatsProvider,
    IoctlStatsProvider,
    plan_stats,
)
from infrapulse.sources.nic.ethtool_ioctl import (
    ETHTOOL_GSSET_INFO,
    ETHTOOL_GSTATS,
    ETHTOOL_GSTRINGS,
    IFREQ_SIZE,
    SIOCETHTOOL,
    EthtoolIoctl,
    InterfaceGone,
    StatSetChanged,
    StatsNotSupported,
)
from infrapulse.store import Store


class FakeKernel:
    """Stands in for the kernel's SIOCETHTOOL handler: it reads the request from, and writes the
    answer into, the caller's buffers by address, exactly as copy_from/to_user would.

    `patched`: kernels with "ethtool: Avoid overflowing userspace buffer on stats query" answer
    a count mismatch with len/n_stats = 0; older ones write the current set regardless.
    `on_call(kernel, iface, cmd)` runs before each command, so a test can change the stat set
    between the three calls, as mlx5 does when PFC is reconfigured.
    """

    def __init__(self, stats: dict[str, dict[str, int] | None], patched: bool = True, on_call=None) -> None:
        self.stats = stats
        self.patched = patched
        self.on_call = on_call
        self.calls: list[tuple[str, int]] = []

    def __call__(self, fd: int, request: int, arg: bytes):
        assert request == SIOCETHTOOL and len(arg) == IFREQ_SIZE and fd >= 0
        raw_name, address = struct.unpack_from("16sP", arg)
        iface = raw_name.rstrip(b"\0").decode()
        cmd = struct.unpack("=I", ctypes.string_at(address, 4))[0]
        self.calls.append((iface, cmd))
        if self.on_call is not None:
            self.on_call(self, iface, cmd)
        if iface not in self.stats:
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))
        stats = self.stats[iface]
        if stats is None:
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        count = len(stats)
        if cmd == ETHTOOL_GSSET_INFO:
            _, _, mask = struct.unpack("=IIQ", ctypes.string_at(address, 16))
            ctypes.memmove(address + 8, struct.pack("=QI", mask & 0b10 if stats else 0, count), 12)
        elif cmd == ETHTOOL_GSTRINGS:
            _, string_set, expected = struct.unpack("=III", ctypes.string_at(address, 12))
            assert string_set == 1
            if self.patched and expected != count:
                ctypes.memmove(address + 8, struct.pack("=I", 0), 4)
                return arg
            table = b"".join(name.encode().ljust(32, b"\0") for name in stats)
            ctypes.memmove(address + 8, struct.pack("=I", count), 4)
            ctypes.memmove(address + 12, table, len(table))
        elif cmd == ETHTOOL_GSTATS:
            _, expected = struct.unpack("=II", ctypes.string_at(address, 8))
            if self.patched and expected != count:
                ctypes.memmove(address + 4, struct.pack("=I", 0), 4)
                return arg
            data = struct.pack(f"={count}Q", *stats.values())
            ctypes.memmove(address + 4, struct.pack("=I", count), 4)
            ctypes.memmove(address + 8, data, len(data))
        else:
            raise OSError(errno.EPERM, "unexpected command")
        return arg


def mlx5_values(pfc=(3,), base=1000) -> dict[str, int]:
    return {name: base + i for i, name in enumerate(mlx5_stat_names(pfc))}


# -- the ioctl layer ---------------------------------------------------------------------------


def test_reads_names_and_values_through_the_ioctl_abi():
    stats = mlx5_values()
    kernel = FakeKernel({"ens1f0np0": stats})
    ethtool = EthtoolIoctl(ioctl=kernel)
    names, values = ethtool.read("ens1f0np0")
    assert dict(zip(names, values)) == stats
    assert [cmd for _, cmd in kernel.calls] == [ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS, ETHTOOL_GSTATS,
                                                ETHTOOL_GSSET_INFO]
    again, _ = ethtool.read("ens1f0np0")
    assert again is names  # unchanged name table: the same tuple, so plans are reused
    ethtool.close()


@pytest.mark.parametrize("patched", [True, False])
@pytest.mark.parametrize("change_before", [ETHTOOL_GSTRINGS, ETHTOOL_GSTATS])
def test_stat_set_changing_between_calls_is_retried(patched, change_before):
    """PFC gets enabled on priority 4 in the middle of a read: the set grows by 5 stats."""
    changed = []

    def reconfigure(kernel, iface, cmd):
        if cmd == change_before and not changed:
            kernel.stats[iface] = mlx5_values(pfc=(3, 4))
            changed.append(True)

    kernel = FakeKernel({"ens1f0np0": mlx5_values()}, patched=patched, on_call=reconfigure)
    names, values = EthtoolIoctl(ioctl=kernel).read("ens1f0np0")
    assert len(names) == len(mlx5_stat_names((3, 4))) == len(mlx5_stat_names((3,))) + 5
    assert dict(zip(names, values)) == mlx5_values(pfc=(3, 4))
    assert kernel.calls.count(("ens1f0np0", ETHTOOL_GSSET_INFO)) >= 3  # a second attempt happened


def test_same_count_but_changed_between_stats_and_recheck_is_retried():
    flips = []

    def reconfigure(kernel, iface, cmd):
        # After the values were read, the count changes: the re-check must catch it.
        if cmd == ETHTOOL_GSSET_INFO and len(kernel.calls) == 4 and not flips:
            kernel.stats[iface] = mlx5_values(pfc=())
            flips.append(True)

    kernel = FakeKernel({"eth1": mlx5_values()}, on_call=reconfigure)
    names, _ = EthtoolIoctl(ioctl=kernel).read("eth1")
    assert tuple(names) == tuple(mlx5_stat_names(()))


def test_a_set_that_never_settles_gives_up_cleanly():
    toggle = [1]

    def reconfigure(kernel, iface, cmd):
        if cmd == ETHTOOL_GSTRINGS:
            toggle[0] ^= 1
            kernel.stats[iface] = mlx5_values(pfc=(3,) if toggle[0] else (3, 4))

    kernel = FakeKernel({"eth1": mlx5_values()}, on_call=reconfigure)
    with pytest.raises(StatSetChanged):
        EthtoolIoctl(ioctl=kernel, retries=3).read("eth1")
    collector = EthtoolCollector(IoctlStatsProvider(ethtool=EthtoolIoctl(ioctl=kernel)), interfaces=["eth1"])
    collector.provider.interfaces = lambda: ["eth1"]
    [result] = collector.collect()
    assert result.snapshot is None and result.reason == "stats_unstable"


def test_errors_map_to_clean_exceptions():
    kernel = FakeKernel({"lo": None, "veth0": {}})
    ethtool = EthtoolIoctl(ioctl=kernel)
    with pytest.raises(StatsNotSupported):
        ethtool.read("lo")  # EOPNOTSUPP
    with pytest.raises(StatsNotSupported):
        ethtool.read("veth0")  # no ETH_SS_STATS bit in the sset mask
    with pytest.raises(InterfaceGone):
        ethtool.read("gone0")  # ENODEV
    with pytest.raises(ValueError):
        ethtool.read("a-name-longer-than-ifnamsiz")


def test_trailing_space_in_a_driver_name_is_stripped():
    stats = {"tx_pause_storm_warning_events ": 4, "rx_prio3_pause": 9}
    kernel = FakeKernel({"ens1f0np0": stats})
    provider = IoctlStatsProvider(ethtool=EthtoolIoctl(ioctl=kernel))
    provider.interfaces = lambda: ["ens1f0np0"]
    [result] = EthtoolCollector(provider, interfaces=["ens1.*"]).collect()
    assert result.snapshot.get("infrapulse_nic_pause_storm_events_total", ("ens1f0np0", "warning")) == 4
    assert result.snapshot.get("infrapulse_nic_pfc_pause_frames_total", ("ens1f0np0", "3", "rx")) == 9


# -- the real ioctl on this machine's interfaces -----------------------------------------------


def test_real_ioctl_on_loopback_is_cleanly_not_supported():
    ethtool = EthtoolIoctl()
    try:
        with pytest.raises(StatsNotSupported):
            ethtool.read("lo")
        with pytest.raises(InterfaceGone):
            ethtool.read("nosuchif0")
    finally:
        ethtool.close()


def test_real_ioctl_on_every_local_interface():
    """Real stats (consistent with the kernel's count) or a clean 'not supported'; never a crash."""
    ethtool = EthtoolIoctl()
    outcomes = {}
    try:
        for iface in sorted(os.listdir("/sys/class/net")):
            try:
                names, values = ethtool.read(iface)
            except StatsNotSupported:
                outcomes[iface] = "not supported"
                continue
            except InterfaceGone:  # a transient interface vanished after the listing
                continue
            assert len(names) == len(values) == ethtool.stat_count(iface)
            assert all(isinstance(v, int) and 0 <= v < 2**64 for v in values)
            assert all(n and n.isprintable() for n in names)
            outcomes[iface] = len(names)
    finally:
        ethtool.close()
    assert outcomes["lo"] == "not supported"


async def test_real_ioctl_through_the_source(tmp_path):
    store = Store()
    cfg = EthtoolSource.CONFIG.validate({"interfaces": [".*"]}, "sources.ethtool")
    assert EthtoolSource.wanted(cfg)
    source = EthtoolSource(cfg, SourceContext(store=store, interval=5.0))
    await source.poll_once()
    await source.close()
    values = render_store(store)
    assert value(values, "infrapulse_source_up", source="ethtool", target="lo") == 0
    assert value(values, "infrapulse_source_status_info", source="ethtool", target="lo",
                 reason="not_supported") == 1
    for (_, target), status in store.status.items():
        # (no_such_interface: a transient interface, e.g. a veth, vanished between listing and reading.)
        assert status.up or status.reason in ("not_supported", "no_such_interface"), (
            target, status.reason, status.message)
        if status.up:  # e.g. virtio_net eth0: counted, even if none of its names is a PFC stat
            assert value(values, "infrapulse_nic_driver_stats", interface=target) >= 1


# -- mapping ---------------------------------------------------------------------------------


FIXTURE_STATS = {
    "rx_prio3_pause": 120, "tx_prio3_pause": 45, "rx_prio3_pause_duration": 2_500_000,
    "tx_prio3_pause_duration": 750, "rx_prio3_pause_transition": 60, "tx_prio3_pause_transition": 1,
    "rx_prio5_discards": 8, "rx_prio5_buf_discard": 3, "rx_prio5_cong_discard": 2, "rx_prio3_marked": 77,
    "tx_prio3_marked": 5, "rx_prio3_bytes": 10**12, "tx_prio0_packets": 42,
    "tx_pause_storm_warning_events": 2, "tx_pause_storm_error_events": 1,
    "rx_global_pause": 4, "tx_global_pause_duration": 3_000_000,
    "rx_pause_ctrl_phy": 130, "tx_pause_ctrl_phy": 50,
    "rx_crc_errors_phy": 11, "rx_symbol_err_phy": 12, "rx_pcs_symbol_err_phy": 13, "tx_errors_phy": 14,
    "rx_err_lane_2_phy": 15, "rx_corrected_bits_phy": 16, "rx_bits_phy": 10**15, "link_down_events_phy": 3,
    "rx_discards_phy": 17, "tx_discards_phy": 18, "rx_bytes_phy": 19, "tx_packets_phy": 20,
    "rx_buffer_passed_thres_phy": 21, "rx_out_of_buffer": 22,
    "rx_prio9_pause": 1, "rx_queue_0_packets": 5, "rx_vport_rdma_unicast_bytes": 6,  # not mapped
}


async def poll(config: dict) -> tuple[Store, EthtoolSource]:
    store = Store()
    cfg = EthtoolSource.CONFIG.validate(config, "sources.ethtool")
    source = EthtoolSource(cfg, SourceContext(store=store, interval=5.0))
    await source.poll_once()
    await source.close()
    return store, source


async def test_exact_samples_from_stats_fixture(tmp_path):
    (tmp_path / "ens1f0np0.json").write_text(json.dumps(FIXTURE_STATS))
    store, _ = await poll({"stats_dir": str(tmp_path), "interfaces": ["ens1f0np0"],
                           "include_stats": ["rx_queue_.*"]})
    v = render_store(store)
    i = {"interface": "ens1f0np0"}
    assert value(v, "infrapulse_nic_pfc_pause_frames_total", priority="3", direction="rx", **i) == 120
    assert value(v, "infrapulse_nic_pfc_pause_frames_total", priority="3", direction="tx", **i) == 45
    assert value(v, "infrapulse_nic_pfc_pause_duration_seconds_total", priority="3", direction="rx",
                 **i) == 2.5
    assert value(v, "infrapulse_nic_pfc_pause_duration_seconds_total", priority="3", direction="tx",
                 **i) == pytest.approx(0.00075)
    assert samples_of(v, "infrapulse_nic_pfc_pause_transitions_total") == {
        frozenset({**i, "priority": "3", "direction": "rx"}.items()): 60,
        frozenset({**i, "priority": "3", "direction": "tx"}.items()): 1}
    assert value(v, "infrapulse_nic_priority_discards_total", priority="5", **i) == 8
    assert value(v, "infrapulse_nic_priority_buffer_discards_total", priority="5", **i) == 3
    assert value(v, "infrapulse_nic_priority_congestion_discards_total", priority="5", **i) == 2
    assert samples_of(v, "infrapulse_nic_ecn_marked_packets_total") == {
        frozenset({**i, "priority": "3"}.items()): 77}
    assert value(v, "infrapulse_nic_priority_bytes_total", priority="3", direction="rx", **i) == 10**12
    assert value(v, "infrapulse_nic_priority_packets_total", priority="0", direction="tx", **i) == 42
    assert value(v, "infrapulse_nic_pause_storm_events_total", level="warning", **i) == 2
    assert value(v, "infrapulse_nic_pause_storm_events_total", level="error", **i) == 1
    assert value(v, "infrapulse_nic_global_pause_frames_total", direction="rx", **i) == 4
    assert value(v, "infrapulse_nic_global_pause_duration_seconds_total", direction="tx", **i) == 3.0
    assert value(v, "infrapulse_nic_pause_frames_total", direction="rx", **i) == 130
    assert samples_of(v, "infrapulse_nic_phy_errors_total") == {
        frozenset({**i, "kind": k}.items()): n for k, n in (("crc", 11), ("symbol", 12), ("pcs_symbol", 13))}
    assert value(v, "infrapulse_nic_tx_oversize_drops_total", **i) == 14  # tx_errors_phy: MTU, not PHY
    assert value(v, "infrapulse_nic_lane_errors_total", lane="2", **i) == 15
    assert value(v, "infrapulse_nic_fec_corrected_bits_total", **i) == 16
    assert value(v, "infrapulse_nic_received_bits_total", **i) == 10**15
    assert value(v, "infrapulse_nic_link_down_events_total", **i) == 3
    assert value(v, "infrapulse_nic_port_discards_total", direction="tx", **i) == 18
    assert value(v, "infrapulse_nic_phy_bytes_total", direction="rx", **i) == 19
    assert value(v, "infrapulse_nic_phy_packets_total", direction="tx", **i) == 20
    assert value(v, "infrapulse_nic_rx_buffer_almost_full_events_total", **i) == 21
    assert value(v, "infrapulse_nic_rx_out_of_buffer_total", **i) == 22
    assert value(v, "infrapulse_nic_driver_stats", **i) == len(FIXTURE_STATS)
    assert samples_of(v, "infrapulse_nic_driver_stat") == {
        frozenset({**i, "stat": "rx_queue_0_packets"}.items()): 5}
    # 36 stats: 3 map nowhere (tx_prio3_marked, rx_prio9_pause, rx_vport_rdma_unicast_bytes);
    # 33 samples plus the stat-count gauge.
    assert sum(1 for n, _ in v if n.startswith("infrapulse_nic_")) == 34
    assert value(v, "infrapulse_source_up", source="ethtool", target="ens1f0np0") == 1


def test_plan_ignores_unknown_and_out_of_range_names():
    plan = plan_stats("eth0",
                      ["rx_prio9_pause", "rx_prio3_foo", "rx_vport_rdma_unicast_bytes", "rx_prio3_pause"])
    assert plan == [(3, "infrapulse_nic_pfc_pause_frames_total", ("eth0", "3", "rx"), 1)]


# -- interface selection and reporting ---------------------------------------------------------


async def test_default_interfaces_are_the_netdevs_behind_rdma_ports(tmp_path):
    tree = write_tree(tmp_path / "sys", demo_devices())
    netdevs = [p.netdev for d in tree.devices for p in d.ports if p.netdev]
    stats_dir = tmp_path / "stats"
    write_stats(stats_dir, netdevs + ["eth9"])  # eth9 is not behind an RDMA port
    cfg = {"stats_dir": str(stats_dir), "sysfs_root": str(tree.root)}
    assert EthtoolSource.wanted(EthtoolSource.CONFIG.validate(cfg, ""))
    store, _ = await poll(cfg)
    assert sorted(t for _, t in store.status) == sorted(netdevs)
    assert all(s.up for s in store.status.values())


async def test_no_rdma_ports_and_no_regex_means_nothing_to_do(tmp_path):
    cfg = {"sysfs_root": str(tmp_path)}
    assert not EthtoolSource.wanted(EthtoolSource.CONFIG.validate(cfg, ""))  # auto: off
    store, _ = await poll({**cfg, "enabled": True})
    values = render_store(store)
    assert value(values, "infrapulse_source_up", source="ethtool", target="ethtool") == 0
    assert value(values, "infrapulse_source_status_info", source="ethtool", target="ethtool",
                 reason="no_interfaces") == 1
    assert "no RDMA port" in store.status[("ethtool", "ethtool")].message


async def test_broken_interface_file_hides_nothing_else(tmp_path):
    write_stats(tmp_path, ["ens1f0np0", "ens2f0np0"])
    (tmp_path / "ens2f0np0.json").write_text("{not json")
    store, _ = await poll({"stats_dir": str(tmp_path), "interfaces": ["ens.*"]})
    values = render_store(store)
    assert value(values, "infrapulse_source_up", source="ethtool", target="ens2f0np0") == 0
    assert value(values, "infrapulse_source_up", source="ethtool", target="ens1f0np0") == 1
    assert len([k for k in samples_of(values, "infrapulse_nic_pfc_pause_frames_total")]) == 2


def test_stat_set_change_with_same_size_rebuilds_the_plan(tmp_path):
    nics = write_stats(tmp_path, ["ens1f0np0"])
    collector = EthtoolCollector(FileStatsProvider(tmp_path), interfaces=["ens1f0np0"])
    [first] = collector.collect()
    assert first.snapshot.get("infrapulse_nic_pfc_pause_frames_total", ("ens1f0np0", "3", "rx")) is not None
    nic: NicStats = nics["ens1f0np0"]
    nic.set_pfc((4,))  # PFC moved from priority 3 to 4: same number of stats, other names
    nic.values["rx_prio4_pause"] = 31337
    nic.write(tmp_path)
    [second] = collector.collect()
    frames = second.snapshot.series["infrapulse_nic_pfc_pause_frames_total"]
    assert frames[("ens1f0np0", "4", "rx")] == 31337
    assert ("ens1f0np0", "3", "rx") not in frames
    collector.close()


def test_vanished_interface_is_reported_and_re_resolved(tmp_path):
    write_stats(tmp_path, ["ens1f0np0", "ens2f0np0"])
    now = [0.0]
    collector = EthtoolCollector(FileStatsProvider(tmp_path), interfaces=["ens.*"], clock=lambda: now[0])
    assert [r.target for r in collector.collect()] == ["ens1f0np0", "ens2f0np0"]
    Path(tmp_path / "ens2f0np0.json").unlink()
    results = {r.target: r for r in collector.collect()}
    assert results["ens2f0np0"].reason == "no_such_interface"
    assert [r.target for r in collector.collect()] == ["ens1f0np0"]  # resolved again at once
