"""NIC health on real mlx5 captures (../shared/real/ethtool): the capture goes through the ethtool
source's own mapping, then a minute of known change, then one health pass.

What the captures showed wrong: 802.3x global pause moved nothing, the three PHY error kinds
mlx5 counts for one corrupted frame were summed (3x), and RoCE link flaps were read from the
InfiniBand-only `link_downed` counter."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from health_fixtures import STALE, service_for, signal
from helpers import real
from infrapulse.sources.nic.ethtool import EthtoolCollector
from infrapulse.store import Snapshot, Store

IFACE = "ens1f0np0"
T0 = time.time() - 60  # recent: the store expires snapshots against the wall clock


def capture_stats(name: str) -> dict[str, int]:
    """`name: integer` lines of an `ethtool -S` capture, in order (see its PROVENANCE.md)."""
    stats = {}
    for line in real("ethtool", name).read_text().splitlines():
        key, sep, value = line.strip().removeprefix("# ").rpartition(": ")
        if sep and value.strip().lstrip("-").isdigit():
            stats[key.strip()] = int(value)
    return stats


class CaptureProvider:
    """The ethtool source's StatsProvider, answering with a capture the test moves forward."""

    def __init__(self, stats: dict[str, int]) -> None:
        self.stats = dict(stats)

    def interfaces(self) -> list[str]:
        return [IFACE]

    def read(self, interface: str) -> tuple[Sequence[str], Sequence[int]]:
        return tuple(self.stats), list(self.stats.values())

    def close(self) -> None:
        pass


def nic_snapshot(collector: EthtoolCollector, ts: float) -> Snapshot:
    (result,) = collector.collect()
    assert result.snapshot is not None, result.message
    result.snapshot.timestamp = ts
    return result.snapshot


def roce_port(ts: float, link_downed: float, symbol_errors: float) -> Snapshot:
    """The RoCE port behind the NIC, with PMA counters that mean nothing on Ethernet."""
    snap = Snapshot(ts)
    snap.add("infrapulse_rdma_port_info", ("mlx5_0", "1", "Ethernet", IFACE), 1.0)
    snap.add("infrapulse_rdma_port_state", ("mlx5_0", "1"), 4.0)
    snap.add("infrapulse_rdma_port_link_downed_total", ("mlx5_0", "1"), link_downed)
    snap.add("infrapulse_rdma_port_symbol_errors_total", ("mlx5_0", "1"), symbol_errors)
    return snap


def run(capture: str, change: dict[str, int],
        rdma: tuple[tuple[float, float], tuple[float, float]] | None = None):
    """Publish the capture, then the capture + `change` 60 s later; score both passes."""
    store = Store()
    service = service_for(store)
    provider = CaptureProvider(capture_stats(capture))
    collector = EthtoolCollector(provider, interfaces=[IFACE])
    for step, ts in enumerate((T0, T0 + 60)):
        if step:
            for name, delta in change.items():
                provider.stats[name] += delta
        store.publish("ethtool", IFACE, nic_snapshot(collector, ts), STALE)
        store.record_success("ethtool", IFACE, 0.001)
        if rdma is not None:
            store.publish("infiniband", "mlx5_0", roce_port(ts, *rdma[step]), STALE)
            store.record_success("infiniband", "mlx5_0", 0.001)
        service.tick(ts)
    return service.report


def test_global_pause_of_the_connectx6dx_capture_counts_as_pause_time():
    stats = capture_stats("mlx5-cx6dx-bpf2024-k6.5.txt")
    assert stats["tx_global_pause_duration"] == 5_961_284_324  # µs: 5,961 s paused, no PFC at all
    assert not [n for n in stats if "prio" in n and "pause" in n]
    # 36 s of the next minute paused (the µs counter), as the XDP_DROP load in the thread did.
    report = run("mlx5-cx6dx-bpf2024-k6.5.txt",
                 {"tx_global_pause_duration": 36_000_000, "tx_global_pause": 9000})
    result = signal(report, "pfc_pause_ratio")
    assert result.known and result.worst.measurement.target == f"{IFACE} global pause tx"
    assert result.worst.measurement.value == pytest.approx(0.6)
    assert result.worst.measurement.labels == {"interface": IFACE, "direction": "tx"}
    assert result.score == 0.0 and "pfc_pause_ratio" in report.firing  # critical: the score is capped
    assert report.score == 0.0 and report.status == "critical"  # the only known signal, and it fires
    assert report.detractors[0].sentence == (f"{IFACE} global pause tx: pause in effect 60.0% of the time "
                                             "over the last 1m (802.3x global pause: this port paused its "
                                             "peer; bad at 20%)")
    # Frames have a duration beside them: the frames signal does not apply (no lost coverage).
    assert not signal(report, "pfc_pause_frames_rate").applicable


