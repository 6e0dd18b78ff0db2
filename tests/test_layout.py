"""How the tests are laid out: tests/ is the unit tier (`make unit`: no socket bound or listening, no
process, no gRPC server), tests/integration/ serves and spawns on loopback (`make integration`), tests/e2e/
drives the system tools (`make e2e`); the guards in conftest.py keep it so."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from conftest import E2E, INTEGRATION, ROOT, SYSTEM_TOOLS, serving_refused, tier


@pytest.mark.parametrize("argv", [["promtool", "--version"], ["/usr/bin/chromium", "--headless"],
                                  ["vmalert", "-dryRun"],
                                  "systemd-analyze verify x.service"])
def test_a_unit_test_cannot_start_a_system_tool(argv: list[str] | str) -> None:
    with pytest.raises(AssertionError, match=r"belongs in tests/e2e/"):
        subprocess.run(argv, shell=isinstance(argv, str), capture_output=True)


async def test_nor_through_asyncio() -> None:
    with pytest.raises(AssertionError, match=r"starts amtool"):
        await asyncio.create_subprocess_exec("amtool", "--version")


def test_a_unit_test_cannot_bind_listen_spawn_or_serve_grpc() -> None:
    import grpc.aio

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, \
            pytest.raises(AssertionError, match=r"binds a socket: .*tests/integration/"):
        sock.bind(("127.0.0.1", 0))
    with socket.socket() as sock, \
            pytest.raises(AssertionError, match=r"listens on a socket: .*tests/integration/"):
        sock.listen()  # (an unbound TCP socket would take an ephemeral port)
    with pytest.raises(AssertionError, match=r"starts a process: .*tests/integration/"):
        subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True)
    with pytest.raises(AssertionError, match=r"creates a gRPC server"):
        grpc.aio.server()


def test_the_refusal_ends_with_its_guard() -> None:
    """What the guard patches is put back when it closes: the integration tier runs in the same
    xdist worker processes after unit tests. (This test's own guard is open around the inner one.)"""
    import grpc.aio

    before = (socket.socket.listen, subprocess.Popen.__init__, grpc.aio.server)
    with serving_refused("inner"):
        assert socket.socket.listen is not before[0]
    assert (socket.socket.listen, subprocess.Popen.__init__, grpc.aio.server) == before


def test_each_folder_is_its_tier() -> None:
    assert tier(ROOT / "tests" / "test_layout.py") == "unit"
    assert tier(INTEGRATION / "test_daemon.py") == "integration" and tier(E2E / "x.py") == "e2e"


def test_the_tool_list_matches_system_deps() -> None:
    script = (ROOT / "scripts" / "system-deps.sh").read_text()
    installed = {line.split("[/usr/bin/", 1)[1].split("]", 1)[0] for line in script.splitlines()
                 if line.strip().startswith("[/usr/bin/")}
    assert installed and installed <= SYSTEM_TOOLS


def test_e2e_file_names_do_not_shadow_unit_ones() -> None:
    """tests/, tests/integration/ and tests/e2e/ share one import namespace (no __init__.py): a file name
    used twice breaks collection, and their tests import tests/conftest.py as `conftest`, which a
    second one would shadow."""
    tiers = [{p.name for p in folder.glob("*.py")} for folder in (ROOT / "tests", INTEGRATION, E2E)]
    assert all(not (a & b) for i, a in enumerate(tiers) for b in tiers[i + 1:])
    for folder in (INTEGRATION, E2E):
        assert not (folder / "__init__.py").exists() and not (folder / "conftest.py").exists()
