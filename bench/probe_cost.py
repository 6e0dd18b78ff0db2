#!/usr/bin/env python3
"""What the probe source costs when it is not probing, and what parsing a result costs.

* idle scheduler: a probe source with every probe configured (nccl-tests, perftest, an empty
  inbox) whose next run is not due: one check (versions from a sysfs tree of 8 RDMA devices,
  the inbox, the schedule, publishing the snapshot) in CPU time, and the share of one core at
  the default check_interval (30 s).
* parsing a 200-row nccl-tests table (the format of nccl-tests 2.18, printed by the fake tool),
  beside a peer: a naive parser with one fixed regular expression per row (what most scripts
  around nccl-tests do). The naive one reads only the 2022+ layout; infrapulse's reads every
  version, the noise lines and the footer. Both are checked to agree on the values.

Usage: .venv/bin/python bench/probe_cost.py [--ticks 300] [--parses 300]
"""

# The table is printed with nccl-tests' own C printf formats: %-formatting is the point here.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from infrapulse.simulate.probe_fake import float_str
from infrapulse.sources.base import SourceContext
from infrapulse.sources.probe import nccl
from infrapulse.sources.probe.config import CONFIG
from infrapulse.sources.probe.idle import GPU_ACTIVITY_KEY
from infrapulse.sources.probe.source import ProbeSource
from infrapulse.store import Store

CHECK_INTERVAL = 30.0  # the default sources.probe.check_interval
ROWS = 200


class NoGpu:
    def compute_processes(self) -> int | None:
        return 0


def table(rows: int) -> str:
    """A 200-row nccl-tests 2.18 table with the upstream printf formats, NCCL INFO noise and footer."""
    out = ["# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907",
           "# Collective test starting: all_reduce_perf", "#",
           "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
           % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong", 0, "")]
    for i in range(rows):
        size = 8 + i * 4096
        t = 18.0 + size / 3.6e5
        alg = size / 1e9 / (t * 1e-6)
        body = "  %7s  %6s  %6s  %6g" % (float_str(t, 7), float_str(alg, 6), float_str(alg * 1.75, 6), 0)
        out.append("%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1) + body * 2)
        if i % 50 == 0:
            out.append("gpu-node-01:3442:3442 [0] NCCL INFO Launch mode Parallel")
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 12.5 ", "#"]
    return "\n".join(out) + "\n"


NAIVE_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)"
                       r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", re.M)


def naive(text: str) -> list[tuple[int, float, float]]:
    return [(int(m.group(1)), float(m.group(6)), float(m.group(8))) for m in NAIVE_ROW.finditer(text)]


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(best, median) wall seconds of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def bench_parse(parses: int) -> None:
    text = table(ROWS)
    ours = nccl.parse_text(text)
    theirs = naive(text)
    assert len(ours.rows) == len(theirs) == ROWS
    for row, (size, t, bus) in zip(ours.rows, theirs):
        assert row.out_of_place is not None
        assert (row.size, row.out_of_place.time_us, row.out_of_place.busbw_gbps) == (size, t, bus)
    best_ours, med_ours = best_of(lambda: nccl.parse_text(text), parses)
    best_naive, med_naive = best_of(lambda: naive(text), parses)
    print(f"parse {ROWS}-row nccl-tests table ({len(text)} bytes), {parses} runs:")
    print(f"  infrapulse nccl.parse_text   best {best_ours * 1e3:7.3f} ms  median {med_ours * 1e3:7.3f} ms")
    print(f"  naive one-regex-per-row      best {best_naive * 1e3:7.3f} ms  median {med_naive * 1e3:7.3f} ms")
    print(f"  ratio infrapulse / naive     {med_ours / med_naive:.2f}x (median); budget 5 ms: "
          f"{'ok' if med_ours < 5e-3 else 'OVER'}")


def sysfs(root: Path) -> None:
    for i in range(8):
        dev = root / "class" / "infiniband" / f"mlx5_{i}"
        dev.mkdir(parents=True)
        (dev / "fw_ver").write_text("28.39.1002\n")
        (dev / "hca_type").write_text("MT4129\n")


async def bench_idle(ticks: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sysfs(root / "sys")
        (root / "inbox").mkdir()
        cfg = CONFIG.validate({"enabled": True, "versions": {"sysfs_root": str(root / "sys")},
                               "inbox": {"dir": str(root / "inbox")}}, "sources.probe")
        ctx = SourceContext(store=Store(), interval=5.0, options={GPU_ACTIVITY_KEY: NoGpu},
                            state_dir=str(root / "state"))
        src = ProbeSource(cfg, ctx)
        now = time.time()
        src.start(now)
        src.state["next_run"] = now + 86400  # not due: the idle path
        await src.tick(now)
        cpu = time.process_time()
        wall = time.perf_counter()
        for i in range(ticks):
            await src.tick(now + i)
        cpu = (time.process_time() - cpu) / ticks
        wall = (time.perf_counter() - wall) / ticks
        assert src.running is None
    print(f"idle probe scheduler, {ticks} checks (8 RDMA devices, empty inbox, nothing due):")
    print(f"  per check: {cpu * 1e6:8.1f} us CPU, {wall * 1e6:8.1f} us wall")
    print(f"  at check_interval {CHECK_INTERVAL:g}s: {cpu / CHECK_INTERVAL * 100:.5f} % of one core")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--parses", type=int, default=300)
    args = parser.parse_args(argv)
    asyncio.run(bench_idle(args.ticks))
    bench_parse(args.parses)
    return 0


if __name__ == "__main__":
    sys.exit(main())
