#!/usr/bin/env python3
"""What one attribution refresh of the `workload` source costs on a busy node: 8 GPUs (the NVML
fake, 2 compute processes each, their cgroups in a /proc-shaped tree), 200 pods from a kubelet
pod-resources server on a unix socket (real gRPC; 8 of them hold a GPU, the rest none, as on a
node full of CPU pods), 4 RDMA NICs in a sysfs PCIe tree, 2 endpoint rules.

Reported: CPU seconds per refresh (process time: it includes the in-process gRPC server's
answer, so it is an upper bound for the daemon's share) and the share of one core at the default
interval (15 s), against the issue's budget of 0.05 %. There is no peer that attributes network
faults to workloads to run beside it; dcgm-exporter's pod mapping (one List per scrape, labels on
every series) is the nearest, and it is not installable here.

Usage: .venv/bin/python bench/workload_refresh.py [--refreshes 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from infrapulse import config as config_mod
from infrapulse.pci import sysfs_address
from infrapulse.simulate import workloads as demo
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, FakeNvml, open_fake
from infrapulse.sources.base import SourceContext
from infrapulse.sources.workload.source import OPEN_FAKE_KEY, WorkloadSource
from infrapulse.store import Store

INTERVAL = 15.0  # the default sources.workload.interval
BUDGET = 0.0005  # 0.05 % of a core


async def run(refreshes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec = yaml.safe_load(DEFAULT_DATA.read_text())
        for index, pids in demo.gpu_processes().items():
            spec["gpus"][index]["processes"] = pids
        (root / "gpus.yaml").write_text(yaml.safe_dump(spec))
        fake = FakeNvml.from_file(root / "gpus.yaml")
        demo.write_topology(root / "sys", [sysfs_address(g.pci_bus_id) for g in fake.gpus])
        demo.write_procs(root / "proc")
        grants = demo.demo_grants([g.uuid for g in fake.gpus])
        for n in range(200 - len(grants)):  # CPU-only pods: listed by the kubelet, no device
            grants[f"web-{n}"] = [("app", "cpu-only", [])]
        server = demo.PodResourcesServer(root / "k.sock", grants)
        await server.start()
        section = {"enabled": True, "nvml_fake": str(root / "gpus.yaml"),
                   "pod_resources_socket": str(root / "k.sock"), "proc_root": str(root / "proc"),
                   "sysfs_root": str(root / "sys"),
                   "endpoints": [{"name": "sglang-qwen", "pods": ["sglang-qwen-0"], "namespace": "llm"},
                                 {"name": "vllm-llama-70b", "port": 8000}]}
        cfg = config_mod.load_text(yaml.safe_dump({"sources": {"workload": section}}), "<bench>")
        ctx = SourceContext(store=Store(), interval=5.0, options={OPEN_FAKE_KEY: open_fake})
        source = WorkloadSource(cfg.sources["workload"], ctx)
        try:
            [first] = await source.collect()
            series = len(first.snapshot) if first.snapshot else 0
            cpu = []
            for _ in range(refreshes):
                started = time.process_time()
                await source.collect()
                cpu.append(time.process_time() - started)
        finally:
            await source.close()
            await server.close()
    per = statistics.median(cpu)
    share = per / INTERVAL
    print(f"workload refresh: 8 GPUs, 200 pods ({server.calls} List calls), {series} series")
    p90 = sorted(cpu)[int(len(cpu) * 0.9)]
    print(f"  CPU per refresh   median {per * 1e3:.2f} ms  (p90 {p90 * 1e3:.2f} ms)")
    print(f"  share of a core   {share * 100:.4f} % at {INTERVAL:.0f} s  (budget {BUDGET * 100:.2f} %: "
          f"{'within' if share <= BUDGET else 'OVER'}, {share / BUDGET:.2f}x of it)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refreshes", type=int, default=200)
    asyncio.run(run(parser.parse_args().refreshes))


if __name__ == "__main__":
    main()
