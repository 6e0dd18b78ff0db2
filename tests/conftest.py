"""Shared test helpers: free ports, an in-process daemon, and scraping /metrics into values.

The suite has three tiers, one folder each, and the hooks here keep every test in its tier:

* tests/ — the unit tier (`make unit`): pure Python in this process. A unit test binds no socket
  (TCP or UDP: it serves nothing), listens on none, starts no process and no gRPC server: one
  that does fails with a pointer to tests/integration/.
* tests/integration/ — what serves or spawns on loopback (`make integration`): in-process daemons,
  HTTP and gRPC targets, the CLI as a subprocess; still no system package. One that starts a
  system tool fails with a pointer to tests/e2e/.
* tests/e2e/ — what drives the system tools (Prometheus, Alertmanager, promtool, amtool,
  node_exporter, Chromium, docker-compose, systemd-analyze, VictoriaMetrics, vmalert, Slurm) or
  runs the whole daemon against every simulator (`make e2e`).

Hypothesis runs under one of two profiles registered here: `ci` (derandomized: the same examples
on every run, so CI cannot fail on an example no earlier run drew; no example database; failures
print their reproduction blob) when HYPOTHESIS_PROFILE=ci or the CI variable is set (`make test`
and .ci/run set it), `dev` (random examples, the local database) otherwise. An example a random
run finds is pinned with @example on its test.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
_in_ci = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if _in_ci else "dev"))

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "tests" / "e2e"
INTEGRATION = ROOT / "tests" / "integration"
sys.path.insert(0, str(ROOT / "tests"))

# Executables of the Debian packages scripts/system-deps.sh installs for `make e2e`.
SYSTEM_TOOLS = frozenset({
    "prometheus", "promtool", "prometheus-alertmanager", "alertmanager", "amtool",
    "prometheus-node-exporter", "node_exporter", "chromium", "docker-compose", "systemd-analyze",
    "curl", "jq", "victoria-metrics", "vmalert", "munged", "slurmctld", "slurmd", "srun", "sinfo", "scancel",
})


def _program(args: Any) -> str:
    """The executable's file name from Popen's first argument (an argv list or a shell string)."""
    if isinstance(args, (str, bytes, os.PathLike)):
        words = os.fsdecode(args).split()
        return Path(words[0]).name if words else ""
    return Path(os.fsdecode(args[0])).name if args else ""


def tier(path: Path) -> str:
    """The tier a test file belongs to: "unit", "integration" or "e2e"."""
    parents = Path(path).resolve().parents
    return "e2e" if E2E in parents else "integration" if INTEGRATION in parents else "unit"


@pytest.fixture(autouse=True)
def _no_system_tool_outside_e2e(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside tests/e2e, refuse to start a system tool (subprocess and asyncio both go through Popen)."""
    if tier(request.node.path) == "e2e":
        return

    class NoSystemToolPopen(subprocess.Popen[bytes]):
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            program = _program(args)
            if program in SYSTEM_TOOLS:
                raise AssertionError(f"{request.node.nodeid} starts {program}: a test that needs a system "
                                     "tool belongs in tests/e2e/ (`make e2e`); the other tiers run "
                                     "without them")
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", NoSystemToolPopen)


@contextlib.contextmanager
def serving_refused(nodeid: str) -> Iterator[None]:
    """While it is open, binding or listening on a socket, starting a process and creating a gRPC
    server raise AssertionError naming the test and tests/integration/: what a unit test may not do.
    (socketpair(), which asyncio's event loop uses, binds nothing.)"""
    import grpc
    import grpc.aio

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"{nodeid} {what}: a test that serves or spawns belongs in "
                                 "tests/integration/ (`make integration`); a unit test stays in its process")
        return refused

    patches = [(socket.socket, "bind", refuse("binds a socket")),
               (socket.socket, "listen", refuse("listens on a socket")),
               (subprocess.Popen, "__init__", refuse("starts a process")),
               (grpc, "server", refuse("creates a gRPC server")),
               (grpc.aio, "server", refuse("creates a gRPC server"))]
    # socket.socket.bind and .listen are _socket.socket's: deleting the patch restores them
    inherited = object()
    saved = [(owner, name, vars(owner).get(name, inherited)) for owner, name, _ in patches]
    try:
        for owner, name, replacement in patches:
            setattr(owner, name, replacement)
        yield
    finally:
        for owner, name, original in saved:
            if original is inherited:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A unit test is refused serving and spawning over its whole protocol: setup (a module-scoped
    fixture starting a server included), call and teardown."""
    if tier(item.path) != "unit":
        yield
        return
    with serving_refused(item.nodeid):
        yield


def stop_process(proc, timeout: float = 10.0) -> None:
    """SIGTERM a test's child process, SIGKILL it if it has not exited after `timeout`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_http_ready(url: str, proc, log_path: Path, what: str, timeout: float = 30.0) -> None:
    """Poll `url` until it answers 200; fail early with the log tail if `proc` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{what} not ready")


async def scrape_until(daemon, predicate, attempts: int = 50) -> dict:
    """Scrape an in-process daemon's /metrics until `predicate(values)` holds (or attempts run out)."""
    import asyncio

    import aiohttp

    from helpers import parse_exposition

    url = f"http://127.0.0.1:{daemon.bound_port}/metrics"
    values: dict = {}
    async with aiohttp.ClientSession() as session:
        for _ in range(attempts):
            async with session.get(url) as resp:
                values = parse_exposition(await resp.text())
            if predicate(values):
                break
            await asyncio.sleep(0.1)
    return values


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def short_workdir() -> Iterator[Path]:
    """A demo's working directory with a short path, removed after the test: the simulators put
    Unix sockets in it (the kubelet's pod-resources socket), and `sun_path` holds 108 bytes, which
    a `tmp_path` under a long test name can exceed."""
    with tempfile.TemporaryDirectory(prefix="infrapulse-demo-") as workdir:
        yield Path(workdir)


@contextlib.asynccontextmanager
async def running_daemon(config_text: str, config_path: Path | None = None, hostname: str = "testhost",
                         web_security=None):
    """Start a Daemon in this event loop on a free loopback port; yields it."""
    from infrapulse import config as config_mod
    from infrapulse.cli import source_options
    from infrapulse.daemon import Daemon

    cfg = config_mod.load_text(config_text, str(config_path or "<test>"))
    if "kmsg" not in config_text:
        # The host's kernel log publishes whenever this machine logs something (enabled: auto reads
        # /dev/kmsg): a test daemon reads it only when its config says so.
        cfg.sources["kmsg"].enabled = False
    with contextlib.ExitStack() as cleanup:
        if "state_dir" not in config_text:
            # Never the host's /var/lib/infrapulse: what one test's daemon keeps (inspections, the
            # kmsg cursor) must not reach another's, nor a parallel worker's.
            cfg.state_dir = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="infrapulse-state-"))
        daemon = Daemon(cfg, config_path=str(config_path) if config_path else None,
                        listen_override=f"127.0.0.1:{free_port()}", hostname=hostname,
                        web_security=web_security, source_options=source_options(cfg))
        await daemon.start()
        try:
            yield daemon
        finally:
            await daemon.stop()

