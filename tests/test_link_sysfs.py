"""Link state from sysfs class/net (carrier counters, speed, hwmon) in the ethtool source, and the
node simulator's link-flap / half-dead-link scenarios on the node side."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from helpers import render_store, samples_of, value
from infrapulse.simulate.net_sysfs import NetLink
from infrapulse.simulate.node import VICTIM_NETDEV, NodeSimulator, Traffic
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources.base import SourceContext
from infrapulse.sources.nic.ethtool import EthtoolSource
from infrapulse.sources.nic.link_sysfs import LINK_FAMILIES, read_link
from infrapulse.store import Store


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def mlx5_link_tree(root: Path, interface: str = "ens1f0np0") -> Path:
    """class/net/<if> as a ConnectX on kernel >= 6.5 shows it: carrier counters, speed 400000 and
    the PCI function's mlx5 hwmon (an ASIC channel and the module channel, millidegrees)."""
    base = root / "class" / "net" / interface
    for name, text in (("carrier", "1"), ("carrier_changes", "7"), ("carrier_up_count", "4"),
                       ("carrier_down_count", "3"), ("speed", "400000"), ("operstate", "up")):
        write(base / name, text)
    hw = base / "device" / "hwmon" / "hwmon3"
    write(hw / "name", "mlx5")
    for channel, label, milli, crit in ((1, "asic", 61_250, 105_000), (2, "sensor64", 44_125, 75_000)):
        write(hw / f"temp{channel}_label", label)
        write(hw / f"temp{channel}_input", str(milli))
        write(hw / f"temp{channel}_crit", str(crit))
    return base


async def poll(root: Path, stats: dict[str, int], interface: str = "ens1f0np0") -> Store:
    stats_dir = root / "stats"
    stats_dir.mkdir(exist_ok=True)
    (stats_dir / f"{interface}.json").write_text(json.dumps(stats))
    store = Store()
    cfg = EthtoolSource.CONFIG.validate({"stats_dir": str(stats_dir), "interfaces": [interface],
                                         "sysfs_root": str(root)}, "sources.ethtool")
    source = EthtoolSource(cfg, SourceContext(store=store, interval=5.0))
    await source.poll_once()
    await source.close()
    return store


async def test_carrier_counters_speed_and_hwmon_exact(tmp_path):
    mlx5_link_tree(tmp_path)
    store = await poll(tmp_path, {"link_down_events_phy": 3, "total_success_recovery_phy": 11})
    v = render_store(store)
    i = {"interface": "ens1f0np0"}
    assert value(v, "infrapulse_nic_carrier_changes_total", **i) == 7
    assert value(v, "infrapulse_nic_carrier_up_events_total", **i) == 4
    assert value(v, "infrapulse_nic_carrier_down_events_total", **i) == 3
    assert value(v, "infrapulse_nic_carrier_up", **i) == 1
    assert value(v, "infrapulse_nic_link_speed_bytes_per_second", **i) == 400e9 / 8
    assert value(v, "infrapulse_nic_link_recoveries_total", **i) == 11
    assert value(v, "infrapulse_nic_link_down_events_total", **i) == 3
    asic, module = frozenset({**i, "sensor": "asic"}.items()), frozenset({**i, "sensor": "sensor64"}.items())
    assert samples_of(v, "infrapulse_nic_temperature_celsius") == {asic: 61.25, module: 44.125}
    assert samples_of(v, "infrapulse_nic_temperature_critical_celsius") == {asic: 105.0, module: 75.0}
    status = store.status[("ethtool", "ens1f0np0")]
    assert status.reason == "ok" and status.partial_errors == []
    assert status.coverage["infrapulse_nic_temperature_celsius"].series == 2
    assert status.coverage["infrapulse_nic_link_recoveries_total"].series == 1


async def test_no_class_net_directory_exports_nothing_and_says_so_in_coverage(tmp_path):
    store = await poll(tmp_path, {"link_down_events_phy": 3})
    v = render_store(store)
    assert not samples_of(v, "infrapulse_nic_carrier_changes_total")
    status = store.status[("ethtool", "ens1f0np0")]
    assert status.reason == "ok"
    assert {f: status.coverage[f].series for f in LINK_FAMILIES} == dict.fromkeys(LINK_FAMILIES, 0)


async def test_link_down_without_speed_and_a_broken_sensor_is_a_partial_error(tmp_path):
    base = mlx5_link_tree(tmp_path)
    write(base / "carrier", "0")
    write(base / "speed", "-1")  # no link: no speed, so no BER denominator from it
    os.remove(base / "carrier_up_count")  # kernels before 4.16 have only carrier_changes
    write(base / "device" / "hwmon" / "hwmon3" / "temp2_input", "garbage")
    store = await poll(tmp_path, {"link_down_events_phy": 3})
    v = render_store(store)
    i = {"interface": "ens1f0np0"}
    assert value(v, "infrapulse_nic_carrier_up", **i) == 0
    assert not samples_of(v, "infrapulse_nic_link_speed_bytes_per_second")
    assert not samples_of(v, "infrapulse_nic_carrier_up_events_total")
    assert samples_of(v, "infrapulse_nic_temperature_celsius") == {
        frozenset({**i, "sensor": "asic"}.items()): 61.25}
    status = store.status[("ethtool", "ens1f0np0")]
    assert status.reason == "partial"
    assert any("hwmon3/temp2_input" in e and "garbage" in e for e in status.partial_errors)


