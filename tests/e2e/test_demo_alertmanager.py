"""The demo's Alertmanager delivers (issue 32): scripts/demo_stack.py points every receiver of
alerts/alertmanager.yml at its local recording sink and writes the credentials files the config
references; a real Alertmanager given that config delivers a critical NOC alert to `noc-page`,
with its bearer token, and the sink records it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from demo_stack import (  # noqa: E402
    ALERTMANAGER,
    NotificationSink,
    alertmanager_config,
    free_port,
    wait_http,
)


def _post_alert(url: str, labels: dict[str, str]) -> None:
    body = json.dumps([{"labels": labels, "annotations": {"summary": "e2e"}}]).encode()
    request = urllib.request.Request(f"{url}/api/v2/alerts", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
        assert response.status == 200


def test_the_demo_alertmanager_delivers_to_its_recording_sink(tmp_path):
    sink = NotificationSink(tmp_path / "notifications.jsonl")
    config = alertmanager_config(tmp_path, sink.url)
    assert config is not None
    port = free_port()
    am = subprocess.Popen([ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp_path / 'am'}",
                           f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                           "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/-/ready", am, "alertmanager")
        _post_alert(url, {"alertname": "InfrapulseNicPfcPauseStorm", "severity": "critical",
                          "team": "noc", "instance": "gpu-node-01:9477", "interface": "ens1f0np0"})
        deadline = time.monotonic() + 60  # the critical route's group_wait is 10 s
        while not sink.notifications() and time.monotonic() < deadline:
            time.sleep(0.5)
        got = sink.notifications()
    finally:
        am.terminate()
        am.wait(timeout=10)
        sink.close()
    assert got, "Alertmanager delivered nothing to the demo's sink"
    first = got[0]
    assert first["receiver"] == "noc-page"
    assert first["authorization"] is True  # the credentials file it references was written
    alerts = first["payload"]["alerts"]
    assert [(a["labels"]["alertname"], a["status"]) for a in alerts] == [
        ("InfrapulseNicPfcPauseStorm", "firing")]
