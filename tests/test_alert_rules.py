"""The alert and recording rules in alerts/: well-formed, every alert with a runbook and promtool
tests that show it quiet, firing and resolved, built only from metric families infrapulse really
exports, and the generated PrometheusRule objects current.

promtool itself runs them in tests/e2e/test_alert_rules_promtool.py (`make e2e`).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "alerts"
RUNBOOKS = ROOT / "docs" / "runbooks"

RULE_FILES = sorted(ALERTS.glob("*.rules.yaml"))
TEST_FILES = sorted((ALERTS / "tests").glob("*.yaml"))
ALERT_NAME = re.compile(r"^Infrapulse[A-Z][A-Za-z0-9]*$")
# level:metric:operations
RECORD_NAME = re.compile(r"^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$")
SEVERITIES = {"critical", "warning", "info"}
TEAMS = {"noc", "ml", "all"}  # all = both teams (health alerts); see alerts/alertmanager.yml
# Metrics Prometheus itself produces that rules may use.
PROMETHEUS_METRICS = {"up"}


def _rules() -> list[dict]:
    rules = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                rules.append({**rule, "_file": path.name, "_group": group["name"]})
    return rules


RULES = _rules()
ALERTS_RULES = [r for r in RULES if "alert" in r]
RECORDS = sorted({r["record"] for r in RULES if "record" in r})
ALERT_NAMES = sorted({r["alert"] for r in ALERTS_RULES})


def test_there_are_rules_and_tests():
    assert {p.name for p in RULE_FILES} >= {"network.rules.yaml", "rdma.rules.yaml", "gpu.rules.yaml",
                                            "serving.rules.yaml", "health.rules.yaml", "recording.rules.yaml",
                                            "health-score.rules.yaml"}
    assert len(ALERT_NAMES) >= 25 and len(RECORDS) >= 40
    assert TEST_FILES


def test_group_names_are_unique():
    names = [g["name"] for p in RULE_FILES for g in yaml.safe_load(p.read_text())["groups"]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule", ALERTS_RULES, ids=lambda r: f"{r['alert']}-{r['labels'].get('severity')}")
def test_alert_follows_mixin_conventions(rule):
    name = rule["alert"]
    assert ALERT_NAME.match(name), name
    labels, annotations = rule.get("labels", {}), rule.get("annotations", {})
    assert labels.get("severity") in SEVERITIES
    assert labels.get("team") in TEAMS
    assert annotations.get("summary", "").endswith("."), "summary is one sentence ending in a period"
    assert "{{" not in annotations["summary"], "summary is static so grouped notifications agree"
    assert annotations.get("description", "").strip()
    assert annotations.get("runbook_url", "").endswith(f"/docs/runbooks/{name}.md")
    assert (RUNBOOKS / f"{name}.md").is_file(), f"docs/runbooks/{name}.md is missing"


def test_recording_rule_names_follow_level_metric_operations():
    bad = [r for r in RECORDS if not RECORD_NAME.match(r)]
    assert not bad
    # `_total` is dropped once rate()/increase() is applied (prometheus/docs practices/rules.md)
    assert not [r for r in RECORDS if "_total:" in r]


def test_same_named_alerts_differ_only_by_severity():
    by_name: dict[str, list[str]] = {}
    for rule in ALERTS_RULES:
        by_name.setdefault(rule["alert"], []).append(rule["labels"]["severity"])
    for name, severities in by_name.items():
        assert len(severities) == len(set(severities)), f"{name} has two rules of one severity"


def test_every_runbook_belongs_to_an_alert():
    assert sorted(p.stem for p in RUNBOOKS.glob("Infrapulse*.md")) == ALERT_NAMES


# --- every alert and recording rule is unit-tested -------------------------------------------

def _parse_duration(text: str) -> int:
    total = 0
    for amount, unit in re.findall(r"(\d+)([smhd])", str(text)):
        total += int(amount) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    return total


def _alert_expectations() -> dict[str, list[tuple[str, int, set[str]]]]:
    """alertname -> [(test file and name, eval time in s, severities expected firing)]."""
    found: dict[str, list[tuple[str, int, set[str]]]] = {}
    for path in TEST_FILES:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                severities = {a["exp_labels"]["severity"] for a in case.get("exp_alerts") or []}
                found.setdefault(case["alertname"], []).append(
                    (f"{path.name}:{test.get('name')}", _parse_duration(case["eval_time"]), severities))
    return found


EXPECTATIONS = _alert_expectations()


@pytest.mark.parametrize("name", ALERT_NAMES)
def test_every_alert_is_tested_quiet_firing_and_resolved(name):
    cases = EXPECTATIONS.get(name)
    assert cases, f"{name} has no promtool test"
    severities = {r["labels"]["severity"] for r in ALERTS_RULES if r["alert"] == name}
    tested = set().union(*(s for _, _, s in cases))
    assert tested == severities, f"{name}: severities {severities - tested} never seen firing"
    by_test: dict[str, list[tuple[int, set[str]]]] = {}
    for test, at, sev in cases:
        by_test.setdefault(test, []).append((at, sev))
    ok = False
    for timeline in by_test.values():
        timeline.sort()
        firing = [t for t, s in timeline if s]
        if not firing:
            continue
        quiet_before = any(not s and t < firing[0] for t, s in timeline)
        critical = [t for t, s in timeline if "critical" in s]
        resolved_after = any(not s and t > firing[-1] for t, s in timeline) or bool(
            # a page resolves while its ticket-level twin keeps firing (SLO burn rates)
            critical and any("critical" not in s and t > critical[-1] for t, s in timeline))
        ok = ok or (quiet_before and resolved_after)
    assert ok, f"{name}: no test shows it quiet before firing and resolved afterwards"


def test_every_recording_rule_is_tested():
    exprs = " ".join(
        case["expr"]
        for path in TEST_FILES
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("promql_expr_test", [])
    )
    used = set(re.findall(r"[a-z_]+:[a-z0-9_]+(?::[a-z0-9_]+)?", exprs))
    assert not sorted(set(RECORDS) - used), "recording rules without a promql_expr_test"


# --- every metric a rule reads exists --------------------------------------------------------

def metric_names(expr: str) -> set[str]:
    """Series names a PromQL expression selects: infrapulse families, recording rules, `up`."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values and label_replace arguments
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # matchers
    names = set(re.findall(r"\b(infrapulse_[a-z0-9_]+|[a-z_]+:[a-z0-9_]+(?::[a-z0-9_]+)?)\b", expr))
    names |= {n for n in PROMETHEUS_METRICS if re.search(rf"\b{n}\s*\{{", expr)}
    return names


