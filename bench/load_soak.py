"""Load and soak of a fabric instance: many concurrent scrapers, then hours-style churn in minutes.

Setup (all processes on loopback): `infrapulse simulate gnmi` serves N switches x M ports in its
own process; an `infrapulse run` fabric daemon subscribes to all of them (PROTO SAMPLE, 10 s)
until it holds the target number of series.

  load: `--scrapers` concurrent clients GET /metrics in a loop for `--load-seconds`; reports
        scrapes, errors, p50/p99 latency (the daemon's render cache shares a render between
        scrapes that arrive together, as an HA Prometheus pair's do);
  soak: for `--soak-minutes`, every `--fault-period` the simulated fabric is killed (streams
        drop mid-way), kept down for a while (switches unreachable) and restarted (reconnect,
        resync); after each recovery the daemon's RSS, open fds, asyncio tasks and series are
        sampled (RSS every 2 s through the settled window: its floor and peak). Pass criteria:
        the RSS floor drifts under 5% from the second to the last cycle, and so does its
        least-squares trend over all cycles; no growth in tasks, fds or series.

Run: .venv/bin/python bench/load_soak.py [--switches 64 --ports 64] [--soak-minutes 30]
     [--render-cache 1s] [--exporter DIR]
--render-cache sets the daemon's http.render_cache (0s: every scrape renders); --exporter runs
another tree's exporter/ (e.g. `git archive` of a base commit) for the daemon and simulator.
The load line also gives the daemon's CPU over the load window (from /proc) and its RSS after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(args) -> dict[str, str]:
    exporter = Path(args.exporter).resolve() if args.exporter else ROOT / "exporter"
    return {**os.environ, "PYTHONPATH": str(exporter)}


def start_fabric(args, targets_file: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [PY, "-m", "infrapulse", "simulate", "gnmi", "--switches", str(args.switches),
         "--ports", str(args.ports), "--profile", args.profile, "--targets-file", str(targets_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(args))
    line = proc.stdout.readline()
    if "serving" not in line:
        raise RuntimeError(f"simulator did not start: {line}{proc.stdout.read()}")
    return proc


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metric_values(text: str, names: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        for name in names:
            if line.startswith(name) and (len(line) == len(name) or line[len(name)] in " {"):
                out[line.split(" ")[0]] = float(line.rsplit(" ", 1)[1])
    return out


async def scrape(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url) as resp:
        resp.raise_for_status()
        return await resp.text()


def proc_stats(pid: int) -> dict[str, float]:
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    return {"rss_bytes": rss, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


async def daemon_stats(session, base: str, pid: int) -> dict[str, float]:
    text = await scrape(session, base + "/metrics")
    values = metric_values(text, ("infrapulse_exporter_asyncio_tasks", "infrapulse_exporter_series"))
    series = sum(v for k, v in values.items() if k.startswith("infrapulse_exporter_series"))
    return {**proc_stats(pid), "tasks": values.get("infrapulse_exporter_asyncio_tasks", 0), "series": series}


async def wait_series(session, base: str, minimum: float, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    series = 0.0
    while time.monotonic() < deadline:
        try:
            text = await scrape(session, base + "/metrics")
            values = metric_values(text, ("infrapulse_exporter_series",))
            series = values.get('infrapulse_exporter_series{source="gnmi"}', 0.0)
            if series >= minimum:
                return series
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(2)
    raise TimeoutError(f"only {series:.0f} gnmi series after {timeout:.0f}s")


async def load(base: str, scrapers: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    sizes: list[int] = []
    deadline = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=120)

    async def one_scraper(session):
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                body = await scrape(session, base + "/metrics")
                sizes.append(len(body))
                latencies.append(time.monotonic() - started)
            except Exception as exc:  # noqa: BLE001 - every failure is a data point here
                errors.append(f"{type(exc).__name__}: {exc}")

    connector = aiohttp.TCPConnector(limit=scrapers)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(one_scraper(session) for _ in range(scrapers)))
    latencies.sort()
    return {
        "scrapes": len(latencies), "errors": len(errors), "first_errors": errors[:3],
        "p50_s": statistics.median(latencies) if latencies else None,
        "p99_s": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else None,
        "body_mb": (statistics.median(sizes) / 1e6) if sizes else None,
    }


async def soak(args, base: str, pid: int, targets_file: Path, fabrics: list[subprocess.Popen],
               minimum: float) -> dict:
    """`fabrics[0]` is the running simulator; replaced in place so the caller can always stop it."""
    samples = []
    end = time.monotonic() + args.soak_minutes * 60
    cycle = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        while time.monotonic() < end:
            cycle += 1
            kind = ("kill", "pause")[cycle % 2]
            if kind == "kill":  # streams drop mid-way, targets gone
                stop(fabrics[0], signal.SIGKILL)
                await asyncio.sleep(min(20, args.fault_period / 3))
            else:  # stall: every stream stays open but nothing arrives
                fabrics[0].send_signal(signal.SIGSTOP)
                await asyncio.sleep(min(45, args.fault_period / 2))
                fabrics[0].send_signal(signal.SIGCONT)
                stop(fabrics[0], signal.SIGKILL)
            fabrics[0] = start_fabric(args, targets_file)  # new ports: the targets file changes too
            series = await wait_series(session, base, minimum, timeout=args.fault_period * 5)
            # RSS swings by tens of MiB with each render buffer and resync in flight, so one
            # reading is noise: sample the settled window and keep its floor (what a leak
            # raises) and its peak.
            settle_until = time.monotonic() + max(0, args.fault_period - 30)
            rss = [proc_stats(pid)["rss_bytes"]]
            while time.monotonic() < settle_until:
                await asyncio.sleep(2)
                rss.append(proc_stats(pid)["rss_bytes"])
            stats = await daemon_stats(session, base, pid)
            stats.update(cycle=cycle, fault=kind, gnmi_series=series, rss_floor=min(rss), rss_peak=max(rss))
            samples.append(stats)
            print(f"  cycle {cycle:3d} ({kind:5}): rss floor {stats['rss_floor'] / 2**20:7.1f} MiB, peak "
                  f"{stats['rss_peak'] / 2**20:7.1f} MiB  fds {stats['fds']:4.0f}  "
                  f"tasks {stats['tasks']:4.0f}"
                  f"  series {stats['series']:8.0f}", flush=True)
    first, last = samples[min(1, len(samples) - 1)], samples[-1]  # cycle 1 warms caches up
    floors = [s["rss_floor"] for s in samples[1:]] or [first["rss_floor"]]
    return {"cycles": len(samples), "first": first, "last": last,
            "rss_drift": (last["rss_floor"] - first["rss_floor"]) / first["rss_floor"],
            "rss_trend": fitted_change(floors) / first["rss_floor"],
            "rss_max": max(s["rss_peak"] for s in samples),
            "max_fds": max(s["fds"] for s in samples), "max_tasks": max(s["tasks"] for s in samples)}


def fitted_change(values: list[float]) -> float:
    """Least-squares slope x span: the change over the run with the per-cycle noise averaged out."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
             / sum((x - mean_x) ** 2 for x in range(n)))
    return slope * (n - 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switches", type=int, default=64)
    parser.add_argument("--ports", type=int, default=64)
    parser.add_argument("--profile", default="nvidia-cumulus")
    parser.add_argument("--series", type=float, default=250_000, help="wait for this many gnmi series")
    parser.add_argument("--scrapers", type=int, default=50)
    parser.add_argument("--load-seconds", type=float, default=60)
    parser.add_argument("--soak-minutes", type=float, default=0)
    parser.add_argument("--fault-period", type=float, default=60)
    parser.add_argument("--render-cache", default="1s", help="the daemon's http.render_cache")
    parser.add_argument("--exporter", help="another tree's exporter/ directory to run")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="infrapulse-soak-"))
    targets_file = work / "switches.yaml"
    fabrics = [start_fabric(args, targets_file)]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = work / "fabric.yaml"
    config.write_text(f"""
interval: 5s
health: {{interval: 30s}}
http: {{render_cache: {args.render_cache}}}
sources:
  gnmi:
    defaults: {{insecure: true, profile: {args.profile}, sample_interval: 10s}}
    targets_file: {targets_file}
    retry_max: 5s
""")
    daemon = subprocess.Popen([PY, "-m", "infrapulse", "run", "--config", str(config),
                               "--listen", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(args))
    try:
        async def run() -> None:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                started = time.monotonic()
                series = await wait_series(session, base, args.series, timeout=600)
                print(f"fabric instance holds {series:.0f} gnmi series "
                      f"({args.switches} switches x {args.ports} ports, {args.profile}) after "
                      f"{time.monotonic() - started:.0f}s", flush=True)
                before = await daemon_stats(session, base, daemon.pid)
            cpu0 = proc_cpu_seconds(daemon.pid)
            result = await load(base, args.scrapers, args.load_seconds)
            cpu = proc_cpu_seconds(daemon.pid) - cpu0
            print(f"load: {args.scrapers} concurrent scrapers for {args.load_seconds:.0f}s "
                  f"(render_cache {args.render_cache}): "
                  f"{result['scrapes']} scrapes, {result['errors']} errors, p50 {result['p50_s']:.2f}s, "
                  f"p99 {result['p99_s']:.2f}s, body {result['body_mb']:.1f} MB; daemon CPU "
                  f"{cpu / args.load_seconds * 100:.0f}% of a core during the load; daemon RSS "
                  f"{before['rss_bytes'] / 2**20:.0f} MiB before, {proc_rss_mib(daemon.pid):.0f} MiB after; "
                  f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
            if result["errors"]:
                print(f"  first errors: {result['first_errors']}")
            if args.soak_minutes:
                print(f"soak: {args.soak_minutes:g} min, a fault every {args.fault_period:g}s", flush=True)
                out = await soak(args, base, daemon.pid, targets_file, fabrics, args.series * 0.95)
                verdict = (abs(out["rss_drift"]) < 0.05 and out["rss_trend"] < 0.05
                           and out["last"]["tasks"] <= out["first"]["tasks"]
                           and out["last"]["fds"] <= out["first"]["fds"] + 2
                           and out["last"]["series"] <= out["first"]["series"] * 1.01)
                first, last = out["first"], out["last"]
                print(f"soak: {out['cycles']} fault cycles; RSS floor {first['rss_floor'] / 2**20:.1f} -> "
                      f"{last['rss_floor'] / 2**20:.1f} MiB ({out['rss_drift'] * 100:+.2f}%; fitted trend "
                      f"over cycles 2-{out['cycles']} {out['rss_trend'] * 100:+.2f}%; peak "
                      f"{out['rss_max'] / 2**20:.1f} MiB); tasks "
                      f"{first['tasks']:.0f} -> {last['tasks']:.0f}; fds {first['fds']:.0f} -> "
                      f"{last['fds']:.0f}; series {first['series']:.0f} -> {last['series']:.0f}: "
                      f"{'PASS' if verdict else 'FAIL'}", flush=True)

        asyncio.run(run())
    finally:
        stop(daemon)
        stop(fabrics[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
