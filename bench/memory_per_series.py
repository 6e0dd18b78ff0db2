#!/usr/bin/env python3
"""Memory a live fabric instance keeps per series: tracemalloc (grouped by file:line) and RSS of a
store filled the way the gNMI source fills it (bench/health_pass.py's `Fabric`: SwitchStates fed
the simulator's SAMPLE notifications in the shape real switches send, one per list entry, so the
decoded prefixes are held as live), with the health service warmed up (rings full, reports
kept) and the /metrics encoder's label blocks built by one render, at two fabric sizes; the
slope between them is the per-series cost (fixed costs cancel).

Run: PYTHONPATH=exporter .venv/bin/python bench/memory_per_series.py [--switches 6 12] [--top 25]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import health_pass  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def build(switches: int, interval: float) -> tuple[Any, ...]:
    """A fabric, its health service warmed up to steady state, one /metrics render done."""
    from prometheus_client.exposition import choose_encoder

    from infrapulse.config import default_config
    from infrapulse.exposition import render_body
    from infrapulse.health.service import HealthService
    from infrapulse.metrics import DaemonState, make_registry

    fabric = health_pass.Fabric(switches)
    health = dataclasses.replace(default_config().health, **health_pass.HEALTH)
    service = HealthService(fabric.store, health, "node000", interval)
    now = 1.8e9
    for _ in range(int(health.event_window / interval) + 2):
        now += interval
        fabric.advance(now)
        service.tick(now)
    registry = make_registry(fabric.store, DaemonState("bench", "fabric"))
    render_body(registry, choose_encoder("")[0])
    return fabric, service, registry


def measure(switches: int, interval: float) -> tuple[int, float, float, tracemalloc.Snapshot]:
    gc.collect()
    rss0 = rss_mb()
    tracemalloc.start(1)
    world = build(switches, interval)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0]
    snap = tracemalloc.take_snapshot()
    tracemalloc.stop()
    series = world[0].store.series_count()
    del world
    gc.collect()
    # RSS without tracemalloc's own overhead: build again untraced
    world = build(switches, interval)
    gc.collect()
    rss = rss_mb() - rss0
    del world
    gc.collect()
    return series, traced / 1e6, rss, snap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, nargs=2, default=[6, 12])
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    build(1, args.interval)  # imports and one-off caches out of the way
    gc.collect()
    small, large = (measure(n, args.interval) for n in args.switches)
    d_series = large[0] - small[0]
    per = 1e5 / d_series
    for (n, m) in zip(args.switches, (small, large)):
        print(f"{n:3d} switches: {m[0]:,} series, traced {m[1]:.1f} MB, RSS growth {m[2]:.1f} MB")
    print(f"slope per 100k series: traced {(large[1] - small[1]) * per:.1f} MB, "
          f"RSS {(large[2] - small[2]) * per:.1f} MB")
    diff = large[3].compare_to(small[3], "lineno")
    print(f"\ntop {args.top} lines by growth (MB per 100k series):")
    root = str(Path(__file__).resolve().parents[1]) + "/"
    for stat in diff[:args.top]:
        frame = stat.traceback[0]
        print(f"  {stat.size_diff / 1e6 * per:7.2f}  {stat.count_diff * per / 1e5:6.2f} obj/series  "
              f"{frame.filename.replace(root, '')}:{frame.lineno}")


if __name__ == "__main__":
    main()
