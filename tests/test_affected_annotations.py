"""The `affected` annotation (issue 32): alerts/generate_affected_annotations.py gives every
fabric, link, RDMA, RoCE, GPU, probe and mesh alert the workloads behind its own target.
promtool evaluates the templates against workload join series in alerts/tests/affected.test.yaml
(and every other rule test expects the annotation's "unknown" form)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from infrapulse.health import affected_annotation as ann

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "alerts"))
import generate_affected_annotations as gen  # noqa: E402

RULE_FILES = [*gen.rule_files(), ROOT / "alerts" / "link.rules.yaml"]  # link: generate_link_rules.py


def _alerts(path: Path) -> dict[str, dict]:
    return {r["alert"] + ":" + r["labels"].get("severity", ""): r
            for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"] if "alert" in r}


def test_the_committed_rules_are_current():
    assert gen.main(["--check"]) == 0


def test_every_alert_of_those_files_carries_the_template_for_its_target():
    seen = 0
    for path in RULE_FILES:
        for key, rule in _alerts(path).items():
            seen += 1
            assert ann.KEY in rule["annotations"], key
            assert "$sel" in rule["annotations"][ann.KEY], key
    assert seen >= 40  # gpu, link, mesh, network, probe, rdma, roce


@pytest.mark.parametrize("path,alert,kind", [
    ("gpu", "InfrapulseGpuCriticalXid:critical", "gpu"),
    ("network", "InfrapulseSwitchInterfaceFlapping:critical", "switch port"),
    ("network", "InfrapulseSwitchTelemetryDown:critical", "switch"),
    ("network", "InfrapulseNicPfcPauseStorm:critical", "nic"),
    ("link", "InfrapulseNicLinkHalfDead:critical", "nic or rdma device"),
    ("rdma", "InfrapulseRdmaRetransmissionsHigh:warning", "rdma device"),
    ("mesh", "InfrapulseMeshPacketLoss:critical", "node"),
])
def test_the_target_is_read_from_the_labels_the_alert_names(path, alert, kind):
    rule = _alerts(ROOT / "alerts" / f"{path}.rules.yaml")[alert]
    assert rule["annotations"][ann.KEY] == ann.template(kind)


def test_rewrite_replaces_a_stale_annotation_and_keeps_the_others():
    text = """groups:
  - name: g
    rules:
      - alert: A
        expr: up == 0
        annotations:
          affected: |-
            stale
            lines
          summary: gpu
          description: '{{ $labels.instance }} GPU {{ $labels.gpu }}'
      - record: r
        expr: up
"""
    once = ann.rewrite(text)
    assert ann.rewrite(once) == once
    rule = yaml.safe_load(once)["groups"][0]["rules"][0]
    assert rule["annotations"] == {"affected": ann.template("gpu"), "summary": "gpu",
                                   "description": "{{ $labels.instance }} GPU {{ $labels.gpu }}"}
    assert yaml.safe_load(once)["groups"][0]["rules"][1] == {"record": "r", "expr": "up"}


def test_make_generate_runs_it_before_the_prometheusrule_copy():
    makefile = (ROOT / "Makefile").read_text()
    makefile = makefile[makefile.index("GENERATORS :="):]
    assert makefile.index("alerts/generate_affected_annotations.py") < \
        makefile.index("alerts/generate_prometheusrule.py")
