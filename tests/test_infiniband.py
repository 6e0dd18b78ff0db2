"""Source `infiniband` on real sysfs-shaped trees: exact values, failure isolation, rescans.
Through the daemon: tests/integration/test_infiniband_served.py."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from helpers import render_store, samples_of, value
from infrapulse.metrics import DaemonState, make_registry
from infrapulse.simulate.sysfs_tree import (
    IRDMA_HW_COUNTERS,
    MLX5_HW_COUNTERS,
    NO_PMA,
    DeviceSpec,
    PortSpec,
    write_tree,
)
from infrapulse.sources.base import SourceContext
from infrapulse.sources.nic.infiniband import (
    PMA_COUNTER_BITS,
    InfinibandReader,
    InfinibandSource,
    _BulkPlan,
    parse_rate,
    parse_state,
    rdma_netdevs,
)
from infrapulse.store import Snapshot, Store

GOLDEN = Path(__file__).parent / "golden" / "infiniband.prom"


def fixture_devices() -> list[DeviceSpec]:
    """Known values where the tests look; CRC-derived (stable) values elsewhere."""
    return [
        DeviceSpec("mlx5_0", hca_type="MT4129", board_id="MT_0000000838", fw_ver="28.39.1002",
                   node_guid="b83f:d203:00aa:0001", pci_address="0000:0d:00.0", ports=[PortSpec(
                       link_layer="Ethernet", netdev="ens1f0np0", rate="100 Gb/sec (4X EDR)",
                       overrides={"counters/port_xmit_data": 1000, "counters/port_rcv_data": 2500,
                                  "counters/port_xmit_packets": 10, "counters/port_rcv_packets": 20,
                                  "hw_counters/np_ecn_marked_roce_packets": 7, "hw_counters/np_cnp_sent": 6,
                                  "hw_counters/rp_cnp_handled": 5, "hw_counters/out_of_buffer": 4,
                                  "hw_counters/packet_seq_err": 3, "hw_counters/local_ack_timeout_err": 2,
                                  "hw_counters/req_cqe_error": 11,
                                  "gid_attrs/ndevs/0": ""})]),  # first GID entry unused: netdev from entry 1
        DeviceSpec("mlx5_1", node_guid="b83f:d203:00aa:0002", pci_address="0000:0d:00.1", ports=[PortSpec(
            rate="400 Gb/sec (4X NDR)",
            overrides={"counters/port_xmit_wait": 2**32 - 1, "counters/link_downed": 255,
                       "counters/symbol_error": 17})]),
        DeviceSpec("mlx5_2", node_guid="b83f:d203:00aa:0003",
                   ports=[PortSpec(1, rate="2.5 Gb/sec (1X SDR)"),
                          PortSpec(2, state="1: DOWN", phys_state="3: Disabled", rate="10 Gb/sec (4X)")],
                   device_hw_counters=("np_cnp_sent", "rx_icrc_encapsulated")),
        DeviceSpec("i40iw0", hca_type="I40IW", board_id="I40IW Board ID", fw_ver="0.2",
                   node_guid="0000:0000:0000:0001", ports=[PortSpec(
                       link_layer="Ethernet", netdev="eno1", rate="10 Gb/sec (4X)", counters="na",
                       hw_counters=())]),
        DeviceSpec("irdma0", hca_type="E810", board_id="E810-XXVDA2", fw_ver="1.57",
                   node_guid="0000:0000:0000:0002", pci_address="0000:5e:00.0", ports=[PortSpec(
                       link_layer="Ethernet", netdev="ens9f0", rate="25 Gb/sec (1X EDR)", counters="absent",
                       hw_counters=IRDMA_HW_COUNTERS)]),
    ]


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path / "sys", fixture_devices())


async def poll(tree_root, reader: InfinibandReader | None = None, **config) -> tuple[Store, InfinibandSource]:
    store = Store()
    cfg = InfinibandSource.CONFIG.validate({"enabled": True, "sysfs_root": str(tree_root), **config},
                                           "sources.infiniband")
    source = InfinibandSource(cfg, SourceContext(store=store, interval=5.0))
    if reader is not None:
        source.reader = reader
    await source.poll_once()
    return store, source


def failing_pread(reader_ref: list, fail: dict[str, int]):
    """An os.pread that fails with errno `fail[substring]` for files whose path contains it."""

    def pread(fd: int, size: int, offset: int) -> bytes:
        path = reader_ref[0].fd_paths.get(fd, "")
        for fragment, code in fail.items():
            if fragment in path:
                raise OSError(code, os.strerror(code))
        return os.pread(fd, size, offset)

    return pread


def make_reader(root, fail: dict[str, int], **kwargs) -> InfinibandReader:
    ref: list = []
    reader = InfinibandReader(root, pread=failing_pread(ref, fail), **kwargs)
    ref.append(reader)
    return reader


# -- exact values ------------------------------------------------------------------------------


async def test_exact_samples_from_fixture_tree(tree):
    store, source = await poll(tree.root)
    values = render_store(store)
    d0 = {"device": "mlx5_0", "port": "1"}
    assert value(values, "infrapulse_rdma_port_transmitted_bytes_total", **d0) == 4000  # 4-octet words x 4
    assert value(values, "infrapulse_rdma_port_received_bytes_total", **d0) == 10000
    assert value(values, "infrapulse_rdma_port_transmitted_packets_total", **d0) == 10
    assert value(values, "infrapulse_rdma_port_received_packets_total", **d0) == 20
    assert value(values, "infrapulse_rdma_ecn_marked_packets_total", **d0) == 7
    assert value(values, "infrapulse_rdma_cnp_sent_total", **d0) == 6
    assert value(values, "infrapulse_rdma_cnp_handled_total", **d0) == 5
    assert value(values, "infrapulse_rdma_out_of_buffer_total", **d0) == 4
    assert value(values, "infrapulse_rdma_retransmission_events_total", reason="packet_seq_err", **d0) == 3
    assert value(values, "infrapulse_rdma_retransmission_events_total", reason="local_ack_timeout_err",
                 **d0) == 2
    assert value(values, "infrapulse_rdma_hw_counter_total", counter="req_cqe_error", **d0) == 11
    assert value(values, "infrapulse_rdma_port_state", **d0) == 4
    assert value(values, "infrapulse_rdma_port_physical_state", **d0) == 5
    assert value(values, "infrapulse_rdma_port_rate_bytes_per_second", **d0) == 12.5e9
    assert value(values, "infrapulse_rdma_port_info", link_layer="Ethernet", netdev="ens1f0np0", **d0) == 1
    assert value(values, "infrapulse_rdma_device_info", device="mlx5_0", hca_type="MT4129",
                 board_id="MT_0000000838", firmware_version="28.39.1002",
                 node_guid="b83f:d203:00aa:0001", pci_address="0000:0d:00.0") == 1
    # Every hw counter of the port is exported exactly once, under one family or another.
    hw_families = ("infrapulse_rdma_ecn_marked_packets_total", "infrapulse_rdma_cnp_sent_total",
                   "infrapulse_rdma_cnp_handled_total", "infrapulse_rdma_cnp_ignored_total",
                   "infrapulse_rdma_out_of_buffer_total", "infrapulse_rdma_retransmission_events_total",
                   "infrapulse_rdma_hw_counter_total")
    exported = sum(1 for f in hw_families for labels in samples_of(values, f)
                   if dict(labels).get("device") == "mlx5_0")
    assert exported == len(MLX5_HW_COUNTERS)
    assert not any(dict(labels).get("counter") == "lifespan"
                   for labels in samples_of(values, "infrapulse_rdma_hw_counter_total"))
    # Other ports: InfiniBand has no netdev; a DOWN port and odd rate strings parse.
    assert value(values, "infrapulse_rdma_port_info", device="mlx5_1", port="1", link_layer="InfiniBand",
                 netdev="") == 1
    assert value(values, "infrapulse_rdma_port_state", device="mlx5_2", port="2") == 1
    assert value(values, "infrapulse_rdma_port_physical_state", device="mlx5_2", port="2") == 3
    assert value(values, "infrapulse_rdma_port_rate_bytes_per_second", device="mlx5_2",
                 port="1") == 312_500_000
    assert value(values, "infrapulse_rdma_port_rate_bytes_per_second", device="mlx5_2", port="2") == 1.25e9
    # Device-level hw_counters (switchdev mode) carry an empty port label.
    assert value(values, "infrapulse_rdma_cnp_sent_total", device="mlx5_2", port="") == tree.values[
        "mlx5_2/hw_counters/np_cnp_sent"]
    assert value(values, "infrapulse_rdma_hw_counter_total", device="mlx5_2", port="",
                 counter="rx_icrc_encapsulated") == tree.values["mlx5_2/hw_counters/rx_icrc_encapsulated"]
    for target in ("mlx5_0", "mlx5_1", "mlx5_2", "irdma0"):
        assert value(values, "infrapulse_source_up", source="infiniband", target=target) == 1
        assert value(values, "infrapulse_source_status_info", source="infiniband", target=target,
                     reason="ok") == 1


async def test_saturated_counters_are_flagged(tree):
    store, _ = await poll(tree.root)
    values = render_store(store)
    d1 = {"device": "mlx5_1", "port": "1"}
    assert value(values, "infrapulse_rdma_port_transmit_wait_total", **d1) == 2**32 - 1
    assert value(values, "infrapulse_rdma_port_link_downed_total", **d1) == 255
    assert value(values, "infrapulse_rdma_port_symbol_errors_total", **d1) == 17
    assert value(values, "infrapulse_rdma_port_saturated_counters", **d1) == 2  # xmit_wait and link_downed
    assert value(values, "infrapulse_rdma_port_saturated_counters", device="mlx5_0", port="1") == 0
    # No readable PMA counter -> no saturation gauge claiming "0 saturated".
    assert ("infrapulse_rdma_port_saturated_counters",
            frozenset({"device": "i40iw0", "port": "1"}.items())) not in values


def test_golden_exposition(tree):
    """The whole infiniband exposition of the fixture tree, byte for byte.

    Regenerate on purpose only: UPDATE_GOLDEN=1 pytest tests/test_infiniband.py
    """
    import asyncio

    store, _ = asyncio.run(poll(tree.root))
    text = generate_latest(make_registry(store, DaemonState("testhost", "node"))).decode()
    lines = [line for line in text.splitlines()
             if "infrapulse_rdma_" in line
             or (line.startswith(("infrapulse_source_up{", "infrapulse_source_status_info{"))
                 and 'source="infiniband"' in line)]
    rendered = "\n".join(lines) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(rendered)
    assert rendered == GOLDEN.read_text()


async def test_the_device_link_names_the_pci_function(tree):
    """pci_address is the target of class/infiniband/<device>/device, as the kernel log spells it
    (what joins a kmsg event to the NIC); a VF names its own function; no link, or a link to no
    PCI function (a software device's virtual parent), gives ""."""
    cls = tree.class_dir
    # As the kernel links them: relative, from the device's own directory under the function.
    os.symlink("../../../0000:0d:00.2", cls / "mlx5_2" / "device")  # a VF of the mlx5_0 card
    os.symlink("../../../devices/virtual/net/lo", cls / "i40iw0" / "device")
    store, _ = await poll(tree.root)
    pci = {dict(labels)["device"]: dict(labels)["pci_address"]
           for labels in samples_of(render_store(store), "infrapulse_rdma_device_info")}
    assert pci == {"mlx5_0": "0000:0d:00.0", "mlx5_1": "0000:0d:00.1", "mlx5_2": "0000:0d:00.2",
                   "i40iw0": "", "irdma0": "0000:5e:00.0"}


def test_parsers():
    assert parse_state(b"4: ACTIVE\n") == 4
    assert parse_state(b"5: LinkUp\n") == 5
    assert parse_rate(b"100 Gb/sec (4X EDR)\n") == 12.5e9
    assert parse_rate(b"2.5 Gb/sec (1X SDR)\n") == 312_500_000
    assert parse_rate(b"53.125 Gb/sec (1X HDR)\n") == 53.125 * 125_000_000
    with pytest.raises(ValueError):
        parse_rate(b"fast\n")


# -- damaged files, devices and trees --------------------------------------------------------


async def test_no_pma_counters_are_skipped_not_fatal(tree):
    store, _ = await poll(tree.root)
    values = render_store(store)
    assert value(values, "infrapulse_rdma_port_state", device="i40iw0", port="1") == 4
    assert value(values, "infrapulse_rdma_port_info", device="i40iw0", port="1", link_layer="Ethernet",
                 netdev="eno1") == 1
    assert not any(dict(labels).get("device") == "i40iw0"
                   for labels in samples_of(values, "infrapulse_rdma_port_transmitted_bytes_total"))
    assert value(values, "infrapulse_source_up", source="infiniband", target="i40iw0") == 1
    assert value(values, "infrapulse_source_status_info", source="infiniband", target="i40iw0",
                 reason="partial") == 1
    status = store.status[("infiniband", "i40iw0")]
    assert len(status.partial_errors) == len(PMA_COUNTER_BITS)
    assert f"ports/1/counters/port_xmit_data: {NO_PMA}" in status.partial_errors


async def test_missing_counters_dir_is_normal(tree):
    store, _ = await poll(tree.root)
    values = render_store(store)
    status = store.status[("infiniband", "irdma0")]
    assert status.up and status.reason == "ok" and status.partial_errors == []
    assert value(values, "infrapulse_rdma_hw_counter_total", device="irdma0", port="1",
                 counter="tcpRetransSegs") == tree.values["irdma0/ports/1/hw_counters/tcpRetransSegs"]
    assert not any(dict(labels).get("device") == "irdma0"
                   for labels in samples_of(values, "infrapulse_rdma_port_received_bytes_total"))


async def test_einval_on_one_file_skips_only_that_file(tree):
    reader = make_reader(tree.root, {"mlx5_1/ports/1/counters/port_rcv_data": errno.EINVAL,
                                     "mlx5_1/ports/1/hw_counters/out_of_buffer": errno.EOPNOTSUPP})
    store, _ = await poll(tree.root, reader)
    values = render_store(store)
    d1 = {"device": "mlx5_1", "port": "1"}
    assert ("infrapulse_rdma_port_received_bytes_total", frozenset(d1.items())) not in values
    assert ("infrapulse_rdma_out_of_buffer_total", frozenset(d1.items())) not in values
    assert value(values, "infrapulse_rdma_port_transmitted_bytes_total", **d1) == 4 * tree.values[
        "mlx5_1/ports/1/counters/port_xmit_data"]
    status = store.status[("infiniband", "mlx5_1")]
    assert status.up and status.reason == "partial"
    assert status.partial_errors == ["ports/1/counters/port_rcv_data: Invalid argument",
                                     "ports/1/hw_counters/out_of_buffer: Operation not supported"]
    assert reader.scans == 1  # EINVAL is not a reason to re-scan


async def test_broken_device_hides_nothing_else(tree):
    reader = make_reader(tree.root, {"/mlx5_1/": errno.EIO})
    store, _ = await poll(tree.root, reader)
    values = render_store(store)
    assert value(values, "infrapulse_source_up", source="infiniband", target="mlx5_1") == 0
    assert value(values, "infrapulse_source_status_info", source="infiniband", target="mlx5_1",
                 reason="unreadable") == 1
    assert "Input/output error" in store.status[("infiniband", "mlx5_1")].message
    assert not any(dict(labels).get("device") == "mlx5_1"
                   for name, labels in values if name.startswith("infrapulse_rdma_"))
    # Everyone else is complete.
    healthy, _ = await poll(tree.root)
    expected = {k: v for k, v in render_store(healthy).items()
                if k[0].startswith("infrapulse_rdma_") and dict(k[1]).get("device") != "mlx5_1"}
    got = {k: v for k, v in values.items()
           if k[0].startswith("infrapulse_rdma_") and dict(k[1]).get("device") != "mlx5_1"}
    assert got == expected and len(got) > 100


async def test_device_without_ports_dir_is_down_alone(tree):
    shutil.rmtree(tree.class_dir / "mlx5_2" / "ports")
    (tree.class_dir / "mlx5_2" / "ports").write_text("not a directory\n")
    store, _ = await poll(tree.root)
    values = render_store(store)
    assert value(values, "infrapulse_source_up", source="infiniband", target="mlx5_2") == 0
    assert "ports/" in store.status[("infiniband", "mlx5_2")].message
    assert value(values, "infrapulse_source_up", source="infiniband", target="mlx5_0") == 1


async def test_no_infiniband_class(tmp_path):
    cfg = {"sysfs_root": str(tmp_path)}
    assert InfinibandSource.wanted(InfinibandSource.CONFIG.validate(cfg, "")) is False  # auto: nothing here
    assert InfinibandSource.wanted(InfinibandSource.CONFIG.validate({**cfg, "enabled": True}, "")) is True
    store, _ = await poll(tmp_path)
    values = render_store(store)
    assert value(values, "infrapulse_source_up", source="infiniband", target="infiniband") == 0
    assert value(values, "infrapulse_source_status_info", source="infiniband", target="infiniband",
                 reason="no_devices") == 1
    assert "does not exist" in store.status[("infiniband", "infiniband")].message


async def test_device_filter(tree):
    store, _ = await poll(tree.root, devices=["mlx5_[01]", "irdma.*"])
    assert sorted(t for (s, t) in store.status) == ["irdma0", "mlx5_0", "mlx5_1"]
    store, _ = await poll(tree.root, devices=["nothing"])
    assert store.status[("infiniband", "infiniband")].reason == "no_devices"


# -- descriptors kept open, rescans ----------------------------------------------------------


def test_counters_advance_through_open_descriptors(tree):
    reader = InfinibandReader(tree.root)
    first = {r.target: r for r in reader.collect()}
    tree.set("mlx5_1/ports/1/counters/port_xmit_data", 123456789012)
    tree.write_text("mlx5_1/ports/1/state", "1: DOWN")  # shorter than before: truncated in place
    second = {r.target: r for r in reader.collect()}
    labels = ("mlx5_1", "1")
    assert first["mlx5_1"].snapshot.get("infrapulse_rdma_port_transmitted_bytes_total",
                                        labels) != 4 * 123456789012
    assert second["mlx5_1"].snapshot.get("infrapulse_rdma_port_transmitted_bytes_total",
                                         labels) == 4 * 123456789012
    assert second["mlx5_1"].snapshot.get("infrapulse_rdma_port_state", labels) == 1
    assert reader.scans == 1
    reader.close()


def test_value_caught_mid_rewrite_is_read(tree):
    """A writer that has put the new (longer) text over an old one but not yet truncated."""
    (tree.class_dir / "mlx5_1/ports/1/counters/port_rcv_packets").write_bytes(b"987654\n21\n")
    reader = InfinibandReader(tree.root)
    results = {r.target: r for r in reader.collect()}
    assert results["mlx5_1"].snapshot.get("infrapulse_rdma_port_received_packets_total",
                                          ("mlx5_1", "1")) == 987654
    assert results["mlx5_1"].partial_errors == []
    reader.close()


def test_enodev_triggers_rescan_and_drops_the_device(tree):
    gone: set[str] = set()
    ref: list = []

    def pread(fd, size, offset):
        if any(g in ref[0].fd_paths.get(fd, "") for g in gone):
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))
        return os.pread(fd, size, offset)

    reader = InfinibandReader(tree.root, pread=pread, rescan_interval=3600)
    ref.append(reader)
    assert "mlx5_2" in {r.target for r in reader.collect()}
    # Hot-unplug: the device leaves sysfs and its open descriptors answer ENODEV.
    shutil.rmtree(tree.class_dir / "mlx5_2")
    gone.add("/mlx5_2/")
    results = {r.target: r for r in reader.collect()}
    assert reader.scans == 2
    assert "mlx5_2" not in results
    assert results["mlx5_0"].snapshot is not None and results["mlx5_0"].partial_errors == []
    reader.close()


