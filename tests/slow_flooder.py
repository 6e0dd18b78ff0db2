#!/usr/bin/env python3
"""A bounded slow-client flood against one loopback HTTP(S) port, run as a separate process.

    python tests/slow_flooder.py --port 9477 [--tls] [--connections 1000] [--duration 20]
                                 [--source 127.0.0.2] [--reconnect-delay 0.2]

Holds up to --connections connections open from --source (a loopback address; anything else
is refused) for at most --duration seconds, none of them authenticated. The connections cycle
through the ways a slow client ties up a server:

  idle        TCP connected, nothing sent (on a TLS port: no ClientHello)
  partial     a TLS record header (TLS port) or half a request line (plain port), then silence
  trickle     (after the TLS handshake on a TLS port) a request line, then one header byte a second
  handshaken  TLS port only: the handshake completes, then silence
  unauth      a complete request without credentials, then the connection is held open

--spread N spreads the connections over N consecutive loopback addresses (round robin), so
a per-address cap alone does not stop them and the global cap's eviction has to.

A connection the server closes is opened again after --reconnect-delay (0: at once, as an
attacker would), so the count stays at --connections for the whole run. Prints one JSON line
of counts when done; exits 0.

The rest of this module is what tests/integration/test_slow_clients.py and bench/slow_clients.py share: a
daemon with TLS and basic auth in a subprocess, the flood in another, and authenticated scrapes
from 127.0.0.1 timed while the flood runs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import ipaddress
import json
import resource
import ssl
import time
from dataclasses import asdict, dataclass, field

PLAIN_MODES = ("idle", "partial", "trickle", "unauth")
TLS_MODES = ("idle", "partial", "trickle", "handshaken", "unauth")
TRICKLE_EVERY = 1.0
REQUEST_LINE = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
TRICKLE_HEADER = b"X-Slow: " + b"a" * 64


@dataclass
class Counts:
    opened: int = 0
    closed_by_server: int = 0
    connect_failed: int = 0
    max_open: int = 0
    open_now: int = 0
    responses: int = 0
    errors: dict[str, int] = field(default_factory=dict)


async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, trickle: bytes,
                stop_at: float, counts: Counts) -> bool:
    """Keep the connection open, sending `trickle` one byte per TRICKLE_EVERY, until the server
    closes it (True) or the run ends (False)."""
    loop = asyncio.get_running_loop()
    sent = 0
    while loop.time() < stop_at:
        try:
            data = await asyncio.wait_for(reader.read(4096),
                                          timeout=min(TRICKLE_EVERY, stop_at - loop.time()))
        except asyncio.TimeoutError:
            if sent < len(trickle):
                writer.write(trickle[sent:sent + 1])
                sent += 1
            continue
        except (ConnectionError, ssl.SSLError, OSError):
            return True
        if not data:
            return True
        if data.startswith(b"HTTP/1."):
            counts.responses += 1
    return False


@functools.cache
def _client_context() -> ssl.SSLContext:
    # One context for every connection: building one loads the CA store (slow, and MBs each).
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def _one(mode: str, source: str, args: argparse.Namespace, stop_at: float, counts: Counts) -> bool:
    """One connection in `mode` from `source`; True when the server ended it before the run did."""
    tls_ctx = _client_context() if args.tls and mode in ("trickle", "handshaken", "unauth") else None
    loop = asyncio.get_running_loop()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(args.host, args.port, local_addr=(source, 0), ssl=tls_ctx,
                                    ssl_handshake_timeout=(max(stop_at - loop.time(), 0.1)
                                                           if tls_ctx else None)),
            timeout=max(stop_at - loop.time(), 0.1))
    except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
        counts.connect_failed += 1
        counts.errors[type(exc).__name__] = counts.errors.get(type(exc).__name__, 0) + 1
        return loop.time() < stop_at
    counts.opened += 1
    counts.open_now += 1
    counts.max_open = max(counts.max_open, counts.open_now)
    try:
        trickle = b""
        if mode == "partial":
            writer.write(b"\x16\x03\x01\x02\x00" if args.tls else b"GET /metr")
        elif mode == "trickle":
            writer.write(REQUEST_LINE)
            trickle = TRICKLE_HEADER
        elif mode == "unauth":
            writer.write(REQUEST_LINE + b"\r\n")
        closed = await _hold(reader, writer, trickle, stop_at, counts)
        if closed:
            counts.closed_by_server += 1
        return closed
    finally:
        counts.open_now -= 1
        writer.transport.abort()


async def _slot(index: int, args: argparse.Namespace, stop_at: float, counts: Counts) -> None:
    modes = TLS_MODES if args.tls else PLAIN_MODES
    mode = modes[index % len(modes)]
    source = str(ipaddress.ip_address(args.source) + index % args.spread)
    loop = asyncio.get_running_loop()
    while loop.time() < stop_at:
        if not await _one(mode, source, args, stop_at, counts):
            return
        if not args.reconnect:
            return
        await asyncio.sleep(args.reconnect_delay)


async def flood(args: argparse.Namespace) -> Counts:
    counts = Counts()
    stop_at = asyncio.get_running_loop().time() + args.duration
    await asyncio.gather(*(_slot(i, args, stop_at, counts) for i in range(args.connections)))
    return counts


def _raise_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--source", default="127.0.0.2", help="loopback address the flood comes from")
    parser.add_argument("--spread", type=int, default=1,
                        help="come from this many consecutive addresses from --source on")
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--no-reconnect", dest="reconnect", action="store_false",
                        help="open each connection once (the first probe of issue 19)")
    parser.add_argument("--reconnect-delay", type=float, default=0.0)
    args = parser.parse_args()
    if not 1 <= args.spread <= 250:
        parser.error("--spread must be 1..250")
    last_source = ipaddress.ip_address(args.source) + args.spread - 1
    for address in (args.host, args.source, last_source):
        if not ipaddress.ip_address(address).is_loopback:
            parser.error(f"{address} is not a loopback address: this tool only floods this machine")
    if not 1 <= args.connections <= 5000 or not 0 < args.duration <= 300:
        parser.error("--connections must be 1..5000 and --duration 0..300 s")
    _raise_fd_limit(args.connections + 64)
    started = time.monotonic()
    counts = asyncio.run(flood(args))
    print(json.dumps({**asdict(counts), "seconds": round(time.monotonic() - started, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# -- shared by the test and the bench (imported; nothing below runs in the flooder process) ----

USER, PASSWORD = "prometheus", "scrape-pass-19"
FLOODER = __file__


@dataclass
class ScrapeResult:
    latencies: list[float]  # seconds, successful scrapes only
    failures: list[str]
    attempted: int

    @property
    def ok(self) -> int:
        return len(self.latencies)

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]

    def summary(self) -> str:
        return (f"{self.ok}/{self.attempted} scrapes ok, p50 {self.percentile(0.5) * 1000:.0f} ms, "
                f"p99 {self.percentile(0.99) * 1000:.0f} ms, "
                f"max {max(self.latencies, default=0) * 1000:.0f} ms"
                + (f"; failures: {sorted(set(self.failures))}" if self.failures else ""))


def auth_header() -> dict[str, str]:
    import base64

    return {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}


def start_tls_daemon(exporter_dir: str, workdir, port: int, extra_config: str = ""):
    """`infrapulse run` from `exporter_dir` on 127.0.0.1:`port` with TLS and basic auth; returns
    (Popen, ssl.SSLContext trusting its CA). The caller stops it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import bcrypt

    from infrapulse.simulate.certs import make_test_pki

    workdir = Path(workdir)
    pki = make_test_pki(workdir / "pki")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    web = workdir / "web.yaml"
    web.write_text(f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
                   f"basic_auth_users:\n  {USER}: {hashed}\n")
    config = workdir / "config.yaml"
    config.write_text("interval: 5s\nsources:\n  nvml: {enabled: false}\n  dcgm: {enabled: false}\n"
                      + extra_config)
    log = open(workdir / "daemon.log", "wb")  # noqa: SIM115 (closed with the process by the caller)
    proc = subprocess.Popen(
        [sys.executable, "-m", "infrapulse", "run", "--config", str(config), "--listen", f"127.0.0.1:{port}",
         "--web.config.file", str(web)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": exporter_dir})
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    return proc, ctx


async def wait_ready(port: int, ctx: ssl.SSLContext, proc, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited with {proc.returncode}")
        if (await scrape_once(port, ctx, path="/healthz"))[0]:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError("daemon not ready")


async def scrape_once(port: int, ctx: ssl.SSLContext, path: str = "/metrics",
                      timeout: float = 10.0) -> tuple[bool, float, str]:
    """One authenticated GET on a new connection from 127.0.0.1: (ok, seconds, failure)."""
    import aiohttp

    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        connector = aiohttp.TCPConnector(ssl=ctx, force_close=True, local_addr=("127.0.0.1", 0))
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout),
                                         headers=auth_header()) as session:
            async with session.get(f"https://localhost:{port}{path}") as resp:
                body = await resp.read()
                if resp.status != 200 or (path == "/metrics" and b"infrapulse_build_info" not in body):
                    return False, loop.time() - started, f"http_{resp.status}"
    except asyncio.TimeoutError:
        return False, loop.time() - started, "timeout"
    except (aiohttp.ClientError, OSError) as exc:
        return False, loop.time() - started, type(exc).__name__
    return True, loop.time() - started, ""


async def scrape_during(port: int, ctx: ssl.SSLContext, seconds: float, every: float = 0.5) -> ScrapeResult:
    """Start one scrape every `every` seconds for `seconds` (each on its own connection, each
    with a 10 s timeout, overlapping when slow) and wait for all of them."""
    loop = asyncio.get_running_loop()
    tasks = []
    end = loop.time() + seconds
    while loop.time() < end:
        tasks.append(asyncio.ensure_future(scrape_once(port, ctx)))
        await asyncio.sleep(every)
    result = ScrapeResult([], [], len(tasks))
    for ok, took, failure in await asyncio.gather(*tasks):
        if ok:
            result.latencies.append(took)
        else:
            result.failures.append(failure)
    return result


async def start_flooder(port: int, connections: int, duration: float, reconnect: bool = True,
                        reconnect_delay: float = 0.0, spread: int = 1) -> asyncio.subprocess.Process:
    import sys

    args = [sys.executable, FLOODER, "--port", str(port), "--tls", "--connections", str(connections),
            "--duration", str(duration), "--reconnect-delay", str(reconnect_delay), "--spread", str(spread)]
    if not reconnect:
        args.append("--no-reconnect")
    return await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE)


def raise_fd_limit(wanted: int) -> None:
    """Raise this process's soft RLIMIT_NOFILE to `wanted` (at most the hard limit)."""
    _raise_fd_limit(wanted)
