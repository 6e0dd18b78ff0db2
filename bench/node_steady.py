#!/usr/bin/env python3
"""A node daemon's steady-state cost: CPU % of one core and RSS, against simulated hardware.

The node: 8 mlx5 RoCE devices (sysfs tree + ethtool stats moving every second), 8 fake GPUs
(nvml reads the data-driven fake, dcgm scrapes a fake dcgm-exporter over the same GPUs), two
serving engines (vLLM with 2 data-parallel ranks, SGLang). `infrapulse run` runs as its own
process at `interval` (default 5 s) with the default health settings; this process hosts the
simulators and scrapes /metrics every `--scrape-every` seconds (default 15 s, past the render
cache, so every scrape renders). CPU is utime+stime of the daemon from /proc/<pid>/stat over
the measurement window (after a warm-up); RSS is VmRSS at the end.

Before the daemon runs, `--cycles N` (default 60) also measures the node sources' own work in
this process, per 5 s cycle and without HTTP: infiniband collect (re-scan every 6th cycle, as at
the default 30 s), ethtool (the simulator's file provider), nvml (the fake), dcgm parse + map and
serving parse + normalise with warm caches — the part of the daemon's CPU the sources own.

`--py-spy FILE` also records the daemon with py-spy (raw/collapsed stacks, only samples holding
the GIL: Python's own CPU, not threads blocked in I/O) over the window and prints the share of
samples under a few frames (render, health pass, each source). The nvml fake runs inside the
daemon (it stands in for libnvidia-ml), so its share is reported apart.

    .venv/bin/python bench/node_steady.py [--seconds 120] [--warmup 30] [--py-spy out.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from infrapulse import textparse
from infrapulse.simulate.dcgm_exporter import FakeDcgmExporter, GpuExposition
from infrapulse.simulate.nic_stats import write_stats
from infrapulse.simulate.node import NodeSimulator, netdev_driver
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, FakeNvml
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.simulate.sysfs_tree import DeviceSpec, PortSpec, write_tree
from infrapulse.sources.gpu.dcgm import DcgmMapper
from infrapulse.sources.gpu.nvml_poll import GpuPoller
from infrapulse.sources.nic.ethtool import EthtoolCollector, FileStatsProvider
from infrapulse.sources.nic.infiniband import InfinibandReader
from infrapulse.sources.serving import normalize as norm

CLK_TCK = os.sysconf("SC_CLK_TCK")
PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
# Where a sample's CPU goes: the first (label, frame substring) found in its stack wins, so the
# shares add up (a source's HTTP fetch and parse count for that source).
SPLIT = (
    ("nvml fake (simulator)", "simulate/"),
    ("health pass", "health/"),
    ("render (/metrics)", "metrics_handler"),
    ("render (/metrics)", "infrapulse/metrics.py"),
    ("serving (fetch, parse, map)", "sources/serving"),
    ("dcgm (fetch, parse, map)", "gpu/dcgm"),
    ("nvml", "gpu/nvml"),
    ("infiniband", "nic/infiniband"),
    ("ethtool", "nic/ethtool"),
    ("source loop + store", "sources/base.py"),
    ("source loop + store", "infrapulse/store.py"),
    ("HTTP server", "aiohttp/web"),
)
# Leaves of a thread that waits (py-spy --gil can still catch them holding the GIL briefly).
IDLE = ("Condition.wait (threading.py", "EpollSelector.select (selectors.py",
        "_worker (concurrent/futures/thread.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def devices(n: int) -> list[DeviceSpec]:
    return [DeviceSpec(f"mlx5_{i}", hca_type="MT4129", ports=[PortSpec(
        link_layer="Ethernet", netdev=f"ens{i + 1}f0np0", rate="400 Gb/sec (4X NDR)")]) for i in range(n)]


async def scrape(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as resp:
        body = await resp.read()
    return sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))


def share_of(collapsed: Path) -> tuple[int, dict[str, float]]:
    """Samples and the share of each SPLIT label (plus "other"), from py-spy's raw output."""
    counts: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit() or stack.rsplit(";", 1)[-1].startswith(IDLE):
            continue
        total += int(n)
        counts[next((label for label, frame in SPLIT if frame in stack), "other")] += int(n)
    labels = list(dict.fromkeys(label for label, _ in SPLIT)) + ["other"]
    return total, {label: counts[label] / total if total else 0.0 for label in labels}