def test_periodic_rescan_finds_new_devices(tmp_path):
    now = [0.0]
    tree = write_tree(tmp_path / "sys", 2)
    reader = InfinibandReader(tree.root, rescan_interval=30, clock=lambda: now[0])
    assert [r.target for r in reader.collect()] == ["mlx5_0", "mlx5_1"]
    write_tree(tmp_path / "sys", 3)
    now[0] = 10.0
    assert len(reader.collect()) == 2 and reader.scans == 1
    now[0] = 31.0
    assert [r.target for r in reader.collect()] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert reader.scans == 2
    reader.close()


def test_each_file_read_once_per_cycle(tree):
    reads: list[int] = []

    def pread(fd, size, offset):
        assert offset == 0
        reads.append(fd)
        return os.pread(fd, size, offset)

    reader = InfinibandReader(tree.root, pread=pread)
    reader.collect()
    assert len(reads) == len(set(reads)) == len(reader.fd_paths)
    reads.clear()
    reader.collect()
    assert len(reads) == len(set(reads)) == len(reader.fd_paths)
    # state, phys_state, rate per port + every counter file except lifespan, nothing else.
    expected = 0
    for spec in fixture_devices():
        expected += len(spec.device_hw_counters)
        for port in spec.ports:
            expected += 3 + len(port.hw_counters) + (len(PMA_COUNTER_BITS)
                                                     if port.counters != "absent" else 0)
    assert len(reads) == expected
    reader.close()


