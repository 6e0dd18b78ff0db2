"""Measured capacity of the scale path (docs/scaling.md): samples per second per CPU core of each
part, memory per active series, and bytes per stored sample. A bench, not part of `make test`.

    python bench/capacity.py run [--nodes 1000] [--interval 15] [--warmup 60] [--window 180]
    python bench/capacity.py tsdb [--nodes 20] [--interval 1] [--block 5m]
    python bench/capacity.py daemon [--scrapes 60]
    python bench/capacity.py series

run     bench/loadgen.py serves N simulated nodes (the demo node's 2,908 series each, the same
        share of them moving) from one process; a Prometheus agent (Debian prometheus 2.42,
        --enable-feature=agent) scrapes them all every --interval and remote-writes everything to
        single-node VictoriaMetrics (Debian victoria-metrics 1.79). Window 1 measures ingestion
        alone; then vmalert evaluates alerts/*.rules.yaml against VictoriaMetrics every interval
        and window 2 measures again. Per process: CPU seconds (utime + stime from /proc, so a
        busy shared machine stretches the run but hardly moves the per-core figures) and RSS;
        samples: the agent's prometheus_remote_storage_samples_total, VictoriaMetrics'
        vm_rows_inserted_total. Finally VictoriaMetrics is flushed and merged and its bytes per
        stored sample read (vm_data_size_bytes / vm_rows of its data parts; indexdb apart).
tsdb    Prometheus in server mode with blocks cut every --block (a hidden 2.42 flag; 2h by
        default) scrapes N simulated nodes; once the first block is written its chunk bytes per
        sample come from the block itself (meta.json numSamples).
daemon  CPU seconds an infrapulse node daemon (the template's) spends per /metrics scrape.
series  the series per node and per switch port, by source: the demo's node daemon and a fabric
        collector on the demo's four simulated switches (one per vendor profile, 16 ports each).

Results are printed and written as JSON (--out). docs/scaling.md has the figures and the
extrapolation to 10,000 GPUs. Memory: `run --nodes 1000` needs about 12 GiB free (the agent holds
2.6 KiB per active series) and takes about 20 minutes on 2 vCPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exporter"))
sys.path.insert(0, str(ROOT / "bench"))
import loadgen  # noqa: E402

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
VICTORIA_METRICS = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
VMALERT = shutil.which("vmalert") or "/usr/bin/vmalert"
REMOTE_WRITE_EXAMPLE = ROOT / "deploy" / "prometheus" / "remote-write" / "victoriametrics.yml"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", re.M)


# -- processes and their figures -------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 30.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def metric(url: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` on a /metrics page whose labels include `labels`."""
    total = 0.0
    for found, label_text, value in SAMPLE.findall(get(url).decode()):
        if found == name and all(f'{k}="{v}"' in (label_text or "") for k, v in labels.items()):
            total += float(value)
    return total


def metric_by(url: str, name: str, label: str) -> dict[str, float]:
    """The samples of `name` on a /metrics page by the value of one label."""
    out: dict[str, float] = {}
    for found, label_text, value in SAMPLE.findall(get(url).decode()):
        match = re.search(rf'{label}="([^"]*)"', label_text or "")
        if found == name and match:
            out[match.group(1)] = out.get(match.group(1), 0.0) + float(value)
    return out


