"""perftest against a peer node (the client side): ask the peer's daemon to start the server
(`POST /api/v1/probes/perftest-server`, see peer_server.py), then run the client against the
peer's RDMA address. Results carry scope `peer:<name>` and path `fabric`.

What goes wrong on the peer's side is a skip reason, never an exception: `peer_refused` (401,
403, 404, any other 4xx: wrong or missing credentials, the endpoint not enabled, a request it
does not take), `peer_busy` (409, 429: another probe, the idle rules, the rate limit; retried
for `retry_for` first), `peer_unreachable` (no connection, TLS failure, timeout, 5xx, an answer
that is not what the endpoint sends). Credentials are read from their files per run and never
put in a message or a log line; redirects are not followed, so they go to the configured URL
only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from . import runner
from .config import PeerSettings
from .peer_server import ROUTE, TOKEN_HEADER
from .probes import PerftestProbe, ProbeRun, RunContext

MAX_ANSWER_BYTES = 64 * 1024
RETRY_STATUSES = (409, 429)


class PeerError(Exception):
    """The peer did not start a server; `reason` is the probe's result."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ServerAnswer:
    port: int
    address: str


def _secret(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PeerError("failed", f"cannot read the {what} {path}: {getattr(exc, 'strerror', None) or exc}") \
            from None


def credentials(peer: PeerSettings) -> dict[str, str]:
    """The token header and the basic auth header of a peer, from their files."""
    headers = {TOKEN_HEADER: _secret(peer.token_file, "token_file")} if peer.token_file else {}
    if peer.user:
        pair = f"{peer.user}:{_secret(peer.password_file, 'password_file')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    return headers


def _ssl(peer: PeerSettings) -> ssl.SSLContext | None:
    if not peer.url.startswith("https://"):
        return None
    try:
        return ssl.create_default_context(cafile=peer.ca_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise PeerError("failed", f"ca_file {peer.ca_file}: {exc}") from None


def _error_of(text: str) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:200].strip()
    return str(doc.get("error", ""))[:300] if isinstance(doc, dict) else text[:200]


async def _post(peer: PeerSettings, body: dict[str, Any]) -> tuple[int, str, str]:
    """(status, body text, Retry-After) of one request; PeerError(peer_unreachable) without one."""
    headers = credentials(peer)
    context = _ssl(peer)
    url = peer.url.rstrip("/") + ROUTE
    timeout = aiohttp.ClientTimeout(total=peer.request_timeout)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.post(url, json=body, headers=headers, allow_redirects=False,
                                    ssl=context if context is not None else True) as resp:
                raw = await resp.content.read(MAX_ANSWER_BYTES)
                return resp.status, raw.decode("utf-8", "replace"), resp.headers.get("Retry-After", "")
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        why = "timed out" if isinstance(exc, asyncio.TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise PeerError("peer_unreachable", f"{url}: {why}") from None


def _answer(status: int, text: str, url: str) -> ServerAnswer:
    if status in RETRY_STATUSES:
        raise PeerError("peer_busy", f"{url}: {status} {_error_of(text)}")
    if status != 200:
        reason = "peer_refused" if 400 <= status < 500 else "peer_unreachable"
        raise PeerError(reason, f"{url}: {status} {_error_of(text)}")
    try:
        doc = json.loads(text)
        port, address = doc["port"], doc.get("address", "")
    except (ValueError, KeyError, TypeError):
        raise PeerError("peer_unreachable", f"{url}: not a perftest-server answer: {text[:120]!r}") from None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536 \
            or not isinstance(address, str):
        raise PeerError("peer_unreachable", f"{url}: not a perftest-server answer: {text[:120]!r}")
    return ServerAnswer(port, address)


async def request_server(peer: PeerSettings, body: dict[str, Any], deadline: float) -> ServerAnswer:
    """Ask the peer to start a server; a busy peer is asked again (Retry-After, else 1 s) until
    `retry_for` or the monotonic `deadline` runs out."""
    give_up = min(deadline, time.monotonic() + peer.retry_for)
    while True:
        status, text, retry_after = await _post(peer, body)
        try:
            return _answer(status, text, peer.url)
        except PeerError as exc:
            wait = float(retry_after) if retry_after.isdigit() else 1.0
            if exc.reason != "peer_busy" or time.monotonic() + wait > give_up:
                raise
        await asyncio.sleep(wait)


class PeerPerftestProbe(PerftestProbe):
    """One perftest binary against one peer: per size, a server started by the peer's daemon
    and this node's client on `local_device`."""

    def __init__(self, name: str, test: str, binary: str, peer: PeerSettings, local_device: str,
                 sizes: list[int], iterations: int, json_mode: str, gbits: bool, extra_args: list[str],
                 nic_models: dict[str, str]) -> None:
        super().__init__(name, binary, [], sizes, iterations, 0, "", json_mode, gbits, extra_args, nic_models)
        self.test = test
        self.peer = peer
        self.local_device = local_device
        self.scope = f"peer:{peer.name}"

    async def run(self, ctx: RunContext) -> ProbeRun:
        path = runner.resolve(self.binary)
        if path is None:
            return ProbeRun(self.name, "no_binary", f"{self.binary}: not found or not executable")
        if not self.local_device:
            return ProbeRun(self.name, "failed", "no local RDMA device for the client "
                                                 "(perftest.peers[].local_device, or one in sysfs)")
        use_json = await self._supports_json(path, ctx)
        started = time.monotonic()
        run = ProbeRun(self.name, "ok")
        for size in self.sizes:
            problem = await self._against_peer(path, size, use_json, ctx, run)
            if problem is not None:
                run.result, run.message = problem
                break
        run.duration = time.monotonic() - started
        return run

    async def _against_peer(self, path: str, size: int, use_json: bool, ctx: RunContext,
                            run: ProbeRun) -> tuple[str, str] | None:
        body = {"test": self.test, "device": self.peer.device, "size": size, "iterations": self.iterations}
        try:
            answer = await request_server(self.peer, body, ctx.deadline)
        except PeerError as exc:
            return exc.reason, f"peer {self.peer.name}: {exc}"
        address = self.peer.address or answer.address or urlsplit(self.peer.url).hostname or ""
        tag = f"{self.peer.name}-{size}"
        return await self._client(path, self.local_device, answer.port, size, address, self.scope, tag,
                                  use_json, ctx, run)
