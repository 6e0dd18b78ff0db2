"""Source `ethtool` on real `ethtool -S` captures (shared/real/ethtool, see its PROVENANCE.md):
every series value-exact per capture, unmapped drivers reported, the simulator's shapes.

Each capture is fed through the `stats_dir` provider (one JSON file per interface) exactly as
PROVENANCE.md says to read it. Expected values are transcribed from the capture files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest

from helpers import parse_exposition, real
from infrapulse.http import sources_status
from infrapulse.metrics import DaemonState, make_registry
from infrapulse.simulate.nic_stats import bnxt_stat_names, ice_stat_names, mlx5_stat_names
from infrapulse.sources.base import SourceContext
from infrapulse.sources.nic.ethtool import EthtoolSource
from infrapulse.store import Store

_STAT_LINE = re.compile(r"(?:# )?\s*(.+): (\d+)")


def capture_stats(name: str) -> dict[str, int]:
    """`ethtool -S` text -> {name: value} in order (PROVENANCE.md: the name is everything before
    the last ': ', an optional '# ' prefix is dropped, other lines are skipped)."""
    stats: dict[str, int] = {}
    for line in real("ethtool", name).read_text().splitlines():
        match = _STAT_LINE.fullmatch(line.rstrip())
        if match:
            stats[match.group(1).strip()] = int(match.group(2))
    return stats


async def collect(tmp_path: Path, stats: dict[str, int], interface: str = "eth0") -> tuple[Store, str]:
    """One poll of the source over a stats_dir holding `stats`; the store and its exposition."""
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir(exist_ok=True)
    (stats_dir / f"{interface}.json").write_text(json.dumps(stats))
    store = Store()
    # sysfs_root: an empty tree, so the host's own class/net/eth0 link files stay out of it.
    cfg = EthtoolSource.CONFIG.validate({"stats_dir": str(stats_dir), "interfaces": [interface],
                                         "sysfs_root": str(tmp_path)}, "sources.ethtool")
    source = EthtoolSource(cfg, SourceContext(store=store, interval=5.0))
    await source.poll_once()
    await source.close()
    text = generate_latest(make_registry(store, DaemonState("testhost", "node"))).decode()
    return store, text


def nic_series(text: str) -> dict[tuple[str, frozenset], float]:
    """Every infrapulse_nic_* sample except the stat-count gauge, labels without `interface`."""
    out = {}
    for (name, labels), v in parse_exposition(text).items():
        if name.startswith("infrapulse_nic_") and name != "infrapulse_nic_driver_stats":
            out[(name, frozenset((k, x) for k, x in labels if k != "interface"))] = v
    return out


def s(name: str, value: float, **labels: str) -> tuple[tuple[str, frozenset], float]:
    return (f"infrapulse_nic_{name}", frozenset(labels.items())), value


# -- mlx5 --------------------------------------------------------------------------------------


def mlx5_traffic(rx_bytes: int, tx_bytes: int, rx_packets: int, tx_packets: int) -> list:
    return [s("phy_bytes_total", rx_bytes, direction="rx"), s("phy_bytes_total", tx_bytes, direction="tx"),
            s("phy_packets_total", rx_packets, direction="rx"),
            s("phy_packets_total", tx_packets, direction="tx")]


async def test_mlx5_cx6dx_k515_global_pause_exact(tmp_path):
    store, text = await collect(tmp_path, capture_stats("mlx5-cx6dx-bpf2024-k5.15.txt"))
    assert nic_series(text) == dict([
        *mlx5_traffic(6211329423080, 357657403514, 97052087562, 5588396729),
        s("pause_frames_total", 5745055, direction="tx"),
        s("port_discards_total", 58591428329, direction="rx"), s("port_discards_total", 0, direction="tx"),
        s("tx_oversize_drops_total", 0),
        s("phy_errors_total", 0, kind="undersize"), s("phy_errors_total", 0, kind="fragment"),
        s("phy_errors_total", 0, kind="jabber"),
        s("priority_bytes_total", 6211318150440, priority="0", direction="rx"),
        s("priority_bytes_total", 357288052986, priority="0", direction="tx"),
        s("priority_packets_total", 38460533605, priority="0", direction="rx"),
        s("priority_packets_total", 5582625883, priority="0", direction="tx"),
        s("priority_discards_total", 58591314012, priority="0"),
        s("global_pause_frames_total", 5745042, direction="tx"),
        s("global_pause_duration_seconds_total", 771.10381, direction="tx"),
        s("rx_out_of_buffer_total", 990473555),
    ])
    assert store.status[("ethtool", "eth0")].reason == "ok"


async def test_mlx5_cx6dx_k65_global_pause_exact_and_exposed_without_float_noise(tmp_path):
    _, text = await collect(tmp_path, capture_stats("mlx5-cx6dx-bpf2024-k6.5.txt"))
    assert nic_series(text) == dict([
        *mlx5_traffic(46609758231313, 3008055468662, 728277471186, 47000866603),
        s("pause_frames_total", 44414017, direction="tx"),
        s("port_discards_total", 441063206498, direction="rx"),
        s("rx_buffer_almost_full_events_total", 1192226),
        s("priority_bytes_total", 46609758231313, priority="0", direction="rx"),
        s("priority_bytes_total", 3005212971574, priority="0", direction="tx"),
        s("priority_packets_total", 287214264688, priority="0", direction="rx"),
        s("priority_packets_total", 46956452586, priority="0", direction="tx"),
        s("priority_discards_total", 441063206498, priority="0"),
        s("global_pause_frames_total", 44414017, direction="tx"),
        s("global_pause_duration_seconds_total", 5961.284324, direction="tx"),
        s("rx_out_of_buffer_total", 534918379),
    ])
    # tx_global_pause_duration 5961284324 us: divided, not multiplied by 1e-6 (5961.284323999999).
    line = 'infrapulse_nic_global_pause_duration_seconds_total{direction="tx",interface="eth0"} 5961.284324\n'
    assert line in text
    assert "5961.28432399" not in text


async def test_mlx5_cx4lx_pfc_priority_0_exact(tmp_path):
    _, vm00 = await collect(tmp_path, capture_stats("mlx5-cx4lx-pfc-blog-vm00.txt"), "ens1")
    assert nic_series(vm00) == dict([
        s("pfc_pause_frames_total", 12667, priority="0", direction="rx"),
        s("pfc_pause_frames_total", 80, priority="0", direction="tx"),
        s("pfc_pause_transitions_total", 5418, priority="0", direction="rx"),
        s("rx_out_of_buffer_total", 0), s("port_discards_total", 0, direction="rx"),
    ])
    _, vm01 = await collect(tmp_path, capture_stats("mlx5-cx4lx-pfc-blog-vm01.txt"), "ens1")
    assert nic_series(vm01) == dict([  # the peer: what one VM sent, the other received
        s("pfc_pause_frames_total", 80, priority="0", direction="rx"),
        s("pfc_pause_frames_total", 12667, priority="0", direction="tx"),
        s("rx_out_of_buffer_total", 0), s("port_discards_total", 0, direction="rx"),
    ])


async def test_mlx5_ofed_100g_fec_lanes_and_phy_errors_exact(tmp_path):
    stats = capture_stats("mlx5-100g-ofed-annotated-note.txt")
    lanes = {lane: stats[f"rx_err_lane_{lane}_phy"] for lane in range(4)}
    assert sum(lanes.values()) == stats["rx_corrected_bits_phy"]  # the capture is self-consistent
    _, text = await collect(tmp_path, stats)
    kinds = {"crc": 386, "symbol": 386, "pcs_symbol": 386, "in_range_length": 0, "out_of_range_length": 0,
             "oversize": 0, "undersize": 0, "fragment": 0, "jabber": 0}
    assert nic_series(text) == dict([
        *mlx5_traffic(2027206797, 865069388, 15005729, 7222595),
        *(s("phy_errors_total", n, kind=k) for k, n in kinds.items()),
        s("pause_frames_total", 0, direction="rx"), s("pause_frames_total", 2, direction="tx"),
        s("port_discards_total", 0, direction="rx"), s("port_discards_total", 0, direction="tx"),
        s("tx_oversize_drops_total", 0), s("link_down_events_total", 0),
        s("fec_corrected_bits_total", 17750739),
        s("lane_errors_total", 28116, lane="0"), s("lane_errors_total", 0, lane="1"),
        s("lane_errors_total", 0, lane="2"), s("lane_errors_total", 17722623, lane="3"),
        s("rx_buffer_almost_full_events_total", 0),
        s("priority_bytes_total", 2027206797, priority="0", direction="rx"),
        s("priority_bytes_total", 865069260, priority="0", direction="tx"),
        s("priority_packets_total", 15005729, priority="0", direction="rx"),
        s("priority_packets_total", 7222593, priority="0", direction="tx"),
        s("priority_discards_total", 0, priority="0"),
        s("pause_storm_events_total", 0, level="warning"), s("pause_storm_events_total", 0, level="error"),
        s("priority_buffer_discards_total", 0, priority="0"),
        s("priority_congestion_discards_total", 0, priority="0"),
        s("ecn_marked_packets_total", 0, priority="0"),
        s("rx_out_of_buffer_total", 0),
    ])


# -- bnxt_en and ice ---------------------------------------------------------------------------


async def test_bnxt_en_bcm5741x_maps_pfc_per_priority_and_phy_exact(tmp_path):
    store, text = await collect(tmp_path, capture_stats("bnxt_en-bcm5741x-showmax-fixture.txt"), "ens2f1")
    per_priority = [s(family, 0, priority=str(p), direction=d)
                    for family in ("pfc_pause_frames_total", "pfc_pause_duration_seconds_total",
                                   "pfc_pause_transitions_total")
                    for p in range(8) for d in ("rx", "tx")]
    assert nic_series(text) == dict([
        *per_priority,
        s("link_down_events_total", 4),
        s("phy_errors_total", 0, kind="crc"), s("phy_errors_total", 0, kind="pcs_symbol"),
        s("fec_corrected_bits_total", 0), s("received_bits_total", 1722813173120),
        s("rx_buffer_almost_full_events_total", 417),
    ])
    status = store.status[("ethtool", "ens2f1")]
    assert status.reason == "ok"
    cov = {m: c.series for m, c in status.coverage.items()}
    assert cov["infrapulse_nic_pfc_pause_frames_total"] == 16
    assert cov["infrapulse_nic_link_down_events_total"] == 1
    assert cov["infrapulse_nic_priority_bytes_total"] == 0  # rx_bytes_pri<N> (per CoS queue) is not mapped
    assert cov["driver_stats"] == 16 * 3 + 6


async def test_bnxt_pfc_values_land_on_their_priority_and_direction(tmp_path):
    """The capture's PFC counters are all 0: distinct values show each name reaches its series."""
    stats = capture_stats("bnxt_en-bcm5741x-showmax-fixture.txt")
    stats.update({"rx_pfc_ena_frames_pri3": 1001, "tx_pfc_ena_frames_pri5": 1002,
                  "pfc_pri3_rx_duration_us": 2_500_001, "pfc_pri5_tx_duration_us": 7,
                  "pfc_pri3_rx_transitions": 1003, "pfc_pri6_tx_transitions": 1004})
    _, text = await collect(tmp_path, stats)
    got = nic_series(text)
    assert got[s("pfc_pause_frames_total", 0, priority="3", direction="rx")[0]] == 1001
    assert got[s("pfc_pause_frames_total", 0, priority="5", direction="tx")[0]] == 1002
    assert got[s("pfc_pause_duration_seconds_total", 0, priority="3", direction="rx")[0]] == 2.500001
    assert got[s("pfc_pause_duration_seconds_total", 0, priority="5", direction="tx")[0]] == 7e-06
    assert got[s("pfc_pause_transitions_total", 0, priority="3", direction="rx")[0]] == 1003
    assert got[s("pfc_pause_transitions_total", 0, priority="6", direction="tx")[0]] == 1004
    pfc_total = sum(v for (n, _), v in got.items() if n.startswith("infrapulse_nic_pfc_"))
    assert pfc_total == 1001 + 1002 + 2.500001 + 7e-06 + 1003 + 1004  # nothing else is non-zero


