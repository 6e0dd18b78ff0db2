"""The mesh probe packet and the responder's decision, free of sockets (so it can be fuzzed).

A probe is one UDP datagram: a fixed 28-byte header, then zero padding up to the configured
size. The reply is the request itself with the kind flipped and the responder's dwell time
written into the header: it is exactly as long as the request, never longer, so the responder
cannot amplify; it is never a request, so two responders cannot ping-pong.

    offset  size  field
    0       4     magic b"IPMP"
    4       1     version (1)
    5       1     kind: 1 request, 2 reply, 3 late notice
    6       2     flags (0)
    8       4     token: random per prober instance (replies to an earlier instance are ignored)
    12      8     sequence number
    20      8     dwell: ns between the request's arrival and the reply's departure (0 in requests)

The dwell lets the prober subtract the time a busy peer held the request (its Python event
loop, its GIL), so the RTT measures the network and the two kernels, not the daemons. The dwell
is stamped just before the reply's send; when the send itself is then held up (the thread loses
the CPU or the GIL between the stamp and the socket), the reply has left with too short a dwell,
so the responder follows it with a late notice: the reply's 28-byte header with kind 3. The
prober counts that probe answered but untimed (a two-step reply, as PTP's follow-up, sent only
when needed). A notice is never longer than its request and follows only an answered one.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

MAGIC = b"IPMP"
VERSION = 1
REQUEST, REPLY, LATE = 1, 2, 3
HEADER = struct.Struct("!4sBBHIQQ")
HEADER_SIZE = HEADER.size  # 28
MAX_SIZE = 1472  # one datagram in a 1500-byte MTU (IPv4 + UDP headers), never fragmented
DWELL_OFFSET = 20
MAX_DWELL_NS = (1 << 64) - 1


@dataclass(frozen=True)
class Probe:
    kind: int
    token: int
    seq: int
    dwell_ns: int


def encode_request(token: int, seq: int, size: int) -> bytes:
    """A request of `size` bytes (HEADER_SIZE <= size <= MAX_SIZE)."""
    if not HEADER_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"probe size {size} outside {HEADER_SIZE}..{MAX_SIZE}")
    return HEADER.pack(MAGIC, VERSION, REQUEST, 0, token, seq, 0) + bytes(size - HEADER_SIZE)


def decode(data: bytes | bytearray) -> Probe | None:
    """The header of a probe datagram, or None for anything that is not one."""
    if len(data) < HEADER_SIZE or len(data) > MAX_SIZE:
        return None
    magic, version, kind, _flags, token, seq, dwell = HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION or kind not in (REQUEST, REPLY, LATE):
        return None
    return Probe(kind, token, seq, dwell)


def make_reply(request: bytes | bytearray, dwell_ns: int = 0) -> bytearray:
    """The reply to a request: same bytes and length, kind REPLY, dwell filled in."""
    reply = bytearray(request)
    reply[5] = REPLY
    stamp_dwell(reply, dwell_ns)
    return reply


def stamp_dwell(reply: bytearray, dwell_ns: int) -> None:
    struct.pack_into("!Q", reply, DWELL_OFFSET, min(max(dwell_ns, 0), MAX_DWELL_NS))


def late_notice(reply: bytes | bytearray) -> bytes:
    """The notice that `reply` left late: its header with kind LATE and no dwell."""
    notice = bytearray(reply[:HEADER_SIZE])
    notice[5] = LATE
    stamp_dwell(notice, 0)
    return bytes(notice)


def normalize_ip(address: str) -> str:
    """One spelling per address ('::ffff:10.0.0.1' and '10.0.0.1' are the same peer)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


@dataclass
class TokenBucket:
    """`rate` tokens per second up to `burst`; take() spends one if there is one."""

    rate: float
    burst: float
    tokens: float = -1.0
    stamp: float = 0.0

    def take(self, now: float) -> bool:
        if self.tokens < 0:  # first use: full
            self.tokens, self.stamp = self.burst, now
        elapsed = max(now - self.stamp, 0.0)
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass
class Responder:
    """Decides, per datagram, whether and what to answer.

    Answers only requests from an allowed address (the candidate peers; any source port),
    each address limited to `rate` answers per second (burst `burst`), all addresses together
    to `total_rate`. Counts the refusals (unlisted, rate_limited, malformed); the caller counts
    `answered`, `answered_late` or `send_failed` once it has tried to send the reply
    (mesh_socket.send_reply).
    """

    rate: float = 10.0
    burst: float = 20.0
    total_rate: float = 2000.0
    clock: Callable[[], float] = field(default=lambda: 0.0)
    allowed: frozenset[str] = frozenset()
    outcomes: dict[str, int] = field(default_factory=dict)
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _total: TokenBucket | None = None

    def allow(self, addresses: Iterable[str]) -> None:
        """Replace the allowed addresses (normalised); buckets of removed ones are dropped."""
        self.allowed = frozenset(normalize_ip(a) for a in addresses)
        self._buckets = {a: b for a, b in self._buckets.items() if a in self.allowed}

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def answer(self, data: bytes | bytearray, source_ip: str) -> bytearray | None:
        """The reply to send back to the datagram's source (its dwell still to be stamped), or
        None (dropped, counted)."""
        probe = decode(data)
        if probe is None or probe.kind != REQUEST:
            self.count("malformed")
            return None
        ip = source_ip
        if ip not in self.allowed:  # the socket's spelling is usually the normalised one already
            try:
                ip = normalize_ip(source_ip)
            except ValueError:
                self.count("malformed")
                return None
        if ip not in self.allowed:
            self.count("unlisted")
            return None
        now = self.clock()
        bucket = self._buckets.get(ip)
        if bucket is None:
            bucket = self._buckets[ip] = TokenBucket(self.rate, self.burst)
        if self._total is None:
            self._total = TokenBucket(self.total_rate, max(self.total_rate, self.burst))
        if not bucket.take(now) or not self._total.take(now):
            self.count("rate_limited")
            return None
        return make_reply(data)
