"""The scale path's real parts for tests: VictoriaMetrics, vmalert, hashmod-sharded Prometheus
servers (agent or server mode) remote-writing to it, and a notifier sink for vmalert.

All of them are Debian binaries (victoria-metrics ships vmalert) on free loopback ports with
their data in the test's temporary directory. A process can be killed (SIGKILL, as a crash)
and started again on the same port and data directory.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from conftest import free_port, stop_process, wait_http_ready
from infrapulse.sources.gnmi.shard import shard_of

Labels = tuple[tuple[str, str], ...]
VICTORIA_METRICS = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
VMALERT = shutil.which("vmalert") or "/usr/bin/vmalert"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def hashmod_shard(address: str, count: int) -> int:
    """The Prometheus shard that keeps `address` under a `hashmod` relabel on __address__ (the
    same MD5 function infrapulse's fabric sharding uses)."""
    return shard_of(address, count)


def http_json(url: str, data: bytes | None = None, timeout: float = 10.0) -> Any:
    request = urllib.request.Request(url, data=data)
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback only
        return json.loads(response.read())


class Service:
    """One child process with a log file; start() again after kill() reuses port and data."""

    def __init__(self, name: str, workdir: Path, ready_path: str, port: int | None = None) -> None:
        self.name = name
        self.workdir = workdir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready_path = ready_path
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str] | None:
        return None

    def start(self, timeout: float = 60.0) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env())
        wait_http_ready(self.url + self.ready_path, self.proc, self.log_path, self.name, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown work (no stale markers, no flush)."""
        assert self.proc is not None and self.proc.poll() is None, f"{self.name} is not running"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def log_tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- {self.name} ---\n" + "\n".join(text.splitlines()[-lines:])


class VictoriaMetrics(Service):
    """Single-node VictoriaMetrics: Prometheus remote_write at /api/v1/write, the query API at /."""

    def __init__(self, workdir: Path) -> None:
        super().__init__("victoria-metrics", workdir, "/health")
        self.data = workdir / "vm-data"

    def argv(self) -> list[str]:
        # latencyOffset 0 and no cache: a test reads what was written a second ago.
        return [VICTORIA_METRICS, f"-storageDataPath={self.data}", f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=1d", "-search.latencyOffset=0s", "-search.disableCache",
                "-loggerLevel=WARN", "-memory.allowedPercent=20"]

    @property
    def write_url(self) -> str:
        return self.url + "/api/v1/write"

    def query(self, expr: str, at: float | None = None, lookback: str | None = None) -> list[dict]:
        """An instant query; `lookback` (VictoriaMetrics' `step`, default 5m like Prometheus) is how
        old the latest sample of a series may be for it to count."""
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {}),
                  **({"step": lookback} if lookback else {})}
        doc = http_json(f"{self.url}/api/v1/query?" + urllib.parse.urlencode(params))
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def wait_for(self, expr: str, predicate: Callable[[list[dict]], bool] = bool,
                 timeout: float = 60.0, every: float = 1.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        result: list[dict] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if predicate(result):
                return result
            time.sleep(every)
        raise AssertionError(f"{expr!r} never satisfied the condition in {timeout:.0f}s; last: {result}")

    def export(self, match: str, start: float, end: float) -> dict[Labels, list[tuple[float, float]]]:
        """Raw samples (seconds, value) per series, in time order, stale markers left out."""
        params = urllib.parse.urlencode({"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})
        with urllib.request.urlopen(f"{self.url}/api/v1/export?{params}", timeout=30) as response:
            lines = response.read().decode().splitlines()
        out: dict[Labels, list[tuple[float, float]]] = {}
        for line in lines:
            row = json.loads(line)
            samples = [(ts / 1000, float(value)) for ts, value in zip(row["timestamps"], row["values"])
                       if value is not None and not math.isnan(float(value))]
            out.setdefault(tuple(sorted(row["metric"].items())), []).extend(samples)
        return {k: sorted(v) for k, v in out.items()}

    def label_values(self, label: str, match: str) -> list[str]:
        url = f"{self.url}/api/v1/label/{label}/values?" + urllib.parse.urlencode({"match[]": match})
        return http_json(url)["data"]


class Vmalert(Service):
    """vmalert evaluating rule files against VictoriaMetrics; with `remote_write` it writes the
    recording rules' results and the ALERTS series back into it."""

    def __init__(self, name: str, workdir: Path, rule_files: list[Path], datasource: str, notifier: str,
                 interval: str, remote_write: str | None = None, lookback: str = "5m") -> None:
        super().__init__(name, workdir, "/-/healthy")
        self.lookback = lookback  # vmalert's query step: how long a series without samples still counts
        self.rule_files = rule_files
        self.datasource = datasource
        self.notifier = notifier
        self.interval = interval
        self.remote_write = remote_write

    def argv(self) -> list[str]:
        argv = [VMALERT, f"-httpListenAddr=127.0.0.1:{self.port}", f"-datasource.url={self.datasource}",
                f"-notifier.url={self.notifier}", f"-evaluationInterval={self.interval}",
                f"-datasource.queryStep={self.lookback}",
                "-loggerLevel=WARN", *(f"-rule={p}" for p in self.rule_files)]
        if self.remote_write:
            argv += [f"-remoteWrite.url={self.remote_write}", "-remoteWrite.flushInterval=1s"]
        return argv

    def groups(self) -> list[dict]:
        return http_json(self.url + "/api/v1/rules")["data"]["groups"]


def shard_config(example: dict[str, Any], index: int, count: int, jobs: dict[str, list[str]],
                 remote_write: str, interval: str) -> dict[str, Any]:
    """A remote-write example (deploy/prometheus/remote-write/) made to run here: every job keeps
    hashmod share `index` of `count` of the given loopback targets, scrapes every `interval`, and
    writes to `remote_write` in short batches; external label prometheus="shard-<index>"."""
    cfg = copy.deepcopy(example)
    cfg["global"].update(scrape_interval=interval, scrape_timeout=interval)
    cfg["global"]["external_labels"]["prometheus"] = f"shard-{index}"
    for job in cfg["scrape_configs"]:
        job.pop("file_sd_configs")
        job.update(static_configs=[{"targets": jobs[job["job_name"]]}], scrape_interval=interval,
                   scrape_timeout=interval)
        hashmod, keep = job["relabel_configs"]  # the example's two rules, nothing else
        assert hashmod["action"] == "hashmod" and keep == {
            "source_labels": [hashmod["target_label"]], "regex": keep["regex"], "action": "keep"}, job
        hashmod["modulus"], keep["regex"] = count, str(index)
    (remote,) = cfg["remote_write"]
    remote["url"] = remote_write
    # Short batches so a test sees a sample in VictoriaMetrics about a second after the scrape.
    remote["queue_config"].update(batch_send_deadline="1s", min_backoff="100ms", max_backoff="1s")
    return cfg


class PrometheusShard(Service):
    """Prometheus keeping shard `index` of `count` of every job (hashmod on __address__) and
    remote-writing all of it; in agent mode it stores nothing locally but the WAL."""

    def __init__(self, workdir: Path, config: dict[str, Any], index: int, agent: bool) -> None:
        super().__init__(f"prometheus-shard-{index}", workdir, "/-/ready")
        self.index, self.agent = index, agent
        self.external_labels: dict[str, str] = config["global"]["external_labels"]
        self.data = workdir / f"prometheus-{index}-data"
        self.config_path = workdir / f"prometheus-{index}.yml"
        self.config_path.write_text(yaml.safe_dump(config))

    def argv(self) -> list[str]:
        common = [PROMETHEUS, f"--config.file={self.config_path}",
                  f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        if self.agent:
            return [*common, "--enable-feature=agent", f"--storage.agent.path={self.data}"]
        return [*common, f"--storage.tsdb.path={self.data}", "--storage.tsdb.retention.time=1h"]

    def active_targets(self) -> set[tuple[str, str]]:
        doc = http_json(self.url + "/api/v1/targets?state=active")
        return {(t["labels"]["job"], t["labels"]["instance"]) for t in doc["data"]["activeTargets"]}


class NotifierSink:
    """An Alertmanager stand-in for vmalert: records every alert POSTed to /api/v2/alerts with the
    time it arrived."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                now = time.time()
                with outer._lock:
                    outer.received += [(now, alert) for alert in json.loads(body)]
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, since: float = 0.0, **labels: str) -> list[tuple[float, dict[str, Any]]]:
        with self._lock:
            return [(t, a) for t, a in self.received
                    if t >= since and all(a["labels"].get(k) == v for k, v in labels.items())]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
