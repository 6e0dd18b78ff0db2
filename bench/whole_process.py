"""What a running infrapulse instance costs, measured on the whole process (issue 20, item 0).

Every other bench measures a part (ingest alone, one render, one health pass); users pay for the
daemon as it runs: streams arriving, a health pass every interval, Prometheus scraping. This
bench runs the real daemon (`python -m infrapulse run --config ...`, its own process) against the
project's simulators (other processes) and reads the daemon's CPU from /proc/<pid>/stat
(utime + stime of the daemon only: simulators and scraper excluded, so a busy shared machine
stretches the run but hardly moves the per-core figures).

    python bench/whole_process.py fabric [--switches 32 --small-switches 16 --ports 64 --seconds 120]
    python bench/whole_process.py node   [--seconds 120]
    python bench/whole_process.py all    [--out result.json]

fabric  `infrapulse simulate gnmi` serves N switches x 64 ports in the nvidia-cumulus dialect
        (PROTO, the 5.16 capture's encodings) on loopback; the daemon subscribes at 10 s sampling,
        health.interval 60 s, http.render_cache 0 s. Run twice (--small-switches, then
        --switches) so that RSS per 100k series is a slope between two fabric sizes, not a ratio
        that hides the fixed cost. The notification shape the simulator sends (updates per
        notification, what the prefix holds) is read off the wire and checked against the real
        Cumulus capture in shared/real/gnmi/: repacking the stream is not an optimisation.
node    the demo's node simulation (simulated sysfs/ethtool tree, 8 fake GPUs through the NVML
        fake and a fake dcgm-exporter, two serving engines, the RoCE CC/QoS config of 4 netdevs read
        at its own default interval) in a simulator process; the node daemon at a 5 s interval,
        render cache off.

Both: a scraper GETs /metrics every 15 s as Prometheus does (its Accept and gzip), and py-spy
(`record --format raw --nonblocking`) samples the daemon for --profile-seconds in the middle of
the window; stacks are bucketed into ingest / transport (grpc) / health / render / event loop /
other, beside the CPU of every daemon thread by name (gRPC's C threads are invisible to py-spy).
The load average of the machine is printed before and after each window.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
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
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exporter"))

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
CUMULUS_CAPTURE = Path(os.environ.get("INFRAPULSE_REAL", ROOT.parent / "shared" / "real")) / "gnmi" / \
    "cumulus_5.16_gnmic_subscribe_response.txt"
PROFILE = "nvidia-cumulus"
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                     "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")  # Prometheus 2.42's scrape Accept
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_LINE = re.compile(rb"^[a-zA-Z_:][^ {]*(\{[^}]*\})? ", re.M)


# -- the daemon process, from /proc ------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime of every thread


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (threads of one name summed)."""
    out: Counter[str] = Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[name] += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return dict(out)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


class Process:
    def __init__(self, name: str, argv: list[str], workdir: Path) -> None:
        self.name = name
        self.log = workdir / f"{name}.log"
        with self.log.open("wb") as log:
            env = {**os.environ, "PYTHONPATH": str(ROOT / "exporter")}
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=workdir, env=env)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"{self.name} exited with {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# -- the scraper ----------------------------------------------------------------------------------------

