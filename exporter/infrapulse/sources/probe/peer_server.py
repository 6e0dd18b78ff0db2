"""The server side of perftest against a peer node: `POST /api/v1/probes/perftest-server`.

A peer's probe source asks this daemon to start one perftest server (`ib_write_lat` or
`ib_write_bw` on one of this node's RDMA devices), then runs its client against it. Off by
default (`sources.probe.perftest.peer_server.enabled`); while off the endpoint answers 404.

Authentication is required, never optional: a request is refused (403) unless the daemon has
some configured for it, the shared token of `peer_server.token_file` (header
X-Infrapulse-Probe-Token, compared in constant time; 401 when missing or wrong) and/or the web
config's basic auth (the middleware admitted the user before this handler runs;
`allowed_users` narrows it). With both, both are required. The token is never logged.

The server runs like every probe: under the node-wide probe lock (so never beside a scheduled
probe or another peer's server: 409), only when the idle rules allow it (409 with the reason),
at lowered priority, in its own process group, killed at `timeout` whether or not a client
came; perftest's server exits by itself after one test. One at a time (409) and at least
`min_interval` apart (429).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from ...http import JsonField, JsonInputError, parse_json_object
from ...webconfig import BASIC_AUTH_USER
from . import runner
from .config import PerftestSettings, ProbeSettings
from .idle import Idleness
from .mesh_peers import interface_ipv4

ROUTE = "/api/v1/probes/perftest-server"
TOKEN_HEADER = "X-Infrapulse-Probe-Token"
STATUS_TARGET = "perftest_server"
TESTS = ("ib_write_lat", "ib_write_bw")
DEFAULT_SIZE = {"ib_write_lat": 8, "ib_write_bw": 65536}
MIN_TOKEN_BYTES = 16
READY_SECONDS = 5.0
REFUSAL_LOG_SECONDS = 60.0
REQUEST_FIELDS = {"test": JsonField((str,), required=True), "device": JsonField((str,), required=True),
                  "port": JsonField((int,)), "size": JsonField((int,)), "iterations": JsonField((int,))}

log = logging.getLogger("infrapulse.source.probe")


class RequestError(ValueError):
    """A request the endpoint refuses; `status` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """What a peer may ask for (from peer_server and the perftest section)."""

    port_min: int
    port_max: int
    max_size: int
    max_iterations: int
    iterations: dict[str, int]  # the default -n per test

    @classmethod
    def from_config(cls, perftest: PerftestSettings) -> Limits:
        server = perftest.peer_server
        return cls(server.port_min, server.port_max, server.max_size, server.max_iterations,
                   {"ib_write_lat": perftest.latency_iterations,
                    "ib_write_bw": perftest.bandwidth_iterations})


@dataclass(frozen=True)
class ServerRequest:
    test: str
    device: str
    port: int | None  # None: the server picks a free one in its range
    size: int
    iterations: int


def parse_request(raw: bytes, limits: Limits) -> ServerRequest:
    """The request body: exactly REQUEST_FIELDS, each of its type and within `limits`, or
    RequestError(400) naming the field."""
    try:
        body = parse_json_object(raw, REQUEST_FIELDS)
    except JsonInputError as exc:
        raise RequestError(400, str(exc)) from None
    test, device = str(body["test"]), str(body["device"])
    if test not in TESTS:
        raise RequestError(400, f"field 'test' must be one of {', '.join(TESTS)}, got {test[:40]!r}")
    if not device or len(device) > 64 or not all(c.isascii() and (c.isalnum() or c in "_.-") for c in device):
        raise RequestError(400, f"field 'device' is not an RDMA device name: {device[:40]!r}")
    port = _int(body, "port", None, limits.port_min, limits.port_max)
    size = _int(body, "size", DEFAULT_SIZE[test], 1, limits.max_size)
    iterations = _int(body, "iterations", min(limits.iterations[test], limits.max_iterations), 10,
                      limits.max_iterations)
    assert size is not None and iterations is not None  # they have defaults
    return ServerRequest(test, device, port, size, iterations)


def _int(body: dict[str, object], key: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int) or not low <= value <= high:
        raise RequestError(400, f"field {key!r} must be within {low}-{high}")
    return value