def sources_cycle(n_devices: int, cycles: int, interval: float) -> None:
    """CPU per poll cycle of each node source's work, in this process (no HTTP, no store)."""
    work = Path(tempfile.mkdtemp(prefix="infrapulse-node-cycle-"))
    try:
        tree = write_tree(work / "sys", devices(n_devices))
        netdevs = {p.netdev: netdev_driver(d.name) for d in tree.devices for p in d.ports if p.netdev}
        node = NodeSimulator(tree, write_stats(work / "ethtool", netdevs), work / "ethtool")
        ib = InfinibandReader(str(work / "sys"), None, 30.0)
        eth = EthtoolCollector(FileStatsProvider(work / "ethtool"), sysfs_root=str(work / "sys"))
        fake = FakeNvml.from_file()
        poller = GpuPoller(fake)
        dcgm_text = GpuExposition(fake).render()
        dcgm_cache, mapper = new_parse_cache(), DcgmMapper("gpu-node-01")
        clock = [0.0]
        engines = []
        for variant, ranks in (("vllm", 2), ("sglang", 1)):
            server = EngineServer(variant, dp_ranks=ranks, clock=lambda: clock[0])
            clock[0] += 30.0
            server.advance()
            engines.append((server.render(), new_parse_cache()))

        def serving() -> None:
            for text, cache in engines:
                families = textparse.parse(text, label_cache=cache)
                fmt = norm.detect(families)
                assert fmt is not None
                norm.normalise(norm.canonical_names(families, fmt), fmt, "engine", fmt)

        rescan_every = max(1, round(30.0 / interval))

        def infiniband(cycle: int) -> None:
            if cycle % rescan_every == 0:
                ib.rescan()
            ib.collect()

        parts: dict[str, Callable[[int], object]] = {
            "infiniband": infiniband,
            "ethtool (file provider)": lambda i: eth.collect(),
            "nvml (fake)": lambda i: poller.poll(None),
            "dcgm parse + map": lambda i: mapper.map(textparse.parse(dcgm_text, label_cache=dcgm_cache)),
            "serving parse + normalise": lambda i: serving(),
        }
        spent = dict.fromkeys(parts, 0.0)
        for i in range(cycles + 2):  # two warm-up cycles fill the caches
            node.step(interval)
            for label, fn in parts.items():
                started = time.process_time()
                fn(i)
                if i >= 2:
                    spent[label] += time.process_time() - started
        total = sum(spent.values()) / cycles
        print(f"node sources in-process, per {interval:g}s cycle (no HTTP), mean of {cycles} cycles:")
        for label, seconds in spent.items():
            print(f"  {label:28s} {seconds / cycles * 1e3:6.2f} ms")
        print(f"  {'total':28s} {total * 1e3:6.2f} ms = {100 * total / interval:.3f} % of one core")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def new_parse_cache() -> Any:
    """A ParseCache, or the plain label dict of versions before it (for a before figure)."""
    return textparse.ParseCache() if hasattr(textparse, "ParseCache") else {}


