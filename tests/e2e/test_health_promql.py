"""The cross-instance PromQL of infrapulse.health.promql, run through `promtool test rules`.

A temporary rule file holds promql.recording_rules(); a temporary test file feeds series of
two node instances and one fabric instance and states the values each rule must produce.
Needs Debian promtool at /usr/bin/promtool (`make test` installs it).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from infrapulse.health import promql
from infrapulse.health.scoring import curve
from infrapulse.health.signals import SIGNALS

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

# 15 s samples for 10 minutes; rules evaluated at 5m over the 1m window.
NODE1 = {"job": "node", "instance": "node1:9477"}
NODE2 = {"job": "node", "instance": "node2:9477"}
NODE3 = {"job": "node", "instance": "node3:9477"}
FABRIC = {"job": "fabric", "instance": "fabric0:9477"}


def _series(name: str, labels: dict, values: str) -> dict:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _inputs() -> list[dict]:
    q = {"switch": "leaf01", "queue": "3"}
    return [
        _series("infrapulse_node_info", {**NODE1, "hostname": "gpu-node-01", "role": "node"}, "1x40"),
        # The LLDP neighbour is an FQDN; node 2 reports its short name: matched on the first label.
        _series("infrapulse_node_info", {**NODE2, "hostname": "gpu-node-02", "role": "node"}, "1x40"),
        _series("infrapulse_node_info", {**NODE3, "hostname": "gpu-node-03", "role": "node"}, "1x40"),
        _series("infrapulse_node_info", {**FABRIC, "hostname": "fabric0", "role": "fabric"}, "1x40"),
        _series("infrapulse_switch_lldp_neighbor_info",
                {**FABRIC, "switch": "leaf01", "interface": "Ethernet1", "neighbor_system": "gpu-node-01",
                 "neighbor_port": "mlx5_0"}, "1x40"),
        _series("infrapulse_switch_lldp_neighbor_info",
                {**FABRIC, "switch": "leaf01", "interface": "Ethernet2",
                 "neighbor_system": "gpu-node-02.example.net", "neighbor_port": "mlx5_0"}, "1x40"),
        # Ethernet1 queue 3: 7.9% ECN-marked; queue 0 clean. Ethernet2: 0.2% marked.
        _series("infrapulse_switch_queue_transmitted_packets_total",
                {**FABRIC, **q, "interface": "Ethernet1"}, "0+250x40"),
        _series("infrapulse_switch_queue_ecn_marked_packets_total", {**FABRIC, **q, "interface": "Ethernet1"},
                "0+19.75x40"),
        _series("infrapulse_switch_queue_transmitted_packets_total",
                {**FABRIC, "switch": "leaf01", "queue": "0", "interface": "Ethernet1"}, "0+250x40"),
        _series("infrapulse_switch_queue_ecn_marked_packets_total",
                {**FABRIC, "switch": "leaf01", "queue": "0", "interface": "Ethernet1"}, "0x40"),
        _series("infrapulse_switch_queue_transmitted_packets_total",
                {**FABRIC, **q, "interface": "Ethernet2"}, "0+1000x40"),
        _series("infrapulse_switch_queue_ecn_marked_packets_total", {**FABRIC, **q, "interface": "Ethernet2"},
                "0+2x40"),
        # PFC: Ethernet2 priority 3 rx paused 3 s of every 60 s (5%); Ethernet1 not at all.
        _series("infrapulse_switch_pfc_pause_duration_seconds_total",
                {**FABRIC, "switch": "leaf01", "interface": "Ethernet2", "priority": "3", "direction": "rx"},
                "0+0.75x40"),
        _series("infrapulse_switch_pfc_pause_duration_seconds_total",
                {**FABRIC, "switch": "leaf01", "interface": "Ethernet1", "priority": "3", "direction": "rx"},
                "0x40"),
        # Health scores and coverage of every instance.
        _series("infrapulse_health_score", NODE1, "90x40"),
        _series("infrapulse_health_coverage_ratio", NODE1, "1x40"),
        _series("infrapulse_health_score", NODE2, "30x40"),
        _series("infrapulse_health_coverage_ratio", NODE2, "0.5x40"),
        _series("infrapulse_health_score", NODE3, "100x40"),
        _series("infrapulse_health_coverage_ratio", NODE3, "1x40"),
        _series("infrapulse_health_score", FABRIC, "80x40"),
        _series("infrapulse_health_coverage_ratio", FABRIC, "1x40"),
    ]


def _sample(labels: dict, value: float) -> dict:
    return {"labels": "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "value": value}


def _rounded(tests: list[dict]) -> list[dict]:
    """promtool compares floats exactly: compare every rule's value rounded to 1e-6."""
    for t in tests:
        t["expr"] = f"round({t['expr']}, 0.000001)"
        for sample in t["exp_samples"]:
            sample["value"] = round(sample["value"], 6)
    return tests


