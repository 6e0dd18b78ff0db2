"""The mesh's per-packet path: probes sent on schedule, datagrams read and dispatched, replies
matched to their probes, RTTs counted a round late, timeouts expired.

Everything here runs per datagram or per tick, so it stays flat: the state it touches lives on
the one `Prober` object (no lookups through the source that owns it), the socket readers are
its bound methods, and the peer list arrives already planned (`reschedule`: who is probed, from
which socket). A reply's RTT is kept one round before it counts, so that the late notice of a
reply held up on the peer's side (mesh_wire) can still turn it into an untimed answer.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import heapq
import logging
import random
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from . import mesh_families as fam
from . import mesh_peers as mp
from . import mesh_wire as wire
from .mesh_socket import ANCILLARY_SIZE, SEND_STALL_NS, MeshSocket, rx_time_ns, send_reply
from .mesh_stats import PeerStats, RttHistogram

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


class Prober:
    """The prober of one mesh source, and the reader of its sockets (requests go to `responder`)."""

    def __init__(self, responder: wire.Responder, size: int, probe_interval: float, timeout: float,
                 log: logging.Logger) -> None:
        self.responder = responder
        self.probe_interval = probe_interval
        self.timeout = timeout
        self.log = log
        self.token = random.getrandbits(32)
        self.via: dict[str, MeshSocket] = {}  # probed peer label -> the socket it is probed from
        self.probed: dict[str, mp.Peer] = {}  # label -> probed peer
        self.stats: dict[str, PeerStats] = {}
        self.histograms = {group: RttHistogram() for group in fam.PEER_GROUPS}
        self.outstanding: collections.OrderedDict[int, Outstanding] = collections.OrderedDict()
        # seq -> an RTT not yet counted: replies of this round, and of the round before
        self.answered: dict[int, Answered] = {}
        self._answered_before: dict[int, Answered] = {}
        self._seq = 0
        self._request = bytearray(wire.encode_request(self.token, 0, size))
        self._due: dict[str, float] = {}
        self._schedule: list[tuple[float, str]] = []
        # False holds new probes while replies and timeouts are still handled (lets a test or an
        # operator drain what is in flight and read settled counters).
        self.sending = True

    def reschedule(self, probed: list[mp.Peer], via: dict[str, MeshSocket]) -> None:
        """Probe `probed`, each from its socket in `via`. Keep each remaining peer's next probe
        time; spread new peers over one interval."""
        self.via = via
        self.probed = {p.label: p for p in probed}
        now = time.monotonic()
        period = self.probe_interval
        labels = {p.label for p in probed}
        self._due = {label: due for label, due in self._due.items() if label in labels}
        for peer in probed:
            if peer.label not in self._due:
                self._due[peer.label] = now + random.random() * period
        self._schedule = [(due, label) for label, due in self._due.items()]
        heapq.heapify(self._schedule)
        self.stats = {label: self.stats.get(label) or PeerStats() for label in sorted(labels)}

    async def run(self, sockets: dict[str, MeshSocket]) -> None:
        """One round per tick: read what arrived, expire what timed out, send what is due.

        `sockets` is the source's local ip -> socket (LocalSockets.by_ip, rebound in place).
        Those with kernel receive timestamps are read here rather than woken per datagram:
        the timestamps (and the dwell the reply carries) keep the RTT exact, and the daemon
        wakes a few times per second whatever the number of peers."""
        period = self.probe_interval
        tick = min(TICK, period / 2, self.timeout / 2)
        next_tick = time.monotonic()
        while True:
            for msock in list(sockets.values()):
                if msock.kernel_timestamps:
                    self.on_readable(msock)
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
                                                  time.monotonic() + self.timeout, timed)

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

    def on_readable(self, msock: MeshSocket) -> None:
        """Read what `msock` holds: replies and late notices for the prober, requests answered."""
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


def _from_peer(addr: tuple[Any, ...], entry: Outstanding) -> bool:
    return addr[1] == entry.port and (addr[0] == entry.ip or _same_ip(addr[0], entry.ip))


def _same_ip(text: str, normalized: str) -> bool:
    """Whether a socket's address text is the normalised address (the slow path: other spellings)."""
    try:
        return wire.normalize_ip(text) == normalized
    except ValueError:
        return False