async def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="infrapulse-node-steady-"))
    tasks: list[asyncio.Task[None]] = []
    servers: list[EngineServer] = []
    dcgm: FakeDcgmExporter | None = None
    proc: subprocess.Popen[bytes] | None = None
    try:
        tree = write_tree(work / "sys", devices(args.devices))
        netdevs = {p.netdev: netdev_driver(d.name) for d in tree.devices for p in d.ports if p.netdev}
        nics = write_stats(work / "ethtool", netdevs)
        node = NodeSimulator(tree, nics, work / "ethtool")
        tasks.append(asyncio.create_task(node.run(1.0)))
        gpus = work / "gpus.yaml"
        shutil.copyfile(DEFAULT_DATA, gpus)
        dcgm = FakeDcgmExporter(GpuExposition(FakeNvml.from_file(gpus)))
        dcgm_url = await dcgm.start()
        for variant, model, ranks in (("vllm", "meta-llama/Llama-3.1-70B-Instruct", 2),
                                      ("sglang", "Qwen/Qwen2.5-32B-Instruct", 1)):
            server = EngineServer(variant, model=model, dp_ranks=ranks, arrival_rate=3.0)
            await server.start()
            servers.append(server)
        port = free_port()
        config = {
            "listen": f"127.0.0.1:{port}", "interval": f"{args.interval}s", "state_dir": str(work / "state"),
            "sources": {
                "infiniband": {"enabled": True, "sysfs_root": str(work / "sys")},
                "ethtool": {"enabled": True, "sysfs_root": str(work / "sys"),
                            "stats_dir": str(work / "ethtool")},
                "nvml": {"enabled": True, "fake": str(gpus)},
                "dcgm": {"enabled": True, "url": dcgm_url},
                "serving": {"endpoints": [{"name": f"engine-{i}", "url": s.url}
                                          for i, s in enumerate(servers)]},
            },
        }
        (work / "config.yaml").write_text(yaml.safe_dump(config))
        env = {**os.environ, "PYTHONPATH": args.exporter}
        proc = subprocess.Popen([sys.executable, "-m", "infrapulse", "run", "-c", str(work / "config.yaml"),
                                 "--log-level", "warning"], env=env)
        url = f"http://127.0.0.1:{port}/metrics"
        async with aiohttp.ClientSession() as session:
            for _ in range(300):
                try:
                    series = await scrape(session, url)
                    break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.1)
            else:
                raise SystemExit("the daemon did not answer")
            await asyncio.sleep(args.warmup)
            spy = None
            if args.py_spy:
                spy = subprocess.Popen([PY_SPY, "record", "--pid", str(proc.pid), "--format", "raw",
                                        "--rate", "100", "--duration", str(int(args.seconds)), "--gil",
                                        "--output", args.py_spy, "--nonblocking"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            scrapes = 0
            while time.monotonic() - t0 < args.seconds:
                series = await scrape(session, url)
                scrapes += 1
                await asyncio.sleep(min(args.scrape_every, max(0.0, args.seconds - (time.monotonic() - t0))))
            cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
            rss = rss_bytes(proc.pid)
        if spy is not None:
            spy.wait(timeout=60)
        share = 100.0 * (cpu1 - cpu0) / (t1 - t0)
        print(f"node: {args.devices} mlx5 RoCE devices, 8 fake GPUs (nvml + dcgm), "
              "2 engines (vLLM dp=2, SGLang); "
              f"interval {args.interval:g}s, scrape every {args.scrape_every:g}s, {series} series")
        print(f"daemon CPU over {t1 - t0:.0f}s ({scrapes} scrapes): {share:.2f} % of one core "
              f"({cpu1 - cpu0:.2f} s CPU)")
        print(f"daemon RSS: {rss / 2**20:.1f} MiB")
        if args.py_spy and Path(args.py_spy).exists():
            total, split = share_of(Path(args.py_spy))
            print(f"py-spy: {total} samples holding the GIL; share of samples:")
            for label, frac in split.items():
                print(f"  {label:30s} {100 * frac:5.1f} %")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in servers:
            await server.stop()
        if dcgm is not None:
            await dcgm.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="measurement window (default 120)")
    ap.add_argument("--warmup", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--scrape-every", type=float, default=15.0)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--py-spy", metavar="FILE", default="", help="record the daemon with py-spy into FILE")
    ap.add_argument("--exporter", metavar="DIR",
                    default=str(Path(__file__).resolve().parents[1] / "exporter"),
                    help="the infrapulse package the daemon runs (another checkout's exporter/ "
                         "for a before figure)")
    ap.add_argument("--cycles", type=int, default=60, help="in-process source cycles (0: skip)")
    parsed = ap.parse_args()
    if parsed.cycles:
        sources_cycle(parsed.devices, parsed.cycles, parsed.interval)
    asyncio.run(main(parsed))
