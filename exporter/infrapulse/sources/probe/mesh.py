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
"""

from __future__ import annotations

import asyncio
import collections
import errno
import heapq
import os
import random
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...deadline import within
from ...store import Snapshot, stale_after
from ..base import Source, SourceContext
from . import mesh_families as fam
from . import mesh_peers as mp
from . import mesh_wire as wire
from .mesh_config import CONFIG
from .mesh_socket import ANCILLARY_SIZE, SEND_STALL_NS, MeshSocket, rx_time_ns, send_reply
from .mesh_stats import PeerStats, RttHistogram

TARGET = "mesh"
RESOLVE_KEY = "mesh.resolve"  # SourceContext.options: async (name) -> [ip, ...], for tests
DNS_TIMEOUT = 5.0
READS_PER_WAKEUP = 256  # datagrams read per socket and round before yielding to the loop
TICK = 0.5  # seconds between two rounds of the prober (less when probe_interval is shorter)


@dataclass
class Outstanding:
    label: str
    ip: str
    port: int
    tx_ns: int
    deadline: float
    timed: bool = True  # False: a send was held up (ours or the reply's): answered, but no RTT


@dataclass
class Answered:
    """A reply's RTT, kept until a late notice for it could have arrived (one prober round)."""

    probe: Outstanding
    rtt: float
    at: float  # monotonic time of the reply


Resolver = Callable[[str], Awaitable[list[str]]]


