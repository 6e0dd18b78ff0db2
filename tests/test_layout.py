"""How the tests are laid out: tests/ runs without system packages (`make unit`), tests/e2e/ drives
the system tools (`make e2e`); the guard in conftest.py keeps it so."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from conftest import E2E, ROOT, SYSTEM_TOOLS


@pytest.mark.parametrize("argv", [["promtool", "--version"], ["/usr/bin/chromium", "--headless"],
                                  ["vmalert", "-dryRun"],
                                  "systemd-analyze verify x.service"])
def test_a_unit_test_cannot_start_a_system_tool(argv: list[str] | str) -> None:
    with pytest.raises(AssertionError, match=r"belongs in tests/e2e/"):
        subprocess.run(argv, shell=isinstance(argv, str), capture_output=True)


async def test_nor_through_asyncio() -> None:
    with pytest.raises(AssertionError, match=r"starts amtool"):
        await asyncio.create_subprocess_exec("amtool", "--version")


def test_other_programs_still_run() -> None:
    out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
    assert out.stdout == "42\n"


def test_the_tool_list_matches_system_deps() -> None:
    script = (ROOT / "scripts" / "system-deps.sh").read_text()
    installed = {line.split("[/usr/bin/", 1)[1].split("]", 1)[0] for line in script.splitlines()
                 if line.strip().startswith("[/usr/bin/")}
    assert installed and installed <= SYSTEM_TOOLS


def test_e2e_file_names_do_not_shadow_unit_ones() -> None:
    """tests/ and tests/e2e/ share one import namespace (no __init__.py): a file name used twice breaks
    collection, and e2e tests import tests/conftest.py as `conftest`, which a second one would shadow."""
    unit = {p.name for p in (ROOT / "tests").glob("*.py")}
    e2e = {p.name for p in E2E.glob("*.py")}
    assert unit & e2e == set()
    assert not (E2E / "__init__.py").exists() and not (E2E / "conftest.py").exists()