class Process:
    def __init__(self, name: str, argv: list[str], workdir: Path, ready_url: str = "") -> None:
        self.name = name
        self.log = workdir / f"{name}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if ready_url:
            try:
                self.wait(ready_url)
            except BaseException:
                self.stop()  # never leave a half-started process behind
                raise

    def wait(self, url: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-2000:]}")
            try:
                get(url, timeout=2)
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"{self.name} not ready at {url}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Sink:
    """Where vmalert sends alerts (it needs a notifier); they are counted and dropped."""

    def __init__(self) -> None:
        self.alerts = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                outer.alerts += len(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def template_for(args: argparse.Namespace, workdir: Path, probes: bool = False) -> dict[str, Any]:
    path = Path(args.template) if args.template else workdir / "template.json"
    if path.exists():
        return json.loads(path.read_text())
    print(f"capturing the node template ({args.interval:g}s between two scrapes) ...", flush=True)
    return loadgen.capture(path, args.interval, probes=probes)


def start_loadgen(template_path: Path, nodes: int, workdir: Path) -> tuple[Process, int]:
    port = free_port()
    gen = Process("loadgen", [sys.executable, str(ROOT / "bench" / "loadgen.py"), "serve", str(template_path),
                              "--nodes", str(nodes), "--port", str(port)], workdir)
    try:
        gen.wait(f"http://127.0.0.1:{port}/node/0/metrics")
    except BaseException:
        gen.stop()
        raise
    return gen, port


def file_sd(workdir: Path, port: int, nodes: int) -> Path:
    path = workdir / "nodes.json"
    path.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"],
                                 "labels": {"__metrics_path__": f"/node/{k}/metrics",
                                            "instance": f"gpu-node-{k:04d}"}}
                                for k in range(nodes)]))
    return path


def scrape_config(targets: Path, interval: float) -> dict[str, Any]:
    return {"job_name": "infrapulse-node", "scrape_interval": f"{interval:g}s",
            "scrape_timeout": f"{min(interval, 10.0):g}s", "file_sd_configs": [{"files": [str(targets)]}]}


