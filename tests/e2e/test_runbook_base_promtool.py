"""A copy of the rules under another runbook base (alerts/generate_runbook_urls.py --out) is what
Prometheus users load: promtool checks it clean and its unit tests, links included, pass."""

from __future__ import annotations

import shutil
import subprocess

from test_runbook_urls import BASE, _gen

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def test_rules_with_another_runbook_base_pass_promtool(tmp_path):
    gen = _gen()
    assert gen.main(["--runbook-base", BASE, "--out", str(tmp_path)]) == 0
    rules = sorted(str(p) for p in tmp_path.glob("*.rules.yaml"))
    tests = sorted(str(p) for p in (tmp_path / "tests").glob("*.yaml"))
    checked = subprocess.run([PROMTOOL, "check", "rules", *rules], capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode == 0 and "WARNING" not in checked.stdout + checked.stderr, checked.stderr
    result = subprocess.run([PROMTOOL, "test", "rules", *tests], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(tests) >= 5
    # The links promtool compared are the new ones (a stale expectation would fail above).
    assert all(BASE in line for t in tests for line in open(t) if "runbook_url:" in line)