def test_metric_name_extraction():
    expr = ('sum by (job) (rate(infrapulse_x_total{a="b:c:d"}[5m])) / on (job) group_left () '
            'foo:infrapulse_y:rate5m or label_replace(infrapulse_z_info, "hostname", "$1", "n", "(.+)") '
            'or up{job=~".*infrapulse.*"}')
    assert metric_names(expr) == {"infrapulse_x_total", "foo:infrapulse_y:rate5m", "infrapulse_z_info", "up"}


def _catalog_names() -> set[str]:
    sys.path.insert(0, str(ROOT / "exporter"))
    from infrapulse import catalog, metrics  # noqa: F401  (metrics declares the daemon's own families)
    from infrapulse.sources import registry

    registry()
    health = importlib.import_module("infrapulse.health")
    for info in pkgutil.iter_modules(health.__path__):
        importlib.import_module(f"infrapulse.health.{info.name}")
    importlib.import_module("infrapulse.inspect.families")
    names = set()
    for family in catalog.all_families():
        names.add(family.name)
        if family.type == catalog.HISTOGRAM:
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
    return names


def test_every_metric_in_the_rules_is_exported_or_recorded():
    known = _catalog_names() | set(RECORDS)
    missing = {}
    for rule in RULES:
        for name in metric_names(rule["expr"]) - known - PROMETHEUS_METRICS:
            missing.setdefault(name, []).append(rule.get("alert") or rule.get("record"))
    assert not missing, f"rules read families nobody exports: {missing}"


# --- the Kubernetes PrometheusRule objects are the same rules ---------------------------------

def _generator():
    sys.path.insert(0, str(ALERTS))
    import generate_prometheusrule

    return generate_prometheusrule


def test_committed_generated_files_are_current():
    gen = _generator()
    assert gen.HEALTH_RULES.read_text() == gen.render_health_rules(), \
        "run: python alerts/generate_prometheusrule.py"
    assert gen.OUTPUT.read_text() == gen.render(), "run: python alerts/generate_prometheusrule.py"
    assert gen.main(["--check"]) == 0


def test_health_score_rules_are_the_health_engines_promql():
    from infrapulse.health import promql

    doc = yaml.safe_load((ALERTS / "health-score.rules.yaml").read_text())
    assert doc["groups"][0]["rules"] == promql.recording_rules()


def test_prometheusrule_groups_equal_the_rule_files():
    docs = list(yaml.safe_load_all(_generator().OUTPUT.read_text()))
    assert [d["kind"] for d in docs] == ["PrometheusRule"] * len(RULE_FILES)
    for doc, path in zip(docs, RULE_FILES):
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        assert doc["spec"]["groups"] == yaml.safe_load(path.read_text())["groups"]


def test_generator_check_fails_on_drift(tmp_path):
    stale = tmp_path / "prometheusrule.yaml"
    stale.write_text(_generator().render().replace("InfrapulseGpuLost", "InfrapulseGpuGone"))
    assert _generator().main(["--check", "--output", str(stale)]) == 1