def wait_targets_up(url: str, nodes: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    up = 0
    while time.monotonic() < deadline:
        targets = json.loads(get(url + "/api/v1/targets?state=active"))["data"]["activeTargets"]
        up = sum(t["health"] == "up" for t in targets)
        if up == nodes:
            return
        time.sleep(2)
    raise RuntimeError(f"only {up} of {nodes} targets up after {timeout:.0f}s")


# -- run: agent -> VictoriaMetrics (-> vmalert) ------------------------------------------------------

def window(parts: dict[str, Process], counters: dict[str, Any], seconds: float) -> dict[str, Any]:
    """CPU seconds of each part and the growth of each counter over `seconds`."""
    cpu0 = {n: cpu_seconds(p.pid) for n, p in parts.items()}
    count0 = {n: f() for n, f in counters.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    cpu = {n: cpu_seconds(p.pid) - cpu0[n] for n, p in parts.items()}
    counts = {n: f() - count0[n] for n, f in counters.items()}
    return {"seconds": elapsed, "cpu_seconds": cpu, "counts": counts,
            "rss_bytes": {n: rss_bytes(p.pid) for n, p in parts.items()}}


def wait_caught_up(agent_url: str, interval: float, timeout: float) -> float:
    """Wait until the agent's remote write lags its scrapes by less than one interval (the first
    samples of millions of new series cost far more than steady appends); returns the wait."""
    t0 = time.monotonic()
    calm = 0
    while time.monotonic() - t0 < timeout:
        page = agent_url + "/metrics"
        newest = metric(page, "prometheus_remote_storage_highest_timestamp_in_seconds")
        sent = metric(page, "prometheus_remote_storage_queue_highest_sent_timestamp_seconds")
        calm = calm + 1 if sent and newest - sent < interval else 0
        if calm >= 3:
            return time.monotonic() - t0
        time.sleep(interval / 2)
    raise RuntimeError(f"remote write still behind after {timeout:.0f}s")


def wait_merged(vm_url: str, timeout: float = 900.0) -> None:
    """Ask VictoriaMetrics to flush and merge everything, then wait for its merges to finish."""
    get(vm_url + "/internal/force_flush")
    get(vm_url + "/internal/force_merge", timeout=timeout)
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline and quiet < 5:
        quiet = quiet + 1 if metric(vm_url + "/metrics", "vm_active_merges") == 0 else 0
        time.sleep(2)


def storage_figures(vm_url: str, data_dir: Path) -> dict[str, Any]:
    storage: dict[str, Any] = {}
    for kind in ("storage/small", "storage/big", "indexdb"):
        storage[kind] = {"bytes": metric(vm_url + "/metrics", "vm_data_size_bytes", type=kind),
                         "rows": metric(vm_url + "/metrics", "vm_rows", type=kind)}
    storage["series"] = metric(vm_url + "/metrics", "vm_new_timeseries_created_total")
    storage["disk_bytes"] = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file())
    return storage


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="capacity-"))
    template = template_for(args, workdir)
    template_path = workdir / "template.json"
    template_path.write_text(json.dumps(template))
    series_per_node = len(template["series"])
    offered = args.nodes * (series_per_node + 5) / args.interval  # + up, scrape_duration_seconds, ...
    processes: list[Process] = []
    result: dict[str, Any] = {
        "nodes": args.nodes, "interval": args.interval, "series_per_node": series_per_node,
        "moving_per_node": sum(1 for _, a, b, _ in template["series"] if a != b),
        "offered_samples_per_second": offered, "cpus": os.cpu_count()}
    try:
        gen, port = start_loadgen(template_path, args.nodes, workdir)
        processes.append(gen)
        vm_port = free_port()
        vm = Process("victoria-metrics", [
            VICTORIA_METRICS, f"-storageDataPath={workdir / 'vm-data'}",
            f"-httpListenAddr=127.0.0.1:{vm_port}", "-retentionPeriod=1d", "-loggerLevel=WARN",
            # the rules aggregate over every node: lift the per-query series cap (300k by default)
            "-search.maxUniqueTimeseries=50000000", "-search.maxSamplesPerQuery=10000000000"],
            workdir, f"http://127.0.0.1:{vm_port}/health")
        processes.append(vm)
        vm_url = f"http://127.0.0.1:{vm_port}"
        example = yaml.safe_load(REMOTE_WRITE_EXAMPLE.read_text())
        agent_port = free_port()
        config = {"global": {"scrape_interval": f"{args.interval:g}s",
                             "external_labels": {"prometheus": "shard-0"}},
                  "scrape_configs": [scrape_config(file_sd(workdir, port, args.nodes), args.interval)],
                  "remote_write": [{"url": vm_url + "/api/v1/write",
                                    "queue_config": example["remote_write"][0]["queue_config"]}]}
        (workdir / "agent.yml").write_text(yaml.safe_dump(config))
        agent = Process("prometheus-agent", [
            PROMETHEUS, f"--config.file={workdir / 'agent.yml'}",
            f"--web.listen-address=127.0.0.1:{agent_port}", "--enable-feature=agent",
            f"--storage.agent.path={workdir / 'agent-data'}", "--log.level=warn"],
            workdir, f"http://127.0.0.1:{agent_port}/-/ready")
        processes.append(agent)
        agent_url = f"http://127.0.0.1:{agent_port}"
        print(f"{args.nodes} nodes x {series_per_node} series every {args.interval:g}s; "
              "waiting for the targets", flush=True)
        wait_targets_up(agent_url, args.nodes, timeout=max(120.0, 4 * args.interval))
        result["catch_up_seconds"] = wait_caught_up(agent_url, args.interval, timeout=1200)
        time.sleep(args.warmup)
        parts = {"loadgen": gen, "prometheus-agent": agent, "victoria-metrics": vm}
        counters = {
            "agent_samples_sent": lambda: metric(agent_url + "/metrics",
                                                 "prometheus_remote_storage_samples_total"),
            "vm_rows_inserted": lambda: metric(vm_url + "/metrics", "vm_rows_inserted_total",
                                               type="promremotewrite"),
        }
        print(f"window 1 (ingestion): {args.window:g}s", flush=True)
        result["ingest"] = window(parts, counters, args.window)
        result["ingest"]["active_series"] = metric(vm_url + "/metrics", "vm_cache_entries",
                                                   type="storage/hour_metric_ids")
        if args.rules:
            result.update(rules_windows(args, workdir, parts, counters, agent, vm_url, processes))
        agent.stop()
        print("flushing and merging VictoriaMetrics' data", flush=True)
        wait_merged(vm_url)
        result["storage"] = storage_figures(vm_url, workdir / "vm-data")
        return result
    finally:
        for process in reversed(processes):
            process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def rules_windows(args: argparse.Namespace, workdir: Path, parts: dict[str, Process],
                  counters: dict[str, Any], agent: Process, vm_url: str,
                  processes: list[Process]) -> dict[str, Any]:
    """Window 2: vmalert evaluating the shipped rules during ingestion. Window 3: the agent
    stopped, so VictoriaMetrics' and vmalert's CPU is the rules' alone (over the data of the
    last minutes, still inside every rule's lookback)."""
    sink = Sink()
    vmalert_port = free_port()
    vmalert = Process("vmalert", [
        VMALERT, f"-httpListenAddr=127.0.0.1:{vmalert_port}", f"-datasource.url={vm_url}",
        f"-remoteWrite.url={vm_url}", f"-notifier.url={sink.url}", f"-evaluationInterval={args.interval:g}s",
        "-loggerLevel=WARN", *(f"-rule={p}" for p in sorted((ROOT / "alerts").glob("*.rules.yaml")))],
        workdir, f"http://127.0.0.1:{vmalert_port}/-/healthy")
    processes.append(vmalert)
    time.sleep(3 * args.interval)
    vmalert_url = f"http://127.0.0.1:{vmalert_port}"
    parts = {**parts, "vmalert": vmalert}
    counters = {**counters,
                "vmalert_iterations": lambda: metric(vmalert_url + "/metrics", "vmalert_iteration_total"),
                "vmalert_iteration_seconds": lambda: metric(vmalert_url + "/metrics",
                                                            "vmalert_iteration_duration_seconds_sum")}
    print(f"window 2 (ingestion + vmalert): {args.window:g}s", flush=True)
    with_rules = window(parts, counters, args.window)
    agent.stop()
    time.sleep(5)
    print(f"window 3 (vmalert alone): {args.window:g}s", flush=True)
    rules_only = window({n: p for n, p in parts.items() if n in ("victoria-metrics", "vmalert")},
                        {n: counters[n] for n in ("vmalert_iterations", "vmalert_iteration_seconds")},
                        args.window)
    seconds = metric_by(vmalert_url + "/metrics", "vmalert_iteration_duration_seconds_sum", "group")
    rounds = metric_by(vmalert_url + "/metrics", "vmalert_iteration_duration_seconds_count", "group")
    errors = metric(vmalert_url + "/metrics", "vmalert_execution_errors_total")
    vmalert.stop()
    return {"rules": with_rules, "rules_only": rules_only, "rule_groups": len(rounds),
            "group_seconds": {g: seconds[g] / rounds[g] for g in seconds if rounds.get(g)},
            "vmalert_errors": errors, "alerts_sent": sink.alerts}