def read_token(path: str) -> bytes:
    """The shared token (surrounding whitespace stripped); RequestError(503) when unusable."""
    try:
        token = Path(path).read_bytes().strip()
    except OSError as exc:
        raise RequestError(503, f"token file {path} cannot be read: {exc.strerror or exc}") from None
    if len(token) < MIN_TOKEN_BYTES:
        raise RequestError(503, f"token file {path} holds fewer than {MIN_TOKEN_BYTES} bytes; refusing it")
    return token


def token_matches(given: str | None, expected: bytes) -> bool:
    """Constant-time comparison; a missing header never matches."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected)


def free_port(low: int, high: int, wanted: int | None) -> int | None:
    """`wanted` if it is free, else the first free port of low..high (None when all are taken)."""
    for port in [wanted] if wanted is not None else range(low, high + 1):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
        return port
    return None


def netdev_address(sysfs_root: str, device: str) -> str:
    """The IPv4 address of the RDMA device's netdev (RoCE, IPoIB), or "" when it has none."""
    net = Path(sysfs_root, "class", "infiniband", device, "device", "net")
    try:
        names = sorted(p.name for p in net.iterdir())
    except OSError:
        return ""
    for name in names:
        try:
            return interface_ipv4(name).ip
        except (OSError, ValueError):
            continue
    return ""


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json",
                        headers=headers)


