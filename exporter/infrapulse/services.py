"""What a daemon service is, and the channel services hand results over on.

A service (the health scorer, the inspections, the demo's scenario toggles) is one object the
daemon composes: it runs as one task, adds its HTTP routes to the app, re-reads its config on a
reload and closes on stop. Nothing in a service reaches into the daemon: what one service makes
and another reads (each health report, read by the inspections) goes through a `Channel`, given
to both by the daemon when it composes them.

Imports: the standard library and aiohttp's types only; every layer above may import this.
"""

from __future__ import annotations

import asyncio
from typing import Any, Generic, Protocol, TypeVar

from aiohttp import web

from .deadline import within

T = TypeVar("T")


class Service(Protocol):
    name: str

    async def run(self) -> None:
        """Run until cancelled (the daemon cancels it on stop)."""

    def routes(self, app: web.Application) -> None:
        """Add this service's routes to the daemon's app (called once, before it serves)."""

    def reload(self, config: Any) -> None:
        """The daemon's config was reloaded: take what changed from the whole `Config` (typed Any
        here: the config layer sits above the services that read it)."""

    async def close(self) -> None:
        """After `run` was cancelled: release what the service holds."""


class RoutesOnly:
    """A service that only answers HTTP (the demo's scenario toggles)."""

    def __init__(self, name: str, add_routes: Any) -> None:
        self.name = name
        self._add_routes = add_routes

    async def run(self) -> None:
        await asyncio.Event().wait()  # nothing to do but exist until cancelled

    def routes(self, app: web.Application) -> None:
        self._add_routes(app)

    def reload(self, config: Any) -> None:
        return None

    async def close(self) -> None:
        return None


class Channel(Generic[T]):
    """The latest value one service publishes, for any number of readers: a reader sees the
    newest value (never a queue of stale ones) and can wait for the next."""

    def __init__(self) -> None:
        self.latest: T | None = None
        self.version = 0
        self._changed = asyncio.Event()

    def publish(self, value: T) -> None:
        self.latest = value
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()  # waiters of this version hold the old, set event

    async def wait_newer(self, version: int, timeout: float) -> bool:
        """Wait until a value newer than `version` is published, at most `timeout` seconds;
        True when one is there."""
        if self.version > version:
            return True
        try:
            await within(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            return self.version > version
        return True