async def test_ice_e810_priority_xon_xoff_exact(tmp_path):
    stats = capture_stats("ice-e810-intel-fcguide.txt")
    assert len(stats) == 32
    _, text = await collect(tmp_path, stats, "enp175s0f0")
    tx_xoff = [6434, 6434, 14864, 6434, 0, 6434, 6434, 6434]
    tx_xon = [1, 1, 2, 1, 0, 1, 1, 1]
    expected = {}
    for p in range(8):
        expected.update([s("pfc_pause_frames_total", tx_xoff[p], priority=str(p), direction="tx"),
                         s("pfc_resume_frames_total", tx_xon[p], priority=str(p), direction="tx"),
                         s("pfc_pause_frames_total", 0, priority=str(p), direction="rx"),
                         s("pfc_resume_frames_total", 0, priority=str(p), direction="rx")])
    assert nic_series(text) == expected


# -- a driver that maps to nothing is reported ---------------------------------------------------


async def test_unmapped_driver_is_partial_with_coverage_and_unmapped_count(tmp_path):
    stats = {"rx_queue_0_packets": 5, "rx_queue_0_bytes": 600, "tx_queue_0_packets": 7}  # virtio_net-like
    store, text = await collect(tmp_path, stats, "eth1")
    status = store.status[("ethtool", "eth1")]
    assert status.up and status.reason == "partial"
    assert "none of its 3 driver statistics maps" in status.message and "rx_queue_0_packets" in status.message
    values = parse_exposition(text)
    assert values[("infrapulse_source_mapping_series", frozenset(
        {"source": "ethtool", "target": "eth1", "mapping": "driver_stats"}.items()))] == 0
    assert values[("infrapulse_source_unmapped_total", frozenset(
        {"source": "ethtool", "target": "eth1", "mapping": "driver_stats"}.items()))] == 3
    [row] = [r for r in sources_status(store) if r["target"] == "eth1"]
    assert "driver_stats" in row["coverage"]["empty"]
    assert row["coverage"]["unmapped_example"] == {"mapping": "driver_stats", "sample": "rx_queue_0_packets"}
    assert nic_series(text) == {}


