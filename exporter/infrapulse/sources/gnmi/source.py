"""The gnmi Source: which switches this instance owns, one `SwitchSession` each.

`GnmiSource` loads the profiles, resolves this instance's shard, and keeps one session per owned
switch in step with `targets` and `targets_file` (re-read when it changes, and on SIGHUP): new
switches start, removed ones stop, changed ones restart. Every second it runs each session's
housekeeping (snapshot time, staleness, sweeps). The modules it stands on:

  config.py   the `sources.gnmi` schema, targets file, per-switch settings
  channel.py  credentials and TLS, one gRPC channel
  session.py  one switch's Subscribe streams and reconnects
"""

from __future__ import annotations

import asyncio
import os
import time

from ...store import Snapshot
from ..base import Source, SourceContext
from . import shard as shard_mod
from .config import CONFIG, GnmiSettings, SwitchSettings, TargetsFileError, merge_target, read_targets_file
from .families import SHARD_COUNT
from .profile import Profile, load_profiles
from .session import SwitchSession

HOUSEKEEPING_SECONDS = 1.0
# The store instance holding this collector's shard (a name no switch can have: see TARGET's pattern).
SHARD_TARGET = "#shard"


class GnmiSource(Source[GnmiSettings]):
    name = "gnmi"
    role = "fabric"
    CONFIG = CONFIG

    def __init__(self, config: GnmiSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.sessions: dict[str, SwitchSession] = {}
        self.profiles: dict[str, Profile] = {}
        self.shard = shard_mod.Shard()
        self._targets_file_stamp: tuple[int, int, int] | None = None

    @classmethod
    def absent_reason(cls, config: GnmiSettings) -> str:
        return "no targets or targets_file configured"

    @classmethod
    def wanted(cls, config: GnmiSettings) -> bool:
        enabled = config.enabled
        if enabled == "auto":
            return bool(config.targets or config.targets_file)
        return enabled is True

    async def run(self) -> None:
        self.profiles = load_profiles(self.config.profiles_dir)
        try:
            self.shard = shard_mod.resolve(self.config.shard, os.environ, self.ctx.hostname)
        except shard_mod.ShardError as exc:
            self.store.record_failure(self.name, "shard", "config", str(exc))
            self.log.error("cannot determine this instance's shard", extra={"error": str(exc)})
            return
        self.publish_shard()
        try:
            await self.reload_targets()
            while True:
                await asyncio.sleep(HOUSEKEEPING_SECONDS)
                if self._targets_file_changed():
                    await self.reload_targets()
                now = time.time()
                for session in self.sessions.values():
                    session.housekeeping(now)
        finally:
            await self.close()

    def publish_shard(self) -> None:
        """Export which shard this collector is, so the collectors' indices can be checked together."""
        snapshot = Snapshot()
        snapshot.add(SHARD_COUNT, (str(self.shard.index),), float(self.shard.count))
        self.store.publish(self.name, SHARD_TARGET, snapshot, stale_after=float("inf"))

    def wanted_targets(self) -> list[SwitchSettings]:
        targets = list(self.config.targets)
        if self.config.targets_file:
            self._targets_file_stamp = self._stamp()
            try:
                targets += read_targets_file(self.config.targets_file)
                self.store.status.pop((self.name, "targets_file"), None)
            except TargetsFileError as exc:
                # keep the switches we have rather than dropping the whole fabric on a typo
                self.store.record_failure(self.name, "targets_file", "config", str(exc))
                self.log.error("targets_file unreadable; keeping the current switches",
                               extra={"error": str(exc)})
                return [s.conn for s in self.sessions.values()]
        merged = {}
        for target in targets:
            conn = merge_target(self.config.defaults, target)
            merged[conn.name] = conn
        return [c for c in merged.values() if self.shard.owns(c.name)]

    async def on_reload(self) -> None:
        await self.reload_targets()

    async def reload_targets(self) -> None:
        """Start sessions for new switches, stop removed ones, restart changed ones."""
        wanted = {c.name: c for c in self.wanted_targets()}
        for name in [n for n, s in self.sessions.items() if n not in wanted or wanted[n] != s.conn]:
            await self.sessions.pop(name).stop()
            self.store.remove(self.name, name)
        for name, conn in wanted.items():
            if name in self.sessions:
                continue
            profile = self.profiles.get(conn.profile)
            if profile is None:
                self.store.record_failure(self.name, name, "config", f"unknown profile {conn.profile!r}")
                continue
            session = SwitchSession(self, conn, profile)
            self.sessions[name] = session
            session.start()
        self.log.info("gnmi targets", extra={"switches": len(self.sessions), "shard": str(self.shard)})

    def _stamp(self) -> tuple[int, int, int] | None:
        if not self.config.targets_file:
            return None
        try:
            st = os.stat(self.config.targets_file)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _targets_file_changed(self) -> bool:
        return bool(self.config.targets_file) and self._stamp() != self._targets_file_stamp

    async def close(self) -> None:
        self.store.remove(self.name, SHARD_TARGET)
        sessions, self.sessions = list(self.sessions.values()), {}
        await asyncio.gather(*(s.stop() for s in sessions), return_exceptions=True)


SOURCE = GnmiSource

__all__ = ["SOURCE", "GnmiSource", "CONFIG", "HOUSEKEEPING_SECONDS", "SHARD_TARGET"]