def test_one_phy_error_kind_is_read_never_the_sum_of_the_three():
    stats = capture_stats("mlx5-100g-ofed-annotated-note.txt")
    kinds = ("rx_crc_errors_phy", "rx_symbol_err_phy", "rx_pcs_symbol_err_phy")
    assert [stats[k] for k in kinds] == [386, 386, 386]  # one error, counted three times
    # 60 more corrupted frames in a minute; 6000 oversize transmit drops are not PHY errors.
    report = run("mlx5-100g-ofed-annotated-note.txt", {**dict.fromkeys(kinds, 60), "tx_errors_phy": 6000})
    result = signal(report, "phy_error_rate")
    (nic,) = [t.measurement for t in result.targets if t.measurement.target == IFACE]
    assert nic.value == pytest.approx(1.0)  # was 3.0 (sum of kinds), and 101.0 with tx_errors_phy
    assert nic.labels == {"interface": IFACE, "kind": "pcs_symbol"}
    assert result.score == 0.0
    assert report.detractors[0].sentence == (f"{IFACE}: 1/s link errors over the last 1m (PCS symbol errors "
                                             "FEC could not correct; bad at 1/s)")


def test_a_nic_without_pcs_symbol_falls_back_to_crc_and_ignores_transmit_errors():
    report = run("mlx5-cx6dx-bpf2024-k6.5.txt", {})  # the capture has no PHY error stats at all
    assert IFACE not in {t.measurement.target for t in signal(report, "phy_error_rate").targets}
    stats = capture_stats("mlx5-100g-ofed-annotated-note.txt")
    for name in ("rx_pcs_symbol_err_phy", "rx_symbol_err_phy"):
        del stats[name]
    store = Store()
    service = service_for(store)
    provider = CaptureProvider(stats)
    collector = EthtoolCollector(provider, interfaces=[IFACE])
    for step, ts in enumerate((T0, T0 + 60)):
        provider.stats["rx_crc_errors_phy"] += 30 * step
        provider.stats["tx_errors_phy"] += 6000 * step
        store.publish("ethtool", IFACE, nic_snapshot(collector, ts), STALE)
        service.tick(ts)
    nic = signal(service.report, "phy_error_rate").worst.measurement
    assert (nic.target, nic.value, nic.note) == (IFACE, pytest.approx(0.5), "CRC (FCS) errors")


def test_roce_link_flaps_come_from_the_nic_not_from_link_downed():
    stats = capture_stats("mlx5-100g-ofed-annotated-note.txt")
    assert stats["link_down_events_phy"] == 0
    # link_downed jumps by 40 and symbol_error by 9000 on the RoCE port: meaningless there.
    report = run("mlx5-100g-ofed-annotated-note.txt", {"link_down_events_phy": 2},
                 rdma=((0.0, 0.0), (40.0, 9000.0)))
    flaps = signal(report, "link_flaps")
    # Two PHY link-down events are four carrier transitions (each down comes back up).
    note = "2 PHY link-down events; RoCE mlx5_0 port 1; no LLDP neighbour names this port"
    assert [(t.measurement.target, t.measurement.value, t.measurement.note) for t in flaps.targets] == [
        (IFACE, 4.0, note)]
    assert flaps.score == 0.0 and "link_flaps" in report.firing
    phy_targets = {t.measurement.target for t in signal(report, "phy_error_rate").targets}
    assert phy_targets == {IFACE}  # the RoCE port's PMA symbol_error is not read
    assert report.detractors[0].sentence == (f"{IFACE}: flapping: 4 carrier transition(s) over the last 1m "
                                             f"({note}; bad at 3)")


def test_a_quiet_roce_nic_is_healthy_whatever_link_downed_says():
    report = run("mlx5-100g-ofed-annotated-note.txt", {}, rdma=((0.0, 0.0), (40.0, 9000.0)))
    flaps = signal(report, "link_flaps")
    assert [(t.measurement.target, t.measurement.value) for t in flaps.targets] == [(IFACE, 0.0)]
    assert flaps.score == 100.0 and report.firing == []
