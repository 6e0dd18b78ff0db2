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
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import exposition

from . import __version__
from .exposition import gzip_chunks, render_chunks
from .inventory import inventory
from .metrics import DaemonState
from .store import SourceStatus, Store

STORE_KEY = web.AppKey("store", Store)
STATE_KEY = web.AppKey("state", DaemonState)
REGISTRY_KEY = web.AppKey("registry", object)
Middleware = Callable[[web.Request, Callable[[web.Request], Awaitable[web.StreamResponse]]],
                      Awaitable[web.StreamResponse]]


class RenderCache:
    """The last encoded /metrics body per format, reused for up to `ttl` seconds while the
    store's generation is unchanged: a poll that publishes new data always shows at once; only
    streamed in-place updates (gNMI) can be up to `ttl` old.

    A gzip scrape (Prometheus always asks for gzip) compresses the render as it is produced, at
    level 1, and only the compressed body is kept: a fabric's 35 MB of text is never held whole.
    Scrapes within the window share it; a plain one in the window gets it decompressed."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        # content type -> (rendered at, generation, plain body or None, gzip body or None)
        self._entries: dict[str, tuple[float, int, bytes | None, bytes | None]] = {}

    def get(self, accept: str | None, gzipped: bool, generation: int,
            render: Callable[[Any], Iterable[bytes]]) -> tuple[bytes, str]:
        encoder, content_type = exposition.choose_encoder(accept or "")
        hit = self._entries.get(content_type)
        if hit is not None and hit[1] == generation and time.monotonic() - hit[0] < self.ttl:
            rendered_at, _, plain, compressed = hit
        else:
            rendered_at, plain, compressed = time.monotonic(), None, None
            if gzipped:
                compressed = gzip_chunks(render(encoder))
            else:
                plain = b"".join(render(encoder))
        if gzipped and compressed is None:
            compressed = gzip.compress(plain or b"", compresslevel=1)
        if not gzipped and plain is None:
            plain = gzip.decompress(compressed or b"")
        if self.ttl > 0:
            self._entries[content_type] = (rendered_at, generation, plain, compressed)
        else:
            self._entries.clear()
        body = compressed if gzipped else plain
        assert body is not None
        return body, content_type


RENDER_CACHE_KEY = web.AppKey("render_cache", RenderCache)


async def metrics_handler(request: web.Request) -> web.Response:
    registry = request.app[REGISTRY_KEY]
    gzipped = "gzip" in request.headers.get("Accept-Encoding", "")
    body, content_type = request.app[RENDER_CACHE_KEY].get(
        request.headers.get("Accept"), gzipped, request.app[STORE_KEY].generation,
        lambda encoder: render_chunks(registry, encoder))
    headers = {"Content-Type": content_type}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers)


async def healthz_handler(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def coverage_summary(st: SourceStatus) -> dict[str, Any] | None:
    """How many of an instance's mappings yield nothing, and one unmapped example (None when the
    source reports no mappings)."""
    if not st.coverage and not st.series_dropped:
        return None
    empty = sorted(m for m, cov in st.coverage.items() if cov.series == 0 and not cov.superseded)
    unmapped = [(m, cov) for m, cov in sorted(st.coverage.items()) if cov.unmapped]
    return {
        "mappings": len(st.coverage),
        "empty": empty,
        "superseded": sorted(m for m, cov in st.coverage.items() if cov.superseded),
        "unmapped_total": sum(cov.unmapped for _, cov in unmapped),
        "unmapped_example": ({"mapping": unmapped[0][0], "sample": unmapped[0][1].sample}
                             if unmapped else None),
        "series_dropped": st.series_dropped,
    }


def sources_status(store: Store) -> list[dict[str, Any]]:
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
    store = request.app[STORE_KEY]
    return web.json_response({"sources": sources_status(store), "inventory": inventory(store)},
                             dumps=lambda o: json.dumps(o, indent=2))


LANDING_CSS = """body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;text-align:left}
.up{color:#2e7d32}.down{color:#c62828}
"""


async def index_handler(request: web.Request) -> web.Response:
    store, state = request.app[STORE_KEY], request.app[STATE_KEY]
    rows = []
    for st in sources_status(store):
        state_name = "up" if st["up"] else "down"
        age = f"{time.time() - st['last_success']:.0f}s ago" if st["last_success"] else "never"
        rows.append(
            f"<tr><td>{html.escape(st['source'])}</td><td>{html.escape(st['target'])}</td>"
            f"<td class='{state_name}'>{state_name}</td>"
            f"<td>{html.escape(st['reason'])}</td><td>{html.escape(st['message'])}</td><td>{age}</td></tr>")
    extra = "".join(f"<li><a href='{html.escape(href)}'>{html.escape(text)}</a></li>"
                    for href, text in request.app.get(LINKS_KEY, []))
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>infrapulse</title>
<link rel="stylesheet" href="/static/infrapulse.css"></head>
<body><h1>infrapulse {html.escape(__version__)}</h1>
<p>host <b>{html.escape(state.hostname)}</b>, role <b>{html.escape(state.role)}</b>,
{store.series_count()} series held.</p>
<ul><li><a href="/metrics">/metrics</a></li><li><a href="/api/v1/sources">/api/v1/sources</a></li>{extra}</ul>
<h2>Sources</h2><table><tr><th>source</th><th>target</th><th>state</th><th>reason</th><th>detail</th>
<th>last success</th></tr>{''.join(rows)}</table></body></html>"""
    return web.Response(text=page, content_type="text/html")


async def landing_css_handler(request: web.Request) -> web.Response:
    return web.Response(text=LANDING_CSS, content_type="text/css")


LINKS_KEY = web.AppKey("links", list)
# The demo's scenario board as the status page shows it: a callable returning
# {"active": [names], "known": {name: description}}. Only the demo daemon sets it.
SCENARIOS_KEY = web.AppKey("scenarios", object)
# The Content-Security-Policy every response gets (the status page widens it for its script).
CSP_KEY = web.AppKey("csp", str)


def make_app(store: Store, state: DaemonState, registry: object,
             extensions: Sequence[Callable[[web.Application], None]] = (),
             middlewares: Sequence[Middleware] = (), render_cache: float = 0.0,
             csp_report_uri: str = "") -> web.Application:
    """Build the aiohttp app; `extensions` add routes (the health API) without touching this module."""
    chain: list[Any] = [*middlewares, api_query_middleware]  # aiohttp's own Middleware type varies by version
    app = web.Application(middlewares=chain, client_max_size=MAX_BODY_BYTES)
    app[STORE_KEY] = store
    app[STATE_KEY] = state
    app[REGISTRY_KEY] = registry
    app[RENDER_CACHE_KEY] = RenderCache(render_cache)
    app[LINKS_KEY] = []
    app[API_QUERY_KEY] = {}
    app[CSP_KEY] = content_security_policy(csp_report_uri)
    app.on_response_prepare.append(security_headers(csp_report_uri))
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz_handler)
    app.router.add_get("/api/v1/sources", sources_handler)
    app.router.add_get("/static/infrapulse.css", landing_css_handler)
    for extend in extensions:
        extend(app)
    # The health service registers its status page at "/"; this landing page is the fallback.
    if not any(r.method == "GET" and r.resource is not None and r.resource.canonical == "/"
               for r in app.router.routes()):
        app.router.add_get("/", index_handler)
    return app


