#!/usr/bin/env python3
"""Run the nvml source against the real GPU(s) for a few seconds and print what it collected.

Self-contained: needs only the infrapulse package on the path (no aiohttp, no test helpers)
and nvidia-ml-py. On a GPU machine:

    PYTHONPATH=exporter python3 bench/nvml_real_gpu.py            # real NVML, ~10 s
    PYTHONPATH=exporter python3 bench/nvml_real_gpu.py --fake exporter/infrapulse/simulate/data/gpus.yaml

Prints: the NVML library/driver seen, every infrapulse_gpu_* sample of the last poll in
exposition syntax, the source status (up, reason, partial errors), per-poll wall time and
process CPU, the values the GPU left out, and the XID watcher's state (registered GPUs,
events seen, last error). Exit status 0 when the source came up, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time

from infrapulse import catalog, logs
from infrapulse.sources.base import SourceContext
from infrapulse.sources.gpu.nvml import TARGET, NvmlSource
from infrapulse.store import Store


def render(store: Store) -> list[str]:
    lines = []
    snap = store.snapshot("nvml", TARGET)
    if snap is None:
        return lines
    for name in sorted(snap.series):
        family = catalog.get(name)
        names = family.labels + family.optional_labels
        for values, value in sorted(snap.series[name].items()):
            labels = ",".join(f'{k}="{v}"' for k, v in zip(names, values) if v != "")
            shown = repr(value) if not (isinstance(value, float) and math.isinf(value)) else "+Inf"
            lines.append(f"{name}{{{labels}}} {shown}")
    return lines


async def run(args) -> int:
    store = Store()
    ctx = SourceContext(store=store, interval=args.interval, hostname="nvml-real-gpu")
    config = NvmlSource.CONFIG.validate({"enabled": True, "interval": f"{args.interval}s",
                                         "fake": args.fake or ""}, "sources.nvml")
    source = NvmlSource(config, ctx)
    polls = []
    original = source.poll_once

    async def timed_poll():
        started = time.perf_counter()
        await original()
        polls.append(time.perf_counter() - started)

    source.poll_once = timed_poll
    cpu0 = time.process_time()
    task = asyncio.create_task(source.run())
    await asyncio.sleep(args.seconds)
    task.cancel()
    (outcome,) = await asyncio.gather(task, return_exceptions=True)
    if isinstance(outcome, Exception):
        print(f"the source crashed: {type(outcome).__name__}: {outcome}")
    cpu = time.process_time() - cpu0

    poller, watcher = source.poller, source.watcher
    print("== NVML")
    if poller is None:
        status = store.status.get(("nvml", TARGET))
        print(f"source did not start: {status.reason if status else 'no status'} "
              f"{status.message if status else ''}")
        await source.close()
        return 1
    print(f"driver {poller.driver_version}  CUDA driver {poller.cuda_version}  GPUs {len(poller.gpus)}  "
          f"api {type(source.api).__name__}")
    for gpu in poller.gpus:
        print(f"  gpu {gpu.index}: {gpu.name} {gpu.uuid} {gpu.pci_bus_id} nvlinks={gpu.links} "
              f"mig={gpu.mig_enabled} migs={len(gpu.migs)} sick={gpu.sick} "
              f"batched_fields={len(gpu.fields)} state_by_call={gpu.link_state_by_call}")
        if gpu.absent:
            print(f"    left out (device never answers): {sorted(gpu.absent)}")
    print("== samples (last poll)")
    lines = render(store)
    for line in lines:
        print(line)
    print(f"({len(lines)} samples)")
    print("== source status")
    status = store.status.get(("nvml", TARGET))
    if status is not None:
        print(f"up={status.up} reason={status.reason} errors={status.errors} message={status.message!r}")
        for err in status.partial_errors:
            print(f"  partial: {err}")
    if polls:
        walls = sorted(polls)
        print(f"polls={len(polls)} wall median={walls[len(walls) // 2] * 1e3:.2f} ms "
              f"max={walls[-1] * 1e3:.2f} ms; process CPU over the run {cpu * 1e3:.1f} ms "
              f"({cpu / len(polls) * 1e3:.2f} ms/poll incl. XID thread)")
    print("== XID watcher")
    if watcher is None:
        print("off (xid_events false)")
    else:
        state = watcher.state()
        print(f"registered GPUs={len(state)} events_seen={watcher.events_seen} error={watcher.error!r}")
        for uuid, (counts, last, registered) in sorted(state.items()):
            print(f"  {uuid}: registered={registered} last_xid={last} counts={counts}")
    up = bool(status and status.up)
    await source.close()
    return 0 if up else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--fake", default="", help="path to a gpus.yaml: use the NVML fake instead")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    logs.setup("text", args.log_level)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
