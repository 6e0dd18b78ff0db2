"""The status page at `/`, rendered by headless Chromium (Debian `chromium`): DOM assertions on
what the browser built, and a screenshot kept as a test artifact under tmp_path."""

from __future__ import annotations

import asyncio
import html.parser
import shutil
import time

import aiohttp

from conftest import running_daemon
from health_fixtures import GPU_LABELS, Feed

SWQ = ("leaf03", "Ethernet12", "3")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


async def _chromium(tmp_path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 45)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, err.decode()[-2000:]
    return out.decode()


class _Dom(html.parser.HTMLParser):
    """Elements by id and class from the DOM Chromium dumped, with their attributes and text."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, dict] = {}
        self.by_class: dict[str, list[dict]] = {}
        self.tags: list[tuple[str, dict]] = []
        self._open: list[dict] = []

    def handle_starttag(self, tag, attrs):
        node = {"tag": tag, **dict(attrs), "text": ""}
        self.tags.append((tag, node))
        if "id" in node:
            self.by_id[node["id"]] = node
        for cls in (node.get("class") or "").split():
            self.by_class.setdefault(cls, []).append(node)
        if tag not in ("br", "meta", "rect", "line", "path", "polyline", "input", "img"):
            self._open.append(node)

    def handle_endtag(self, tag):
        if not any(n["tag"] == tag for n in self._open):
            return  # the end of an element that never opened a scope (<path></path>)
        while self._open:
            node = self._open.pop()
            if node["tag"] == tag:
                break

    def handle_data(self, data):
        for node in self._open:
            node["text"] += data


async def test_status_page_in_headless_chromium(tmp_path):
    async with running_daemon("interval: 5s\nhealth: {window: 1m}\n") as daemon:
        service = daemon.health
        # An hour of history for the sparkline, then a busy queue and a lost GPU (the raw score,
        # 0.3 * 78.6 / 0.55 = 42.9, is capped at 40).
        now = time.time()
        for i in range(30):
            service.history.append((now - 3000 + i * 100, 100.0 - i))
        feed = Feed(daemon.store)
        feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
        feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 150, "leaf03")
        feed.gauge("gnmi", "infrapulse_switch_up", ("leaf03",), 1, "leaf03")
        feed.gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 0)
        feed.publish(service)
        daemon.store.record_failure("serving", "llama", "timeout", "no answer within 4.5s")
        service.tick()
        url = f"http://127.0.0.1:{daemon.bound_port}/"
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as resp:
                assert resp.status == 200 and resp.content_type == "text/html"
                raw = await resp.text()
        dom_text = await _chromium(tmp_path, "--dump-dom", url)
        shot = tmp_path / "status.png"
        await _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", url)

    # Offline by construction: no external scripts, styles, images or fonts.
    assert "<script" not in raw and "http://" not in raw.replace(
        f"http://127.0.0.1:{daemon.bound_port}", "").replace("http://www.w3.org/2000/svg", "")
    dom = _Dom()
    dom.feed(dom_text)
    score = dom.by_id["score"]
    assert score["data-status"] == "critical" and score["data-score"] == "40"  # a lost GPU caps at 40
    assert "40" in dom.by_id["gauge"]["text"] and "critical" in dom.by_id["gauge"]["text"]
    bars = {c["data-component"]: c for c in dom.by_class["component"]}
    # serving runs (its endpoint is down) and so does topology (gnmi + a node source): no data yet
    assert set(bars) == {"network", "gpu", "serving", "topology"}
    assert bars["serving"]["data-score"] == "–" and "coverage 0%" in bars["serving"]["text"]
    assert bars["gpu"]["data-score"] == "0" and "capped by gpu_lost" in bars["gpu"]["text"]
    assert bars["network"]["data-score"] == "79"  # ECN 1.5% -> 71.4 (weight 3), stream up 100 (weight 1)
    sentences = [d["text"] for d in dom.by_class["detractor"]]
    assert sentences[0].startswith("GPU 0: GPU is lost")
    assert any("leaf03 Ethernet12 queue 3: 1.5% of packets ECN-marked over the last 1m (bad at 5%)" in s
               for s in sentences)
    rows = {(r["data-source"], r["data-target"]): r for r in dom.by_class["source"]}
    assert ("down" in rows[("serving", "llama")]["class"]
            and "no answer within 4.5s" in rows[("serving", "llama")]["text"])
    assert "up" in rows[("gnmi", "leaf03")]["class"].split()
    spark = dom.by_id["sparkline"]
    assert int(spark["data-points"]) >= 31
    assert any(tag == "polyline" for tag, _ in dom.tags)
    # The screenshot is a real PNG of the rendered page (kept under tmp_path as the artifact).
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