class Scraper:
    """GET /metrics every `interval` seconds, as Prometheus does; keeps what each scrape saw."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.scrapes: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.scrapes.append(scrape(self.url))
            except OSError as exc:
                self.scrapes.append({"error": str(exc), "at": time.monotonic()})
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))


def scrape(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
    t0 = time.monotonic()
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback only
        raw = response.read()
        gzipped = response.headers.get("Content-Encoding") == "gzip"
    seconds = time.monotonic() - t0
    body = gzip.decompress(raw) if gzipped else raw
    updates = sum(float(m.group(1)) for m in re.finditer(
        rb"^infrapulse_switch_updates_total\{[^}]*\} (\S+)", body, re.M))
    up = len(re.findall(rb'^infrapulse_source_up\{source="gnmi",[^}]*\} 1(\.0)?$', body, re.M))
    return {"at": time.monotonic(), "seconds": seconds, "bytes": len(raw), "gzip": gzipped,
            "series": len(SAMPLE_LINE.findall(body)), "updates": updates, "gnmi_up": up}


def series_by_family(url: str) -> dict[str, int]:
    """Series per metric name in the text format (what the series count is made of)."""
    with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 - loopback only
        body = response.read()
    names = Counter(m.group(1).decode() for m in re.finditer(rb"^([a-zA-Z_:][^ {]*)", body, re.M))
    return dict(names.most_common())


# -- py-spy and the split -------------------------------------------------------------------------------

# Leaf frames of a thread that sleeps: py-spy --nonblocking cannot always tell them from running
# ones, so they are counted apart and left out of the split.
WAITING = ("Condition.wait (threading.py", "EpollSelector.select (selectors.py",
           "_worker (concurrent/futures", "Event.wait (threading.py")


def classify(stack: str) -> str:
    """One py-spy stack (root;...;leaf) -> the part of the daemon it belongs to."""
    if "/health/" in stack:
        return "health"
    if any(k in stack for k in ("prometheus_client/", "infrapulse/metrics.py", "infrapulse/exposition",
                                "infrapulse/encod", "metrics_handler", "gzip.py", "zlib")):
        return "render"
    frames = stack.split(";")
    if frames[-1].startswith(WAITING):
        return "waiting"
    if frames[-1].startswith("Thread.run (threading.py"):
        # A thread whose target has no Python frame: in the daemon that is grpc.aio's completion
        # queue poller (`_poll_wrapper`, Cython; `profile` lists the threads py-spy saw).
        return "transport (grpc)"
    for frame in reversed(frames):  # the leaf-most of gRPC and our ingest decides
        if "(grpc/" in frame or "/grpc/" in frame or "cygrpc" in frame or ".pyx" in frame:
            return "transport (grpc)"
        if "/sources/" in frame or "textparse" in frame or "infrapulse/scrape.py" in frame \
                or "infrapulse/store.py" in frame:
            return "ingest"
    if any("asyncio/" in f or "selectors.py" in f for f in frames):
        return "event loop"
    return "other"


def profile(pid: int, seconds: float, out: Path) -> dict[str, Any]:
    """py-spy record (raw folded stacks) -> samples per part, and the hottest leaf frames."""
    argv = [PY_SPY, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "100",
            "--format", "raw", "--nonblocking", "--output", str(out)]
    dump = subprocess.run([PY_SPY, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True,
                          text=True, timeout=60)
    thread_names = sorted(set(re.findall(r'^Thread \S+ \([^)]*\): "([^"]*)"', dump.stdout, re.M)))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0 or not out.exists():
        return {"error": f"py-spy failed ({done.returncode}): {done.stderr.strip()[-300:]}"}
    parts: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        parts[classify(stack)] += n
        leaves[stack.split(";")[-1]] += n
    waiting = parts.pop("waiting", 0)
    busy = total - waiting
    return {"samples": total, "waiting_share": waiting / total if total else 0.0,
            "parts": {k: v / busy for k, v in parts.most_common()} if busy else {},
            "top_leaves": [(k, v / total) for k, v in leaves.most_common(12)] if total else [],
            "raw": str(out), "threads": thread_names}


# -- the notification shape ------------------------------------------------------------------------------

def capture_shape(path: Path = CUMULUS_CAPTURE) -> dict[str, Any]:
    """The real Cumulus 5.16 subscribe response: one notification's prefix and its updates."""
    text = path.read_text().split("=====")[0]
    prefix = re.search(r'"prefix": "([^"]*)"', text)
    paths = re.findall(r'"Path": "([^"]*)"', text)
    return {"prefix": prefix.group(1) if prefix else "", "updates_shown": len(paths),
            "elided": "..." in text, "relative_paths": all(not p.startswith("/") for p in paths),
            "example_paths": paths[:3]}


