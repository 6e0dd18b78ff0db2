"""`infrapulse rules --config FILE` output is what Prometheus users with threshold overrides load:
promtool checks it clean, and its alerts fire at the overridden threshold, not the default one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from infrapulse import cli

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
CONFIG = """\
health:
  thresholds:
    link_flaps: {bad: 5}
    link_half_dead: {bad: 4}
  link:
    window: 15m
"""


def _render(tmp_path: Path) -> Path:
    config = tmp_path / "infrapulse.yaml"
    config.write_text(CONFIG)
    out = tmp_path / "rules"
    assert cli.main(["rules", "--config", str(config), "--output", str(out)]) == 0
    return out


def test_override_rules_pass_promtool_check(tmp_path):
    out = _render(tmp_path)
    rules = sorted(str(p) for p in out.glob("*.rules.yaml"))
    assert len(rules) == 4
    checked = subprocess.run([PROMTOOL, "check", "rules", *rules], capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode == 0 and "WARNING" not in checked.stdout + checked.stderr, \
        checked.stdout + checked.stderr


def _series(name: str, values: str) -> dict:
    return {"series": f'{name}{{job="infrapulse",instance="n1:9477",interface="ens3np0"}}', "values": values}


def test_override_rules_fire_at_the_overridden_threshold(tmp_path):
    """4 carrier transitions: flapping by default (>= 3), not with link_flaps bad 5; 6 is."""
    out = _render(tmp_path)
    flapping = {"alertname": "InfrapulseNicLinkFlapping"}
    labels = {"severity": "critical", "team": "noc", "job": "infrapulse", "instance": "n1:9477",
              "interface": "ens3np0"}
    fired = [{"exp_labels": labels,
              "exp_annotations": {
                  "summary": "NIC link is flapping.",
                  "affected": "unknown (no workload attribution on n1:9477)",  # the override keeps it
                  "description": "n1:9477 ens3np0 changed carrier state 6 times in 15m.",
                  "runbook_url": "https://github.com/infrapulse/infrapulse/blob/main/docs/runbooks/"
                                 "InfrapulseNicLinkFlapping.md"}}]
    unit = {
        "rule_files": [str(out / "recording.rules.yaml"), str(out / "link.rules.yaml"),
                       str(out / "network.rules.yaml")],
        "evaluation_interval": "1m",
        "group_eval_order": ["infrapulse-network.recording", "infrapulse-link.recording"],
        "tests": [
            {"interval": "1m",
             "input_series": [_series("infrapulse_nic_carrier_changes_total", "0x20 4x30")],
             "alert_rule_test": [{"eval_time": "25m", "alertname": flapping["alertname"], "exp_alerts": []}]},
            {"interval": "1m",
             "input_series": [_series("infrapulse_nic_carrier_changes_total", "0x20 6x30")],
             "alert_rule_test": [
                 {"eval_time": "25m", "alertname": flapping["alertname"],
                  "exp_alerts": fired},
                 # 14m after the step the 15m window still holds it (a 10m window would not).
                 {"eval_time": "34m", "alertname": flapping["alertname"],
                  "exp_alerts": fired},
             ]},
        ],
    }
    test_file = tmp_path / "link-override.test.yaml"
    test_file.write_text(yaml.safe_dump(unit, sort_keys=False))
    result = subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
