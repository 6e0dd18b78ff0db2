"""Source `mesh`: an always-on UDP latency mesh between the nodes' RDMA addresses (Pingmesh-style).

Every node daemon binds one UDP socket per local RDMA netdev address (port `port`, DSCP `dscp`,
optionally SO_BINDTODEVICE), which is both its responder and its prober. It probes at most
`max_peers` peers, each every `probe_interval`, so its cost grows with the peer bound, not with
the cluster; and it answers every candidate peer (`mesh_peers`), rate-limited, with a reply as
long as the request (`mesh_wire`). Arrival times are the kernel's receive timestamps
(SO_TIMESTAMPNS) and the peer subtracts the time it held each request, so a busy event loop on
either side does not show up as network latency. A send held up between its time stamp and the
socket gives no RTT: the prober's own it sees itself, a peer's reply is followed by a late
notice (mesh_wire), so each reply's RTT is kept one round before it counts.

Exported (mesh_families): per peer sent/lost counters and an RTT p99 gauge, an RTT histogram per
peer group, the candidate count per peer source, the responder's outcomes. One target, `mesh`:
down with `no_local_address`, `bind_failed` or `no_peers`; a peer source that yields nothing, a
peer outside every local subnet, a name that does not resolve are partial errors, and each
configured peer source's yield is its coverage.

This module only wires the parts: mesh_bind (local addresses and their sockets), mesh_discovery
(the candidate peers), mesh_prober (the per-packet path, a task of its own) and mesh_snapshot.
"""

from __future__ import annotations

import asyncio
import time

from ...deadline import within
from ...store import stale_after
from ..base import Source, SourceContext
from . import mesh_peers as mp
from . import mesh_wire as wire
from .mesh_bind import LocalSockets
from .mesh_config import CONFIG, MeshSettings
from .mesh_discovery import PeerDiscovery
from .mesh_prober import Prober
from .mesh_snapshot import snapshot

TARGET = "mesh"
RESOLVE_KEY = "mesh.resolve"  # SourceContext.options: async (name) -> [ip, ...], for tests


class MeshSource(Source[MeshSettings]):
    """The coordinator: refresh (local sockets, candidate peers, the probe plan) and publication
    on the source's interval, with the prober (mesh_prober) running beside it as its own task."""

    name = "mesh"
    role = "node"
    CONFIG = CONFIG

    def __init__(self, config: MeshSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.interval: float = config.interval or ctx.interval
        self.responder = wire.Responder(rate=config.responder_rate, burst=config.responder_burst,
                                        total_rate=config.responder_total_rate, clock=time.monotonic)
        self.prober = Prober(self.responder, config.size, config.probe_interval, config.timeout, self.log)
        # DSCP in the upper six bits of the TOS / traffic class byte, ECT(0) = 0b10 in the lower two
        tos: int = config.dscp << 2 | (0b10 if config.ecn else 0)
        self.local = LocalSockets(config, tos, self.prober.on_readable)
        self.discovery = PeerDiscovery(config, ctx.hostname, ctx.options.get(RESOLVE_KEY), self.log)
        self.peers = mp.PeerSet()
        self._down: tuple[str, str] | None = ("starting", "")
        self._refresh_now = asyncio.Event()

    @classmethod
    def wanted(cls, config: MeshSettings) -> bool:
        return config.enabled is True

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        prober = asyncio.create_task(self.prober.run(self.local.by_ip), name="mesh:probe")
        try:
            loop = asyncio.get_running_loop()
            next_refresh = 0.0
            while True:
                now = loop.time()
                if now >= next_refresh or self.discovery.file_changed():
                    try:
                        await self.refresh()
                    except Exception as exc:  # a bug: report it, keep the responder and the last peers
                        self.log.exception("mesh refresh failed")
                        self._down = ("error", f"refresh failed: {type(exc).__name__}: {exc}")
                    next_refresh = now + self.config.refresh
                self.publish()
                try:
                    await within(self._refresh_now.wait(), self.interval)
                    next_refresh = 0.0
                except asyncio.TimeoutError:
                    pass
                self._refresh_now.clear()
        finally:
            prober.cancel()
            await asyncio.gather(prober, return_exceptions=True)
            await self.close()

    async def close(self) -> None:
        self.local.close()
        self.prober.via = {}

    async def on_reload(self) -> None:
        self.discovery.forget_file()  # re-read the peers file even if its stamp did not change
        self._refresh_now.set()

    # -- refresh -------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read the local addresses and every peer source; rebuild the probe schedule."""
        problems: list[str] = []
        locals_ = self.local.addresses(self.store, problems)
        self.local.rebind(locals_, problems)
        peers, by_source = await self.discovery.discover(self.store, self.local.own(), problems)
        self.responder.allow(p.ip for p in peers)
        probed, via = self.local.plan(peers, self.ctx.hostname, problems)
        configured = self.discovery.configured_sources()
        self.peers = mp.PeerSet(peers, probed, {s: by_source.get(s, 0) for s in configured}, problems)
        for source in configured:
            if not by_source.get(source):
                problems.append(f"peer source {source} yields no peer")
        self.store.set_coverage(self.name, TARGET, {f"peers_{s}": by_source.get(s, 0) for s in configured})
        self.prober.reschedule(probed, via)
        self._down = self._why_down(locals_)

    def _why_down(self, locals_: list[mp.LocalAddress]) -> tuple[str, str] | None:
        if not locals_:
            if self.config.local_addresses:
                where = "local_addresses"
            elif self.config.interfaces:
                where = "interfaces " + ", ".join(self.config.interfaces)
            else:
                where = "the RDMA netdevs of the infiniband source (none reported)"
            detail = "; ".join(self._problems_now())
            return ("no_local_address",
                    f"no local address to bind from {where}" + (f": {detail}" if detail else ""))
        if not self.local.by_ip:
            return "bind_failed", "; ".join(self._problems_now())
        if not self.peers.probed:
            sources = ", ".join(self.discovery.configured_sources()) or "none configured"
            return "no_peers", f"no peer to probe (peer sources: {sources})"
        return None

    def _problems_now(self) -> list[str]:
        return self.peers.problems[:3]

    # -- publishing ----------------------------------------------------------------------------

    def publish(self) -> None:
        started = time.perf_counter()
        if self._down is not None and (self._down[0] != "no_peers" or not self.local.by_ip):
            # nothing bound: no fresh snapshot (the last one expires after its staleness window)
            self.store.record_failure(self.name, TARGET, *self._down, duration=time.perf_counter() - started)
            return
        snap = snapshot(self.prober, self.peers, self.local.by_ip.values(), self.config)
        self.store.publish(self.name, TARGET, snap, stale_after(self.interval))
        duration = time.perf_counter() - started
        if self._down is not None:
            self.store.record_failure(self.name, TARGET, *self._down, duration=duration)
        else:
            self.store.record_success(self.name, TARGET, duration, list(self.peers.problems))