def simulator_shape(address: str) -> dict[str, Any]:
    """What one simulated switch sends up to its sync_response, read off the wire with the
    daemon's own Subscribe requests (the nvidia-cumulus profile, PROTO)."""
    import grpc
    from pygnmi.spec.v080 import gnmi_pb2 as pb

    from infrapulse.sources.gnmi.profile import load_profiles
    from infrapulse.sources.gnmi.session import SUBSCRIBE_METHOD, subscribe_request

    per_note: list[int] = []
    prefixes_with_keys = 0
    multi_instance = 0
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(SUBSCRIBE_METHOD,
                                     request_serializer=pb.SubscribeRequest.SerializeToString,
                                     response_deserializer=pb.SubscribeResponse.FromString)
        for stream in load_profiles()[PROFILE].streams:
            request = subscribe_request(stream, "proto", 10.0)
            responses = call(iter([request]), timeout=30)
            try:
                for resp in responses:
                    if resp.sync_response:
                        break
                    note = resp.update
                    per_note.append(len(note.update))
                    prefixes_with_keys += bool(note.prefix.elem) and bool(note.prefix.elem[-1].key)
                    # an update path with keys would mean several container instances in one notification
                    multi_instance += any(e.key for u in note.update for e in u.path.elem)
            finally:
                responses.cancel()
    per_note.sort()
    n = len(per_note)
    return {"notifications": n, "updates": sum(per_note),
            "updates_per_notification": {"min": per_note[0], "median": per_note[n // 2], "max": per_note[-1],
                                         "mean": sum(per_note) / n} if n else {},
            "keyed_prefix_share": prefixes_with_keys / n if n else 0.0,
            "multi_instance_notifications": multi_instance}


def shape_verdict(sim: dict[str, Any], real: dict[str, Any]) -> str:
    """The real shape: the prefix is one list entry (it ends with a keyed element, as
    `system/cpus/cpu[index=0]`), every leaf below it an update with a relative, key-free path. A
    simulator that packed several entries into one notification would flatter the transport; one
    leaf container per notification would punish it."""
    ok = (sim["notifications"] > 0 and sim["multi_instance_notifications"] == 0
          and sim["keyed_prefix_share"] == 1.0 and real["relative_paths"] and real["prefix"].endswith("]"))
    return "matches the capture" if ok else "DOES NOT match the capture"


# -- fabric -------------------------------------------------------------------------------------------

def fabric_config(workdir: Path, targets_file: Path, port: int) -> Path:
    config = {
        "listen": f"127.0.0.1:{port}", "interval": "10s", "role": "fabric",
        "state_dir": str(workdir / "state"),
        "http": {"render_cache": "0s"}, "health": {"interval": "60s"},
        "sources": {"infiniband": {"enabled": False}, "ethtool": {"enabled": False},
                    "nvml": {"enabled": False},
                    "gnmi": {"defaults": {"insecure": True, "profile": PROFILE, "sample_interval": "10s"},
                             "targets_file": str(targets_file)}},
    }
    path = workdir / "fabric.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def wait_for(predicate, timeout: float, what: str, procs: list[Process]) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for p in procs:
            p.check()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(1.0)


def measure(daemon: Process, url: str, args: argparse.Namespace, seconds: float, workdir: Path,
            tag: str, with_profile: bool) -> dict[str, Any]:
    """The steady-state window: CPU and RSS of the daemon, scrapes every 15 s, py-spy mid-window."""
    scraper = Scraper(url, args.scrape_interval)
    load_before = load()
    rss: list[float] = []
    c0, t0, th0 = cpu_seconds(daemon.pid), time.monotonic(), thread_cpu(daemon.pid)
    scraper.start()
    spy: dict[str, Any] = {}
    spy_thread = None
    if with_profile and args.profile_seconds > 0:
        def run_spy() -> None:
            time.sleep(max(0.0, (seconds - args.profile_seconds) / 2))
            spy.update(profile(daemon.pid, args.profile_seconds, workdir / f"py-spy-{tag}.txt"))
        spy_thread = threading.Thread(target=run_spy, daemon=True)
        spy_thread.start()
    while time.monotonic() - t0 < seconds:
        daemon.check()
        rss.append(rss_mb(daemon.pid))
        time.sleep(5.0)
    c1, t1, th1 = cpu_seconds(daemon.pid), time.monotonic(), thread_cpu(daemon.pid)
    scraper.stop()
    families = series_by_family(url)  # after the window: its render is not in the figures
    if spy_thread is not None:
        spy_thread.join(args.profile_seconds + 90)
    good = [s for s in scraper.scrapes if "error" not in s]
    if len(good) < 2:
        raise SystemExit(f"{tag}: fewer than two good scrapes in the window: {scraper.scrapes}")
    series = good[-1]["series"]
    cpu = (c1 - c0) / (t1 - t0)
    updates = (good[-1]["updates"] - good[0]["updates"]) / (good[-1]["at"] - good[0]["at"])
    threads = {k: (th1.get(k, 0.0) - th0.get(k, 0.0)) / (t1 - t0) for k in th1}
    rss_mid = sorted(rss)[len(rss) // 2]
    return {"tag": tag, "window_s": t1 - t0, "series": series, "cpu_cores": cpu,
            "cpu_pct_per_100k": 100 * cpu / series * 1e5, "rss_mb": rss_mid, "rss_max_mb": max(rss),
            "updates_per_s": updates, "updates_per_cpu_s": updates / cpu if cpu else 0.0,
            "scrapes": len(good), "scrape_errors": len(scraper.scrapes) - len(good),
            "scrape_s_max": max(s["seconds"] for s in good), "scrape_bytes": good[-1]["bytes"],
            "threads_cores": {k: v for k, v in sorted(threads.items(), key=lambda kv: -kv[1]) if v > 0.001},
            "profile": spy, "load_before": load_before, "load_after": load(), "families": families}


def fabric_size(args: argparse.Namespace, switches: int, seconds: float,
                with_profile: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"whole-fabric-{switches}-"))
    targets = workdir / "targets.yaml"
    sim = Process("simulator", [sys.executable, "-m", "infrapulse", "simulate", "gnmi",
                                "--switches", str(switches), "--ports", str(args.ports), "--profile", PROFILE,
                                "--targets-file", str(targets)], workdir)
    daemon = None
    try:
        wait_for(targets.exists, 120, "the simulator's targets file", [sim])
        shape = None
        if with_profile:
            first = yaml.safe_load(targets.read_text())["targets"][0]["address"]
            shape = simulator_shape(first)
        port = free_port()
        config = fabric_config(workdir, targets, port)
        daemon = Process("daemon", [sys.executable, "-m", "infrapulse", "run", "--config", str(config),
                                    "--log-level", "warning"], workdir)
        url = f"http://127.0.0.1:{port}/metrics"
        synced: list[float] = []

        def all_up() -> bool:
            try:
                seen = scrape(url)
            except OSError:
                return False
            return seen["gnmi_up"] >= switches

        t_start = time.monotonic()
        wait_for(all_up, 300, f"{switches} switches synced", [sim, daemon])
        synced.append(time.monotonic() - t_start)
        time.sleep(args.settle)
        result = measure(daemon, url, args, seconds, workdir, f"fabric-{switches}", with_profile)
        result.update({"switches": switches, "ports": args.ports, "sync_s": synced[0], "shape": shape,
                       "simulator_cpu_cores": None})
        return result
    finally:
        if daemon is not None:
            daemon.stop()
        sim.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def fabric(args: argparse.Namespace) -> dict[str, Any]:
    big = fabric_size(args, args.switches, args.seconds, with_profile=True)
    shape = big["shape"]
    # What the simulator should deliver at 10 s sampling: one full sample per switch per interval.
    # On a loaded machine the simulator falls behind; then the figures are not a steady state.
    big["updates_expected_per_s"] = shape["updates"] * big["switches"] / 10.0
    result = {"mode": "fabric", "big": big, "capture_shape": capture_shape()}
    if args.small_switches:
        small = fabric_size(args, args.small_switches, args.small_seconds, with_profile=False)
        small["updates_expected_per_s"] = shape["updates"] * small["switches"] / 10.0
        result["small"] = small
        grown = big["series"] - small["series"]
        slope = (big["rss_mb"] - small["rss_mb"]) / grown * 1e5 if grown else float("nan")
        result["rss_mb_per_100k_slope"] = slope
    return result


# -- node ---------------------------------------------------------------------------------------------

async def simulate_node(workdir: Path) -> None:
    """The simulator process of `node`: the demo's node simulation, its GPUs and two engines."""
    from infrapulse.simulate import gpus, node, roce_cc
    from infrapulse.simulate.demo import DemoContext, close_parts
    from infrapulse.simulate.scenarios import ScenarioBoard
    from infrapulse.simulate.serving_engines import DEMO_ENGINES, EngineServer

    ctx = DemoContext(workdir=workdir, scenarios=ScenarioBoard())
    # roce_cc after node: it reads the node's sysfs tree; its config is read at the default interval.
    parts = [await node.demo_part(ctx), await gpus.demo_part(ctx), await roce_cc.demo_part(ctx)]
    parts[-1].sources["roce_config"].pop("interval")
    servers = []
    for i, (name, variant, model, rate, dp, batch_limit) in enumerate(DEMO_ENGINES[:2]):
        server = EngineServer(variant, model=model, seed=i, scenarios=ctx.scenarios, arrival_rate=rate,
                              dp_ranks=dp, batch_limit=batch_limit)
        await server.start()
        servers.append((name, server))
    sources: dict[str, Any] = {}
    for part in parts:
        sources.update(part.sources)
    sources["serving"] = {"endpoints": [{"name": n, "url": s.url} for n, s in servers]}
    (workdir / "sources.json").write_text(json.dumps(sources))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for _, server in servers:
        await server.stop()
    await close_parts(parts)


def node_mode(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="whole-node-"))
    sim = Process("simulator", [sys.executable, str(Path(__file__).resolve()), "_simulate-node",
                                str(workdir)], workdir)
    daemon = None
    try:
        wait_for((workdir / "sources.json").exists, 120, "the node simulator", [sim])
        port = free_port()
        config = {"listen": f"127.0.0.1:{port}", "interval": "5s", "role": "node",
                  "state_dir": str(workdir / "state"), "http": {"render_cache": "0s"},
                  "sources": json.loads((workdir / "sources.json").read_text())}
        (workdir / "node.yaml").write_text(yaml.safe_dump(config))
        daemon = Process("daemon", [sys.executable, "-m", "infrapulse", "run", "--config",
                                    str(workdir / "node.yaml"), "--log-level", "warning"], workdir)
        url = f"http://127.0.0.1:{port}/metrics"

        def serving() -> bool:
            try:
                return scrape(url)["series"] > 0
            except OSError:
                return False

        wait_for(serving, 120, "the node daemon", [sim, daemon])
        time.sleep(args.settle)
        result = measure(daemon, url, args, args.seconds, workdir, "node", with_profile=True)
        ib = workdir / "node-sysfs" / "class" / "infiniband"
        result["devices"] = sorted(p.name for p in ib.iterdir())
        return {"mode": "node", "node": result}
    finally:
        if daemon is not None:
            daemon.stop()
        sim.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


