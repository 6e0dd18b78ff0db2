"""Shared test helpers: free ports, an in-process daemon, and scraping /metrics into values."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
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


@contextlib.asynccontextmanager
async def running_daemon(config_text: str, config_path: Path | None = None, hostname: str = "testhost",
                         web_security=None):
    """Start a Daemon in this event loop on a free loopback port; yields it."""
    from infrapulse import config as config_mod
    from infrapulse.cli import source_options
    from infrapulse.daemon import Daemon

    cfg = config_mod.load_text(config_text, str(config_path or "<test>"))
    daemon = Daemon(cfg, config_path=str(config_path) if config_path else None,
                    listen_override=f"127.0.0.1:{free_port()}", hostname=hostname, web_security=web_security,
                    source_options=source_options(cfg))
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()