def summarise_run(result: dict[str, Any]) -> list[str]:
    lines = [f"{result['nodes']} nodes x {result['series_per_node']} series "
             f"({result['moving_per_node']} moving) every {result['interval']:g}s: "
             f"{result['offered_samples_per_second']:,.0f} samples/s offered; "
             f"remote write caught up {result['catch_up_seconds']:.0f}s after the targets were up"]
    for label, key in (("ingestion", "ingest"), ("ingestion + vmalert", "rules")):
        if key not in result:
            continue
        w = result[key]
        samples = w["counts"]["vm_rows_inserted"]
        lines.append(f"{label}: {samples / w['seconds']:,.0f} samples/s into VictoriaMetrics "
                     f"over {w['seconds']:.0f}s")
        for part, cpu in w["cpu_seconds"].items():
            per_core = samples / cpu if cpu else float("inf")
            lines.append(f"  {part:17s} {cpu / w['seconds']:5.2f} cores  {per_core:>12,.0f} samples/s "
                         f"per core  RSS {w['rss_bytes'][part] / 2**20:,.0f} MiB")
    if "rules_only" in result:
        w = result["rules_only"]
        rounds = w["counts"]["vmalert_iterations"] / max(result["rule_groups"], 1)
        cpu = sum(w["cpu_seconds"].values())
        lines.append(f"rules alone: {rounds:.1f} rounds of {result['rule_groups']} groups in "
                     f"{w['seconds']:.0f}s, {cpu / max(rounds, 1e-9):.1f} CPU-seconds per round "
                     f"(VictoriaMetrics {w['cpu_seconds']['victoria-metrics']:.0f}s + vmalert "
                     f"{w['cpu_seconds']['vmalert']:.0f}s)")
        slowest = sorted(result["group_seconds"].items(), key=lambda kv: -kv[1])[:4]
        lines.append("  slowest groups: " + ", ".join(f"{g} {s:.1f}s" for g, s in slowest))
    s = result["storage"]
    data_bytes = s["storage/small"]["bytes"] + s["storage/big"]["bytes"]
    rows = s["storage/small"]["rows"] + s["storage/big"]["rows"]
    if rows:
        per_series = s["indexdb"]["bytes"] / max(s["series"], 1)
        lines.append(f"storage: {data_bytes / rows:.2f} bytes per sample ({rows:,.0f} samples, "
                     f"{rows / max(s['series'], 1):.0f} per series), index {per_series:.0f} bytes per series "
                     f"({s['series']:,.0f} series)")
    return lines


