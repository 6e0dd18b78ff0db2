#!/usr/bin/env python3
"""Authenticated scrapes while a slow-client flood holds the port (issue 19, item 1).

The daemon (`infrapulse run` with TLS and basic auth, from --exporter) runs in one process, the
flood (tests/slow_flooder.py: --connections unauthenticated idle, half-handshake, trickling and
401-then-idle connections from 127.0.0.2, re-opened when closed) in another, and this process
scrapes /metrics from 127.0.0.1 every 0.5 s, each scrape on a new TLS connection with a 10 s
timeout, for the flood's duration (after a 2 s ramp). It prints successful scrapes / attempted
and the latency percentiles (p99: the nearest-rank 99th percentile of the successful ones).

    .venv/bin/python bench/slow_clients.py [--exporter DIR] [--connections 1000] [--duration 20]
                                           [--no-reconnect] [--reconnect-delay 0] [--spread 1]

--exporter points at another tree's exporter/ directory to measure older code the same way
(e.g. a `git archive` of the base commit unpacked under /tmp).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "exporter"))

import slow_flooder  # noqa: E402  (tests/slow_flooder.py)

RAMP_SECONDS = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run(args: argparse.Namespace) -> int:
    slow_flooder.raise_fd_limit(4096)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="infrapulse-slow-clients-") as tmp:
        proc, ctx = slow_flooder.start_tls_daemon(str(args.exporter), tmp, port)
        try:
            await slow_flooder.wait_ready(port, ctx, proc)
            baseline = await slow_flooder.scrape_during(port, ctx, 3.0)
            flood = await slow_flooder.start_flooder(port, args.connections, args.duration + RAMP_SECONDS,
                                                     reconnect=args.reconnect,
                                                     reconnect_delay=args.reconnect_delay,
                                                     spread=args.spread)
            await asyncio.sleep(RAMP_SECONDS)
            result = await slow_flooder.scrape_during(port, ctx, args.duration)
            out, _ = await flood.communicate()
            counts = json.loads(out.decode() or "{}")
            _, _, _ = await slow_flooder.scrape_once(port, ctx)
        finally:
            proc.terminate()
            proc.wait(10)
        print(f"exporter: {args.exporter}")
        sources = "127.0.0.2" if args.spread == 1 else f"{args.spread} addresses from 127.0.0.2"
        reopen = f"re-opened after {args.reconnect_delay:g}s" if args.reconnect else "opened once"
        print(f"flood: {args.connections} connections from {sources} for {args.duration:g}s "
              f"({reopen}): {json.dumps(counts)}")
        print(f"no flood:    {baseline.summary()}")
        print(f"under flood: {result.summary()}")
    return 0 if result.ok == result.attempted else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exporter", type=Path, default=ROOT / "exporter")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--no-reconnect", dest="reconnect", action="store_false")
    parser.add_argument("--reconnect-delay", type=float, default=0.0)
    parser.add_argument("--spread", type=int, default=1,
                        help="flood from this many loopback addresses (127.0.0.2 on), not just one")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
