"""The exposition encoder behind the HTTP server, the integration half of tests/test_exposition.py:
/metrics on loopback serves what prometheus_client writes, gzipped and plain, in each format."""

from __future__ import annotations

import gzip

from prometheus_client.exposition import choose_encoder

from infrapulse.metrics import DaemonState
from test_exposition import catalogue_store, registry_of


async def test_metrics_endpoint_serves_the_encoder_gzipped_and_plain():
    import aiohttp
    from aiohttp.test_utils import TestServer

    from infrapulse.http import make_app

    store = catalogue_store()
    registry = registry_of(store)
    app = make_app(store, DaemonState("host", "node"), registry, render_cache=0.0)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        url = str(server.make_url("/metrics"))
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            for accept in ("", "application/openmetrics-text; version=1.0.0"):
                encoder, content_type = choose_encoder(accept)
                for encoding in ("gzip", "identity"):
                    async with session.get(url, headers={"Accept": accept, "Accept-Encoding": encoding}) as r:
                        raw = await r.read()
                        assert r.headers["Content-Type"] == content_type
                        assert (r.headers.get("Content-Encoding") == "gzip") == (encoding == "gzip")
                    body = gzip.decompress(raw) if encoding == "gzip" else raw
                    assert _without_tasks(body) == _without_tasks(encoder(registry))
    finally:
        await server.close()


def _without_tasks(body: bytes) -> bytes:
    """The body minus the asyncio task count (the server's request task is alive in one)."""
    return b"\n".join(line for line in body.split(b"\n")
                      if not line.startswith(b"infrapulse_exporter_asyncio_tasks "))
