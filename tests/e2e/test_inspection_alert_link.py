"""The alerts link to the inspection: a real Prometheus evaluates the repo's rules (time
compressed 60x) against a running daemon whose GPU is lost, a real Alertmanager routes
InfrapulseHealthScoreLow to a webhook, and the notification's `inspection_url` annotation is
that daemon's /inspections/latest — built from the alert's `instance` label — which answers
with the report the daemon made.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path

import aiohttp

from alerting_stack import AlertmanagerServer, WebhookReceiver, compressed_rules, test_alertmanager_config
from conftest import running_daemon
from health_fixtures import GPU_LABELS, Feed
from prom import PrometheusServer

CONFIG = ("interval: 1s\nhealth: {window: 6s, event_window: 12s}\n"
          "inspect: {allow_unauthenticated: true, on_demand_min_interval: 0s}\n")
FIRE_TIMEOUT = 90.0


async def test_the_alert_links_the_daemons_latest_inspection(tmp_path: Path) -> None:
    hook = WebhookReceiver()
    am = AlertmanagerServer(tmp_path, test_alertmanager_config(tmp_path, hook.url))
    prom = None
    try:
        am.wait_ready()
        async with running_daemon(f"state_dir: {tmp_path / 'state'}\n" + CONFIG,
                                  hostname="gpu-node-07") as daemon:
            # A lost GPU: a critical signal, the score capped at 40, status critical.
            feed = Feed(daemon.store, start=time.time())
            feed.series("nvml", "infrapulse_gpu_healthy", GPU_LABELS, [0.0], "gpu-fixture")
            feed.publish()
            instance = f"127.0.0.1:{daemon.bound_port}"
            base = f"http://{instance}"
            async with aiohttp.ClientSession() as session:
                async with session.post(base + "/api/v1/inspections", json={}) as resp:
                    assert resp.status == 200, await resp.text()
                    report = await resp.json()
            rules = [str(p) for p in compressed_rules(tmp_path, factor=60, window_floor=10)]
            prom = PrometheusServer(tmp_path, {"infrapulse": [instance]}, rule_files=rules,
                                    alertmanager=am.url.removeprefix("http://"))
            await asyncio.to_thread(prom.wait_ready)
            deadline = time.monotonic() + FIRE_TIMEOUT
            alerts: list[dict] = []
            while time.monotonic() < deadline and not alerts:
                await asyncio.sleep(1)
                feed = Feed(daemon.store, start=time.time())  # keep the lost GPU fresh
                feed.series("nvml", "infrapulse_gpu_healthy", GPU_LABELS, [0.0], "gpu-fixture")
                feed.publish()
                alerts = [a for a in hook.alerts() if a["status"] == "firing"
                          and a["labels"].get("alertname") == "InfrapulseHealthScoreLow"]
            assert alerts, f"no InfrapulseHealthScoreLow; got {[a['labels'] for a in hook.alerts()]}"
            links = {a["annotations"].get("inspection_url") for a in alerts}
            assert links == {f"{base}/inspections/latest"}
            page = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"{base}/inspections/latest", timeout=10).read().decode())
            assert f"Inspection {report['id']} on gpu-node-07" in page
            assert {a["labels"]["instance"] for a in alerts} == {instance}
    finally:
        if prom is not None:
            prom.stop()
        am.stop()
        hook.close()
