"""Issue 19, item 1: a slow-client flood must not lock Prometheus out.

The daemon runs with TLS and basic auth in its own process; a separate process
(tests/slow_flooder.py) keeps 1000 unauthenticated connections open from 127.0.0.2 (idle, half a
TLS record, trickling headers, handshaken and silent, 401 and held), re-opening each one the
moment the daemon closes it, for FLOOD_SECONDS. Meanwhile this process scrapes /metrics from
127.0.0.1 every 0.5 s, each time on a new TLS connection with a 10 s timeout: every scrape must
succeed. (Before the guard, 0 of 40 did: bench/slow_clients.py, figures in docs/security.md.)
"""

from __future__ import annotations

import asyncio
import json

import slow_flooder as flood_kit
from conftest import ROOT, free_port, stop_process
from helpers import parse_exposition, samples_of

CONNECTIONS = 1000
RAMP_SECONDS = 2.0
SCRAPE_SECONDS = 10.0
FLOOD_SECONDS = RAMP_SECONDS + SCRAPE_SECONDS + 1.0


async def _closed_counts(port: int, ctx) -> dict[str, float]:
    import aiohttp

    async with aiohttp.ClientSession(headers=flood_kit.auth_header()) as session:
        async with session.get(f"https://localhost:{port}/metrics", ssl=ctx) as resp:
            values = parse_exposition(await resp.text())
    return {dict(labels)["reason"]: value
            for labels, value in samples_of(values, "infrapulse_http_connections_closed_total").items()}


async def test_every_scrape_succeeds_during_a_slow_client_flood(tmp_path):
    flood_kit.raise_fd_limit(4096)
    port = free_port()
    proc, ctx = flood_kit.start_tls_daemon(str(ROOT / "exporter"), tmp_path, port)
    try:
        await flood_kit.wait_ready(port, ctx, proc)
        flood = await flood_kit.start_flooder(port, CONNECTIONS, FLOOD_SECONDS)
        try:
            await asyncio.sleep(RAMP_SECONDS)
            result = await flood_kit.scrape_during(port, ctx, SCRAPE_SECONDS)
            out, _ = await asyncio.wait_for(flood.communicate(), FLOOD_SECONDS + 30)
        finally:
            if flood.returncode is None:
                flood.kill()
                await flood.wait()
        counts = json.loads(out)
        closed = await _closed_counts(port, ctx)
    finally:
        stop_process(proc)
    assert result.attempted >= 18
    assert result.ok == result.attempted, result.summary()
    assert max(result.latencies) < 10.0
    # The flood was real: all 1000 were held or re-opened, and the daemon shed them.
    per_client = 64  # http.max_connections_per_client's default
    assert (counts["max_open"] >= per_client
            and counts["opened"] + counts["connect_failed"] >= CONNECTIONS), counts
    assert closed["client_limit"] >= CONNECTIONS - per_client, closed
    assert closed["handshake_timeout"] + closed["header_timeout"] >= 1, closed
    print(f"\n{CONNECTIONS} slow connections from 127.0.0.2: {result.summary()}; flooder {counts}")


async def test_scrape_helper_reports_a_refused_scrape(tmp_path):
    """The harness can fail: a scrape of a port nobody listens on is counted as failed."""
    import ssl

    ok, _, failure = await flood_kit.scrape_once(free_port(), ssl.create_default_context(), timeout=2.0)
    assert ok is False and failure
