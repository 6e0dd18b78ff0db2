"""Test helpers for the alerting path: a webhook receiver, a real Alertmanager (Debian package),
and test copies of the repo's Alertmanager config and rules that differ only in timing.

The copies are derived from alerts/ at test time — never kept by hand — so a test always runs
the routes, receivers, inhibitions and PromQL that ship.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from conftest import ROOT, free_port, stop_process, wait_http_ready

ALERTS = ROOT / "alerts"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
AMTOOL = shutil.which("amtool") or "/usr/bin/amtool"


class WebhookReceiver:
    """Records every Alertmanager webhook POST: (receiver path, Authorization header, payload)."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, str, dict]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer._lock:
                    outer.notifications.append(
                        (self.path.strip("/"), self.headers.get("Authorization", ""), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def alerts(self, receiver: str | None = None) -> list[dict]:
        """Every alert of every notification (to `receiver` if given), each with its `receiver`."""
        with self._lock:
            found = []
            for path, _auth, payload in self.notifications:
                if receiver is None or path == receiver:
                    found += [{**a, "receiver": path} for a in payload["alerts"]]
            return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_alertmanager_config(workdir: Path, webhook_url: str, token: str = "test-token",
                             fast: bool = True) -> Path:
    """The repo's alertmanager.yml with webhooks pointed at `webhook_url/<receiver>`, a token file
    of our own, and (fast) second-scale group timing. Routes and inhibitions are untouched."""
    config = yaml.safe_load((ALERTS / "alertmanager.yml").read_text())
    token_file = workdir / "webhook-token"
    token_file.write_text(token)
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = f"{webhook_url}/{receiver['name']}"
            hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    if fast:
        def speed_up(route: dict) -> None:
            for key, value in (("group_wait", "1s"), ("group_interval", "1s"), ("repeat_interval", "1h")):
                if key in route or route is config["route"]:
                    route[key] = value
            for child in route.get("routes", []):
                speed_up(child)

        speed_up(config["route"])
        config.setdefault("global", {})["resolve_timeout"] = "10s"
    path = workdir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


test_alertmanager_config.__test__ = False  # a helper, not a pytest test


class AlertmanagerServer:
    """prometheus-alertmanager on a free loopback port, gossip off, state in `workdir`."""

    def __init__(self, workdir: Path, config: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "alertmanager.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [ALERTMANAGER, f"--config.file={config}", f"--storage.path={workdir / 'am-data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=",
             "--log.level=debug"],
            stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_http_ready(self.url + "/-/ready", self.proc, self.log_path, "alertmanager", timeout)

    def api(self, path: str, body: object | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# --- rules with compressed time, for end-to-end runs -----------------------------------------

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")


def _seconds(text: str) -> float:
    return sum(int(n) * _UNITS[u] for n, u in _DURATION.findall(text))


def compress_duration(text: str, factor: float, floor: float) -> str:
    seconds = _seconds(text)
    if seconds == 0:
        return text
    return f"{max(int(round(seconds / factor)), int(floor))}s"


def compressed_rules(workdir: Path, factor: float = 30, window_floor: float = 15,
                     for_floor: float = 1) -> list[Path]:
    """Copies of alerts/*.rules.yaml whose range windows, offsets and `for` durations are divided
    by `factor` (windows never below `window_floor` seconds, so a rate() still spans several
    scrapes). Names, labels, thresholds and expression structure are unchanged."""
    window = re.compile(r"\[(\d+(?:ms|s|m|h|d|w))\]")
    offset = re.compile(r"\boffset\s+(\d+(?:ms|s|m|h|d|w))")
    paths = []
    for source in sorted(ALERTS.glob("*.rules.yaml")):
        doc = yaml.safe_load(source.read_text())
        for group in doc["groups"]:
            for rule in group["rules"]:
                expr = window.sub(lambda m: f"[{compress_duration(m.group(1), factor, window_floor)}]",
                                  rule["expr"])
                rule["expr"] = offset.sub(
                    lambda m: f"offset {compress_duration(m.group(1), factor, window_floor)}", expr)
                if "for" in rule:
                    rule["for"] = compress_duration(rule["for"], factor, for_floor)
        path = workdir / source.name
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        paths.append(path)
    return paths
