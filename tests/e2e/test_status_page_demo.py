"""Issue 18: the demo's status page switches scenarios, in headless Chromium, under the CSP.

The toggles exist on the demo daemon only (the status page of a real one has no script at all,
see test_health_page.py). A click runs /static/scenarios.js — a same-origin script the demo
page's policy allows, never an inline one — which POSTs the scenarios API; the board changes,
the page reloads and shows the scenario running; a second click stops it. No policy violation
on the way (counted in the page, as in test_csp_chromium.py)."""

from __future__ import annotations

import asyncio

import aiohttp

from cdp import Browser
from conftest import free_port
from infrapulse.daemon import Daemon
from infrapulse.simulate import demo
from infrapulse.simulate.nvml_fake import open_fake
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources.gpu.nvml import OPEN_FAKE_KEY

LISTENER = ("window.__csp = [];"
            "document.addEventListener('securitypolicyviolation', e => "
            "window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
BUTTON = "document.querySelector('button.scenario[data-scenario=\"pfc-storm\"]')"


async def _until(predicate, what, timeout: float = 15.0) -> None:
    """Wait for `predicate`; `what` (a string, or a callable giving one) names it on timeout."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        await asyncio.sleep(0.05)


async def test_demo_page_toggles_scenarios_in_chromium(tmp_path, short_workdir):
    board = ScenarioBoard()
    ctx = demo.DemoContext(workdir=short_workdir, scenarios=board)
    parts = await demo.start_parts(ctx)
    port = free_port()
    daemon = Daemon(demo.demo_config(parts, f"127.0.0.1:{port}", "1s"), hostname=ctx.hostname,
                    source_options={OPEN_FAKE_KEY: open_fake})
    daemon.add_service(demo.scenario_service(board))
    browser = Browser()
    origin = f"http://127.0.0.1:{port}"
    try:
        await daemon.start()
        async with aiohttp.ClientSession() as session:
            async with session.get(origin + "/") as resp:
                policy = resp.headers["Content-Security-Policy"]
            async with session.get(origin + "/static/scenarios.js") as resp:
                script_type = resp.content_type
        await browser.start(tmp_path / "chromium-profile")
        await browser.page("Page.addScriptToEvaluateOnNewDocument", {"source": LISTENER})
        await browser.navigate(origin + "/")
        names = await browser.evaluate("[...document.querySelectorAll('button.scenario')]"
                                       ".map(b => b.dataset.scenario)")
        before = await browser.evaluate(f"[{BUTTON}.dataset.active, {BUTTON}.textContent]")

        browser._load.clear()
        await browser.evaluate(f"{BUTTON}.click()")
        await _until(lambda: board.active("pfc-storm"), "the click to start pfc-storm")
        await asyncio.wait_for(browser._load.wait(), 15)  # the script reloads the page
        after = await browser.evaluate(f"[{BUTTON}.dataset.active, {BUTTON}.textContent, {BUTTON}.className]")

        browser._load.clear()
        await browser.evaluate(f"{BUTTON}.click()")
        await _until(lambda: not board.active("pfc-storm"), "the click to stop pfc-storm")
        await asyncio.wait_for(browser._load.wait(), 15)
        violations = await browser.evaluate("window.__csp")
    finally:
        await browser.close()
        await daemon.stop()
        await demo.close_parts(parts)

    assert sorted(names) == sorted(demo.known_scenarios()) and len(names) >= 5
    assert before == ["false", "start pfc-storm"]
    assert after == ["true", "stop pfc-storm", "scenario on"]
    assert violations == []
    assert script_type == "text/javascript"
    # Scripts from this origin only, and only on the demo page: never inline.
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