# -- tsdb: Prometheus server, bytes per sample in a block ---------------------------------------------

def tsdb(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="capacity-tsdb-"))
    template = template_for(args, workdir)
    template_path = workdir / "template.json"
    template_path.write_text(json.dumps(template))
    processes: list[Process] = []
    try:
        gen, port = start_loadgen(template_path, args.nodes, workdir)
        processes.append(gen)
        prom_port = free_port()
        config = {"global": {"scrape_interval": f"{args.interval:g}s"},
                  "scrape_configs": [scrape_config(file_sd(workdir, port, args.nodes), args.interval)]}
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        data = workdir / "prom-data"
        prom = Process("prometheus", [
            PROMETHEUS, f"--config.file={workdir / 'prometheus.yml'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            f"--storage.tsdb.path={data}", f"--storage.tsdb.min-block-duration={args.block}",
            f"--storage.tsdb.max-block-duration={args.block}", "--log.level=warn"],
            workdir, f"http://127.0.0.1:{prom_port}/-/ready")
        processes.append(prom)
        wait_targets_up(f"http://127.0.0.1:{prom_port}", args.nodes, timeout=120)
        cpu0, t0 = cpu_seconds(prom.pid), time.monotonic()
        print(f"{args.nodes} nodes every {args.interval:g}s; waiting for the first {args.block} block",
              flush=True)
        deadline = time.monotonic() + args.timeout
        while not list(data.glob("*/meta.json")):
            if time.monotonic() > deadline:
                raise RuntimeError("no block was cut")
            time.sleep(5)
        cpu = cpu_seconds(prom.pid) - cpu0
        elapsed = time.monotonic() - t0
        appended = metric(f"http://127.0.0.1:{prom_port}/metrics",
                          "prometheus_tsdb_head_samples_appended_total")
        blocks = []
        for meta_path in data.glob("*/meta.json"):
            meta = json.loads(meta_path.read_text())
            block = meta_path.parent
            chunks = sum(f.stat().st_size for f in (block / "chunks").iterdir())
            blocks.append({"samples": meta["stats"]["numSamples"], "series": meta["stats"]["numSeries"],
                           "chunk_bytes": chunks, "index_bytes": (block / "index").stat().st_size})
        return {"nodes": args.nodes, "interval": args.interval, "blocks": blocks, "cpu_seconds": cpu,
                "seconds": elapsed, "samples_appended_total": appended, "rss_bytes": rss_bytes(prom.pid)}
    finally:
        for process in reversed(processes):
            process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def summarise_tsdb(result: dict[str, Any]) -> list[str]:
    lines = []
    for b in result["blocks"]:
        lines.append(f"block: {b['samples']:,} samples of {b['series']:,} series: "
                     f"{b['chunk_bytes'] / b['samples']:.2f} bytes per sample in chunks, "
                     f"index {b['index_bytes'] / b['series']:.0f} bytes per series")
    rate = result["samples_appended_total"] / result["seconds"]
    lines.append(f"prometheus server: {result['cpu_seconds'] / result['seconds']:.2f} cores for about "
                 f"{rate:,.0f} samples/s ({rate * result['seconds'] / result['cpu_seconds']:,.0f} per core, "
                 f"scrape + TSDB + compaction), RSS {result['rss_bytes'] / 2**20:,.0f} MiB")
    return lines


