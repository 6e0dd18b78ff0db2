"""The status page at `/`, rendered by headless Chromium (Debian `chromium`): DOM assertions on
what the browser built, and a screenshot kept as a test artifact under tmp_path."""

from __future__ import annotations

import asyncio
import datetime
import html.parser
import re
import shutil
import time

import aiohttp

from conftest import running_daemon
from health_fixtures import GPU_LABELS, Feed, empty_histogram, latency_histogram

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


EP = ("llama", "vllm", "llama-3-70b")
LONG_PARTIAL = [f"ports/1/counters/{name}: N/A (no PMA) — this kernel driver does not implement the "
                "performance management agent for this port" for name in
                ("VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "symbol_error")]


async def test_status_page_for_the_person_on_call(tmp_path):
    """Issue 18: time axis, value labels and "updated at"; SLO colours (a 51 s TTFT p95 is red);
    why a cell is "–"; runbook links; the GPU and NIC inventory; long partial details folded;
    no scenario toggles (and no script) outside the demo."""
    config = ("interval: 5s\nhealth:\n  window: 1m\n  runbook_base_url: https://runbooks.example.org/ip/\n")
    async with running_daemon(config) as daemon:
        service = daemon.health
        now = time.time()
        for i in range(59):  # an hour, with a dip to 35 forty minutes ago
            service.history.append((now - 3540 + i * 60, 35.0 if i == 19 else 90.0))
        feed = Feed(daemon.store)
        feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
        feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 150, "leaf03")
        feed.gauge("gnmi", "infrapulse_switch_up", ("leaf03",), 1, "leaf03")
        feed.gauge("serving", "infrapulse_llm_endpoint_up", EP[:2], 1, "llama")
        feed.series("serving", "infrapulse_llm_time_to_first_token_seconds", EP,
                    [empty_histogram(51.0), latency_histogram(51.0)], "llama")
        feed.series("serving", "infrapulse_llm_inter_token_latency_seconds", EP,
                    [empty_histogram(0.02), latency_histogram(0.02)], "llama")
        feed.gauge("serving", "infrapulse_llm_endpoint_up", ("mistral", "tgi"), 1, "mistral")
        feed.series("serving", "infrapulse_llm_inter_token_latency_seconds", ("mistral", "tgi", "mistral-7b"),
                    [empty_histogram(0.03), latency_histogram(0.03)], "mistral")
        feed.gauge("serving", "infrapulse_llm_endpoint_up", ("triton", "trtllm"), 1, "triton")
        feed.counter("serving", "infrapulse_llm_requests_total", ("triton", "trtllm", "ensemble", "success"),
                     0, 120, "triton")
        # From dcgm: the test daemon's own nvml source (enabled: auto, no library here) removes
        # the "nvml" target when it gives up.
        gpu = ("0", "GPU-aaaa", "NVIDIA H100 80GB HBM3", "00000000:18:00.0", "570.133.20", "12.8", "", "", "")
        feed.gauge("dcgm", "infrapulse_gpu_info", gpu, 1)
        feed.gauge("dcgm", "infrapulse_gpu_healthy", GPU_LABELS + ("", "", "", "", ""), 1)
        ib = "infiniband"
        feed.gauge(ib, "infrapulse_rdma_device_info", ("mlx5_0", "MT4129", "MT_0000000838", "28.39.1002",
                                                       "a:b:c:d", "0000:0d:00.0"), 1, "mlx5_0")
        feed.gauge(ib, "infrapulse_rdma_port_info", ("mlx5_0", "1", "Ethernet", "ens1f0np0"), 1, "mlx5_0")
        feed.gauge(ib, "infrapulse_rdma_port_state", ("mlx5_0", "1"), 4, "mlx5_0")
        feed.gauge(ib, "infrapulse_rdma_port_rate_bytes_per_second", ("mlx5_0", "1"), 5e10, "mlx5_0")
        feed.publish(service)
        daemon.store.record_success("infiniband", "i40iw0", 0.001, LONG_PARTIAL)
        service.tick()
        history = list(service.history)  # the hour above, then the ticks of the feed
        url = f"http://127.0.0.1:{daemon.bound_port}/"
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as resp:
                policy = resp.headers["Content-Security-Policy"]
                raw = await resp.text()
        dom_text = await _chromium(tmp_path, "--dump-dom", url)
        shot = tmp_path / "status-oncall.png"
        await _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1300,2400", url)

    dom = _Dom()
    dom.feed(dom_text)
    # "updated at": the report's time, machine-readable and as a clock time.
    updated = dom.by_id["updated"]
    assert abs(datetime.datetime.fromisoformat(updated["datetime"]).timestamp() - time.time()) < 60
    assert updated["text"].startswith(datetime.datetime.now().astimezone().strftime("%Y-%m-%d"))
    # The sparkline: every point of the hour, ticks every 15 minutes at clock times, the newest
    # and the lowest value labelled, the daemon's bands drawn.
    spark = dom.by_id["sparkline"]
    known = sum(v is not None for _, v in history)
    assert (spark["data-points"], spark["data-span"], spark["data-step"]) == (str(known), "3600", "900")
    latest = f"{history[-1][1]:.0f}"
    assert (spark["data-latest"], spark["data-min"]) == (latest, "35")
    xticks = [n["text"] for n in dom.by_class["xtick"]]
    assert xticks[-1] == "now" and len(xticks) >= 4
    assert all(len(t) == 5 and t[2] == ":" and int(t[3:]) % 15 == 0 for t in xticks[:-1])
    assert [n["text"] for n in dom.by_class["ytick"]] == ["0", "50", "100"]
    dip = time.strftime("%H:%M", time.localtime(now - 3540 + 19 * 60))
    assert dom.by_id["spark-min"]["text"] == f"min 35 at {dip}"
    assert dom.by_id["spark-latest"]["text"] == latest
    assert {b["data-band"] for b in dom.by_class["band"]} == {"degraded", "critical"}
    # Serving: the 51 s TTFT p95 is red (bad: at or past twice the 1.5 s SLO); ITL 20 ms is fine.
    assert [(c["data-q"], c["text"]) for c in dom.by_class["slo-bad"]] == [("ttft-p95", "51.00 s")]
    assert [(c["data-q"], c["text"]) for c in dom.by_class["slo-ok"]] == [("itl-p95", "20 ms"),
                                                                          ("itl-p95", "30 ms")]
    # Every "–" says why, in a footnote: TGI has no TTFT, Triton needs histogram_latencies.
    assert len(dom.by_class["na"]) == 9  # mistral TTFT x3, triton TTFT x3 and ITL x3
    notes = _notes(dom_text)
    assert notes[("mistral", "ttft")] == "mistral TTFT: TGI exports no time-to-first-token metric"
    assert "histogram_latencies=true" in notes[("triton", "ttft")]
    assert notes[("triton", "itl")] == "triton ITL: Triton exports no inter-token latency (trtllm-serve does)"
    # Runbook links under the configured base: ECN on a switch queue, the TTFT SLO.
    runbooks = {a["data-alert"]: a["href"] for a in dom.by_class["runbook"]}
    assert runbooks["InfrapulseSwitchQueueEcnMarkingHigh"] == \
        "https://runbooks.example.org/ip/InfrapulseSwitchQueueEcnMarkingHigh.md"
    assert runbooks["InfrapulseLlmTtftSloBurnRate"] == "https://runbooks.example.org/ip/InfrapulseLlmTtftSloBurnRate.md"
    # Inventory: the GPU and the RoCE port with its netdev.
    gpu = next(r for r in dom.by_class["gpu"] if r["data-gpu"] == "0")
    assert "NVIDIA H100 80GB HBM3" in gpu["text"] and "healthy" in gpu["text"]
    port = next(r for r in dom.by_class["rdma-port"] if r["data-device"] == "mlx5_0")
    assert _cells(dom_text, port) == ["mlx5_0", "1", "RoCE", "ens1f0np0", "ACTIVE", "400 Gb/s", "MT4129",
                                      "28.39.1002"]
    # The long partial details are folded (closed <details>), the first item as the summary.
    fold = dom.by_class["fold"]
    assert len(fold) == 1 and "open" not in fold[0]
    assert dom.by_class["fold"][0]["text"].count("N/A (no PMA)") == 5  # summary + 4 items
    # Not a demo: no toggles, no script, and the policy runs none.
    assert "scenarios" not in dom.by_id and "<script" not in raw and "script-src" not in policy
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def _notes(dom_text: str) -> dict[tuple[str, str], str]:
    found = re.findall(r'<li data-endpoint="([^"]+)" data-quantity="([^"]+)">([^<]*)</li>', dom_text)
    return {(ep, q): html.unescape(text) for ep, q, text in found}


def _cells(dom_text: str, row: dict) -> list[str]:
    match = re.search(rf'<tr class="rdma-port" data-device="{row["data-device"]}" '
                      rf'data-port="{row["data-port"]}">(.*?)</tr>', dom_text)
    assert match
    return [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", match.group(1))]