# -- output -------------------------------------------------------------------------------------------

def window_lines(r: dict[str, Any]) -> list[str]:
    lines = [f"  series {r['series']:,}; daemon CPU {100 * r['cpu_cores']:.1f} % of a core over "
             f"{r['window_s']:.0f} s = {r['cpu_pct_per_100k']:.1f} % of a core per 100k series; "
             f"RSS {r['rss_mb']:.0f} MB (max {r['rss_max_mb']:.0f})",
             f"  scrapes {r['scrapes']} (errors {r['scrape_errors']}), slowest {r['scrape_s_max']:.2f} s, "
             f"{r['scrape_bytes'] / 1e6:.1f} MB on the wire",
             f"  {r['load_before']} before, {r['load_after'].split('average ')[1]} after"]
    if r.get("updates_per_s"):
        line = (f"  {r['updates_per_s']:,.0f} updates/s = {r['updates_per_cpu_s']:,.0f} updates per "
                "daemon CPU-second")
        expected = r.get("updates_expected_per_s")
        if expected:
            kept = r["updates_per_s"] / expected
            line += f"; the simulator delivered {100 * kept:.0f} % of its {expected:,.0f} updates/s"
            if kept < 0.9:
                line += " -- BEHIND: not a steady state (machine too loaded?), per-100k figures flatter"
        lines.insert(1, line)
    top = list(r.get("families", {}).items())[:6]
    lines.append("  largest families: " + ", ".join(f"{k} {v:,}" for k, v in top))
    lines.append("  threads (% of a core): "
                 + ", ".join(f"{k} {100 * v:.1f}" for k, v in r["threads_cores"].items()))
    spy = r.get("profile") or {}
    if "error" in spy:
        lines.append(f"  py-spy: {spy['error']}")
    elif spy:
        lines.append(f"  py-spy split of the busy Python samples ({spy['samples']} samples, "
                     f"{100 * spy['waiting_share']:.0f} % in select / Condition.wait left out): "
                     + ", ".join(f"{k} {100 * v:.0f} %" for k, v in spy["parts"].items()))
        lines += [f"    {100 * share:4.1f} %  {leaf}" for leaf, share in spy["top_leaves"][:8]]
        lines.append("  Python threads: " + ", ".join(spy.get("threads", [])))
    return lines


