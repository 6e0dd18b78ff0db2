"""One set of bands everywhere, against a daemon on loopback: the status word is the same in
/api/v1/health, `infrapulse score`'s exit code (the CLI as a subprocess), the status page and the
`infrapulse_health_status{status}` state set the alerts read, with the same reasons on every
surface; and the status thresholds the metrics publish are the daemon's own. The integration half
of tests/test_health_status.py."""

from __future__ import annotations

import asyncio
import re
import sys

import aiohttp
import pytest

from conftest import running_daemon
from health_fixtures import Feed
from helpers import parse_exposition
from infrapulse.health.page import COLORS
from test_health_status import SWQ, _fabric_and_gpu, _serving

CONFIG = "interval: 5s\nhealth: {window: 1m}\n"
STATUS_EXIT = {"healthy": 0, "degraded": 1, "critical": 2, "unknown": 3}


def _drifted(feed: Feed) -> Feed:
    feed.gauge("roce_config", "infrapulse_nic_roce_config_baseline_drift", ("ens1f0np0",), 2, "ens1f0np0")
    return feed


def _status_series(values: dict) -> dict[str, float]:
    return {dict(labels)["status"]: v for (name, labels), v in values.items()
            if name == "infrapulse_health_status"}


@pytest.mark.parametrize("case,build,status", [
    ("all good", lambda f: _fabric_and_gpu(_serving(f, 0.3)), "healthy"),
    ("TTFT 2.42 s against 1.5 s, score above 80", lambda f: _serving(f, 2.42), "degraded"),
    ("TTFT past its bad level", lambda f: _fabric_and_gpu(_serving(f, 3.6)), "degraded"),
    ("a flapping link at the cap of 40", lambda f: _fabric_and_gpu(_serving(f, 0.3), flaps=3), "critical"),
    # the weighted score is 85 (healthy in the bands); one signal at its bad level makes it degraded
    ("RoCE settings away from their baseline, score 85",
     lambda f: _drifted(_fabric_and_gpu(_serving(f, 0.3))), "degraded"),
])
async def test_api_cli_page_and_metric_agree(case, build, status):
    from infrapulse.sources import registry

    registry()
    async with running_daemon(CONFIG) as daemon:
        build(Feed(daemon.store)).publish(daemon.health)
        url = f"http://127.0.0.1:{daemon.bound_port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(url + "/api/v1/health") as resp:
                body = await resp.json()
            async with session.get(url + "/metrics") as resp:
                values = parse_exposition(await resp.text())
            async with session.get(url + "/") as resp:
                page = await resp.text()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "infrapulse", "score", "--url", url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), 30)

    assert body["status"] == status, case
    assert proc.returncode == STATUS_EXIT[status] and status.upper() in out.decode()
    assert re.search(rf'id="score" data-score="[^"]*" data-status="{status}"', page)
    assert _status_series(values) == {s: float(s == status) for s in STATUS_EXIT}
    assert values[("infrapulse_health_status_threshold", frozenset({("status", "degraded")}))] == 80.0
    assert values[("infrapulse_health_status_threshold", frozenset({("status", "critical")}))] == 50.0
    assert values[("infrapulse_health_score", frozenset())] == body["score"]
    # The page colours each component with the API's status word, not bands of its own.
    serving = next(c for c in body["components"] if c["name"] == "serving")
    bar = re.search(r'data-component="serving".*?fill="(#[0-9a-f]{6})"/></svg>', page)
    assert bar is not None and bar.group(1) == COLORS[serving["status"]]
    if status == "critical":
        assert body["score"] == 40.0 and body["capped_by"] == ["link_flaps"]
    # Every surface gives the same reasons: the API, the CLI's first lines, the page, the metric.
    reasons = body["status_reasons"]
    assert (reasons == []) == (status == "healthy")
    reason_series = sorted(dict(labels)["signal"] for (name, labels), v in values.items()
                           if name == "infrapulse_health_status_reason_info")
    assert reason_series == sorted(r["signal"] for r in reasons)
    for r in reasons:
        assert f"  {r['status']}: {r['text']}" in out.decode()
        assert f'data-rule="{r["rule"]}" data-signal="{r["signal"]}"' in page
    if "baseline" in case:
        assert body["score"] == 85.0
        assert [(r["status"], r["rule"], r["signal"], r["target"]) for r in reasons] == [
            ("degraded", "signal_past_bad", "roce_config_drift", "ens1f0np0")]


async def test_the_status_thresholds_are_the_daemons_own():
    from infrapulse.sources import registry

    registry()
    config = "interval: 5s\nhealth: {window: 1m, status_thresholds: {degraded: 95, critical: 70}}\n"
    async with running_daemon(config) as daemon:
        # ECN 1.5% on the one queue: network (3 * 71.43 + 100) / 4 = 78.57: healthy in the default
        # bands, degraded in this daemon's (below 95, above 70)
        feed = Feed(daemon.store)
        feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
        feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 150, "leaf03")
        feed.gauge("gnmi", "infrapulse_switch_up", ("leaf03",), 1, "leaf03")
        feed.publish(daemon.health)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{daemon.bound_port}/metrics") as resp:
                values = parse_exposition(await resp.text())
    assert values[("infrapulse_health_score", frozenset())] == 78.57
    assert _status_series(values)["degraded"] == 1.0
    assert values[("infrapulse_health_status_threshold", frozenset({("status", "degraded")}))] == 95.0
    assert values[("infrapulse_health_status_threshold", frozenset({("status", "critical")}))] == 70.0
