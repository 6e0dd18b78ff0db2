#!/usr/bin/env python3
"""Concurrent scrapers on a fabric-sized /metrics: the daemon's HTTP app over ~332k series.

A server process holds the store of bench/render.py (`--switches` switches x 64 ports of the
nvidia-cumulus dialect, taken in through the gnmi source's SwitchState; 45 switches give ~332k
series), serves the daemon's own aiohttp app (http.make_app over metrics.make_registry, the
`--render-cache` the daemon would use) and applies a fresh sample to every switch every 10 s in
place, as streamed gNMI updates land (no publish: the render cache's window applies). This
process runs `--scrapers` concurrent clients (bench/load_soak.py's loop: aiohttp, gzip asked)
for `--seconds` and reports scrapes, errors, p50/p99 latency, the server's CPU from /proc over
the window and its RSS. The clients take the gzip body as it comes, undecompressed: 50 clients
inflating 35 MB each in this one Python process would measure the clients, not the server.
The server is set apart from gRPC ingest on purpose: this is the render/serve path.

Run: PYTHONPATH=exporter python bench/scrape_load.py [--scrapers 50] [--seconds 60]
     [--render-cache 1s] [--exporter DIR]   (DIR: another tree's exporter/, e.g. a base commit)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import aiohttp  # noqa: E402

import load_soak  # noqa: E402
from load_soak import free_port, load, proc_cpu_seconds, proc_rss_mib  # noqa: E402


async def raw_scrape(session: aiohttp.ClientSession, url: str) -> bytes:
    async with session.get(url, headers={"Accept-Encoding": "gzip"}, auto_decompress=False) as resp:
        resp.raise_for_status()
        return await resp.read()


load_soak.scrape = raw_scrape  # load() scrapes through this: bytes as sent (gzip)

SERVER = """
import asyncio, sys
sys.argv = ["render", "--exporter", {exporter!r}]  # render.py puts that tree first on sys.path
sys.path.insert(0, {bench!r})
import render
from aiohttp import web
from infrapulse.http import make_app
from infrapulse.metrics import DaemonState, make_registry

store, sample = render.fabric_store({switches})
state = DaemonState("bench", "fabric")
app = make_app(store, state, make_registry(store, state), render_cache={ttl})

async def resample():
    while True:
        await asyncio.sleep(10)
        sample()

async def main():
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", {port}).start()
    print("series", store.series_count(), flush=True)
    await resample()

asyncio.run(main())
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, default=45)
    parser.add_argument("--scrapers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--render-cache", default="1s", help="seconds, e.g. 1s (the default) or 0s")
    parser.add_argument("--exporter", default=str(BENCH.parent / "exporter"))
    args = parser.parse_args()
    port = free_port()
    exporter = str(Path(args.exporter).resolve())
    ttl = float(args.render_cache.removesuffix("s"))
    code = SERVER.format(bench=str(BENCH), exporter=exporter, switches=args.switches, ttl=ttl, port=port)
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": exporter})
    try:
        line = server.stdout.readline() if server.stdout else ""
        if not line.startswith("series"):
            raise SystemExit(f"server did not start: {line!r}")
        series = int(line.split()[1])
        time.sleep(2)
        cpu0, started = proc_cpu_seconds(server.pid), time.monotonic()
        result = asyncio.run(load(f"http://127.0.0.1:{port}", args.scrapers, args.seconds))
        # the window runs until the last scrape in flight at the deadline is answered
        cpu, window = proc_cpu_seconds(server.pid) - cpu0, time.monotonic() - started
        print(f"{args.scrapers} concurrent scrapers x {args.seconds:.0f}s on {series:,} series "
              f"(render_cache {args.render_cache}, gzip; {exporter}): {result['scrapes']} scrapes, "
              f"{result['errors']} errors, p50 {result['p50_s']:.2f}s, p99 {result['p99_s']:.2f}s, "
              f"gzip body {result['body_mb']:.1f} MB; server CPU {cpu / window * 100:.0f}% of a core "
              f"over {window:.0f}s, "
              f"RSS {proc_rss_mib(server.pid):.0f} MiB; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs", flush=True)
        if result["errors"]:
            print(f"  first errors: {result['first_errors']}")
        return 0
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
