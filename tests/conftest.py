"""Shared test helpers: free ports, an in-process daemon, and scraping /metrics into values."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def stop_process(proc, timeout: float = 10.0) -> None:
    """SIGTERM a test's child process, SIGKILL it if it has not exited after `timeout`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()


@contextlib.asynccontextmanager
async def running_daemon(config_text: str, config_path: Path | None = None, hostname: str = "testhost",
                         web_security=None):
    """Start a Daemon in this event loop on a free loopback port; yields it."""
    from infrapulse import config as config_mod
    from infrapulse.daemon import Daemon

    cfg = config_mod.load_text(config_text, str(config_path or "<test>"))
    daemon = Daemon(cfg, config_path=str(config_path) if config_path else None,
                    listen_override=f"127.0.0.1:{free_port()}", hostname=hostname, web_security=web_security)
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()
