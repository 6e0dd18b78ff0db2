"""Generated reference docs match the code; the README keeps its two commands."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_generated_docs_are_current():
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "docs"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, f"docs out of date, run `make docs`: {proc.stderr}"


def test_metrics_doc_lists_every_family_and_the_lldp_join():
    from infrapulse import catalog
    from infrapulse.docs import load_everything

    load_everything()
    text = (ROOT / "docs/metrics.md").read_text()
    names = [f.name for f in catalog.all_families() if f.source != "test"]
    assert len(names) > 100
    missing = [n for n in names if f"`{n}`" not in text]
    assert missing == []
    assert "infrapulse_switch_lldp_neighbor_info" in text and "group_left (hostname)" in text


def test_readme_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    ci = (ROOT / ".ci/run").read_text()
    assert "make test" in ci


def test_readme_links_resolve():
    import re

    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), target
