"""docs/inspections.md's scenario table is the test: the demo (health windows 6 s, events and link 12 s;
inspections on the network, rdma, gpu and serving components) runs healthy for a while and
must inspect nothing; then each scenario of the table, one at a time, must produce a new
inspection whose verdict has the table's layer and cause and names a target matching its
pattern; the score recovers before the next. The latest report is then opened in headless
Chromium: the verdict renders, and the page raises no Content-Security-Policy violation.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cdp import Browser
from conftest import ROOT
from test_alerting_e2e import Demo as AlertingDemo

# The link signals count over their own window (10 min by default): as short as the events', so a
# link scenario's score recovers before the next one starts.
HEALTH = {"window": "6s", "event_window": "12s", "link": {"window": "12s", "baseline_window": "60s"}}
WATCHED = {"network": 90, "rdma": 90, "gpu": 90, "serving": 90}
BEFORE_SECONDS = 30
INSPECT = {"score_below": 0, "component_below": WATCHED, "before": f"{BEFORE_SECONDS}s", "since": "8s",
           "min_interval": "1s", "rearm_margin": 2}
HEALTHY_SECONDS = 45.0
VERDICT_TIMEOUT = 120.0
RECOVER_TIMEOUT = 120.0 + BEFORE_SECONDS
LISTENER = ("window.__csp = [];"
            "document.addEventListener('securitypolicyviolation', e => "
            "window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")


@dataclass(frozen=True)
class Row:
    scenario: str
    layer: str
    cause: str
    target: re.Pattern[str]


def table_rows() -> list[Row]:
    """The rows of the scenario table in docs/inspections.md."""
    text = (ROOT / "docs" / "inspections.md").read_text()
    section = text.split("## The demo scenarios", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != 4 or cells[0] in ("scenario", "---"):
            continue
        pattern = cells[3].strip("`").replace("\\|", "|")
        rows.append(Row(cells[0], cells[1], cells[2], re.compile(pattern)))
    return rows


class Demo(AlertingDemo):
    """The alerting test's demo, with this test's health windows and inspections."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, HEALTH, INSPECT)

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return json.load(resp)

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"demo exited: {self.log_path.read_text()[-3000:]}")
            try:
                if self.components():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError("demo not ready")

    def components(self) -> dict[str, float]:
        return {c["name"]: c["score"] for c in self.get("/api/v1/health")["components"]
                if c.get("applicable") and c["score"] is not None}

    def inspections(self) -> list[dict]:
        return self.get("/api/v1/inspections")["inspections"]

    def wait_recovered(self) -> None:
        """Every watched component back above its threshold plus the margin (re-armed) and kept
        there for the inspections' `before` window, and no inspection pending: the next
        scenario's before window is then all calm, not the tail of the last scenario (TTFT still
        high while queue-buildup's backlog drains would be ttft-surge's baseline)."""
        deadline = time.monotonic() + RECOVER_TIMEOUT
        scores: dict[str, float] = {}
        calm_since: float | None = None
        while time.monotonic() < deadline:
            scores = self.components()
            listing = self.get("/api/v1/inspections")
            now = time.monotonic()
            if all(scores.get(c, 100) >= t + INSPECT["rearm_margin"] for c, t in WATCHED.items()) \
                    and not listing["pending"] and not listing["running"]:
                calm_since = now if calm_since is None else calm_since
                if now - calm_since >= BEFORE_SECONDS:
                    return
            else:
                calm_since = None
            time.sleep(1)
        raise AssertionError(f"the demo did not recover: {scores}")



def _new_inspection(demo: Demo, seen: set[str]) -> dict | None:
    for item in demo.inspections():
        if item["id"] not in seen:
            return demo.get(f"/api/v1/inspections/{item['id']}")
    return None


async def _open_in_chromium(url: str, profile: Path) -> tuple[str, list[str], str]:
    browser = Browser()
    try:
        await browser.start(profile)
        await browser.page("Page.addScriptToEvaluateOnNewDocument", {"source": LISTENER})
        await browser.navigate(url)
        verdict = await browser.evaluate("document.getElementById('verdict').innerText")
        violations = await browser.evaluate("window.__csp")
        sheet = await browser.evaluate("getComputedStyle(document.getElementById('verdict')).borderLeftStyle")
    finally:
        await browser.close()
    return verdict, violations, sheet


def test_every_scenario_of_the_table_gets_its_verdict(tmp_path: Path) -> None:
    rows = table_rows()
    assert [r.scenario for r in rows] == ["pfc-storm", "ecn-spike", "link-flap", "half-dead-link",
                                          "fw-upgrade-cc-reset", "xid", "queue-buildup", "ttft-surge"]
    demo = Demo(tmp_path)
    results: dict[str, tuple[str, str, str, str]] = {}
    try:
        demo.wait_ready()
        time.sleep(HEALTHY_SECONDS)
        assert demo.inspections() == [], "a healthy demo was inspected"
        demo.wait_recovered()
        seen: set[str] = set()
        for row in rows:
            demo.scenario(row.scenario, True)
            deadline = time.monotonic() + VERDICT_TIMEOUT
            report = None
            while report is None and time.monotonic() < deadline:
                time.sleep(1)
                report = _new_inspection(demo, seen)
            demo.scenario(row.scenario, False)
            assert report is not None, f"{row.scenario}: no inspection within {VERDICT_TIMEOUT:.0f}s"
            seen.update(i["id"] for i in demo.inspections())
            v = report["verdict"]
            results[row.scenario] = (v["layer"], v["cause"], v["target"], v["text"])
            demo.wait_recovered()
            seen.update(i["id"] for i in demo.inspections())
        latest = demo.inspections()[0]["id"]
        verdict_text, violations, border = asyncio.run(
            _open_in_chromium(f"{demo.url}/inspections/{latest}", tmp_path / "chromium"))
    finally:
        demo.stop()
    expected = {row.scenario: row for row in rows}
    wrong = {name: got for name, got in results.items()
             if not (got[0] == expected[name].layer and got[1] == expected[name].cause
                     and expected[name].target.search(got[2]))}
    assert wrong == {}, json.dumps(results, indent=1)
    last = results[rows[-1].scenario]
    assert f"verdict: {last[0]}" in verdict_text and last[2] in verdict_text
    assert violations == [] and border == "solid"  # the stylesheet applied, no inline style needed
