#!/usr/bin/env python3
"""The local demo stack without Docker: `infrapulse demo` + Prometheus + Alertmanager.

    .venv/bin/python scripts/demo_stack.py [--scrape-interval 5s] [--scenario pfc-storm ...]

Starts the daemon on the simulated fabric and, when the Debian binaries are installed
(/usr/bin/prometheus, /usr/bin/prometheus-alertmanager), a Prometheus scraping it with the
repo's rules (alerts/*.rules.yaml) and an Alertmanager with alerts/alertmanager.yml, all on
loopback ports with temporary data directories. Prints the URLs; Ctrl-C (or SIGTERM) stops
everything and removes the temporary files.

`Stack` is also what tests/e2e use to run the same stack with short intervals.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = os.environ.get("INFRAPULSE_PROMETHEUS", "/usr/bin/prometheus")
ALERTMANAGER = os.environ.get("INFRAPULSE_ALERTMANAGER", "/usr/bin/prometheus-alertmanager")


def free_port(preferred: int = 0) -> int:
    """`preferred` when it is free (the usual 9477/9090/9093, so URLs stay the same between
    runs), else any free port.

    The check binds with SO_REUSEADDR, as the daemon (aiohttp), Prometheus and Alertmanager (Go)
    bind their listeners: a port whose last connections are still in TIME_WAIT after a quick
    restart is free for them, so it is free here too. On Linux SO_REUSEADDR still refuses a port
    that something listens on."""
    for port in ((preferred, 0) if preferred else (0,)):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port")


def http_get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read()


def http_post_json(url: str, body: dict, timeout: float = 2.0) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback only
        return json.loads(response.read())


def wait_http(url: str, process: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} before it was ready")
        try:
            http_get(url, timeout=1.0)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} not ready at {url} after {timeout:.0f}s")


def prometheus_config(target: str, scrape_interval: str, evaluation_interval: str,
                      alertmanager: str | None) -> dict:
    """The same jobs and rules as deploy/prometheus/prometheus.yml, pointed at loopback ports."""
    config: dict = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval,
                   "scrape_timeout": scrape_interval},
        "rule_files": [str(ROOT / "alerts" / "*.rules.yaml")],
        # The demo daemon runs both roles (node and fabric) in one process: one target, one job.
        "scrape_configs": [{"job_name": "infrapulse", "static_configs": [{"targets": [target]}]}],
    }
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return config


class NotificationSink:
    """The demo's receiver: an HTTP server on loopback that records every webhook notification
    Alertmanager delivers (one JSON object per line in `path`, with the receiver it came to), so the
    demo's routing can be seen working and the e2e test can read what arrived."""

    def __init__(self, path: Path) -> None:
        self.path = path
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = {"unparsed": body.decode("utf-8", "replace")}
                record = {"receiver": self.path.strip("/"),
                          "authorization": bool(self.headers.get("Authorization")), "payload": payload}
                with sink.path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(record) + "\n")
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="notification-sink",
                                       daemon=True)
        self.thread.start()

    def notifications(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def alertmanager_config(workdir: Path, sink_url: str) -> Path | None:
    """alerts/alertmanager.yml with every webhook delivering to the local sink.

    The repo's config names production URLs and reads each receiver's bearer token from a
    `credentials_file` (secrets never live in the file): the demo points every webhook `url` (or
    `url_file`, Alertmanager >= 0.26) at `sink_url/<receiver>` and writes each credentials file it
    references into its temp dir, so notifications are delivered, not failed.
    """
    source = ROOT / "alerts" / "alertmanager.yml"
    if not source.exists():
        return None
    config = yaml.safe_load(source.read_text())
    secrets = workdir / "secrets"
    secrets.mkdir(exist_ok=True)
    for receiver in config.get("receivers", []):
        for hook in receiver.get("webhook_configs", []):
            hook.pop("url_file", None)
            hook["url"] = f"{sink_url}/{receiver['name']}"
            auth = (hook.get("http_config") or {}).get("authorization") or {}
            if "credentials_file" in auth:
                token = secrets / f"{receiver['name']}-token"
                token.write_text("demo-token\n")
                auth["credentials_file"] = str(token)
    path = workdir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class Stack:
    """Start the demo daemon and, where installed, Prometheus and Alertmanager; `close()` stops all."""

    def __init__(self, *, scrape_interval: str = "5s", evaluation_interval: str | None = None,
                 demo_interval: str = "2s", scenarios: tuple[str, ...] = (), with_prometheus: bool = True,
                 with_alertmanager: bool = True, log_dir: Path | None = None,
                 standard_ports: bool = False) -> None:
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval or scrape_interval
        self.demo_interval = demo_interval
        self.scenarios = scenarios
        self.with_prometheus = with_prometheus and Path(PROMETHEUS).exists()
        self.with_alertmanager = with_alertmanager and self.with_prometheus and Path(ALERTMANAGER).exists()
        self.workdir = Path(tempfile.mkdtemp(prefix="infrapulse-stack-"))
        self.log_dir = log_dir or self.workdir
        self.processes: list[tuple[str, subprocess.Popen]] = []
        self.exporter_url = self.prometheus_url = self.alertmanager_url = ""
        self.standard_ports = standard_ports  # try 9477/9090/9093 first (make demo); tests use any
        self.sink: NotificationSink | None = None  # where the demo's Alertmanager delivers

    def _port(self, standard: int) -> int:
        return free_port(standard if self.standard_ports else 0)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        # A new session: Ctrl-C in the terminal reaches only this script, which stops the children in order.
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=ROOT, start_new_session=True)
        log.close()
        self.processes.append((name, process))
        return process

    def start(self) -> Stack:
        try:
            self._start()
        except RuntimeError as exc:
            tails = self.log_tails()
            self.close()
            raise RuntimeError(f"{exc}\n{tails}") from None
        except BaseException:
            self.close()
            raise
        return self

    def log_tails(self, lines: int = 15) -> str:
        """The last lines of every child's log (the temp dir is removed on close)."""
        out = []
        for name, _ in self.processes:
            path = self.log_dir / f"{name}.log"
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {name} ---\n" + "\n".join(tail))
        return "\n".join(out)

    def _start(self) -> None:
        port = self._port(9477)
        argv = [sys.executable, "-m", "infrapulse", "demo", "--listen", f"127.0.0.1:{port}",
                "--interval", self.demo_interval, "--workdir", str(self.workdir / "demo")]
        for name in self.scenarios:
            argv += ["--scenario", name]
        demo = self._spawn("infrapulse", argv)
        self.exporter_url = f"http://127.0.0.1:{port}"
        wait_http(f"{self.exporter_url}/healthz", demo, "infrapulse demo", timeout=60)

        am_target = None
        if self.with_alertmanager:
            self.sink = NotificationSink(self.workdir / "notifications.jsonl")
            config = alertmanager_config(self.workdir, self.sink.url)
            if config is not None:
                am_port = self._port(9093)
                am = self._spawn("alertmanager", [
                    ALERTMANAGER, f"--config.file={config}", f"--storage.path={self.workdir / 'am-data'}",
                    f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address=",
                    "--log.level=warn"])
                self.alertmanager_url = f"http://127.0.0.1:{am_port}"
                wait_http(f"{self.alertmanager_url}/-/ready", am, "alertmanager")
                am_target = f"127.0.0.1:{am_port}"

        if self.with_prometheus:
            prom_port = self._port(9090)
            config = self.workdir / "prometheus.yml"
            config.write_text(yaml.safe_dump(prometheus_config(
                f"127.0.0.1:{port}", self.scrape_interval, self.evaluation_interval, am_target)))
            prom = self._spawn("prometheus", [
                PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}", "--storage.tsdb.retention.time=2h",
                "--log.level=warn"])
            self.prometheus_url = f"http://127.0.0.1:{prom_port}"
            wait_http(f"{self.prometheus_url}/-/ready", prom, "prometheus")

    def set_scenario(self, name: str, active: bool = True) -> dict:
        return http_post_json(f"{self.exporter_url}/api/v1/scenarios", {"name": name, "active": active})

    def known_scenarios(self) -> dict[str, str]:
        return json.loads(http_get(f"{self.exporter_url}/api/v1/scenarios"))["known"]

    def alive(self) -> list[str]:
        return [name for name, p in self.processes if p.poll() is None]

    def close(self) -> None:
        """SIGTERM every child (last started first), SIGKILL what is left after 5 s, remove temp files."""
        for _, process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for _, process in reversed(self.processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        if self.sink is not None:
            self.sink.close()
            self.sink = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="infrapulse demo with a local Prometheus and Alertmanager")
    parser.add_argument("--scrape-interval", default="5s",
                        help="Prometheus scrape/evaluation interval (default 5s)")
    parser.add_argument("--interval", default="2s", help="poll interval of the demo daemon (default 2s)")
    parser.add_argument("--scenario", action="append", default=[], metavar="NAME",
                        help="anomaly active from the start, repeatable "
                             "(pfc-storm, ecn-spike, ttft-surge, ...)")
    parser.add_argument("--no-prometheus", action="store_true", help="run only the daemon")
    args = parser.parse_args(argv)

    stopping = False

    def stop(signum, frame):  # noqa: ARG001 - signal handler signature
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    stack = Stack(scrape_interval=args.scrape_interval, demo_interval=args.interval,
                  scenarios=tuple(args.scenario), with_prometheus=not args.no_prometheus, standard_ports=True)
    try:
        stack.start()
    except RuntimeError as exc:
        print(f"demo failed to start: {exc}", file=sys.stderr)
        return 1
    print(f"infrapulse demo     {stack.exporter_url}/  (metrics: {stack.exporter_url}/metrics)")
    print(f"  scenarios:        curl -XPOST {stack.exporter_url}/api/v1/scenarios "
          "-H 'Content-Type: application/json' -d '{\"name\": \"pfc-storm\", \"active\": true}'")
    if stack.prometheus_url:
        print(f"Prometheus          {stack.prometheus_url}/  (rules: {stack.prometheus_url}/rules, "
              f"alerts: {stack.prometheus_url}/alerts)")
    else:
        print(f"Prometheus          not started ({PROMETHEUS} not installed: apt-get install prometheus)")
    if stack.alertmanager_url:
        print(f"Alertmanager        {stack.alertmanager_url}/")
        if stack.sink is not None:
            print(f"Notifications       {stack.sink.path} (what Alertmanager delivered, one JSON per line)")
    elif stack.prometheus_url:
        print("Alertmanager        not started "
              "(prometheus-alertmanager not installed, or no alerts/alertmanager.yml)")
    print("Grafana dashboards: docker compose up (compose.yaml), or import dashboards/*.json. Ctrl-C stops.")
    sys.stdout.flush()
    try:
        while not stopping:
            dead = [name for name, p in stack.processes if p.poll() is not None]
            if dead:
                print(f"{', '.join(dead)} exited; stopping\n{stack.log_tails()}", file=sys.stderr)
                return 1
            time.sleep(0.5)
    finally:
        stack.close()
        print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
