"""runbook_url from one configurable base (issue 18): alerts/generate_runbook_urls.py keeps every
rule's link at `<base><AlertName>.md` and writes a copy of the rules, their promtool tests and the
PrometheusRule objects under another base. promtool runs the copy in
tests/e2e/test_runbook_base_promtool.py."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from infrapulse.health.config import DEFAULT_RUNBOOK_BASE

ROOT = Path(__file__).resolve().parent.parent
BASE = "https://wiki.example.com/sre/infrapulse/"


def _gen():
    sys.path.insert(0, str(ROOT / "alerts"))
    import generate_runbook_urls

    return generate_runbook_urls


def _links(doc: object) -> list[tuple[str, str]]:
    """(alert, runbook_url) of every rule and every promtool expectation in a parsed document."""
    found = []
    if isinstance(doc, dict):
        name = doc.get("alert") or doc.get("alertname")
        annotations = doc.get("annotations") or doc.get("exp_annotations")
        if name and isinstance(annotations, dict) and "runbook_url" in annotations:
            found.append((name, annotations["runbook_url"]))
        for value in doc.values():
            found += _links(value)
        for alert in doc.get("exp_alerts") or []:
            if "runbook_url" in alert.get("exp_annotations", {}):
                found.append((doc["alertname"], alert["exp_annotations"]["runbook_url"]))
    elif isinstance(doc, list):
        for item in doc:
            found += _links(item)
    return found


def test_committed_rules_use_the_one_default_base():
    gen = _gen()
    assert gen.default_base() == DEFAULT_RUNBOOK_BASE  # the daemon's health.runbook_base_url default
    assert gen.main(["--check"]) == 0
    links = [link for path in gen.sources() for link in _links(yaml.safe_load(path.read_text()))]
    assert len(links) > 100
    assert all(url == f"{DEFAULT_RUNBOOK_BASE}{alert}.md" for alert, url in links), \
        [link for link in links if link[1] != f"{DEFAULT_RUNBOOK_BASE}{link[0]}.md"]


def test_a_copy_under_another_base_changes_every_link_and_nothing_else(tmp_path):
    gen = _gen()
    assert gen.main(["--runbook-base", BASE.rstrip("/"), "--out", str(tmp_path)]) == 0
    for path in gen.sources():
        copy = tmp_path / path.relative_to(gen.ALERTS_DIR)
        original, rewritten = path.read_text().splitlines(), copy.read_text().splitlines()
        changed = [(a, b) for a, b in zip(original, rewritten) if a != b]
        assert len(original) == len(rewritten) and all("runbook_url:" in a for a, _ in changed)
        links = _links(yaml.safe_load(copy.read_text()))
        assert all(url == f"{BASE}{alert}.md" for alert, url in links), path
        assert len(changed) == len(links) > 0 or not links
    objects = list(yaml.safe_load_all((tmp_path / "prometheusrule.yaml").read_text()))
    links = _links([o["spec"] for o in objects])
    assert links and all(url == f"{BASE}{alert}.md" for alert, url in links)


def test_a_rule_linking_another_alerts_runbook_is_reported():
    gen = _gen()
    text = ("groups:\n- name: g\n  rules:\n  - alert: InfrapulseGpuLost\n    annotations:\n"
            f"      runbook_url: {DEFAULT_RUNBOOK_BASE}InfrapulseGpuThrottling.md\n")
    assert gen.mismatched_alerts(text) == ["InfrapulseGpuLost links InfrapulseGpuThrottling"]
    assert gen.rewrite(text, "https://x.example/rb") == text.replace(DEFAULT_RUNBOOK_BASE, "https://x.example/rb/")


def test_inspection_links_follow_the_scheme_and_point_at_the_alerts_instance():
    gen = _gen()
    rules = (ROOT / "alerts" / "health.rules.yaml").read_text()
    links = [r["annotations"]["inspection_url"] for g in yaml.safe_load(rules)["groups"] for r in g["rules"]
             if "inspection_url" in r.get("annotations", {})]
    assert links == ["http://{{ $labels.instance }}/inspections/latest"] * 2
    https = gen.rewrite(rules, DEFAULT_RUNBOOK_BASE, "https")
    assert https.count("https://{{ $labels.instance }}/inspections/latest") == 2
    assert "http://{{ $labels.instance }}" not in https
    assert gen.inspection_links_off(rules) == []
    wrong = rules.replace("{{ $labels.instance }}/inspections", "node1:9477/inspections", 1)
    assert gen.inspection_links_off(wrong) == [
        "inspection_url host 'node1:9477', expected {{ $labels.instance }}"]