def _expected() -> list[dict]:
    n1 = {**NODE1, "hostname": "gpu-node-01"}
    n2 = {**NODE2, "hostname": "gpu-node-02"}
    ecn1, ecn2 = 0.079, 0.002
    ecn, pfc = SIGNALS["ecn_marked_ratio"], SIGNALS["pfc_pause_ratio"]
    ecn_score = lambda x: curve(x, ecn.good, ecn.bad)  # noqa: E731
    pfc_score = lambda x: curve(x, pfc.good, pfc.bad)  # noqa: E731
    mean_node = (90 * 1 + 30 * 0.5 + 100 * 1) / 2.5  # 82
    return _rounded([
        {"eval_time": "5m", "expr": "instance:infrapulse_health_uplink_ecn_marked_ratio:max",
         "exp_samples": [_sample(n1, ecn1), _sample(n2, ecn2)]},
        {"eval_time": "5m", "expr": "instance:infrapulse_health_uplink_pfc_pause_ratio:max",
         "exp_samples": [_sample(n1, 0.0), _sample(n2, 0.05)]},
        {"eval_time": "5m", "expr": "instance:infrapulse_health_topology_score:mean",
         "exp_samples": [_sample(n1, (ecn_score(ecn1) + pfc_score(0.0)) / 2),
                         _sample(n2, (ecn_score(ecn2) + pfc_score(0.05)) / 2)]},
        {"eval_time": "5m", "expr": "role:infrapulse_health_score:weighted_mean",
         "exp_samples": [_sample({"role": "node"}, mean_node), _sample({"role": "fabric"}, 80.0)]},
        {"eval_time": "5m", "expr": "role:infrapulse_health_score:min",
         "exp_samples": [_sample({"role": "node"}, 30.0), _sample({"role": "fabric"}, 80.0)]},
        # node: mean 82 capped at min 30 + 50 = 80; fabric: 80 (its only instance)
        {"eval_time": "5m", "expr": "role:infrapulse_health_score:cluster",
         "exp_samples": [_sample({"role": "node"}, 80.0), _sample({"role": "fabric"}, 80.0)]},
    ])


def _run(tmp_path, inputs, expected) -> subprocess.CompletedProcess:
    rules = tmp_path / "health.rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "health-promql",
                                                 "rules": promql.recording_rules("1m")}]},
                                    sort_keys=False))
    test = tmp_path / "health.test.yaml"
    test.write_text(yaml.safe_dump({
        "rule_files": [str(rules)], "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": inputs, "promql_expr_test": expected}],
    }, sort_keys=False))
    check = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    return subprocess.run([PROMTOOL, "test", "rules", str(test)], capture_output=True, text=True, timeout=60)


def test_promql_rules_produce_the_expected_values(tmp_path):
    result = _run(tmp_path, _inputs(), _expected())
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_can_fail(tmp_path):
    """The harness is real: a wrong expectation fails."""
    expected = _expected()
    expected[-1]["exp_samples"][0]["value"] = 82.0  # the uncapped mean
    result = _run(tmp_path, _inputs(), expected)
    assert result.returncode != 0
    assert "role:infrapulse_health_score:cluster" in result.stdout + result.stderr


@pytest.mark.parametrize("window", ["30s", "5m"])
def test_window_is_a_parameter(window):
    for rule in promql.recording_rules(window)[:3]:
        assert f"[{window}]" in rule["expr"]