def test_rdma_netdevs(tree):
    assert rdma_netdevs(tree.root) == ["eno1", "ens9f0", "ens1f0np0"]
    assert rdma_netdevs(tree.root / "nowhere") == []


# -- the bulk read against the per-file one -------------------------------------------------------


def per_file_and_bulk(reader: InfinibandReader) -> list[tuple[tuple, tuple]]:
    """Each device read both ways: the per-file path over the scan's entries, in scan order, and
    the bulk path (`_read_device`), as (series, partial errors) pairs, order-free."""

    def shape(result) -> tuple:
        series = ({f: dict(s) for f, s in result.snapshot.series.items()} if result.snapshot else None)
        return result.reason, series, sorted(result.partial_errors)

    pairs = []
    for dev in reader._devices:  # noqa: SLF001
        snapshot = Snapshot(0.0)
        for family, values in dev.static.items():
            snapshot.series[family] = dict(values)
        plan = dev.plan or _BulkPlan(dev.entries)
        per_file, _ = reader._read_entries(dev, snapshot, plan, [], None)  # noqa: SLF001
        bulk, _ = reader._read_device(dev, 0.0)  # noqa: SLF001
        pairs.append((shape(per_file), shape(bulk)))
    return pairs


def test_the_bulk_read_files_every_value_as_the_per_file_read_does(tree):
    """Scaled data counters, saturated 8/32-bit counters, states, rates, device-level and port
    hw_counters, a device whose PMA files read N/A (the bulk parse fails, the per-file path
    reports each file) and one without counters/: the same series and errors both ways."""
    reader = InfinibandReader(tree.root)
    reader.collect()
    pairs = per_file_and_bulk(reader)
    assert len(pairs) == 5
    for per_file, bulk in pairs:
        assert bulk == per_file
    by_device = {dev.name: bulk for dev, (_, bulk) in zip(reader._devices, pairs)}  # noqa: SLF001
    saturated = by_device["mlx5_1"][1]["infrapulse_rdma_port_saturated_counters"]
    assert saturated == {("mlx5_1", "1"): 2.0}
    assert by_device["mlx5_0"][1]["infrapulse_rdma_port_transmitted_bytes_total"] == {("mlx5_0", "1"): 4000}
    assert f"ports/1/counters/port_xmit_data: {NO_PMA}" in by_device["i40iw0"][2]


