"""One XID vocabulary (xid.py): the health signals and the critical-XID alert both
follow it, and alerts/generate_xid_rules.py --check catches a drifted alert regex."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from health_fixtures import GPU_LABELS, Feed, service_for, signal
from infrapulse import xid
from infrapulse.sources.gpu import families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "alerts"))
import generate_xid_rules  # noqa: E402


def _alert_regexes() -> set[str]:
    doc = yaml.safe_load((ROOT / "alerts" / "gpu.rules.yaml").read_text())
    rule = next(r for g in doc["groups"] for r in g["rules"] if r.get("alert") == "InfrapulseGpuCriticalXid")
    return set(re.findall(r'xid=~"([^"]*)"', rule["expr"]))


def test_the_classes_follow_nvidias_immediate_action():
    resets = {"RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR",
              "WORKFLOW_NVLINK5_ERR"}
    assert {x.code for x in xid.XIDS if x.action in resets} == set(xid.CRITICAL_XIDS)
    assert len(xid.CRITICAL_XIDS) == 25 and len(xid.APPLICATION_XIDS) == 8
    assert {48, 64, 74, 79, 95, 119, 120, 140} <= xid.CRITICAL_XIDS
    assert {63, 92, 94} & xid.CRITICAL_XIDS == set()  # no reset asked for: ordinary XIDs now
    assert xid.xid_class(13) == "application"
    assert xid.xid_class(94) == "other" and xid.xid_class(999) == "other"
    assert len(xid.BY_CODE) == len(xid.XIDS)  # no code twice
    assert not hasattr(families, "XID_CRITICAL")  # the second, disagreeing list is gone


def test_the_alert_regex_is_the_tables_critical_class():
    assert _alert_regexes() == {xid.critical_regex()}
    assert {int(c) for c in xid.critical_regex().split("|")} == set(xid.CRITICAL_XIDS)
    assert generate_xid_rules.main(["--check"]) == 0


def test_check_fails_on_drift_and_a_rewrite_fixes_only_the_regex(tmp_path, capsys):
    original = (ROOT / "alerts" / "gpu.rules.yaml").read_text()
    drifted = tmp_path / "gpu.rules.yaml"
    drifted.write_text(original.replace(xid.critical_regex(), "48|79"))
    assert generate_xid_rules.main(["--check", "--rules", str(drifted)]) == 1
    assert "differs from xid.py" in capsys.readouterr().err
    assert generate_xid_rules.main(["--rules", str(drifted)]) == 0
    assert drifted.read_text() == original
    with pytest.raises(ValueError, match="no alert InfrapulseGpuCriticalXid"):
        generate_xid_rules.render("groups: []\n", "1")


@pytest.mark.parametrize("code,critical,other", [("119", 1.0, 0.0), ("94", 0.0, 1.0), ("80", 0.0, 0.0)])
def test_health_scores_an_xid_by_its_class(code, critical, other):
    feed = Feed()
    feed.gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 1)
    feed.counter("nvml", "infrapulse_gpu_xid_errors_total", GPU_LABELS + (code,), 0, 1)
    service = service_for(feed.store)
    feed.publish(service)
    assert signal(service.report, "xid_critical").worst.measurement.value == critical
    assert signal(service.report, "xid_other").worst.measurement.value == other
