"""The one small interface every telemetry source implements.

A source class declares its name, its settings class (a `SourceSettings` dataclass whose
`SCHEMA` is the source's `CONFIG`, validated under `sources.<name>`) and the families it exports
(in `infrapulse.catalog`). The daemon creates it with its validated settings and a
`SourceContext`, then runs `run()` as one asyncio task until cancelled. A source publishes
`Snapshot`s per target into the store and records each target's health; it never raises out of
`run()` for a data problem.

`PollingSource` covers the common case (sysfs, ethtool, NVML, HTTP scrapes): implement
`collect()` and the base class does the timing, the timeout, the health bookkeeping and the
removal of targets that went away.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from ..deadline import within
from ..schema import AutoBool, Duration, Section, Settings, setting
from ..store import Snapshot, Store, stale_after


@dataclass
class SourceContext:
    store: Store
    interval: float  # the global default poll interval, seconds
    hostname: str = field(default_factory=socket.gethostname)
    # What the CLI or the demo injects that a source must not import itself, by documented key
    # (e.g. "nvml.open_fake": the NVML fake behind `sources.nvml.fake`).
    options: dict[str, Any] = field(default_factory=dict)
    # The daemon's `state_dir`: what a source must keep across restarts goes below it.
    state_dir: str = ""


@dataclass
class TargetResult:
    """The outcome of collecting one target: a snapshot, or a failure reason."""

    target: str
    snapshot: Snapshot | None = None
    reason: str = "ok"  # short code when snapshot is None: "unreadable", "timeout", ...
    message: str = ""
    partial_errors: list[str] = field(default_factory=list)


@dataclass(kw_only=True, slots=True)
class SourceSettings(Settings):
    """What every source's settings have: `enabled` (each source redeclares it with its own docs
    and default: true/false, or auto for "on where the thing exists")."""

    enabled: bool | str = setting(AutoBool("Run this source."))


@dataclass(kw_only=True, slots=True)
class PollingSettings(SourceSettings):
    """A polling source's: `interval`, which none set means the daemon's."""

    interval: float | None = setting(Duration("Poll interval; defaults to the global interval.", min=0.05))


ConfigT = TypeVar("ConfigT", bound=SourceSettings)
PollingConfigT = TypeVar("PollingConfigT", bound=PollingSettings)


class Source(Generic[ConfigT]):
    name: ClassVar[str] = ""
    CONFIG: ClassVar[Section] = Section()
    # Which daemon role this source belongs to: "node" or "fabric".
    role: ClassVar[str] = "node"
    # HTTP endpoints the source serves: (method, path, name of an async handler method taking the
    # aiohttp request). The daemon routes them to the running instance (404 while none runs).
    ROUTES: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def __init__(self, config: ConfigT, ctx: SourceContext) -> None:
        self.config = config
        self.ctx = ctx
        self.store = ctx.store
        self.log = logging.getLogger(f"infrapulse.source.{self.name}")

    @classmethod
    def wanted(cls, config: ConfigT) -> bool:
        """Whether the daemon should start this source for its settings."""
        enabled = config.enabled
        return enabled is True or enabled == "auto"

    @classmethod
    def not_wanted(cls, config: ConfigT) -> str:
        """Why the daemon does not start this source for these settings (`wanted` is false), in
        the source's own terms, for `doctor`'s skip rows."""
        if config.enabled is False:
            return "disabled (enabled: false)"
        return cls.absent_reason(config)

    @classmethod
    def absent_reason(cls, config: ConfigT) -> str:
        """What enabled settings lack, or auto found missing, when `wanted` is false."""
        return "enabled: auto and not detected on this host"

    @classmethod
    def unavailable(cls, config: ConfigT) -> str:
        """Why a wanted source cannot collect on this host ("" when nothing is known against it),
        so `check-config` and `doctor` never claim a source runs where it would not."""
        return ""

    async def run(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Release resources (threads, channels). Called after run() is cancelled."""

    async def on_reload(self) -> None:
        """SIGHUP arrived and this source's settings did not change: re-read any files it was
        pointed at (e.g. the gNMI targets_file). Sources whose settings changed are restarted."""


class PollingSource(Source[PollingConfigT]):
    """Calls `collect()` every interval and publishes what it returns."""

    timeout_fraction: ClassVar[float] = 0.9  # a collection may take at most this share of the interval

    def __init__(self, config: PollingConfigT, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.interval: float = config.interval or ctx.interval
        self._known_targets: set[str] = set()

    @property
    def stale_after(self) -> float:
        return stale_after(self.interval)

    async def collect(self) -> list[TargetResult]:
        raise NotImplementedError

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_run = loop.time()
        while True:
            await self.poll_once()
            next_run += self.interval
            now = loop.time()
            if next_run < now:  # we fell behind: skip missed ticks rather than burst
                next_run = now + self.interval
            await asyncio.sleep(next_run - now)

    async def poll_once(self) -> None:
        started = time.perf_counter()
        try:
            results = await within(self.collect(), self.interval * self.timeout_fraction)
        except asyncio.TimeoutError:
            limit = self.interval * self.timeout_fraction
            self._fail_all("timeout", f"collection took longer than {limit:.3g}s",
                           time.perf_counter() - started)
            return
        except Exception as exc:  # a bug or an unexpected OS error: report it, keep the daemon up
            self.log.exception("collection failed")
            self._fail_all("error", f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
            return
        duration = time.perf_counter() - started
        seen = set()
        for result in results:
            seen.add(result.target)
            if result.snapshot is not None:
                self.store.publish(self.name, result.target, result.snapshot, self.stale_after)
                self.store.record_success(self.name, result.target, duration, result.partial_errors)
            else:
                self.store.record_failure(self.name, result.target, result.reason, result.message, duration)
        for gone in self._known_targets - seen:
            self.store.remove(self.name, gone)
        self._known_targets = seen

    def _fail_all(self, reason: str, message: str, duration: float) -> None:
        targets = self._known_targets or {self.default_target()}
        for target in targets:
            self.store.record_failure(self.name, target, reason, message, duration)
        self._known_targets = targets

    def default_target(self) -> str:
        """The target name reported when a whole collection fails before naming targets."""
        return self.name