def test_a_failed_read_leaves_the_bulk_path_for_the_per_file_one(tree):
    reader = make_reader(tree.root, {"mlx5_0/ports/1/hw_counters/out_of_buffer": errno.EINVAL})
    reader.collect()
    for per_file, bulk in per_file_and_bulk(reader):
        assert bulk == per_file
    result = next(r for r in reader.collect() if r.target == "mlx5_0")
    assert result.partial_errors == ["ports/1/hw_counters/out_of_buffer: Invalid argument"]
    assert "infrapulse_rdma_out_of_buffer_total" not in result.snapshot.series
    assert result.snapshot.series["infrapulse_rdma_cnp_sent_total"] == {("mlx5_0", "1"): 6}


def test_failed_reads_are_reported_in_scan_order_and_no_file_is_read_twice(tree):
    """The bulk read stops at a failing file (read in family order, counters first); the per-file
    path goes on from there, in scan order: each file read once, the errors in the order the
    device's files were scanned, whichever the bulk read met first, every cycle."""
    reads: list[int] = []
    fail = {"mlx5_2/ports/1/state": errno.EINVAL, "mlx5_2/ports/2/counters/port_rcv_data": errno.EIO}
    ref: list = []
    failing = failing_pread(ref, fail)

    def pread(fd: int, size: int, offset: int) -> bytes:
        reads.append(fd)
        return failing(fd, size, offset)

    reader = InfinibandReader(tree.root, pread=pread)
    ref.append(reader)
    for _ in range(2):
        reads.clear()
        result = next(r for r in reader.collect() if r.target == "mlx5_2")
        assert len(reads) == len(set(reads)) == len(reader.fd_paths)
        assert result.partial_errors == ["ports/1/state: Invalid argument",
                                         "ports/2/counters/port_rcv_data: Input/output error"]
        series = result.snapshot.series
        assert ("mlx5_2", "1") not in series["infrapulse_rdma_port_state"]
        assert series["infrapulse_rdma_port_state"] == {("mlx5_2", "2"): 1}
        assert ("mlx5_2", "2") not in series["infrapulse_rdma_port_received_bytes_total"]
        assert ("mlx5_2", "1") in series["infrapulse_rdma_port_received_bytes_total"]
    for per_file, bulk in per_file_and_bulk(reader):
        assert bulk == per_file


def test_the_bulk_read_on_the_bench_tree_matches_the_per_file_read(tmp_path):
    reader = InfinibandReader(write_tree(tmp_path / "sys", 8).root)
    reader.collect()
    pairs = per_file_and_bulk(reader)
    assert len(pairs) == 8 and all(bulk == per_file for per_file, bulk in pairs)
    assert all(bulk[0] == "ok" and not bulk[2] for _, bulk in pairs)  # every file read in bulk
