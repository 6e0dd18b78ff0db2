"""Issue 19, item 4: every page of the demo works under the Content-Security-Policy, checked in
headless Chromium: zero violations, counted three ways:

* the reports Chromium POSTs to the policy's report-uri (`http.csp_report_uri`), here a
  collector this test runs and reads;
* `securitypolicyviolation` events, recorded in each page by a DevTools-injected listener;
* the browser's own console messages about the policy (DevTools Log domain).

The pages: the status page, the JSON APIs, /metrics, the stylesheet, a 404; the status page
again with each of the demo's scenarios switched on through its API (its detractors and
capped score render then) and off; the inspection pages, with no report yet and with one
started on demand. A control page served with the same policy and inline style and script
must be reported by all three, so the zero above is not a deaf collector.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
from aiohttp import web

from cdp import Browser
from conftest import free_port
from infrapulse.daemon import Daemon
from infrapulse.simulate import demo
from infrapulse.simulate.nvml_fake import open_fake
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources.gpu.nvml import OPEN_FAKE_KEY

LISTENER = ("window.__csp = [];"
            "document.addEventListener('securitypolicyviolation', e => "
            "window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.documentURI));")
PAGES = ("/", "/api/v1/health", "/api/v1/sources", "/api/v1/scenarios", "/metrics", "/healthz",
         "/static/health.css", "/no-such-page", "/inspections", "/inspections/latest",
         "/static/inspection.css", "/api/v1/inspections")


class Collector:
    """The report-uri endpoint, plus the control page with inline style and script."""

    def __init__(self) -> None:
        self.reports: list[dict] = []
        self.policy = ""

    async def report(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        self.reports.append(body.get("csp-report", body))
        return web.Response(status=204)

    async def control(self, request: web.Request) -> web.Response:
        page = ('<!doctype html><html><head><style>body{color:red}</style></head>'
                '<body><p style="color:blue">inline</p>'
                '<script>document.title = "ran";</script></body></html>')
        return web.Response(text=page, content_type="text/html",
                            headers={"Content-Security-Policy": self.policy})

    def from_origin(self, origin: str) -> list[dict]:
        return [r for r in self.reports if str(r.get("document-uri", "")).startswith(origin)]


async def _browser_violations(browser: Browser, origin: str) -> list[str]:
    console = [e["params"]["entry"]["text"] for e in browser.events
               if e.get("method") == "Log.entryAdded"
               and "Content Security Policy" in e["params"]["entry"]["text"]
               and origin in json.dumps(e["params"]["entry"])]
    return console


async def test_no_page_of_the_demo_violates_its_csp_in_chromium(tmp_path, short_workdir):
    collector = Collector()
    app = web.Application()
    app.router.add_post("/csp", collector.report)
    app.router.add_get("/control", collector.control)
    runner = web.AppRunner(app)
    await runner.setup()
    collector_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", collector_port).start()

    workdir = short_workdir
    board = ScenarioBoard()
    ctx = demo.DemoContext(workdir=workdir, scenarios=board)
    parts = await demo.start_parts(ctx)
    port = free_port()
    cfg = demo.demo_config(parts, f"127.0.0.1:{port}", "1s")
    cfg.http.csp_report_uri = f"http://127.0.0.1:{collector_port}/csp"
    # No automatic inspection (the scenarios would leave one pending): the page comes from a POST.
    cfg.inspect.allow_unauthenticated = True
    cfg.inspect.on_demand_min_interval = 0.0
    cfg.inspect.score_below = 0.0
    daemon = Daemon(cfg, hostname=ctx.hostname, source_options={OPEN_FAKE_KEY: open_fake})
    daemon.add_service(demo.scenario_service(board))
    browser = Browser()
    origin = f"http://127.0.0.1:{port}"
    seen: dict[str, list[str]] = {}
    try:
        await daemon.start()
        await browser.start(tmp_path / "chromium-profile")
        await browser.page("Page.addScriptToEvaluateOnNewDocument", {"source": LISTENER})
        async with aiohttp.ClientSession() as session:
            async with session.get(origin + "/") as resp:
                collector.policy = resp.headers["Content-Security-Policy"]
            for path in PAGES:
                await browser.navigate(origin + path)
                seen[path] = await browser.evaluate("window.__csp")
            scenarios = sorted(demo.known_scenarios())
            for name in scenarios:
                async with session.post(origin + "/api/v1/scenarios",
                                        json={"name": name, "active": True}) as resp:
                    assert resp.status == 200, await resp.text()
                await asyncio.sleep(1.2)  # a health tick renders the scenario's detractors
                await browser.navigate(origin + "/")
                seen[f"/ with {name}"] = await browser.evaluate("window.__csp")
                async with session.post(origin + "/api/v1/scenarios",
                                        json={"name": name, "active": False}) as resp:
                    assert resp.status == 200
            page_text = await browser.evaluate("document.body.innerText")
            async with session.post(origin + "/api/v1/inspections", json={}) as resp:
                assert resp.status == 200, await resp.text()
                inspection = (await resp.json())["id"]
            await browser.navigate(f"{origin}/inspections/{inspection}")
            seen["/inspections/<id>"] = await browser.evaluate("window.__csp")
            inspection_text = await browser.evaluate("document.body.innerText")
            # The control: the same policy with inline style and script is reported.
            control_origin = f"http://127.0.0.1:{collector_port}"
            await browser.navigate(control_origin + "/control")
            control_seen = await browser.evaluate("window.__csp")
            title = await browser.evaluate("document.title")
            for _ in range(100):  # reports are sent after the fact; the control's come last
                if collector.from_origin(control_origin):
                    break
                await asyncio.sleep(0.1)
    finally:
        await browser.close()
        await daemon.stop()
        await demo.close_parts(parts)
        await runner.cleanup()

    assert len(scenarios) >= 5 and "infrapulse health" in page_text
    assert f"Inspection {inspection}" in inspection_text and "verdict:" in inspection_text
    assert title != "ran" and len(control_seen) >= 2, control_seen  # inline script blocked, style reported
    assert collector.from_origin(control_origin), "Chromium sent no CSP report for the control page"
    assert await _browser_violations(browser, control_origin)
    assert {path: found for path, found in seen.items() if found} == {}
    assert collector.from_origin(origin) == []
    assert await _browser_violations(browser, origin) == []
    assert "'unsafe-inline'" not in collector.policy and "report-uri" in collector.policy