# -- response headers ---------------------------------------------------------------------------

MAX_BODY_BYTES = 64 * 1024

# Every response: no MIME sniffing, never framed, no Referer to other sites. The policy allows
# what the pages use (same-origin stylesheets, inline SVG) and nothing else: no script at all.
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
                    "Referrer-Policy": "no-referrer"}
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")


def content_security_policy(report_uri: str = "") -> str:
    return f"{CSP}; report-uri {report_uri}" if report_uri else CSP


def with_own_scripts(policy: str) -> str:
    """`policy` that also runs scripts served by this origin (never inline ones) and lets them
    call its own API: the demo status page's scenario toggles, and nothing else, use it."""
    scripts = "default-src 'none'; script-src 'self'; connect-src 'self';"
    return policy.replace("default-src 'none';", scripts, 1)


def security_headers(report_uri: str = "") -> Callable[[web.Request, web.StreamResponse], Awaitable[None]]:
    """An on_response_prepare hook that sets SECURITY_HEADERS and the CSP on every response the
    app sends (handlers' own, 401s and 404s alike)."""
    headers = {**SECURITY_HEADERS, "Content-Security-Policy": content_security_policy(report_uri)}

    async def hook(request: web.Request, response: web.StreamResponse) -> None:
        for name, value in headers.items():
            response.headers.setdefault(name, value)

    return hook


