"""HTTP: the reports as JSON and HTML, and the authenticated POST that starts one.

    GET  /api/v1/inspections            newest first: id, time, trigger kind, verdict
    GET  /api/v1/inspections/latest     the newest report (404 when there is none)
    GET  /api/v1/inspections/<id>       one report
    POST /api/v1/inspections            run one now (application/json body `{}`); 200 with the report
    GET  /inspections, /inspections/latest, /inspections/<id>   the same as pages

GETs are read-only, guarded like /api/v1/health by the web config. The POST also needs a caller
the web config's basic auth admitted (403 without one, unless inspect.allow_unauthenticated),
and answers 409 while one is pending or running, 429 within on_demand_min_interval.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web

from ..http import LINKS_KEY, JsonField, json_error, read_json_object
from ..webconfig import BASIC_AUTH_USER
from . import page
from .config import InspectSettings
from .reports import ID_PATTERN, ReportStore
from .trigger import Refused


class Inspections(Protocol):
    """What the routes read of the inspection service (service.py implements it)."""

    reports: ReportStore
    hostname: str
    running: bool
    config: InspectSettings

    @property
    def pending(self) -> object | None: ...

    async def on_demand(self, now: float | None = None) -> dict[str, Any]: ...

POST_FIELDS: dict[str, JsonField] = {}  # the body is an empty object: nothing a caller can inject


def summary(report: dict[str, Any]) -> dict[str, Any]:
    return {"id": report["id"], "timestamp": report["timestamp"], "trigger": report["trigger"]["kind"],
            "verdict": report["verdict"], "url": f"/api/v1/inspections/{report['id']}",
            "page": f"/inspections/{report['id']}"}


def _json(body: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers, dumps=lambda o: json.dumps(o, indent=2))


def routes(service: Inspections) -> Callable[[web.Application], None]:
    def find(request: web.Request) -> dict[str, Any]:
        ident = request.match_info.get("id", "latest")
        if ident == "latest":
            report = service.reports.latest()
            if report is None:
                raise json_error(404, "no inspection yet")
            return report
        report = service.reports.get(ident) if ID_PATTERN.match(ident) else None
        if report is None:
            raise json_error(404, f"no inspection {ident!r} (kept: the last {service.config.keep})")
        return report

    async def list_json(request: web.Request) -> web.Response:
        return _json({"host": service.hostname, "running": service.running,
                      "pending": service.pending is not None,
                      "inspections": [summary(r) for r in service.reports.newest_first()]})

    async def one_json(request: web.Request) -> web.Response:
        return _json(find(request))

    async def start(request: web.Request) -> web.Response:
        if request.get(BASIC_AUTH_USER) is None and not service.config.allow_unauthenticated:
            return _json({"error": "starting an inspection needs basic auth (basic_auth_users in the web "
                                   "config) or inspect.allow_unauthenticated"}, 403)
        await read_json_object(request, POST_FIELDS)
        try:
            report = await service.on_demand()
        except Refused as exc:
            headers = {"Retry-After": str(max(math.ceil(exc.retry_after), 1))} if exc.status == 429 else None
            return _json({"error": str(exc)}, exc.status, headers)
        return _json(report)

    async def list_page(request: web.Request) -> web.Response:
        return web.Response(text=page.render_list(service.hostname, service.reports.newest_first()),
                            content_type="text/html")

    async def one_page(request: web.Request) -> web.Response:
        try:
            report = find(request)
        except web.HTTPNotFound:
            return web.Response(status=404, text=page.render_missing(service.hostname),
                                content_type="text/html")
        return web.Response(text=page.render(report), content_type="text/html")

    async def stylesheet(request: web.Request) -> web.Response:
        return web.Response(text=page.stylesheet(), content_type="text/css")

    def extend(app: web.Application) -> None:
        app.router.add_get("/api/v1/inspections", list_json)
        app.router.add_post("/api/v1/inspections", start)
        app.router.add_get("/api/v1/inspections/latest", one_json)
        app.router.add_get("/api/v1/inspections/{id}", one_json)
        app.router.add_get("/inspections", list_page)
        app.router.add_get("/inspections/latest", one_page)
        app.router.add_get("/inspections/{id}", one_page)
        app.router.add_get(page.STYLESHEET, stylesheet)
        app[LINKS_KEY].append(("/inspections/latest", "latest inspection"))

    return extend
