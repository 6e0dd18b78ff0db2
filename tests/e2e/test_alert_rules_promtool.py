"""The rules in alerts/ through Debian promtool (2.42, `make system-deps`): `check rules` is clean,
the unit tests in alerts/tests/ pass, and the rule groups extracted from the generated
PrometheusRule objects check clean too. tests/test_alert_rules.py checks their shape without promtool.
"""

from __future__ import annotations

import shutil
import subprocess

import yaml

from test_alert_rules import RULE_FILES, TEST_FILES, _generator

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


def test_promtool_check_rules_is_clean():
    result = _promtool("check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stdout + result.stderr


def test_promtool_unit_tests_pass():
    result = _promtool("test", "rules", *map(str, TEST_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(TEST_FILES)


def test_prometheusrule_groups_pass_promtool(tmp_path):
    docs = list(yaml.safe_load_all(_generator().OUTPUT.read_text()))
    assert len(docs) == len(RULE_FILES)
    for doc, path in zip(docs, RULE_FILES):
        (tmp_path / path.name).write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    result = _promtool("check", "rules", *map(str, sorted(tmp_path.glob("*.yaml"))))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)