# -- daemon: one node daemon's own cost ---------------------------------------------------------------

def daemon(args: argparse.Namespace) -> dict[str, Any]:
    """A node daemon in a child process; its CPU per /metrics scrape, idle CPU subtracted."""
    port = free_port()
    code = ("import asyncio, sys, pathlib, tempfile; sys.path.insert(0, sys.argv[1]); import loadgen\n"
            "async def main():\n"
            "    ready, stop = asyncio.Event(), asyncio.Event()\n"
            "    with tempfile.TemporaryDirectory() as w:\n"
            "        await loadgen.run_node_daemon(15.0, pathlib.Path(w), ready, stop, int(sys.argv[2]))\n"
            "asyncio.run(main())\n")
    with tempfile.TemporaryDirectory() as workdir:
        child = Process("node-daemon", [sys.executable, "-c", code, str(ROOT / "bench"), str(port)],
                        Path(workdir), f"http://127.0.0.1:{port}/healthz")
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            time.sleep(20)
            idle0, t0 = cpu_seconds(child.pid), time.monotonic()
            time.sleep(30)
            idle_rate = (cpu_seconds(child.pid) - idle0) / (time.monotonic() - t0)
            body = get(url)
            cpu0, t0 = cpu_seconds(child.pid), time.monotonic()
            for _ in range(args.scrapes):
                body = get(url)
            busy = cpu_seconds(child.pid) - cpu0 - idle_rate * (time.monotonic() - t0)
            series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
            return {"scrapes": args.scrapes, "series": series, "bytes": len(body), "idle_cores": idle_rate,
                    "cpu_per_scrape": busy / args.scrapes, "rss_bytes": rss_bytes(child.pid)}
        finally:
            child.stop()


# -- series: per node and per switch port, by source ----------------------------------------------------

