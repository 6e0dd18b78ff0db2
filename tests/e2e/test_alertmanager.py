"""alerts/alertmanager.yml: amtool-clean, every receiver reachable by a routes test, every alert
rule routed to its team, and the inhibitions working in a real Alertmanager (Debian 0.25)."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from alerting_stack import (
    ALERTS,
    AMTOOL,
    AlertmanagerServer,
    WebhookReceiver,
    test_alertmanager_config,
)

CONFIG = ALERTS / "alertmanager.yml"


def amtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AMTOOL, *args], capture_output=True, text=True, timeout=30)


def routes_to(labels: dict[str, str]) -> set[str]:
    result = amtool("config", "routes", "test", f"--config.file={CONFIG}",
                    *(f"{k}={v}" for k, v in labels.items()))
    assert result.returncode == 0, result.stderr
    return set(result.stdout.strip().split(","))


def test_amtool_check_config_is_clean():
    result = amtool("check-config", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert "6 receivers" in result.stdout and "3 inhibit rules" in result.stdout


# One case per receiver (classic matchers, amtool 0.25).
RECEIVER_CASES = [
    ("noc", {"alertname": "InfrapulseSwitchQueueEcnMarkingHigh", "severity": "warning", "team": "noc"}),
    ("noc-page", {"alertname": "InfrapulseSwitchPfcPauseStorm", "severity": "critical", "team": "noc"}),
    ("ml", {"alertname": "InfrapulseLlmKvCacheSaturated", "severity": "warning", "team": "ml"}),
    ("ml-page", {"alertname": "InfrapulseGpuCriticalXid", "severity": "critical", "team": "ml"}),
    ("null", {"alertname": "InfrapulseSomethingInformational", "severity": "info", "team": "noc"}),
    ("default", {"alertname": "NodeFilesystemAlmostOutOfSpace", "severity": "warning"}),
]


@pytest.mark.parametrize("receiver,labels", RECEIVER_CASES, ids=[c[0] for c in RECEIVER_CASES])
def test_amtool_routes_each_receiver(receiver, labels):
    result = amtool("config", "routes", "test", f"--config.file={CONFIG}", f"--verify.receivers={receiver}",
                    *(f"{k}={v}" for k, v in labels.items()))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_amtool_verify_fails_for_the_wrong_receiver():
    result = amtool("config", "routes", "test", f"--config.file={CONFIG}", "--verify.receivers=ml",
                    "alertname=InfrapulseSwitchPfcPauseStorm", "severity=critical", "team=noc")
    assert result.returncode != 0


def test_every_receiver_has_a_routes_case():
    names = {r["name"] for r in yaml.safe_load(CONFIG.read_text())["receivers"]}
    assert names == {receiver for receiver, _ in RECEIVER_CASES}


def test_health_alerts_reach_both_teams():
    assert routes_to({"alertname": "InfrapulseHealthScoreLow", "severity": "warning",
                      "team": "all"}) == {"noc", "ml"}
    assert routes_to({"alertname": "InfrapulseHealthScoreLow", "severity": "critical", "team": "all"}) == {
        "noc-page", "ml-page"}


def _alert_rules():
    for path in sorted(ALERTS.glob("*.rules.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    yield rule


EXPECTED = {
    ("noc", "warning"): {"noc"}, ("noc", "critical"): {"noc-page"},
    ("ml", "warning"): {"ml"}, ("ml", "critical"): {"ml-page"},
    ("all", "warning"): {"noc", "ml"}, ("all", "critical"): {"noc-page", "ml-page"},
}


def test_every_alert_rule_routes_to_its_team():
    for rule in _alert_rules():
        labels = {"alertname": rule["alert"], **rule["labels"], "instance": "n1:9477"}
        expected = EXPECTED[(rule["labels"]["team"], rule["labels"]["severity"])]
        assert routes_to(labels) == expected, rule["alert"]


# --- a real Alertmanager: notifications and inhibitions --------------------------------------

def _alert(name: str, **labels: str) -> dict:
    now = datetime.now(timezone.utc)
    return {"labels": {"alertname": name, **labels},
            "annotations": {"summary": f"{name}."},
            "startsAt": now.isoformat(), "endsAt": (now + timedelta(minutes=5)).isoformat()}


def test_real_alertmanager_delivers_and_inhibits(tmp_path):
    hook = WebhookReceiver()
    try:
        config = test_alertmanager_config(tmp_path, hook.url, token="s3cret-token")
        with AlertmanagerServer(tmp_path, config) as am:
            am.wait_ready()
            am.api("/api/v2/alerts", [
                # a cabled port down silences the congestion alerts of that port only
                _alert("InfrapulseSwitchInterfaceDown", switch="leaf01", interface="Ethernet1",
                       severity="critical", team="noc"),
                _alert("InfrapulseSwitchQueueEcnMarkingHigh", switch="leaf01", interface="Ethernet1",
                       queue="3", severity="warning", team="noc"),
                _alert("InfrapulseSwitchQueueEcnMarkingHigh", switch="leaf01", interface="Ethernet2",
                       queue="3", severity="warning", team="noc"),
                # an unreachable switch silences every port's congestion alerts
                _alert("InfrapulseSwitchTelemetryDown", switch="leaf02", instance="f1:9477",
                       severity="critical", team="noc"),
                _alert("InfrapulseSwitchPfcPauseStorm", switch="leaf02", interface="Ethernet5", priority="3",
                       direction="rx", instance="f1:9477", severity="critical", team="noc"),
                # critical silences warning of the same alert and target
                _alert("InfrapulseHealthScoreLow", instance="n1:9477", severity="critical", team="all"),
                _alert("InfrapulseHealthScoreLow", instance="n1:9477", severity="warning", team="all"),
                _alert("InfrapulseHealthScoreLow", instance="n2:9477", severity="warning", team="all"),
                _alert("InfrapulseGpuLost", instance="n1:9477", gpu="3", severity="critical", team="ml"),
            ])
            expected = {
                ("noc-page", "InfrapulseSwitchInterfaceDown", "leaf01/Ethernet1/"),
                ("noc", "InfrapulseSwitchQueueEcnMarkingHigh", "leaf01/Ethernet2/"),
                ("noc-page", "InfrapulseSwitchTelemetryDown", "leaf02//f1:9477"),
                ("noc-page", "InfrapulseHealthScoreLow", "//n1:9477"),
                ("ml-page", "InfrapulseHealthScoreLow", "//n1:9477"),
                ("noc", "InfrapulseHealthScoreLow", "//n2:9477"),
                ("ml", "InfrapulseHealthScoreLow", "//n2:9477"),
                ("ml-page", "InfrapulseGpuLost", "//n1:9477"),
            }

            def delivered() -> set[tuple[str, str, str]]:
                return {(a["receiver"], a["labels"]["alertname"],
                         "/".join(a["labels"].get(k, "") for k in ("switch", "interface", "instance")))
                        for a in hook.alerts()}

            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not expected <= delivered():
                time.sleep(0.2)
            time.sleep(2.5)  # two more group intervals: anything inhibited would have been sent by now
            assert delivered() == expected
            assert {auth for _, auth, _ in hook.notifications} == {"Bearer s3cret-token"}

            status = {(a["labels"]["alertname"], a["labels"].get("interface", ""),
                       a["labels"].get("instance", ""), a["labels"]["severity"]): a["status"]["inhibitedBy"]
                      for a in am.api("/api/v2/alerts")}
            assert status[("InfrapulseSwitchQueueEcnMarkingHigh", "Ethernet1", "", "warning")]
            assert not status[("InfrapulseSwitchQueueEcnMarkingHigh", "Ethernet2", "", "warning")]
            assert status[("InfrapulseSwitchPfcPauseStorm", "Ethernet5", "f1:9477", "critical")]
            assert status[("InfrapulseHealthScoreLow", "", "n1:9477", "warning")]
            assert not status[("InfrapulseHealthScoreLow", "", "n2:9477", "warning")]
    finally:
        hook.close()


# --- a fleet-wide firmware rollout is one notification ----------------------------------------

ROLLOUT_ROUTE = 'alertname=~"InfrapulseNicRoceConfigChanged|InfrapulseNicRoceConfigFleetMinority"'


def test_amtool_routes_roce_config_changes_through_the_rollout_route():
    for severity, receiver in (("warning", "noc"), ("critical", "noc-page")):
        result = amtool("config", "routes", "test", f"--config.file={CONFIG}", "--tree",
                        f"--verify.receivers={receiver}", "alertname=InfrapulseNicRoceConfigChanged",
                        f"severity={severity}", "team=noc", "instance=n7:9477", "interface=ens1f0np0")
        assert result.returncode == 0, result.stdout + result.stderr
        assert ROLLOUT_ROUTE in result.stdout, result.stdout
    # another node alert does not take it: it stays grouped per instance
    result = amtool("config", "routes", "test", f"--config.file={CONFIG}", "--tree",
                    "alertname=InfrapulseNicRoceEcnNotificationPointOff", "severity=warning", "team=noc")
    assert result.returncode == 0 and ROLLOUT_ROUTE not in result.stdout, result.stdout


def test_a_fleet_wide_firmware_rollout_is_one_notification(tmp_path):
    """200 nodes' NICs change configuration with their firmware at once: the NOC is paged once, with
    every node in it; a per-node alert of the same size (the contrast) arrives once per node."""
    nodes = [f"gpu-node-{i:03d}:9477" for i in range(200)]
    hook = WebhookReceiver()
    try:
        config = test_alertmanager_config(tmp_path, hook.url)
        with AlertmanagerServer(tmp_path, config) as am:
            am.wait_ready()
            am.api("/api/v2/alerts", [
                _alert("InfrapulseNicRoceConfigChanged", instance=node, interface="ens1f0np0",
                       firmware_changed="true", severity="critical", team="noc") for node in nodes
            ] + [
                _alert("InfrapulseNicRoceEcnNotificationPointOff", instance=node, interface="ens1f0np0",
                       priority="3", severity="warning", team="noc") for node in nodes[:5]
            ])

            def pages() -> list[tuple[str, str, dict]]:
                return [n for n in hook.notifications if n[0] == "noc-page"]

            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and (
                    len({a["labels"]["instance"] for a in hook.alerts("noc-page")}) < len(nodes)
                    or len(hook.alerts("noc")) < 5):
                time.sleep(0.2)
            time.sleep(2.5)  # two more group intervals: a second group would have been sent by now
            rollout = pages()
            assert len(rollout) == 1, [len(p["alerts"]) for _, _, p in rollout]
            assert len(rollout[0][2]["alerts"]) == len(nodes)
            assert rollout[0][2]["groupLabels"] == {"alertname": "InfrapulseNicRoceConfigChanged",
                                                    "severity": "critical"}
            per_node = [n for n in hook.notifications if n[0] == "noc"]
            assert len(per_node) == 5 and all(len(p["alerts"]) == 1 for _, _, p in per_node)
    finally:
        hook.close()
