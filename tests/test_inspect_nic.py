"""Inspections of the NIC's own faults, through the real health scorer: a half-dead link (retrains,
carrier steady) and a firmware upgrade that resets the RoCE congestion control (a config change
with the firmware, ECN notification point off) both end in a network verdict naming the netdev,
with the link class and the config change as evidence."""

from __future__ import annotations

import time
from pathlib import Path

from health_fixtures import Feed
from infrapulse import config as config_mod
from infrapulse.health.service import HealthService
from infrapulse.inspect.service import InspectionService
from test_inspect import _drive, _inspect_config

IF = "ens1f0np0"
HEALTHY, FAULTY = 30, 15  # passes, one a second
HEALTH = "health: {window: 5s, event_window: 10s, link: {window: 5s, baseline_window: 30s}}\n"


def _run(feed: Feed, start: float, tmp_path: Path) -> list[dict]:
    import asyncio

    health = HealthService(feed.store, config_mod.load_text(HEALTH).health, "h", 1.0)
    service = InspectionService(feed.store, health.reports, _inspect_config(), str(tmp_path), "gpu-node-01",
                                health.interval)
    return asyncio.run(_drive(feed, start, health, service))


def _network(report: dict) -> dict[str, dict]:
    layer = next(layer for layer in report["layers"] if layer["name"] == "network")
    return {f["metric"]: f for f in layer["findings"] if f["moved"]}


def test_a_half_dead_link_is_a_network_verdict_on_its_netdev_with_its_class(tmp_path: Path) -> None:
    start = time.time() - 100  # the store expires snapshots older than their staleness
    feed = Feed(start=start)
    # A retrain every 2 s from pass 30 (total_success_recovery_phy); the carrier never moves.
    retrains = [2.0] * HEALTHY + [3.0 + i // 2 for i in range(FAULTY)]
    feed.series("ethtool", "infrapulse_nic_link_recoveries_total", (IF,), retrains, IF)
    feed.series("ethtool", "infrapulse_nic_carrier_changes_total", (IF,), [4.0] * (HEALTHY + FAULTY), IF)
    (report,) = _run(feed, start, tmp_path)
    assert (report["verdict"]["layer"], report["verdict"]["cause"], report["verdict"]["target"]) == \
        ("network", "network", IF)
    moved = _network(report)
    assert sorted(moved) == ["link_half_dead", "link_state"]
    half_dead = moved["link_half_dead"]
    assert (half_dead["target"], half_dead["before"]) == (IF, 0.0)
    # The since window's mean of "retrains in the last 5 s", one every 2 s from the crossing.
    assert 1.5 <= half_dead["since"] <= 2.5
    assert half_dead["note"] == "2 PHY recoveries, carrier steady; no LLDP neighbour names this port"
    # The class turns half-dead at the bad threshold (2 retrains), a pass or two after the crossing.
    state = moved["link_state"]
    assert (state["target"], state["before"]) == (IF, 0.0) and 0.5 <= state["since"] < 1.0
    assert state["note"] == "half-dead: 2 retrains without carrier loss"
    assert f"-> network: {IF}" in report["verdict"]["text"]


def test_a_firmware_upgrade_resetting_cc_is_a_network_verdict_with_the_config_change(tmp_path: Path) -> None:
    start = time.time() - 100
    feed = Feed(start=start)
    n = HEALTHY + FAULTY
    # One configuration change at pass 30, the firmware with it; ECN NP off on the PFC priority since.
    feed.series("roce_config", "infrapulse_nic_roce_config_changes_total", (IF,),
                [0.0] * HEALTHY + [1.0] * FAULTY, IF)
    feed.series("roce_config", "infrapulse_nic_roce_config_last_change_info",
                (IF, "ecn roce_np priority 3 1->0, rpg_ai_rate 20->5", "true"),
                [None] * HEALTHY + [1.0] * FAULTY, IF)
    feed.series("roce_config", "infrapulse_nic_pfc_enabled", (IF, "3"), [1.0] * n, IF)
    feed.series("roce_config", "infrapulse_nic_roce_ecn_enabled", (IF, "roce_np", "3"),
                [1.0] * HEALTHY + [0.0] * FAULTY, IF)
    (report,) = _run(feed, start, tmp_path)
    verdict = report["verdict"]
    assert (verdict["layer"], verdict["cause"], verdict["target"]) == ("network", "network", IF)
    moved = _network(report)
    assert sorted(moved) == ["roce_config_changed", "roce_ecn_np_off"]
    changed = moved["roce_config_changed"]
    # An event: none before the drop, one since; its movement is past the noise floor on its own.
    assert (changed["target"], changed["before"], changed["since"]) == (IF, 0.0, 1.0)
    assert changed["change"] > 3
    assert changed["note"] == "ecn roce_np priority 3 1->0, rpg_ai_rate 20->5; firmware changed with it"
    np_off = moved["roce_ecn_np_off"]
    assert (np_off["target"], np_off["before"], np_off["since"]) == (f"{IF} priority 3", 0.0, 1.0)
    assert "network: ens1f0np0 roce_config_changed 0 -> 1" in verdict["text"]


def test_a_config_change_alone_still_moves(tmp_path: Path) -> None:
    """Without the NP flag (a parameter-only change), the change itself is the network evidence."""
    start = time.time() - 100
    feed = Feed(start=start)
    feed.series("roce_config", "infrapulse_nic_roce_config_changes_total", (IF,),
                [5.0] * HEALTHY + [6.0] * FAULTY, IF)
    (report,) = _run(feed, start, tmp_path)
    assert (report["verdict"]["layer"], report["verdict"]["target"]) == ("network", IF)
    assert sorted(_network(report)) == ["roce_config_changed"]
