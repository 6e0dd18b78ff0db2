"""Silent loss in a daemon's health report: a source instance whose mappings map to nothing gets its
note in /api/v1/health and on the status page, served on loopback. The integration half of
tests/test_health_coverage.py."""

from __future__ import annotations

import html.parser

import aiohttp

from conftest import running_daemon
from test_health_coverage import _fabric, _gnmi_coverage


class _Notes(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.items: list[dict] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "li" and attrs.get("class") == "coverage-note":
            self.items.append({**attrs, "text": ""})
            self._in = True

    def handle_endtag(self, tag):
        if tag == "li":
            self._in = False

    def handle_data(self, data):
        if self._in:
            self.items[-1]["text"] += data


async def test_api_and_status_page_show_the_note():
    async with running_daemon("interval: 5s\nhealth: {window: 1m}\n") as daemon:
        feed = _fabric(daemon.store)
        _gnmi_coverage(daemon.store)
        feed.publish(daemon.health)
        base = f"http://127.0.0.1:{daemon.bound_port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/api/v1/health") as resp:
                body = await resp.json()
            async with session.get(f"{base}/") as resp:
                page = await resp.text()
    (note,) = body["coverage_notes"]
    assert (note["source"], note["target"], note["mappings"], note["empty"]) == ("gnmi", "leaf07", 40, 12)
    assert note["sentence"] == "leaf07: 12 of 40 paths map to nothing"
    parser = _Notes()
    parser.feed(page)
    assert parser.items == [{"class": "coverage-note", "data-source": "gnmi", "data-target": "leaf07",
                             "text": "leaf07: 12 of 40 paths map to nothing"}]
    assert 'id="coverage-notes"' in page and "Not counted in the score" in page
