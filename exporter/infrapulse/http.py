"""The HTTP face of the daemon (aiohttp): /metrics, /healthz, /api/v1/sources and a landing page.

/metrics is rendered on the event loop from the store, which sources only ever replace
whole, so a scrape never waits for a source and concurrent scrapes see consistent data.
Scrapes that arrive within `http.render_cache` of a render (HA Prometheus pairs, a burst of
scrapers) share its bytes instead of rendering a large fabric again.
"""

from __future__ import annotations

import gzip
import html
import json
import time
from collections.abc import Callable, Sequence

from aiohttp import web
from prometheus_client import exposition

from . import __version__
from .metrics import DaemonState
from .store import SourceStatus, Store

STORE_KEY = web.AppKey("store", Store)
STATE_KEY = web.AppKey("state", DaemonState)
REGISTRY_KEY = web.AppKey("registry", object)


class RenderCache:
    """The last encoded /metrics body per (format, compression), reused for up to `ttl` seconds
    while the store's generation is unchanged: a poll that publishes new data always shows at
    once; only streamed in-place updates (gNMI) can be up to `ttl` old."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[tuple[str, bool], tuple[float, int, bytes, str]] = {}

    def get(self, accept: str | None, gzipped: bool, generation: int, render) -> tuple[bytes, str]:
        encoder, content_type = exposition.choose_encoder(accept or "")
        key = (content_type, gzipped)
        hit = self._entries.get(key)
        if hit is not None and hit[1] == generation and time.monotonic() - hit[0] < self.ttl:
            return hit[2], hit[3]
        body = render(encoder)
        if gzipped:
            body = gzip.compress(body, compresslevel=1)
        if self.ttl > 0:
            self._entries[key] = (time.monotonic(), generation, body, content_type)
        return body, content_type


RENDER_CACHE_KEY = web.AppKey("render_cache", RenderCache)


async def metrics_handler(request: web.Request) -> web.Response:
    registry = request.app[REGISTRY_KEY]
    gzipped = "gzip" in request.headers.get("Accept-Encoding", "")
    body, content_type = request.app[RENDER_CACHE_KEY].get(
        request.headers.get("Accept"), gzipped, request.app[STORE_KEY].generation,
        lambda encoder: encoder(registry))
    headers = {"Content-Type": content_type}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers)


async def healthz_handler(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def coverage_summary(st: SourceStatus) -> dict | None:
    """How many of an instance's mappings yield nothing, and one unmapped example (None when the
    source reports no mappings)."""
    if not st.coverage and not st.series_dropped:
        return None
    empty = sorted(m for m, cov in st.coverage.items() if cov.series == 0)
    unmapped = [(m, cov) for m, cov in sorted(st.coverage.items()) if cov.unmapped]
    return {
        "mappings": len(st.coverage),
        "empty": empty,
        "unmapped_total": sum(cov.unmapped for _, cov in unmapped),
        "unmapped_example": ({"mapping": unmapped[0][0], "sample": unmapped[0][1].sample}
                             if unmapped else None),
        "series_dropped": st.series_dropped,
    }


def sources_status(store: Store) -> list[dict]:
    out = []
    for st in sorted(store.status.values(), key=lambda s: (s.source, s.target)):
        out.append({
            "source": st.source, "target": st.target, "up": st.up, "reason": st.reason,
            "message": st.message, "last_success": st.last_success or None,
            "collect_duration_seconds": round(st.collect_duration, 6), "errors": st.errors,
            "skipped": st.partial_errors,
            "coverage": coverage_summary(st),
        })
    return out


async def sources_handler(request: web.Request) -> web.Response:
    return web.json_response({"sources": sources_status(request.app[STORE_KEY])},
                             dumps=lambda o: json.dumps(o, indent=2))


async def index_handler(request: web.Request) -> web.Response:
    store, state = request.app[STORE_KEY], request.app[STATE_KEY]
    rows = []
    for st in sources_status(store):
        color = "#2e7d32" if st["up"] else "#c62828"
        age = f"{time.time() - st['last_success']:.0f}s ago" if st["last_success"] else "never"
        rows.append(
            f"<tr><td>{html.escape(st['source'])}</td><td>{html.escape(st['target'])}</td>"
            f"<td style='color:{color}'>{'up' if st['up'] else 'down'}</td>"
            f"<td>{html.escape(st['reason'])}</td><td>{html.escape(st['message'])}</td><td>{age}</td></tr>")
    extra = "".join(f"<li><a href='{href}'>{html.escape(text)}</a></li>"
                    for href, text in request.app.get(LINKS_KEY, []))
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>infrapulse</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:left}}</style></head>
<body><h1>infrapulse {html.escape(__version__)}</h1>
<p>host <b>{html.escape(state.hostname)}</b>, role <b>{html.escape(state.role)}</b>,
{store.series_count()} series held.</p>
<ul><li><a href="/metrics">/metrics</a></li><li><a href="/api/v1/sources">/api/v1/sources</a></li>{extra}</ul>
<h2>Sources</h2><table><tr><th>source</th><th>target</th><th>state</th><th>reason</th><th>detail</th>
<th>last success</th></tr>{''.join(rows)}</table></body></html>"""
    return web.Response(text=page, content_type="text/html")


LINKS_KEY = web.AppKey("links", list)


def make_app(store: Store, state: DaemonState, registry,
             extensions: Sequence[Callable[[web.Application], None]] = (),
             middlewares=(), render_cache: float = 0.0) -> web.Application:
    """Build the aiohttp app; `extensions` add routes (the health API) without touching this module."""
    app = web.Application(middlewares=list(middlewares), client_max_size=64 * 1024)
    app[STORE_KEY] = store
    app[STATE_KEY] = state
    app[REGISTRY_KEY] = registry
    app[RENDER_CACHE_KEY] = RenderCache(render_cache)
    app[LINKS_KEY] = []
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz_handler)
    app.router.add_get("/api/v1/sources", sources_handler)
    for extend in extensions:
        extend(app)
    # The health service registers its status page at "/"; this landing page is the fallback.
    if not any(r.method == "GET" and r.resource is not None and r.resource.canonical == "/"
               for r in app.router.routes()):
        app.router.add_get("/", index_handler)
    return app