def series(args: argparse.Namespace) -> dict[str, Any]:
    """Exposed series by source (catalog family -> source), from a node daemon (the template, with the
    active probes and the latency mesh on) and from a fabric collector on the demo's four switches."""
    from infrapulse import catalog, docs

    docs.load_everything()
    families = {f.name: f for f in catalog.all_families()}

    def source_of(name: str) -> str:
        for candidate in (name, *(name.removesuffix(s) for s in ("_bucket", "_sum", "_count", "_total"))):
            family = families.get(candidate) or families.get(candidate + "_total")
            if family is not None:
                return family.source or "daemon"
        return "process" if name.startswith(("process_", "python_")) else "other"

    workdir = Path(tempfile.mkdtemp(prefix="capacity-series-"))
    try:
        template = template_for(args, workdir, probes=True)
        node: dict[str, int] = {}
        for text, *_ in template["series"]:
            src = source_of(text.split("{", 1)[0])
            node[src] = node.get(src, 0) + 1
        fabric = fabric_series(workdir, source_of)
        return {"node": node, "node_total": len(template["series"]), "fabric": fabric}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def fabric_series(workdir: Path, source_of: Any) -> dict[str, Any]:
    """A fabric collector (`infrapulse run`) on the demo's simulated switches: series per switch."""
    import asyncio

    from infrapulse.simulate import gnmi_target
    from infrapulse.simulate.demo import DemoContext
    from infrapulse.simulate.scenarios import ScenarioBoard

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    started: dict[str, Any] = {}

    async def simulate() -> None:
        part = await gnmi_target.demo_part(DemoContext(workdir=workdir, scenarios=ScenarioBoard()))
        started["gnmi"] = part.sources["gnmi"]
        await stop.wait()
        await part.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(simulate(),), daemon=True)
    thread.start()
    while "gnmi" not in started:
        time.sleep(0.2)
    gnmi = started["gnmi"]
    gnmi["defaults"]["sample_interval"] = "2s"
    config = {"interval": "2s", "role": "fabric", "sources": {
        "infiniband": {"enabled": False}, "ethtool": {"enabled": False}, "nvml": {"enabled": False},
        "gnmi": gnmi}}
    (workdir / "fabric.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    collector = Process("fabric", [sys.executable, "-m", "infrapulse", "run", "--config",
                                   str(workdir / "fabric.yaml"), "--listen", f"127.0.0.1:{port}",
                                   "--log-level", "error"], workdir, f"http://127.0.0.1:{port}/healthz")
    try:
        time.sleep(20)  # every switch synced and sampled at least a few times
        text = get(f"http://127.0.0.1:{port}/metrics").decode()
    finally:
        collector.stop()
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
    per_switch: dict[str, dict[str, int]] = {}
    other: dict[str, int] = {}
    for name, labels, _ in SAMPLE.findall(text):
        switch = re.search(r'switch="([^"]+)"', labels or "")
        src = source_of(name)
        if switch:
            per_switch.setdefault(switch.group(1), {}).setdefault(src, 0)
            per_switch[switch.group(1)][src] += 1
        elif not name.startswith("#"):
            other[src] = other.get(src, 0) + 1
    profiles = {t["name"]: t["profile"] for t in gnmi["targets"]}
    return {"per_switch": per_switch, "profiles": profiles, "ports_per_switch": 16, "collector_other": other}


def summarise_series(result: dict[str, Any]) -> list[str]:
    lines = [f"node: {result['node_total']} series"]
    lines += [f"  {src:12s} {n:5d}" for src, n in sorted(result["node"].items(), key=lambda kv: -kv[1])]
    fabric = result["fabric"]
    for switch, by_source in sorted(fabric["per_switch"].items()):
        total = sum(by_source.values())
        lines.append(f"switch {switch} ({fabric['profiles'][switch]}): {total} series, "
                     f"{total / fabric['ports_per_switch']:.1f} per port")
    lines.append(f"collector itself (no switch label): {sum(fabric['collector_other'].values())} series")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", help="node template JSON (bench/loadgen.py capture); made when missing")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="agent -> VictoriaMetrics (-> vmalert) with N simulated nodes")
    r.add_argument("--nodes", type=int, default=1000)
    r.add_argument("--interval", type=float, default=15.0)
    r.add_argument("--warmup", type=float, default=60.0)
    r.add_argument("--window", type=float, default=180.0)
    r.add_argument("--no-rules", dest="rules", action="store_false", help="ingestion and storage only")
    t = sub.add_parser("tsdb", help="Prometheus server: bytes per sample of a TSDB block")
    t.add_argument("--nodes", type=int, default=20)
    t.add_argument("--interval", type=float, default=1.0)
    t.add_argument("--block", default="5m", help="block length (min and max block duration)")
    t.add_argument("--timeout", type=float, default=1200.0)
    d = sub.add_parser("daemon", help="a node daemon's CPU per /metrics scrape")
    d.add_argument("--scrapes", type=int, default=60)
    d.set_defaults(interval=15.0)
    s = sub.add_parser("series", help="series per node and per switch port by source")
    s.set_defaults(interval=15.0)
    args = parser.parse_args(argv)
    handlers = {"run": (run, summarise_run), "tsdb": (tsdb, summarise_tsdb),
                "daemon": (daemon, lambda r: [json.dumps(r)]), "series": (series, summarise_series)}
    measure, summarise = handlers[args.command]
    result = measure(args)
    print("\n".join(summarise(result)))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
