"""The import graph's one rule checked by importing: a fresh interpreter (a subprocess) that imports
the CLI, builds its parser and imports the daemon loads no `infrapulse.simulate` module. The
integration half of tests/test_imports.py."""

from __future__ import annotations

import os
import subprocess
import sys

from test_imports import PACKAGE_DIR


def test_importing_the_cli_and_building_its_parser_loads_no_simulator() -> None:
    code = ("import sys, infrapulse.cli as c\nc.build_parser()\nimport infrapulse.daemon\n"
            "print(sorted(m for m in sys.modules if m.startswith('infrapulse.simulate')))")
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
