"""docs/inspections.md's scenario table, as the scenario walk (test_alerting_e2e.py) checks it:
with inspections on the network, rdma, gpu and serving components, a calm demo must inspect
nothing; each scenario of the table, started once the demo has been calm for the inspections'
`before` window, must produce a new inspection whose verdict has the table's layer and cause and
names a target matching its pattern. The last row's report is then opened in headless Chromium:
the verdict renders, and the page raises no Content-Security-Policy violation.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cdp import Browser
from conftest import ROOT

WATCHED = {"network": 90, "rdma": 90, "gpu": 90, "serving": 90}
BEFORE_SECONDS = 15
INSPECT = {"score_below": 0, "component_below": WATCHED, "before": f"{BEFORE_SECONDS}s", "since": "8s",
           "min_interval": "1s", "rearm_margin": 2}
CALM_TIMEOUT = 120.0 + BEFORE_SECONDS
LISTENER = ("window.__csp = [];"
            "document.addEventListener('securitypolicyviolation', e => "
            "window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")


@dataclass(frozen=True)
class Row:
    scenario: str
    layer: str
    cause: str
    target: re.Pattern[str]

    def wrong(self, verdict: dict) -> bool:
        return not (verdict["layer"] == self.layer and verdict["cause"] == self.cause
                    and self.target.search(verdict["target"]))


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


class Inspections:
    """The demo's inspections API, as the walk reads it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return json.load(resp)

    def ids(self) -> set[str]:
        return {i["id"] for i in self.get("/api/v1/inspections")["inspections"]}

    def new_report(self, seen: set[str]) -> dict | None:
        for item in self.get("/api/v1/inspections")["inspections"]:
            if item["id"] not in seen:
                return self.get(f"/api/v1/inspections/{item['id']}")
        return None

    def wait_calm(self) -> None:
        """Every watched component back above its threshold plus the margin (re-armed) and kept
        there for the inspections' `before` window, and no inspection pending: the next
        scenario's before window is then all calm, not the tail of the last scenario (TTFT still
        high while queue-buildup's backlog drains would be ttft-surge's baseline)."""
        deadline = time.monotonic() + CALM_TIMEOUT
        scores: dict[str, float] = {}
        calm_since: float | None = None
        while time.monotonic() < deadline:
            scores = {c["name"]: c["score"] for c in self.get("/api/v1/health")["components"]
                      if c.get("applicable") and c["score"] is not None}
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
        raise AssertionError(f"the demo did not calm down: {scores}")


async def open_in_chromium(url: str, profile: Path) -> tuple[str, list[str], str]:
    """(the verdict's text, CSP violations, the verdict's border style) of a report page."""
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
