"""Who gets a connection, and for how long: the HTTP server's defence against slow clients.

A connection that has not yet sent a complete request costs the attacker nothing, so it must
not be able to keep Prometheus out. `ConnectionGuard` is the listening socket's protocol
factory; every accepted connection goes through these gates:

* a per-client cap (`http.max_connections_per_client`; a client is one IPv4 address or one
  IPv6 /64): more from the same client are closed on arrival;
* the global cap (`http.max_connections`): when it is reached, a connection that has not sent
  a request yet (handshake or headers still in progress, or being closed after a 401) is
  closed to admit the new one: the oldest one of the client holding the most such
  connections; failing that, an idle keep-alive one, chosen alike. A connection serving a
  request is never closed; when all of them are, the new one is;
* deadlines: the TLS handshake within `http.handshake_timeout`, then the request line and
  headers within `http.header_timeout` (again from the first byte of every later request on
  the connection). Idle keep-alive connections are aiohttp's business (`http.idle_timeout`).

TLS is started here (`loop.start_tls`) rather than by the server, so a connection that never
finishes its handshake is counted, attributed to its peer and closable like any other.

Everything refused is counted in infrapulse_http_connections_closed_total and
infrapulse_http_requests_rejected_total, and logged as one rate-limited line per kind.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client.metrics_core import Metric

from . import catalog
from .logs import RateLimiter
from .metrics import family_metric

if TYPE_CHECKING:
    from .httpsettings import HttpSettings

log = logging.getLogger("infrapulse.http")

CONNECTION_REASONS = ("client_limit", "connection_limit", "evicted", "handshake_failed", "handshake_timeout",
                      "header_timeout", "linger_timeout")
REQUEST_REASONS = ("bad_request", "malformed", "method_not_allowed", "not_found", "too_large",
                   "unauthorized", "unsupported_media_type", "other")
STATUS_REASONS = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
                  413: "too_large", 415: "unsupported_media_type"}
STATES = ("handshake", "headers", "active", "idle", "closing")

CONNECTIONS_CLOSED = catalog.declare(
    "infrapulse_http_connections_closed_total", catalog.COUNTER,
    "Connections the HTTP server closed to protect itself, by reason: client_limit (the client's "
    "address already had http.max_connections_per_client), connection_limit (http.max_connections "
    "reached and every connection busy), evicted (a connection that had not sent a request yet, closed "
    "to admit a new one), handshake_timeout, handshake_failed (TLS), header_timeout (no complete "
    "request line and headers within http.header_timeout), linger_timeout (a refused request's body "
    "still arriving).", ("reason",), source="daemon")
REQUESTS_REJECTED = catalog.declare(
    "infrapulse_http_requests_rejected_total", catalog.COUNTER,
    "Requests the HTTP server answered with a client error, by reason: malformed (not parseable HTTP), "
    "unauthorized (401), bad_request (400: invalid JSON, unknown field, wrong type), not_found, "
    "method_not_allowed, too_large (body over 64 KiB), unsupported_media_type (415), other.",
    ("reason",), source="daemon")
OPEN_CONNECTIONS = catalog.declare(
    "infrapulse_http_connections", catalog.GAUGE,
    "Open HTTP connections by state: handshake (TLS in progress), headers (request line and headers "
    "arriving), active (a request being served), idle (keep-alive), closing (after a refused request).",
    ("state",), source="daemon")


@dataclass(frozen=True)
class GuardLimits:
    max_connections: int = 256
    max_per_client: int = 64
    handshake_timeout: float = 5.0
    header_timeout: float = 5.0

    @classmethod
    def from_config(cls, http: HttpSettings) -> GuardLimits:
        return cls(http.max_connections, http.max_connections_per_client, http.handshake_timeout,
                   http.header_timeout)


class HttpStats:
    """Counters that outlive one listener (a reload that moves the listen address keeps them)."""

    def __init__(self) -> None:
        self.closed: Counter[str] = Counter({r: 0 for r in CONNECTION_REASONS})
        self.rejected: Counter[str] = Counter({r: 0 for r in REQUEST_REASONS})
        self.states: Callable[[], Counter[str]] = Counter
        self.limiter = RateLimiter(every=10.0)

    def reject_status(self, status: int) -> None:
        if 400 <= status < 500:
            self.rejected[STATUS_REASONS.get(status, "other")] += 1

    def catalog_series(self) -> list[tuple[catalog.Family, dict[tuple[str, ...], float]]]:
        """The guard's families and their series (exposition.registry.CatalogSeries: /metrics
        writes them through the exposition encoder)."""
        states = self.states()
        return [(CONNECTIONS_CLOSED, {(r,): float(n) for r, n in sorted(self.closed.items())}),
                (REQUESTS_REJECTED, {(r,): float(n) for r, n in sorted(self.rejected.items())}),
                (OPEN_CONNECTIONS, {(s,): float(states.get(s, 0)) for s in STATES})]

    def collect(self) -> Iterator[Metric]:
        """prometheus_client collector protocol (registered on the daemon's registry)."""
        for family, series in self.catalog_series():
            metric = family_metric(family, [series])
            if metric is not None:
                yield metric

    def describe(self) -> list[Metric]:
        return []  # keeps registry.register() from collecting at start-up

    def note(self, key: str, message: str, level: int = logging.WARNING, **extra: Any) -> None:
        """One log line per `key` per 10 s; later lines say how many were held back."""
        held = self.limiter.allow(key)
        if held is None:
            return
        if held:
            extra["suppressed_since_last"] = held
        log.log(level, message, extra=extra)


def client_key(peer: Any) -> str:
    """What the per-client cap counts: the IPv4 address, or the /64 of an IPv6 one (one host
    usually owns a whole /64, so counting single IPv6 addresses would cap nothing)."""
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return str(host)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        if not address.is_loopback:
            return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class GuardedConnection(asyncio.Protocol):
    """One accepted connection: starts TLS if asked, then hands the bytes to aiohttp's
    RequestHandler, keeping the state and deadline the guard decides by."""

    def __init__(self, guard: ConnectionGuard) -> None:
        self.guard = guard
        self.raw: asyncio.Transport | None = None
        self.client = ""
        self.peer: Any = None
        self.state = "handshake"
        self.handler: Any = None  # aiohttp RequestHandler, once TLS (if any) is up
        self._deadline: asyncio.TimerHandle | None = None
        self._early: list[bytes] = []
        self._lost = False

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.raw = transport
        self.peer = transport.get_extra_info("peername")
        self.client = client_key(self.peer)
        if not self.guard.admit(self):
            transport.abort()
            self._lost = True
            return
        if self.guard.ssl_context is None:
            self._serve(transport)
            return
        # Stop reading until start_tls owns the socket, so no ClientHello byte lands here.
        transport.pause_reading()
        self._arm(self.guard.limits.handshake_timeout, "handshake_timeout")
        asyncio.get_running_loop().create_task(self._handshake(transport))

    def data_received(self, data: bytes) -> None:
        if self.state == "idle":  # the first bytes of the next request: its headers have a deadline too
            self._set_state("headers")
            self._arm(self.guard.limits.header_timeout, "header_timeout")
        if self.handler is not None:
            self.handler.data_received(data)
        else:  # TLS delivers the first request before start_tls() has returned to _handshake
            self._early.append(data)

    def eof_received(self) -> bool | None:
        return self.handler.eof_received() if self.handler is not None else None

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._disarm()
        self.guard.forget(self)
        if self.handler is not None:
            self.handler.connection_lost(exc)

    # -- states the guard and its middleware move it through -------------------------------

    async def _handshake(self, raw: asyncio.Transport) -> None:
        if self._lost or raw.is_closing():
            return
        loop = asyncio.get_running_loop()
        limits = self.guard.limits
        ssl_context = self.guard.ssl_context
        assert ssl_context is not None  # only TLS listeners hand connections here
        try:
            # start_tls' own timeouts are a backstop: the deadline armed above closes it first.
            handshake_timeout = limits.handshake_timeout + 1.0
            if sys.version_info >= (3, 11):
                app_transport = await loop.start_tls(
                    raw, self, ssl_context, server_side=True, ssl_handshake_timeout=handshake_timeout,
                    ssl_shutdown_timeout=max(limits.header_timeout, 1.0))
            else:  # 3.10's start_tls takes no ssl_shutdown_timeout (a TypeError, every handshake failed)
                app_transport = await loop.start_tls(
                    raw, self, ssl_context, server_side=True, ssl_handshake_timeout=handshake_timeout)
        except Exception as exc:  # ssl.SSLError, ConnectionError, TimeoutError, ...
            if not self._lost:  # not closed by our deadline or an eviction: the client failed it
                self.guard.stats.closed["handshake_failed"] += 1
                self.guard.stats.note(f"tls:{type(exc).__name__}", "TLS handshake failed",
                                      peer=_peer_text(self.peer), error=_short(exc))
                self.close(None)
            return
        if self._lost or app_transport is None:
            return
        self._serve(app_transport)

    def _serve(self, transport: asyncio.BaseTransport) -> None:
        self._set_state("headers")
        self._arm(self.guard.limits.header_timeout, "header_timeout")
        self.handler = self.guard.new_handler(self)
        self.handler.connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            self.handler.data_received(data)

    def request_started(self) -> None:
        self._disarm()
        self._set_state("active")

    def request_finished(self, refused: bool) -> None:
        if self._lost:
            return
        if refused:
            # The response closes the connection; a body still trickling in may not hold it.
            self._set_state("closing")
            self._arm(self.guard.limits.header_timeout, "linger_timeout")
        else:
            self._set_state("idle")

    def close(self, reason: str | None) -> None:
        """Close at once (no TLS goodbye: the peer is not owed one), counting `reason`."""
        if self._lost:
            return
        if reason is not None:
            self.guard.stats.closed[reason] += 1
            self.guard.stats.note(reason, _CLOSE_MESSAGES[reason], peer=_peer_text(self.peer),
                                  state=self.state)
        raw = self.raw
        self.connection_lost(None)
        if raw is not None:
            raw.abort()

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.guard.moved(self, self.state, state)
            self.state = state

    def _arm(self, seconds: float, reason: str) -> None:
        self._disarm()
        self._deadline = asyncio.get_running_loop().call_later(seconds, self.close, reason)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


_CLOSE_MESSAGES = {
    "client_limit": "closed a new connection: this client already holds its share of connections",
    "connection_limit": "closed a new connection: every connection is serving a request",
    "evicted": "closed a connection that had not sent a request, to admit a new one",
    "handshake_timeout": "closed a connection that did not finish its TLS handshake in time",
    "header_timeout": "closed a connection that did not send a request line and headers in time",
    "linger_timeout": "closed a refused connection that kept sending",
}


class ConnectionGuard:
    """The listening socket's protocol factory (see the module doc), plus the middleware that
    tells it when a request starts and ends."""

    # Connections in these states have not earned their slot: closed first when the cap is full.
    EVICTABLE = ("handshake", "headers", "closing")

    def __init__(self, limits: GuardLimits, stats: HttpStats,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.limits = limits
        self.stats = stats
        self.ssl_context = ssl_context
        self.server: Callable[[], Any] | None = None
        self._per_client: Counter[str] = Counter()
        # Insertion-ordered dicts (oldest first): by state for the gauge, and by eviction tier
        # ("pre": not yet earned a slot; "idle": keep-alive) and client to pick a victim.
        self._by_state: dict[str, dict[GuardedConnection, None]] = {s: {} for s in STATES}
        self._tiers: dict[str, dict[str, dict[GuardedConnection, None]]] = {"pre": {}, "idle": {}}
        self._by_handler: dict[Any, GuardedConnection] = {}
        stats.states = self.state_counts

    def bind(self, server: Callable[[], Any]) -> None:
        """The aiohttp web.Server (the runner's `server`) that makes a RequestHandler per connection."""
        self.server = server

    def __call__(self) -> asyncio.Protocol:
        return GuardedConnection(self)

    @property
    def open(self) -> int:
        return sum(len(conns) for conns in self._by_state.values())

    def state_counts(self) -> Counter[str]:
        return Counter({s: len(conns) for s, conns in self._by_state.items()})

    def admit(self, conn: GuardedConnection) -> bool:
        if self._per_client[conn.client] >= self.limits.max_per_client:
            self.stats.closed["client_limit"] += 1
            self.stats.note("client_limit", _CLOSE_MESSAGES["client_limit"], peer=_peer_text(conn.peer),
                            limit=self.limits.max_per_client)
            return False
        if self.open >= self.limits.max_connections:
            victim = self._victim()
            if victim is None:
                self.stats.closed["connection_limit"] += 1
                self.stats.note("connection_limit", _CLOSE_MESSAGES["connection_limit"],
                                peer=_peer_text(conn.peer), limit=self.limits.max_connections)
                return False
            victim.close("evicted")
        self._per_client[conn.client] += 1
        self._track(conn, conn.state)
        return True

    def _victim(self) -> GuardedConnection | None:
        """The oldest connection, in the first tier that has one, of the client holding the most
        connections in that tier: a flood from many addresses evicts its own before a scraper's
        one connection that is still in its handshake."""
        for tier in ("pre", "idle"):
            clients = self._tiers[tier]
            if clients:
                _, conns = max(clients.items(), key=lambda item: len(item[1]))
                return next(iter(conns))
        return None

    @staticmethod
    def _tier(state: str) -> str | None:
        return "pre" if state in ConnectionGuard.EVICTABLE else "idle" if state == "idle" else None

    def _track(self, conn: GuardedConnection, state: str) -> None:
        self._by_state[state][conn] = None
        tier = self._tier(state)
        if tier is not None:
            self._tiers[tier].setdefault(conn.client, {})[conn] = None

    def _untrack(self, conn: GuardedConnection, state: str) -> bool:
        if conn not in self._by_state[state]:
            return False  # never admitted
        del self._by_state[state][conn]
        tier = self._tier(state)
        if tier is not None:
            conns = self._tiers[tier][conn.client]
            del conns[conn]
            if not conns:
                del self._tiers[tier][conn.client]
        return True

    def moved(self, conn: GuardedConnection, old: str, new: str) -> None:
        if self._untrack(conn, old):
            self._track(conn, new)

    def forget(self, conn: GuardedConnection) -> None:
        if self._untrack(conn, conn.state):
            self._per_client[conn.client] -= 1
            if self._per_client[conn.client] <= 0:
                del self._per_client[conn.client]
        if conn.handler is not None:
            self._by_handler.pop(conn.handler, None)

    def new_handler(self, conn: GuardedConnection) -> Any:
        assert self.server is not None, "bind() the aiohttp server first"
        handler = self.server()
        self._by_handler[handler] = conn
        return handler

    def close_all(self) -> None:
        for conns in list(self._by_state.values()):
            for conn in list(conns):
                conn.close(None)

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request],
                                           Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Outermost middleware: the headers are in (stop their deadline); count refusals; a
        401 marks the connection as closing."""
        conn = self._by_handler.get(request.protocol)
        if conn is not None:
            conn.request_started()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            self.stats.reject_status(status)
            if conn is not None:
                conn.request_finished(refused=status == 401)


class ClientErrorLog:
    """The logger aiohttp's request handler writes to (AppRunner(logger=...)). aiohttp logs a
    full traceback for every unparseable request; here each becomes one counted, rate-limited
    line per kind of error with the peer. Tracebacks stay for errors in infrapulse's own
    handlers (500s), rate-limited per exception type."""

    def __init__(self, stats: HttpStats, logger: logging.Logger | None = None) -> None:
        self.stats = stats
        self.logger = logger or logging.getLogger("infrapulse.http")

    def _client_error(self, args: tuple[Any, ...], exc: BaseException) -> None:
        self.stats.rejected["malformed"] += 1
        peer = str(args[1]) if len(args) > 1 else ""
        self.stats.note(f"malformed:{type(exc).__name__}", "rejected a malformed request", peer=peer,
                        error=type(exc).__name__, detail=_short(exc))

    def exception(self, *args: Any, exc_info: Any = True, **kw: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else None
        if isinstance(exc, HttpProcessingError):
            self._client_error(args, exc)
            return
        key = f"server:{type(exc).__name__}"
        if self.stats.limiter.allow(key) is not None:
            self.logger.error(*args, exc_info=exc_info, **kw)

    def debug(self, *args: Any, exc_info: Any = None, **kw: Any) -> None:
        # aiohttp logs non-HTTP bytes on a fresh connection (BadHttpMethod) at debug level.
        if isinstance(exc_info, HttpProcessingError):
            self._client_error(args, exc_info)
            return
        self.logger.debug(*args, exc_info=exc_info, **kw)

    def __getattr__(self, name: str) -> Any:  # info, warning, error, isEnabledFor, ...
        return getattr(self.logger, name)


def _peer_text(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"[{peer[0]}]:{peer[1]}" if ":" in str(peer[0]) else f"{peer[0]}:{peer[1]}"
    return str(peer or "")


def _short(exc: BaseException, limit: int = 160) -> str:
    """An error's message, cut and on one line: it may quote what the client sent."""
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