def summarise(result: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if "fabric" in result:
        f = result["fabric"]
        big, cap = f["big"], f["capture_shape"]
        shape = big["shape"]
        upn = shape["updates_per_notification"]
        out += [f"fabric: {big['switches']} switches x {big['ports']} ports, {PROFILE} PROTO, 10 s sampling, "
                "health.interval 60 s, render cache off, a scrape every 15 s",
                f"  notification shape (simulator, initial sample of one switch): {shape['notifications']} "
                f"notifications, updates per notification min {upn['min']} / median {upn['median']} / "
                f"max {upn['max']} (mean {upn['mean']:.1f}); prefix ends at a list entry in "
                f"{100 * shape['keyed_prefix_share']:.0f} %, {shape['multi_instance_notifications']} "
                "notifications span several entries",
                f"  real capture ({CUMULUS_CAPTURE.name}): prefix {cap['prefix']!r}, {cap['updates_shown']} "
                f"relative-path updates shown{' (list elided)' if cap['elided'] else ''} -> "
                f"{shape_verdict(shape, cap)}",
                f"{big['switches']} switches (synced in {big['sync_s']:.0f} s):"] + window_lines(big)
        if "small" in f:
            small = f["small"]
            out += [f"{small['switches']} switches:"] + window_lines(small)
            out.append(f"RSS slope between {small['series']:,} and {big['series']:,} series: "
                       f"{f['rss_mb_per_100k_slope']:.0f} MB per 100k series")
    if "node" in result:
        n = result["node"]["node"]
        out += [f"node: {', '.join(n['devices'])}; 8 fake GPUs (NVML fake + fake dcgm-exporter); "
                "two engines; roce_config of 4 netdevs; 5 s interval; render cache off; "
                "a scrape every 15 s"] + window_lines(n)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("fabric", "node", "all", "_simulate-node"))
    parser.add_argument("workdir", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("--switches", type=int, default=32)
    parser.add_argument("--small-switches", type=int, default=16, help="0: no second size (no RSS slope)")
    parser.add_argument("--ports", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=120.0, help="steady-state window (default 120)")
    parser.add_argument("--small-seconds", type=float, default=45.0,
                        help="window of the smaller fabric (RSS slope; default 45)")
    parser.add_argument("--settle", type=float, default=20.0, help="wait after sync before measuring")
    parser.add_argument("--scrape-interval", type=float, default=15.0)
    parser.add_argument("--profile-seconds", type=float, default=25.0, help="py-spy sampling (0: none)")
    parser.add_argument("--keep", action="store_true", help="keep the work directories (logs, py-spy output)")
    parser.add_argument("--out", type=Path, help="write the result as JSON")
    args = parser.parse_args(argv)
    if args.mode == "_simulate-node":
        asyncio.run(simulate_node(Path(args.workdir)))
        return 0
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    result: dict[str, Any] = {"started": started, "load": load()}
    print(f"whole-process bench, {result['load']}", flush=True)
    if args.mode in ("fabric", "all"):
        result["fabric"] = fabric(args)
    if args.mode in ("node", "all"):
        result["node"] = node_mode(args)
    for line in summarise(result):
        print(line)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
