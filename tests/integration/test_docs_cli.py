"""The generated reference docs are current, checked as a person runs the check: `infrapulse docs`
from the checkout's root, a subfolder or --root, and outside a checkout (exit 2, nothing written);
scripts/generate_docs.py checks and writes a tree of its own. Both run as subprocesses. The
integration half of tests/test_docs.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def _infrapulse_docs(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "exporter")}
    return subprocess.run([sys.executable, "-m", "infrapulse", "docs", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_generated_docs_are_current():
    proc = _infrapulse_docs(cwd=ROOT)
    assert proc.returncode == 0, f"docs out of date, run `make docs`: {proc.stderr}"


def test_docs_command_finds_the_checkout_from_a_subfolder_or_root(tmp_path):
    assert _infrapulse_docs("--check", cwd=ROOT / "docs" / "runbooks").returncode == 0
    assert _infrapulse_docs("--root", str(ROOT), cwd=tmp_path).returncode == 0


def test_docs_command_outside_a_checkout_says_so(tmp_path):
    proc = _infrapulse_docs(cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{tmp_path} (or a parent) is not an infrapulse source checkout" in proc.stderr
    assert "--root DIR" in proc.stderr
    proc = _infrapulse_docs("--write", "--root", str(tmp_path), cwd=ROOT)
    assert proc.returncode == 2 and f"--root {tmp_path} is not" in proc.stderr
    assert not (tmp_path / "docs").exists()  # nothing written


def test_generate_docs_script_checks_and_writes_a_tree(tmp_path):
    """In a subprocess: in this process other tests have declared families of their own."""
    def script(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "scripts/generate_docs.py"), *args, "--root",
                               str(tmp_path)],
                              capture_output=True, text=True, timeout=120)

    (tmp_path / "docs").mkdir()
    for rel in ("docs/metrics.md", "docs/configuration.md", "docs/health.md"):
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    health = tmp_path / "docs/health.md"
    health.write_text(health.read_text().replace("| network | `", "| netwerk | `", 1))
    config = tmp_path / "docs/configuration.md"
    config.write_text(config.read_text().replace("| `interval` |", "| `intervall` |"))
    proc = script("--check")
    assert proc.returncode == 1
    # metrics.md is current
    assert proc.stderr == "out of date: docs/configuration.md, docs/health.md (run `make docs`)\n"
    proc = script()
    assert proc.returncode == 0
    assert proc.stdout == "wrote docs/metrics.md\nwrote docs/configuration.md\nwrote docs/health.md\n"
    assert config.read_text() == (ROOT / "docs/configuration.md").read_text()
    assert health.read_text() == (ROOT / "docs/health.md").read_text()
    health.unlink()
    proc = script("--check")
    assert proc.returncode == 1 and proc.stderr.startswith("missing: docs/health.md")
