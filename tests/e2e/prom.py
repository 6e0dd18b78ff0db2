"""A real Prometheus server (Debian package) for tests: start on a free loopback port, query its API."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from conftest import free_port, stop_process, wait_http_ready

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


class PrometheusServer:
    def __init__(self, workdir: Path, scrape_targets: dict[str, list[str]], scrape_interval: str = "1s",
                 rule_files: list[str] | None = None, evaluation_interval: str = "1s",
                 alertmanager: str | None = None, extra_args: list[str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
            "scrape_configs": [
                {"job_name": job, "scrape_interval": scrape_interval,
                 "static_configs": [{"targets": targets}]}
                for job, targets in scrape_targets.items()
            ],
        }
        if rule_files:
            config["rule_files"] = rule_files
        if alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        self.config_path = self.workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.log_path = self.workdir / "prometheus.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config_path}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h",
             *(extra_args or [])],
            stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_http_ready(self.url + "/-/ready", self.proc, self.log_path, "prometheus", timeout)

    def query(self, expr: str) -> list[dict]:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            doc = json.load(resp)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def wait_for(self, expr: str, predicate=lambda result: bool(result), timeout: float = 30.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        result: list[dict] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if predicate(result):
                return result
            time.sleep(0.5)
        raise AssertionError(f"{expr!r} never satisfied the condition; last result {result}")

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
