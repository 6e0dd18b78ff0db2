"""Parsing helpers for tests: exposition text -> {(name, frozenset(labels)): value}; waits on a
condition (wait_until, wait_until_async) instead of fixed sleeps; a basic-auth web config."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infrapulse.metrics import make_registry

ROOT = Path(__file__).resolve().parents[1]
# Real captures nobody here wrote (../shared/real beside the project; CI has it there too).
REAL = ROOT.parent / "shared" / "real"


def real(*parts: str) -> Path:
    """A real capture under ../shared/real; a missing one fails the test (never a skip)."""
    path = REAL.joinpath(*parts)
    assert path.exists(), f"real capture missing: {path} (shared/ must sit beside the project)"
    return path



def basic_auth_web_config(directory: Path, users: dict[str, str]) -> Any:
    """A web config (`directory`/web.yaml) with these users' passwords as bcrypt hashes (cost 4:
    fast), loaded as the daemon loads it."""
    import bcrypt

    from infrapulse.webconfig import WebSecurity

    lines = ["basic_auth_users:"] + [
        f"  {u}: {bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=4)).decode()}" for u, p in users.items()]
    path = directory / "web.yaml"
    path.write_text("\n".join(lines) + "\n")
    return WebSecurity(path)


def parse_exposition(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def samples_of(values: dict, name: str, /) -> dict[frozenset, float]:
    return {labels: v for (n, labels), v in values.items() if n == name}


def value(values: dict, name: str, /, **labels) -> float:
    return values[(name, frozenset(labels.items()))]


def render_store(store, state=None) -> dict:
    from infrapulse.metrics import DaemonState

    registry = make_registry(store, state or DaemonState("testhost", "node"))
    return parse_exposition(generate_latest(registry).decode())


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition",
               every: float = 0.02) -> Any:
    """Poll until predicate() is truthy and return its value; a bounded wait, not a timing
    assertion (a loaded machine only makes it take longer)."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


async def wait_until_async(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition",
                           every: float = 0.02) -> Any:
    """wait_until inside an event loop: the loop runs between polls."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(every)