async def test_mapped_driver_has_no_unmapped_count(tmp_path):
    store, text = await collect(tmp_path, capture_stats("mlx5-cx4lx-pfc-blog-vm00.txt"))
    status = store.status[("ethtool", "eth0")]
    assert status.reason == "ok" and status.coverage["driver_stats"].series == 5
    assert status.coverage["driver_stats"].unmapped == 0
    assert status.coverage["infrapulse_nic_global_pause_frames_total"].series == 0


# -- the simulator sends what the captures show --------------------------------------------------


def test_simulated_bnxt_names_are_the_captures_in_order():
    assert bnxt_stat_names(rings=8) == list(capture_stats("bnxt_en-bcm5741x-showmax-fixture.txt"))


def test_simulated_ice_priority_names_are_the_captures_in_order():
    priority_names = [n for n in ice_stat_names() if "_priority_" in n]
    assert priority_names == list(capture_stats("ice-e810-intel-fcguide.txt"))


MLX5_CAPTURES = ("mlx5-cx6dx-bpf2024-k5.15.txt", "mlx5-cx6dx-bpf2024-k6.5.txt",
                 "mlx5-cx4lx-pfc-blog-vm00.txt", "mlx5-100g-ofed-annotated-note.txt")
# In the driver (en_stats.c, mlx5/counters.rst) but in no capture: the captures have no PFC
# duration lines, no rx-side global pause, and rx_bits_phy and total_success_recovery_phy are newer
# than all of them.
MLX5_SOURCE_ONLY = re.compile(r"(rx|tx)_prio[0-7]_pause_duration|rx_global_pause(_duration|_transition)?"
                              r"|rx_bits_phy|total_success_recovery_phy")


def _generic(name: str) -> str:
    return re.sub(r"prio[0-7]_", "prioN_", re.sub(r"^(rx|tx|ch)0", r"\1N", name))


def test_simulated_mlx5_names_are_real_and_in_driver_order():
    real_names = [n for capture in MLX5_CAPTURES for n in capture_stats(capture)]
    known = {_generic(n) for n in real_names}
    for pfc, global_pause in (((3,), False), ((), True)):
        names = mlx5_stat_names(pfc, global_pause=global_pause)
        invented = [n for n in names if _generic(n) not in known and not MLX5_SOURCE_ONLY.fullmatch(n)]
        assert invented == []
    # Names the OFED capture (every group, one channel) has appear in its order.
    ofed = list(capture_stats("mlx5-100g-ofed-annotated-note.txt"))
    common = [n for n in mlx5_stat_names((), lanes=4) if n in ofed]
    assert common == [n for n in ofed if n in common]
    assert len(common) >= 60
