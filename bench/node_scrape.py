#!/usr/bin/env python3
"""infrapulse's infiniband collection beside prometheus-node-exporter, on the same sysfs tree.

The tree: 8 mlx5 devices, one InfiniBand port each, every PMA counter and hw_counter
(infrapulse.simulate.sysfs_tree.write_tree(root, 8)).

Measured, in one run:

* node_exporter (`--collector.disable-defaults --collector.infiniband --path.sysfs=<tree>`): it
  collects on every scrape, so one scrape = one full collection. CPU = utime+stime of the process
  from /proc/<pid>/stat around N scrapes; latency = client-side wall time of each GET /metrics.
* infrapulse, collection: `InfinibandReader.collect()` in this process, N times, CPU from
  time.process_time() (the reader is what the daemon runs in its worker thread each interval).
* infrapulse, collect + render: the same plus publishing into a Store and rendering the text
  exposition as the daemon's /metrics does (exposition.render_body; prometheus_client's
  generate_latest on trees without it), i.e. everything a node_exporter scrape does except HTTP.
* infrapulse daemon (`infrapulse run`, a subprocess with a long interval so it does not collect
  during the measurement, and `http.render_cache: 0s` so that every scrape renders): CPU from
  /proc/<pid>/stat and latency of N GET /metrics, i.e. the serving cost on top of the collection.
* paced, both processes side by side in one window: node_exporter and an infrapulse daemon
  collecting every 1 s (render cache off) are each scraped once a second for --paced seconds;
  CPU of each process from /proc over the window, per scrape: the whole process, idle work
  included, as Prometheus would see it at a 1 s scrape interval.

The three one-process measurements (node_exporter, collection, daemon) run `--rounds` times,
node_exporter first in one round and last in the next (ABBA): this 2-vCPU VM's speed drifts
within a run, by as much as the ratio's distance from a target. Each round's ratios come from
that round's own figures; the median round is printed, and every round's headline ratio.

Usage: .venv/bin/python bench/node_scrape.py [--scrapes 1000] [--devices 8] [--paced 30]
                                             [--rounds 3] [--exporter DIR]
--exporter runs another tree's exporter/ (e.g. `git archive` of a base commit) the same way.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "--exporter" in sys.argv:  # before importing infrapulse: measure another tree's code
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--exporter") + 1]).resolve()))

from prometheus_client import generate_latest  # noqa: E402
from prometheus_client.exposition import choose_encoder  # noqa: E402

from infrapulse.metrics import DaemonState, make_registry  # noqa: E402
from infrapulse.simulate.sysfs_tree import write_tree  # noqa: E402
from infrapulse.sources.nic.infiniband import InfinibandReader  # noqa: E402
from infrapulse.store import Store  # noqa: E402

try:
    from infrapulse.exposition import render_body  # noqa: E402
except ImportError:  # a tree from before the exposition encoder
    def render_body(registry, encoder):  # type: ignore[no-redef]
        return encoder(registry)

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


def wait_http(port: int, path: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{proc.args[0]} did not answer on port {port}")


def scrape_many(pid: int, port: int, n: int, must_contain: bytes) -> tuple[float, float, int]:
    """N scrapes over one keep-alive connection: (CPU seconds of `pid`, median latency s, body size)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(max(10, n // 20)):  # warm-up: connections, caches, Go/Python allocators
        conn.request("GET", "/metrics")
        conn.getresponse().read()
    latencies = []
    cpu0 = process_cpu_seconds(pid)
    size = 0
    for _ in range(n):
        started = time.perf_counter()
        conn.request("GET", "/metrics")
        body = conn.getresponse().read()
        latencies.append(time.perf_counter() - started)
        size = len(body)
    cpu = process_cpu_seconds(pid) - cpu0
    conn.close()
    if must_contain not in body:
        raise SystemExit(f"unexpected /metrics body from pid {pid}: {body[:300]!r}")
    return cpu, statistics.median(latencies), size


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def bench_node_exporter(root: Path, n: int) -> tuple[float, float, int]:
    port = free_port()
    proc = subprocess.Popen([NODE_EXPORTER, f"--path.sysfs={root}", "--collector.disable-defaults",
                             "--collector.infiniband", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(port, "/metrics", proc)
        return scrape_many(proc.pid, port, n, b'node_scrape_collector_success{collector="infiniband"} 1')
    finally:
        stop(proc)


def bench_collection(root: Path, n: int) -> tuple[float, float, int, float]:
    reader = InfinibandReader(root)
    reader.collect()  # the scan: opens the descriptors once
    files = len(reader.fd_paths)
    cpu0 = time.process_time()
    for _ in range(n):
        reader.collect()
    collect_cpu = time.process_time() - cpu0

    store = Store()
    registry = make_registry(store, DaemonState("bench", "node"))
    encoder, _ = choose_encoder("")
    cpu0 = time.process_time()
    for _ in range(n):
        for result in reader.collect():
            store.publish("infiniband", result.target, result.snapshot, 30.0)
            store.record_success("infiniband", result.target, 0.0, result.partial_errors)
        render_body(registry, encoder)
    full_cpu = time.process_time() - cpu0
    cpu0 = time.process_time()
    for _ in range(n):
        generate_latest(registry)
    reference_cpu = time.process_time() - cpu0
    reader.close()
    return collect_cpu, full_cpu, files, reference_cpu


def start_daemon(root: Path, workdir: Path, interval: str) -> tuple[subprocess.Popen, int]:
    config = workdir / f"bench-{interval}.yaml"
    # render_cache 0s: every scrape renders (the default 1 s cache would serve back-to-back
    # scrapes one render and hide its cost).
    config.write_text(f"interval: {interval}\nhttp: {{render_cache: 0s}}\n"
                      f"sources:\n  infiniband:\n    sysfs_root: {root}\n")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "infrapulse", "run", "--config", str(config),
                             "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())
    wait_http(port, "/healthz", proc)
    deadline = time.monotonic() + 20
    while True:  # until the first collection is published
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        if b"infrapulse_rdma_port_received_bytes_total" in conn.getresponse().read():
            return proc, port
        if time.monotonic() > deadline:
            stop(proc)
            raise SystemExit("the daemon never published infiniband metrics")
        time.sleep(0.1)


def child_env() -> dict[str, str]:
    """The daemon imports the same tree as this process."""
    import infrapulse

    return {**os.environ, "PYTHONPATH": str(Path(infrapulse.__file__).resolve().parents[1])}


def bench_paced(root: Path, workdir: Path, seconds: float) -> tuple[float, float, int]:
    """node_exporter and a daemon collecting every second, each scraped once a second, side by
    side: (node_exporter CPU s per scrape, daemon CPU s per scrape, scrapes)."""
    ne_port = free_port()
    ne = subprocess.Popen([NODE_EXPORTER, f"--path.sysfs={root}", "--collector.disable-defaults",
                           "--collector.infiniband", f"--web.listen-address=127.0.0.1:{ne_port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemon, port = start_daemon(root, workdir, "1s")
    try:
        wait_http(ne_port, "/metrics", ne)
        conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=10) for p in (ne_port, port)]
        time.sleep(3)  # settle: the daemon's first polls, both processes' allocators
        cpu0 = [process_cpu_seconds(ne.pid), process_cpu_seconds(daemon.pid)]
        started, scrapes = time.monotonic(), 0
        while time.monotonic() - started < seconds:
            for conn in conns:
                conn.request("GET", "/metrics")
                conn.getresponse().read()
            scrapes += 1
            time.sleep(max(0.0, started + scrapes - time.monotonic()))
        ne_cpu = process_cpu_seconds(ne.pid) - cpu0[0]
        d_cpu = process_cpu_seconds(daemon.pid) - cpu0[1]
        return ne_cpu / scrapes, d_cpu / scrapes, scrapes
    finally:
        stop(ne)
        stop(daemon)


def bench_daemon(root: Path, n: int, workdir: Path) -> tuple[float, float, int]:
    # A long interval: the daemon collects once at start, so the scrapes measure serving only.
    proc, port = start_daemon(root, workdir, "1h")
    try:
        return scrape_many(proc.pid, port, n, b"infrapulse_rdma_port_received_bytes_total")
    finally:
        stop(proc)


def measure_round(root: Path, n: int, workdir: Path, peer_first: bool) -> dict[str, tuple]:
    """node_exporter, then infrapulse's collection and daemon, or the other way round."""
    out: dict[str, tuple] = {}

    def peer() -> None:
        out["peer"] = bench_node_exporter(root, n)

    def ours() -> None:
        out["collection"] = bench_collection(root, n)
        out["daemon"] = bench_daemon(root, n, workdir)

    for step in ((peer, ours) if peer_first else (ours, peer)):
        step()
    return out


def headline_ratio(figures: dict[str, tuple]) -> float:
    """CPU of infrapulse's collection + daemon scrape over node_exporter's scrape, in one round."""
    return (figures["collection"][0] + figures["daemon"][0]) / figures["peer"][0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=1000, help="collections/scrapes per measurement")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--paced", type=float, default=30.0, help="seconds of 1/s scrapes side by side")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of the one-process measurements, the order turned every round")
    parser.add_argument("--exporter", help="another tree's exporter/ directory to measure")
    args = parser.parse_args()
    if not os.path.exists(NODE_EXPORTER):
        print(f"{NODE_EXPORTER} not found: apt-get install prometheus-node-exporter", file=sys.stderr)
        return 2
    n = args.scrapes
    with tempfile.TemporaryDirectory(prefix="infrapulse-bench-") as tmp:
        workdir = Path(tmp)
        root = workdir / "sys"
        write_tree(root, args.devices)
        version = subprocess.run([NODE_EXPORTER, "--version"], capture_output=True, text=True)
        ne_version = (version.stdout or version.stderr).splitlines()[0]

        rounds = [measure_round(root, n, workdir, peer_first=i % 2 == 0) for i in range(args.rounds)]
        paced_ne, paced_daemon, paced_n = bench_paced(root, workdir, args.paced)

    headline = [headline_ratio(r) for r in rounds]
    median = sorted(rounds, key=headline_ratio)[(len(rounds) - 1) // 2]
    ne_cpu, ne_latency, ne_size = median["peer"]
    collect_cpu, full_cpu, files, reference_cpu = median["collection"]
    d_cpu, d_latency, d_size = median["daemon"]

    per_k = 1000 / n
    print(f"tree: {args.devices} mlx5 devices x 1 port, all counters/ and hw_counters/; "
          f"{n} collections each, {args.rounds} rounds alternated (figures: the median round by "
          "the collection + daemon scrape ratio)")
    print(f"peer: {ne_version}")
    print(f"infrapulse reads {files} files per collection (node_exporter 1.5 reads counters/ only, "
          f"no hw_counters)")
    print()
    print(f"{'':44} {'CPU s / 1000':>13} {'median /metrics':>16} {'body bytes':>11}")
    print(f"{'node_exporter scrape (= collection)':44} {ne_cpu * per_k:13.3f} {ne_latency * 1e3:13.2f} ms "
          f"{ne_size:11d}")
    print(f"{'infrapulse collection (in-process)':44} {collect_cpu * per_k:13.3f} {'-':>16}")
    print(f"{'infrapulse collection + render (in-process)':44} {full_cpu * per_k:13.3f} {'-':>16}")
    print(f"{'  (render through prometheus_client alone)':44} {reference_cpu * per_k:13.3f} {'-':>16}")
    print(f"{'infrapulse daemon scrape (cache off, no poll)':44} {d_cpu * per_k:13.3f} "
          f"{d_latency * 1e3:13.2f} ms {d_size:11d}")
    print(f"paced, side by side for {paced_n} s (1 scrape/s each; the daemon also polls every 1 s):")
    print(f"{'  node_exporter process':44} {paced_ne * 1000:13.3f}")
    print(f"{'  infrapulse daemon process':44} {paced_daemon * 1000:13.3f}")
    print()
    print(f"ratio CPU, infrapulse collection / node_exporter:            {collect_cpu / ne_cpu:6.2f}")
    print(f"ratio CPU, infrapulse collection + render / node_exporter:   {full_cpu / ne_cpu:6.2f}")
    print("ratio CPU, infrapulse collection + daemon scrape / node_exporter: "
          f"{(collect_cpu + d_cpu) / ne_cpu:6.2f} (rounds: {', '.join(f'{r:.2f}' for r in headline)})")
    print(f"ratio median /metrics latency, infrapulse / node_exporter:  {d_latency / ne_latency:6.2f}")
    print(f"ratio CPU, paced whole processes, infrapulse / node_exporter: {paced_daemon / paced_ne:6.2f} "
          f"(/proc ticks are {1000 / CLK_TCK:.0f} ms: {paced_n} s measure "
          f"{paced_ne * paced_n * CLK_TCK:.0f} and {paced_daemon * paced_n * CLK_TCK:.0f} ticks)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