# -- strict JSON input ---------------------------------------------------------------------------

API_QUERY_KEY = web.AppKey("api_query", dict)  # path -> the query parameters that API accepts


def json_error(status: int, message: str) -> web.HTTPException:
    """An HTTP error whose body is {"error": message}, for the JSON APIs to raise."""
    classes: dict[int, type[web.HTTPException]] = {
        400: web.HTTPBadRequest, 415: web.HTTPUnsupportedMediaType, 404: web.HTTPNotFound}
    return classes[status](text=json.dumps({"error": message}), content_type="application/json")


@web.middleware
async def api_query_middleware(request: web.Request,
                               handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                               ) -> web.StreamResponse:
    """/api/ endpoints take no query parameters unless they declare them in API_QUERY_KEY: an
    unknown one is a 400, not silently ignored."""
    if request.path.startswith("/api/") and request.query:
        allowed = request.app[API_QUERY_KEY].get(request.path, frozenset())
        unknown = sorted(set(request.query) - set(allowed))
        if unknown:
            raise json_error(400, f"unknown query parameter {unknown[0]!r}; this endpoint takes "
                                  + (", ".join(sorted(allowed)) or "none"))
    return await handler(request)


@dataclass(frozen=True)
class JsonField:
    """One member of a JSON object body: its accepted types and whether it must be present."""

    types: tuple[type, ...]
    required: bool = False

    def type_name(self) -> str:
        names = {bool: "a boolean", str: "a string", int: "a number", float: "a number", type(None): "null",
                 dict: "an object", list: "an array"}
        return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in self.types))

    def accepts(self, value: object) -> bool:
        if isinstance(value, bool) and bool not in self.types:  # JSON true is not the number 1
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return isinstance(value, self.types)


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


class JsonInputError(ValueError):
    """A JSON body that is not what the endpoint takes; the message says why."""


def parse_json_object(raw: bytes, fields: dict[str, JsonField]) -> dict[str, object]:
    """`raw` as a JSON object with only `fields`, each of its type, or JsonInputError."""
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise JsonInputError(f"invalid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise JsonInputError(f"expected a JSON object, got {type(body).__name__}")
    for key in body:
        if key not in fields:
            raise JsonInputError(f"unknown field {key!r}; expected {', '.join(sorted(fields))}")
    for key, field in fields.items():
        if key not in body:
            if field.required:
                raise JsonInputError(f"missing field {key!r}")
            continue
        if not field.accepts(body[key]):
            raise JsonInputError(f"field {key!r} must be {field.type_name()}, "
                                 f"got {json.dumps(body[key])[:80]}")
    return body


async def read_json_object(request: web.Request, fields: dict[str, JsonField]) -> dict[str, object]:
    """The request body through parse_json_object. Anything else is an HTTP error with a
    message: 415 unless Content-Type is application/json (so a cross-site HTML form cannot post
    it), 400 for what parse_json_object refuses, 413 over MAX_BODY_BYTES."""
    if request.content_type != "application/json":
        raise json_error(415, f"Content-Type must be application/json, got {request.content_type!r}")
    try:
        return parse_json_object(await request.read(), fields)
    except JsonInputError as exc:
        raise json_error(400, str(exc)) from None