class MeshSource(Source):
    name = "mesh"
    role = "node"
    CONFIG = CONFIG

    def __init__(self, config: dict[str, Any], ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.interval: float = config["interval"] or ctx.interval
        self.responder = wire.Responder(rate=config["responder_rate"], burst=config["responder_burst"],
                                        total_rate=config["responder_total_rate"], clock=time.monotonic)
        self.token = random.getrandbits(32)
        self.sockets: dict[str, MeshSocket] = {}  # local ip -> socket
        self.peers = mp.PeerSet()
        self.via: dict[str, MeshSocket] = {}  # probed peer label -> the socket it is probed from
        self.probed: dict[str, mp.Peer] = {}  # label -> probed peer
        self.stats: dict[str, PeerStats] = {}
        self.histograms = {group: RttHistogram() for group in fam.PEER_GROUPS}
        self.outstanding: collections.OrderedDict[int, Outstanding] = collections.OrderedDict()
        # seq -> an RTT not yet counted: replies of this round, and of the round before
        self.answered: dict[int, Answered] = {}
        self._answered_before: dict[int, Answered] = {}
        self._seq = 0
        self._request = bytearray(wire.encode_request(self.token, 0, config["size"]))
        self._due: dict[str, float] = {}
        self._schedule: list[tuple[float, str]] = []
        self._file_entries: list[mp.PeerEntry] = []
        self._file_stamp: tuple[int, int, int] | None = None
        self._file_problem = ""
        self._down: tuple[str, str] | None = ("starting", "")
        self._refresh_now = asyncio.Event()
        # False holds new probes while replies and timeouts are still handled (lets a test or an
        # operator drain what is in flight and read settled counters).
        self.sending = True
        self.resolve: Resolver = ctx.options.get(RESOLVE_KEY) or _resolve
        # DSCP in the upper six bits of the TOS / traffic class byte, ECT(0) = 0b10 in the lower two
        self.tos: int = config["dscp"] << 2 | (0b10 if config["ecn"] else 0)

    @classmethod
    def wanted(cls, config: dict[str, Any]) -> bool:
        return config["enabled"] is True

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        prober = asyncio.create_task(self._probe_loop(), name="mesh:probe")
        try:
            loop = asyncio.get_running_loop()
            next_refresh = 0.0
            while True:
                now = loop.time()
                if now >= next_refresh or self._file_changed():
                    try:
                        await self.refresh()
                    except Exception as exc:  # a bug: report it, keep the responder and the last peers
                        self.log.exception("mesh refresh failed")
                        self._down = ("error", f"refresh failed: {type(exc).__name__}: {exc}")
                    next_refresh = now + self.config["refresh"]
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
        for msock in self.sockets.values():
            self._close_socket(msock)
        self.sockets = {}
        self.via = {}

    def _close_socket(self, msock: MeshSocket) -> None:
        if not msock.kernel_timestamps:
            asyncio.get_running_loop().remove_reader(msock.sock.fileno())
        msock.close()

    async def on_reload(self) -> None:
        self._file_stamp = None  # re-read the peers file even if its stamp did not change
        self._refresh_now.set()

    # -- peers and sockets ---------------------------------------------------------------------

    def _file_changed(self) -> bool:
        path = self.config["peers_file"]
        return bool(path) and _stamp(path) != self._file_stamp

    def _read_file(self) -> None:
        path = self.config["peers_file"]
        stamp = _stamp(path)
        if stamp == self._file_stamp and self._file_stamp is not None:
            return
        self._file_stamp = stamp
        try:
            self._file_entries = mp.read_peers_file(path)
            self._file_problem = ""
        except mp.PeersFileError as exc:
            # keep the peers we had rather than dropping the mesh on a typo
            self._file_problem = f"{exc}; keeping the {len(self._file_entries)} peers read before"
            self.log.error("peers_file unusable", extra={"error": str(exc)})

    def local_addresses(self, problems: list[str]) -> list[mp.LocalAddress]:
        if self.config["local_addresses"]:
            return [mp.parse_local(text) for text in self.config["local_addresses"]]
        netdevs = self.config["interfaces"] or mp.rdma_netdevs(self.store)
        out = []
        for ifname in netdevs:
            try:
                out.append(mp.interface_ipv4(ifname))
            except OSError as exc:
                problems.append(f"interface {ifname}: {exc.strerror or exc}")
        return out

    def _rebind(self, locals_: list[mp.LocalAddress], problems: list[str]) -> None:
        loop = asyncio.get_running_loop()
        wanted = {loc.ip: loc for loc in locals_}
        for ip in [ip for ip, s in self.sockets.items() if wanted.get(ip) != s.local]:
            self._close_socket(self.sockets.pop(ip))
        for ip, loc in wanted.items():
            if ip in self.sockets:
                problems.extend(self.sockets[ip].problems)
                continue
            try:
                msock = MeshSocket(loc, self.config["port"], self.tos, self.config["bind_to_device"])
            except OSError as exc:
                problems.append(f"cannot bind {ip} port {self.config['port']}: {exc.strerror or exc}")
                continue
            problems.extend(msock.problems)
            self.sockets[ip] = msock
            if not msock.kernel_timestamps:  # arrival time read on arrival: wake per datagram
                loop.add_reader(msock.sock.fileno(), self._on_readable, msock)

    async def _resolve_entries(self, entries: list[mp.PeerEntry],
                               problems: list[str]) -> list[tuple[mp.PeerEntry, str]]:
        out: list[tuple[mp.PeerEntry, str]] = []
        names = sorted({e.host for e in entries if not mp.is_ip(e.host)})
        answers = await asyncio.gather(*(self._lookup(name) for name in names))
        found = dict(zip(names, answers))
        for entry in entries:
            if mp.is_ip(entry.host):
                out.append((entry, wire.normalize_ip(entry.host)))
                continue
            ips, error = found[entry.host]
            if error:
                problems.append(f"{entry.source} peer {entry.host}: {error}")
            # a DNS name stands for all its addresses; a peer's host name for its first one
            for ip in ips if entry.source == "dns" else ips[:1]:
                out.append((entry, ip))
        return out

    async def _lookup(self, name: str) -> tuple[list[str], str]:
        try:
            ips = await within(self.resolve(name), DNS_TIMEOUT)
        except asyncio.TimeoutError:
            return [], f"DNS lookup timed out after {DNS_TIMEOUT:g}s"
        except OSError as exc:
            return [], f"does not resolve ({exc.strerror or exc})"
        ips = sorted({wire.normalize_ip(ip) for ip in ips})
        return ips, "" if ips else "resolves to no address"

    def _entries(self, lldp: dict[str, set[str]], own_switches: frozenset[str]) -> list[mp.PeerEntry]:
        entries = mp.entries_from_config(self.config["peers"], "config")
        if self.config["peers_file"]:
            entries += self._file_entries
        entries += [mp.PeerEntry(name, "", None, "", "dns") for name in self.config["peers_dns"]]
        if self.config["lldp_peers"]:
            me = mp.host_key(self.ctx.hostname)
            for host, switches in sorted(lldp.items()):
                name = self.config["lldp_peer_name"].replace("{system}", host)
                # one entry per switch the host shares with this node (merge unites them)
                entries += [mp.PeerEntry(name, host, None, switch, "lldp")
                            for switch in sorted(switches & own_switches) if host != me]
        return entries

    def _own_switches(self, lldp: dict[str, set[str]]) -> frozenset[str]:
        if self.config["switch"]:
            return frozenset({self.config["switch"]})
        return frozenset(lldp.get(mp.host_key(self.ctx.hostname), set()))

    def _plan(self, peers: list[mp.Peer], problems: list[str]) -> tuple[list[mp.Peer], dict[str, MeshSocket]]:
        """The probed peers (at most max_peers) and the socket each is probed from."""
        probed, via = [], {}
        for peer in mp.select(peers, self.ctx.hostname, self.config["max_peers"]):
            local, inside = mp.pick_local(peer.ip, [s.local for s in self.sockets.values()])
            if local is None:
                if self.sockets:
                    problems.append(f"peer {peer.label} ({peer.ip}): no local address of its family")
                continue
            if not inside and local.network is not None:
                problems.append(f"peer {peer.label} ({peer.ip}) is outside every local RDMA subnet; "
                                f"probed from {local.ip}, the route may not cross the RDMA fabric")
            probed.append(peer)
            via[peer.label] = self.sockets[local.ip]
        return probed, via

    async def refresh(self) -> None:
        """Re-read the local addresses and every peer source; rebuild the probe schedule."""
        problems: list[str] = []
        locals_ = self.local_addresses(problems)
        self._rebind(locals_, problems)
        if self.config["peers_file"]:
            self._read_file()
            if self._file_problem:
                problems.append(self._file_problem)
        lldp = mp.lldp_switches(self.store)
        own_switches = self._own_switches(lldp)
        resolved = await self._resolve_entries(self._entries(lldp, own_switches), problems)
        own = {(s.local.ip, s.port) for s in self.sockets.values()}
        if not self.config["port"]:
            for entry, ip in resolved:
                if entry.port is None:
                    problems.append(f"{entry.source} peer {entry.host} ({ip}): no port "
                                    "(sources.mesh.port is 0)")
        peers, by_source = mp.merge(resolved, own, own_switches, lldp, self.config["port"])
        peers = mp.dedupe_labels(peers)
        self.responder.allow(p.ip for p in peers)
        probed, via = self._plan(peers, problems)
        configured = self._configured_sources()
        self.peers = mp.PeerSet(peers, probed, {s: by_source.get(s, 0) for s in configured}, problems)
        for source in configured:
            if not by_source.get(source):
                problems.append(f"peer source {source} yields no peer")
        self.store.set_coverage(self.name, TARGET, {f"peers_{s}": by_source.get(s, 0) for s in configured})
        self.via = via
        self.probed = {p.label: p for p in probed}
        self._reschedule(probed)
        self._down = self._why_down(locals_)

    def _configured_sources(self) -> list[str]:
        config = self.config
        return [s for s, on in (("config", bool(config["peers"])), ("file", bool(config["peers_file"])),
                                ("dns", bool(config["peers_dns"])), ("lldp", config["lldp_peers"])) if on]

    def _why_down(self, locals_: list[mp.LocalAddress]) -> tuple[str, str] | None:
        if not locals_:
            if self.config["local_addresses"]:
                where = "local_addresses"
            elif self.config["interfaces"]:
                where = "interfaces " + ", ".join(self.config["interfaces"])
            else:
                where = "the RDMA netdevs of the infiniband source (none reported)"
            detail = "; ".join(self._problems_now())
            return ("no_local_address",
                    f"no local address to bind from {where}" + (f": {detail}" if detail else ""))
        if not self.sockets:
            return "bind_failed", "; ".join(self._problems_now())
        if not self.peers.probed:
            sources = ", ".join(self._configured_sources()) or "none configured"
            return "no_peers", f"no peer to probe (peer sources: {sources})"
        return None

    def _problems_now(self) -> list[str]:
        return self.peers.problems[:3]

    def _reschedule(self, probed: list[mp.Peer]) -> None:
        """Keep each remaining peer's next probe time; spread new peers over one interval."""
        now = time.monotonic()
        period = self.config["probe_interval"]
        labels = {p.label for p in probed}
        self._due = {label: due for label, due in self._due.items() if label in labels}
        for peer in probed:
            if peer.label not in self._due:
                self._due[peer.label] = now + random.random() * period
        self._schedule = [(due, label) for label, due in self._due.items()]
        heapq.heapify(self._schedule)
        self.stats = {label: self.stats.get(label) or PeerStats() for label in sorted(labels)}

    # -- probing -------------------------------------------------------------------------------

    async def _probe_loop(self) -> None:
        """One round per tick: read what arrived, expire what timed out, send what is due.

        Sockets with kernel receive timestamps are read here rather than woken per datagram:
        the timestamps (and the dwell the reply carries) keep the RTT exact, and the daemon
        wakes a few times per second whatever the number of peers."""
        period = self.config["probe_interval"]
        tick = min(TICK, period / 2, self.config["timeout"] / 2)
        next_tick = time.monotonic()
        while True:
            for msock in list(self.sockets.values()):
                if msock.kernel_timestamps:
                    self._on_readable(msock)
            now = time.monotonic()
            self._expire(now)
            self._count_answered()
            schedule = self._schedule
            while self.sending and schedule and schedule[0][0] <= now:
                due, label = heapq.heappop(schedule)
                if self._due.get(label) != due:  # rescheduled or removed meanwhile
                    continue
                self._send(label)
                nxt = due + period if due + period > now else now + period
                self._due[label] = nxt
                heapq.heappush(schedule, (nxt, label))
            next_tick += tick
            if next_tick < now:  # fell behind (a stalled loop): skip ticks rather than burst
                next_tick = now + tick
            await asyncio.sleep(next_tick - now)

    def _send(self, label: str) -> None:
        msock = self.via.get(label)
        stats = self.stats.get(label)
        peer = self.probed.get(label)
        if msock is None or stats is None or peer is None:
            return
        self._seq += 1
        struct.pack_into("!Q", self._request, 12, self._seq)
        stats.sent += 1
        tx_ns = time.time_ns()
        try:
            msock.sock.sendto(self._request, (peer.ip, peer.port))
        except OSError as exc:  # unreachable, no buffer space: the probe is lost, the reason logged once
            stats.lost += 1
            if exc.errno not in (errno.EAGAIN, errno.ENOBUFS):
                self.log.debug("mesh probe not sent", extra={"peer": label, "error": str(exc)})
            return
        # The stamp and the send are two steps: a thread held between them (the GIL handed to
        # another thread, the scheduler) would put the host's delay into the RTT, milliseconds on
        # a busy node. Such a probe still counts as answered, but it is not timed.
        timed = time.time_ns() - tx_ns <= SEND_STALL_NS
        self.outstanding[self._seq] = Outstanding(label, peer.ip, peer.port, tx_ns,
                                                  time.monotonic() + self.config["timeout"], timed)

    def _count_answered(self) -> None:
        """Count the RTTs of the round before this one: a late notice for them had a round to arrive."""
        for answered in self._answered_before.values():
            label = answered.probe.label
            stats, peer = self.stats.get(label), self.probed.get(label)
            if stats is None or peer is None:
                continue
            stats.samples.append((answered.at, answered.rtt))
            self.histograms[peer.group].observe(answered.rtt)
        self._answered_before, self.answered = self.answered, {}

    def _expire(self, now: float) -> None:
        outstanding = self.outstanding
        while outstanding:
            seq, entry = next(iter(outstanding.items()))
            if entry.deadline > now:
                return
            del outstanding[seq]
            stats = self.stats.get(entry.label)
            if stats is not None:
                stats.lost += 1

    def _on_readable(self, msock: MeshSocket) -> None:
        sock = msock.sock
        for _ in range(READS_PER_WAKEUP):
            try:
                data, ancillary, flags, addr = sock.recvmsg(wire.MAX_SIZE + 1, ANCILLARY_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # an ICMP error queued on the socket: nothing to read this time
                return
            rx_ns = rx_time_ns(ancillary)
            kind = data[5] if len(data) >= wire.HEADER_SIZE and not flags & socket.MSG_TRUNC else 0
            if kind == wire.REPLY:
                self._on_reply(data, addr, rx_ns)
                continue
            if kind == wire.LATE:
                self._on_late(data, addr)
                continue
            reply = self.responder.answer(data, addr[0])
            if reply is not None:
                send_reply(sock, self.responder, reply, addr, rx_ns)

    def _on_reply(self, data: bytes, addr: tuple[Any, ...], rx_ns: int) -> None:
        probe = wire.decode(data)
        if probe is None or probe.token != self.token:
            return  # a reply to an earlier daemon instance, or garbage
        entry = self.outstanding.get(probe.seq)
        if entry is None:
            return  # late: already counted lost
        if not _from_peer(addr, entry):
            return  # not from the peer it was sent to: keep waiting for the real one
        del self.outstanding[probe.seq]
        if not entry.timed:  # answered, so not lost; a send was held up, so no RTT
            self._count_untimed(entry)
            return
        elapsed = rx_ns - entry.tx_ns
        if probe.dwell_ns > elapsed or elapsed <= 0:
            return  # the wall clock stepped: answered, but no usable RTT
        self.answered[probe.seq] = Answered(entry, (elapsed - probe.dwell_ns) / 1e9, time.monotonic())

    def _on_late(self, data: bytes, addr: tuple[Any, ...]) -> None:
        """A peer's reply left late: its RTT, not yet counted, is dropped (the probe stays answered)."""
        probe = wire.decode(data)
        if probe is None or probe.token != self.token:
            return
        answered = self.answered.get(probe.seq) or self._answered_before.get(probe.seq)
        if answered is not None and _from_peer(addr, answered.probe):
            self.answered.pop(probe.seq, None)
            self._answered_before.pop(probe.seq, None)
            self._count_untimed(answered.probe)
            return
        entry = self.outstanding.get(probe.seq)  # the notice overtook its reply
        if entry is not None and _from_peer(addr, entry):
            entry.timed = False

    def _count_untimed(self, entry: Outstanding) -> None:
        stats = self.stats.get(entry.label)
        if stats is not None:
            stats.untimed += 1

    # -- publishing ----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        now = time.monotonic()
        snap = Snapshot()
        for label, stats in self.stats.items():
            snap.add(fam.SENT, (label,), float(stats.sent))
            snap.add(fam.LOST, (label,), float(stats.lost))
            snap.add(fam.UNTIMED, (label,), float(stats.untimed))
            p99 = stats.p99(now, self.config["p99_window"], self.config["min_samples"])
            if p99 is not None:
                snap.add(fam.RTT_P99, (label,), p99)
        for group, hist in self.histograms.items():
            snap.add(fam.RTT, (group,), hist.value())
            snap.add(fam.PROBED_PEERS, (group,), float(sum(p.group == group for p in self.peers.probed)))
        for source, count in self.peers.by_source.items():
            snap.add(fam.PEERS, (source,), float(count))
        for outcome in fam.RESPONDER_OUTCOMES:
            snap.add(fam.RESPONDER_REQUESTS, (outcome,), float(self.responder.outcomes.get(outcome, 0)))
        for msock in self.sockets.values():
            local = msock.local
            snap.add(fam.LOCAL_ADDRESS, (local.interface, local.ip, str(self.config["dscp"])), 1.0)
        return snap

    def publish(self) -> None:
        started = time.perf_counter()
        if self._down is not None and (self._down[0] != "no_peers" or not self.sockets):
            # nothing bound: no fresh snapshot (the last one expires after its staleness window)
            self.store.record_failure(self.name, TARGET, *self._down, duration=time.perf_counter() - started)
            return
        self.store.publish(self.name, TARGET, self.snapshot(), stale_after(self.interval))
        duration = time.perf_counter() - started
        if self._down is not None:
            self.store.record_failure(self.name, TARGET, *self._down, duration=duration)
        else:
            self.store.record_success(self.name, TARGET, duration, list(self.peers.problems))


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


async def _resolve(name: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_DGRAM)
    return [str(info[4][0]) for info in infos]


def _from_peer(addr: tuple[Any, ...], entry: Outstanding) -> bool:
    return addr[1] == entry.port and (addr[0] == entry.ip or _same_ip(addr[0], entry.ip))


def _same_ip(text: str, normalized: str) -> bool:
    """Whether a socket's address text is the normalised address (the slow path: other spellings)."""
    try:
        return wire.normalize_ip(text) == normalized
    except ValueError:
        return False