class PeerServer:
    """The endpoint's state: the running server (one at a time) and the rate limit."""

    def __init__(self, probe_config: ProbeSettings, probe_dir: Path,
                 idle_check: Callable[[], Awaitable[Idleness]], devices: Callable[[], dict[str, str]],
                 status: Callable[[str, str], None]) -> None:
        self.perftest = probe_config.perftest
        self.cfg = self.perftest.peer_server
        self.probe_config = probe_config
        self.dir = probe_dir
        self.limits = Limits.from_config(self.perftest)
        self.idle_check = idle_check
        self.devices = devices
        self.status = status
        self.task: asyncio.Task[None] | None = None
        self.last_start = -float("inf")  # time.monotonic() of the last started server
        self._refusals = 0
        self._last_refusal_log = -float("inf")

    @property
    def enabled(self) -> bool:
        return self.cfg.enabled

    def check_setup(self) -> None:
        """At start: say in the status whether the endpoint can ever accept a request."""
        if not self.enabled:
            return
        if self.cfg.token_file:
            try:
                read_token(self.cfg.token_file)
            except RequestError as exc:
                self.status("token_file", str(exc))
                return
        self.status("ready", "waiting for peers' requests")

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    # -- the handler ---------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        if not self.enabled:
            return _json(404, {"error": "the perftest server for peers is not enabled on this node "
                                        "(sources.probe.perftest.peer_server.enabled)"})
        try:
            self.authorize(request)
            if request.content_type != "application/json":
                raise RequestError(415, "Content-Type must be application/json, got "
                                        f"{request.content_type!r}")
            req = parse_request(await request.read(), self.limits)
            return await self.start(req, request.remote or "")
        except RequestError as exc:
            self._note_refusal(exc, request.remote or "")
            headers = {}
            if exc.status == 401:
                headers["WWW-Authenticate"] = f'{TOKEN_HEADER} realm="infrapulse"'
            if exc.status == 429:
                wait = self.cfg.min_interval - (time.monotonic() - self.last_start)
                headers["Retry-After"] = str(max(int(wait) + 1, 1))
            return _json(exc.status, {"error": str(exc)}, headers)

    def authorize(self, request: web.Request) -> None:
        user = request.get(BASIC_AUTH_USER)
        token_file = self.cfg.token_file
        if not token_file and user is None:
            raise RequestError(403, "no authentication is configured for this endpoint: set "
                                    "sources.probe.perftest.peer_server.token_file or basic_auth_users "
                                    "in the web config")
        if user is not None and self.cfg.allowed_users and user not in self.cfg.allowed_users:
            raise RequestError(403, f"user {user!r} may not start perftest servers")
        if token_file and not token_matches(request.headers.get(TOKEN_HEADER), read_token(token_file)):
            raise RequestError(401, f"missing or wrong {TOKEN_HEADER}")

    def _note_refusal(self, exc: RequestError, remote: str) -> None:
        """Refusals in the status and the log, at most one log line a minute (a scan is no storm)."""
        self._refusals += 1
        self.status("refused", f"last refused request from {remote}: {exc.status} {exc}")
        now = time.monotonic()
        if now - self._last_refusal_log >= REFUSAL_LOG_SECONDS:
            log.warning("perftest server request refused", extra={
                "remote": remote, "status": exc.status, "reason": str(exc), "refused_since_last_log":
                self._refusals})
            self._refusals = 0
            self._last_refusal_log = now

    # -- starting the server -------------------------------------------------------------------

    async def start(self, req: ServerRequest, remote: str) -> web.Response:
        if self.task is not None and not self.task.done():
            raise RequestError(409, "busy: a perftest server for a peer is already running")
        if time.monotonic() - self.last_start < self.cfg.min_interval:
            raise RequestError(429, f"at most one perftest server every {self.cfg.min_interval:g}s")
        lat = req.test == "ib_write_lat"
        binary = self.perftest.latency_binary if lat else self.perftest.bandwidth_binary
        path = runner.resolve(binary) if binary else None
        if path is None:
            raise RequestError(503, f"{req.test}: no binary on this node ({binary or 'not configured'})")
        allowed = self.cfg.devices or sorted(self.devices())
        if req.device not in allowed:
            raise RequestError(400, f"device {req.device!r} is not one this node serves "
                                    f"({', '.join(allowed) or 'no RDMA device'})")
        idleness = await self.idle_check()
        if not idleness.idle:
            raise RequestError(409, f"busy: {idleness.why}")
        port = free_port(self.limits.port_min, self.limits.port_max, req.port)
        if port is None:
            taken = (f"port {req.port} is in use" if req.port is not None
                     else f"no free port in {self.limits.port_min}-{self.limits.port_max}")
            raise RequestError(409, f"busy: {taken}")
        stack = ExitStack()
        try:
            stack.enter_context(runner.probe_lock(self.dir / "run.lock"))
        except runner.ProbeBusy as exc:
            stack.close()
            raise RequestError(409, f"busy: {exc}") from None
        try:
            process, workdir = self._spawn(path, req, port)
        except OSError as exc:
            stack.close()
            raise RequestError(503, f"cannot start {req.test}: {exc.strerror or exc}") from None
        stack.callback(shutil.rmtree, workdir, True)
        self.last_start = time.monotonic()
        deadline = process.started + self.cfg.timeout
        self.task = asyncio.create_task(self._serve(process, stack, req, port, remote, deadline),
                                        name="probe:perftest-server")
        if not await _ready(process, min(deadline, time.monotonic() + READY_SECONDS)):
            await self.close()
            raise RequestError(503, f"{req.test} server did not start: {process.output()[-300:].strip()}")
        address = self.cfg.address or netdev_address(self.probe_config.versions.sysfs_root, req.device)
        log.info("perftest server started for a peer", extra={
            "remote": remote, "test": req.test, "device": req.device, "port": port, "size": req.size})
        return _json(200, {"test": req.test, "device": req.device, "port": port, "address": address,
                           "size": req.size, "iterations": req.iterations,
                           "timeout": self.cfg.timeout})

    def _spawn(self, path: str, req: ServerRequest, port: int) -> tuple[runner.Process, Path]:
        self.dir.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="perftest-server.", dir=self.dir))
        argv = [path, "-d", req.device, "-p", str(port), "-s", str(req.size), "-n", str(req.iterations),
                *self.perftest.extra_args]
        env = {**os.environ, **self.probe_config.env}
        try:
            process = runner.Process(argv, workdir / "server.txt", env, str(workdir),
                                     self.probe_config.nice, self.probe_config.io_idle)
        except OSError:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return process, workdir

    async def _serve(self, process: runner.Process, stack: ExitStack, req: ServerRequest, port: int,
                     remote: str, deadline: float) -> None:
        """Wait for the one test or the timeout, then release the lock and the files."""
        what = f"{req.test} on {req.device} port {port} for {remote}"
        try:
            self.status("serving", what)
            outcome = await process.wait(deadline)
            if outcome.status == "timeout":
                self.status("timeout", f"{what}: no test within {self.cfg.timeout:g}s; killed")
            elif outcome.status == "ok":
                self.status("served", what)
            else:
                self.status("failed", f"{what}: {outcome.message}")
        except asyncio.CancelledError:
            await asyncio.shield(process.stop())
            raise
        finally:
            stack.close()


async def _ready(process: runner.Process, deadline: float) -> bool:
    """Until the server printed perftest's "Waiting for client to connect"; False if it exited
    or the deadline passed first."""
    while time.monotonic() < deadline:
        if "Waiting for client" in process.output():
            return True
        if process.proc.poll() is not None:
            return False
        await asyncio.sleep(0.05)
    return False