def test_real_sysfs_of_this_machine():
    """lo and eth0 exist here (no hwmon on lo): the counters read are the files' own values."""
    for interface in ("lo", "eth0"):
        base = Path("/sys/class/net") / interface
        if not base.is_dir():
            continue
        reading = read_link("/sys", interface)
        assert reading.present
        expected = int((base / "carrier_changes").read_text())
        assert reading.series["infrapulse_nic_carrier_changes_total"] == {(interface,): expected}
    assert not read_link("/sys", "no-such-if0").present


def make_sim(tmp_path, active=()):
    now = [0.0]
    board = ScenarioBoard(set(active), clock=lambda: now[0])
    sim = NodeSimulator.create(tmp_path / "sys", tmp_path / "stats", board, Traffic(), random.Random(3))
    return sim, board, now


def nic(sim: NodeSimulator) -> dict[str, int]:
    return json.loads((sim.stats_dir / f"{VICTIM_NETDEV}.json").read_text())


def carrier(sim: NodeSimulator) -> dict[str, int]:
    reading = read_link(sim.tree.root, VICTIM_NETDEV)
    return {f: int(v[(VICTIM_NETDEV,)]) for f, v in reading.series.items() if (VICTIM_NETDEV,) in v}


def test_simulated_tree_has_the_kernel_files(tmp_path):
    sim, _, _ = make_sim(tmp_path)
    base = sim.tree.root / "class" / "net" / VICTIM_NETDEV
    assert (base / "carrier_changes").read_text() == "1\n"
    assert (base / "speed").read_text() == "400000\n"  # the RDMA port's 400 Gb/sec
    assert (base / "device/hwmon/hwmon0/name").read_text() == "mlx5\n"
    assert (base / "device/hwmon/hwmon0/temp2_label").read_text() == "sensor64\n"
    # bnxt_en/ice/i40e netdevs have carrier files but no simulated mlx5 hwmon.
    assert (sim.tree.root / "class/net/ens10f0np0/carrier").read_text() == "1\n"
    assert not (sim.tree.root / "class/net/ens10f0np0/device").exists()


def test_link_flap_moves_carrier_changes_on_the_node(tmp_path):
    sim, board, now = make_sim(tmp_path)
    start = carrier(sim)
    board.activate("link-flap")
    for _ in range(25):  # down 2 s of every 10 s: three downs and (at 2 s, 12 s, 22 s) three ups
        sim.step(1.0)
        now[0] += 1
    end = carrier(sim)
    moved = {f.removeprefix("infrapulse_nic_"): end[f] - start[f] for f in end}
    assert moved == {"carrier_down_events_total": 3, "carrier_up_events_total": 3, "carrier_changes_total": 6,
                     "carrier_up": 0, "link_speed_bytes_per_second": 0}
    assert end["infrapulse_nic_carrier_up"] == 1


def test_half_dead_link_retrains_without_carrier_loss(tmp_path):
    sim, board, now = make_sim(tmp_path)
    sim.step(1.0)
    before, carrier_before = nic(sim), carrier(sim)
    board.activate("half-dead-link")
    for _ in range(20):  # a retrain every 4 s, the first at once: 5 in 20 s
        sim.step(1.0)
        now[0] += 1
    after = nic(sim)
    assert after["total_success_recovery_phy"] - before["total_success_recovery_phy"] == 5
    crc = after["rx_crc_errors_phy"] - before["rx_crc_errors_phy"]
    assert 5 * 200 <= crc <= 5 * 800
    assert after["rx_pcs_symbol_err_phy"] - before["rx_pcs_symbol_err_phy"] == crc
    assert after["link_down_events_phy"] == before["link_down_events_phy"]
    assert carrier(sim) == carrier_before  # the carrier never moved
    # Pre-FEC: corrected bits at ~1e-6 of the wire bits, far above the healthy ~1e-9.
    bits = after["rx_bits_phy"] - before["rx_bits_phy"]
    corrected = after["rx_corrected_bits_phy"] - before["rx_corrected_bits_phy"]
    assert 0.5e-6 < corrected / bits < 2e-6


def test_netlink_counts_each_transition_once():
    link = NetLink("eth9", 100_000, hwmon=False)
    link.set_carrier(False)
    link.set_carrier(False)
    link.set_carrier(True)
    assert (link.carrier_down, link.carrier_up, link.carrier_changes) == (1, 2, 3)
