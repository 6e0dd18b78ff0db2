"""GET /api/v1/health, /metrics and `infrapulse score` against a real running daemon."""

from __future__ import annotations

import asyncio
import sys

import aiohttp
import pytest

from conftest import running_daemon
from health_fixtures import GPU_LABELS, Feed
from helpers import parse_exposition

SWQ = ("leaf03", "Ethernet12", "3")
CONFIG = "interval: 5s\nhealth: {window: 1m}\n"


def _congested(feed: Feed, marked: float) -> Feed:
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, marked, "leaf03")
    feed.gauge("gnmi", "infrapulse_switch_up", ("leaf03",), 1, "leaf03")
    return feed


async def _get_json(port: int, path: str = "/api/v1/health") -> dict:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}{path}") as resp:
            assert resp.status == 200
            return await resp.json()


async def _score_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infrapulse", "score", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode, out.decode(), err.decode()


async def test_api_shape_and_values():
    async with running_daemon(CONFIG) as daemon:
        feed = _congested(Feed(daemon.store), 790)
        # Not target "nvml": the daemon's own nvml source (enabled: auto, no NVML library here)
        # removes its ("nvml", "nvml") instance when it gives up, racing with this feed.
        feed.gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 1, "gpu-fixture")
        feed.publish(daemon.health)
        body = await _get_json(daemon.bound_port)

    assert set(body) >= {"score", "raw_score", "status", "coverage", "cap", "capped_by", "firing",
                         "components", "detractors", "sources", "serving", "window_seconds", "host",
                         "timestamp"}
    assert body["host"] == "testhost"
    # network: ECN 7.9% -> 0 (weight 3), stream up -> 100 (weight 1) = 25; gpu: all 100
    assert body["score"] == pytest.approx((0.3 * 25 + 0.25 * 100) / 0.55, abs=0.01)
    assert body["status"] == "degraded"  # 59: below 80, above 50
    comps = {c["name"]: c for c in body["components"]}
    assert comps["network"]["score"] == 25.0 and comps["gpu"]["score"] == 100.0
    assert comps["serving"]["score"] is None and comps["serving"]["applicable"] is False
    ecn = next(s for s in comps["network"]["signals"] if s["name"] == "ecn_marked_ratio")
    assert ecn == {**ecn, "value": pytest.approx(0.079), "value_text": "7.9%", "good": 0.001, "bad": 0.05,
                   "good_text": "0.1%", "bad_text": "5%", "score": 0.0, "target": "leaf03 Ethernet12 queue 3",
                   "known": True, "critical": False, "weight": 3.0, "window_seconds": 60.0}
    assert ecn["worst"][0]["labels"] == {"switch": "leaf03", "interface": "Ethernet12", "queue": "3"}
    top = body["detractors"][0]
    assert top["sentence"] == ("leaf03 Ethernet12 queue 3: 7.9% of packets ECN-marked over the last 1m "
                               "(bad at 5%)")
    assert top["rank"] == 1 and top["signal"] == "ecn_marked_ratio" and top["hint"]
    sources = {(s["source"], s["target"]) for s in body["sources"]}
    assert ("gnmi", "leaf03") in sources and ("nvml", "gpu-fixture") in sources


async def test_source_errors_reach_the_api():
    async with running_daemon(CONFIG) as daemon:
        feed = _congested(Feed(daemon.store), 0)
        feed.publish(daemon.health)
        daemon.store.record_failure("gnmi", "leaf07", "unauthenticated", "wrong username or password")
        daemon.health.tick()
        body = await _get_json(daemon.bound_port)
    leaf07 = next(s for s in body["sources"] if s["target"] == "leaf07")
    assert leaf07["up"] is False and leaf07["reason"] == "unauthenticated"
    down = next(s for c in body["components"] for s in c["signals"] if s["name"] == "gnmi_stream_down")
    assert down["target"] == "leaf07" and down["score"] == 0.0
    assert any(d["sentence"] == "leaf07: gNMI telemetry stream is down (unauthenticated)"
               for d in body["detractors"])


async def test_metrics_carry_the_health_families():
    from infrapulse.sources import registry

    registry()
    async with running_daemon(CONFIG) as daemon:
        _congested(Feed(daemon.store), 10).publish(daemon.health)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{daemon.bound_port}/metrics") as resp:
                values = parse_exposition(await resp.text())
    assert values[("infrapulse_health_score", frozenset())] == 100.0
    assert values[("infrapulse_health_coverage_ratio", frozenset())] > 0
    assert values[("infrapulse_health_component_score", frozenset({("component", "network")}))] == 100.0
    assert not [k for k in values if k[0] == "infrapulse_health_detractor_info"]


@pytest.mark.parametrize("marked,expected_exit,word", [
    (5, 0, "HEALTHY"),      # 0.05% marked: every signal good
    (150, 1, "DEGRADED"),   # 1.5% -> ecn 71.4, network (3*71.4+100)/4 = 78.6
    (790, 2, "CRITICAL"),   # 7.9% -> network 25
])
async def test_score_cli_exit_codes(marked, expected_exit, word):
    async with running_daemon(CONFIG) as daemon:
        _congested(Feed(daemon.store), marked).publish(daemon.health)
        code, out, err = await _score_cli("--url", f"http://127.0.0.1:{daemon.bound_port}")
    assert code == expected_exit, err
    assert f"testhost (http://127.0.0.1:{daemon.bound_port}): score" in out and word in out
    assert "ecn_marked_ratio" in out and "leaf03 Ethernet12 queue 3" in out
    if expected_exit:
        assert "of packets ECN-marked over the last 1m (bad at 5%)" in out


async def test_score_cli_unknown_and_unreachable():
    async with running_daemon(CONFIG) as daemon:
        code, out, _ = await _score_cli("--url", f"http://127.0.0.1:{daemon.bound_port}", "--json")
        assert code == 3  # no data at all: unknown, never healthy
        assert '"status": "unknown"' in out
        port = daemon.bound_port
    code, out, err = await _score_cli("--url", f"http://127.0.0.1:{port}", "--timeout", "2")
    assert code == 3 and "cannot read" in err and out == ""
