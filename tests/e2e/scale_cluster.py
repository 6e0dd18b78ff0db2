"""A small simulated cluster for the scale e2e test: node daemons in one process, the switches
their fabric collectors subscribe to, and the configs of those collectors.

    python tests/e2e/scale_cluster.py --workdir DIR --node-port 19001 --node-port 19002 ...

One process runs the demo's simulators once (the gNMI switches whose LLDP neighbours are the
node hostnames, the node's sysfs/ethtool tree, the serving engines) and one infrapulse daemon
per `--node-port`, each with its own hostname (gpu-node-01, ...) and its own fake GPUs and fake
dcgm-exporter (XIDs and throttling follow the shared scenario board). The nodes share the
sysfs tree and the serving engines: their values are alike, their series are their own.
The first node serves the demo's scenario API (POST /api/v1/scenarios).

The fabric collectors are not started here: the test runs them as `infrapulse run` processes
(so it can kill one). This process writes their configs, `fabric-<i>.yaml` (the demo's gNMI
section plus `shard: {index: i, count: N}`), and, once every daemon answers, `cluster.json`
with the node URLs, the switch names and the config paths. SIGTERM stops everything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from infrapulse import config as config_mod
from infrapulse.daemon import Daemon
from infrapulse.simulate import (
    gnmi_target,
    gpus,
    kmsg,
    mesh,
    node,
    probe,
    roce_cc,
    serving_engines,
    workloads,
)
from infrapulse.simulate.demo import DEMO_NODES, DemoContext, DemoPart, close_parts, scenario_service
from infrapulse.simulate.nvml_fake import open_fake
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources.gpu.nvml import OPEN_FAKE_KEY

# Sources that read the local machine by default: a fabric collector must not read this host's /sys.
NODE_SOURCES_OFF = {"infiniband": {"enabled": False}, "ethtool": {"enabled": False},
                    "nvml": {"enabled": False}, "kmsg": {"enabled": False}, "workload": {"enabled": False}}


def node_config(interval: str, parts: list[DemoPart], state_dir: Path) -> dict[str, Any]:
    sources: dict[str, Any] = {}
    for part in parts:
        sources.update(part.sources)
    # On-demand inspections unauthenticated (loopback only): the test starts one for the dashboards.
    return config_mod.load_text(yaml.safe_dump({"interval": interval, "sources": sources,
                                                "state_dir": str(state_dir),
                                                "inspect": {"allow_unauthenticated": True}}), "<scale node>")


def fabric_config(gnmi: dict[str, Any], index: int, count: int, interval: str) -> dict[str, Any]:
    gnmi = json.loads(json.dumps(gnmi))
    gnmi["defaults"]["sample_interval"] = interval
    gnmi["shard"] = {"index": index, "count": count}
    return {"interval": interval, "hostname": f"fabric-{index}", "role": "fabric",
            "sources": {**NODE_SOURCES_OFF, "gnmi": gnmi}}


async def run(args: argparse.Namespace) -> None:
    workdir = Path(args.workdir)
    board = ScenarioBoard(set(args.scenario))
    hostnames = DEMO_NODES[: len(args.node_port)]
    ctx = DemoContext(workdir=workdir, scenarios=board)
    shared: list[DemoPart] = []
    per_node: list[DemoPart] = []
    daemons: list[Daemon] = []
    try:
        # Every node-role part of the demo, the latency mesh included, on every node ...
        for module in (gnmi_target, node, roce_cc, serving_engines, mesh):  # roce_cc reads node's tree
            shared.append(await module.demo_part(ctx))
        fabric_part, node_parts = shared[0], shared[1:]
        # ... and the active probes on the first one only: the fake's firmware upgrade waits for that
        # node's probe baseline, which runs on other nodes would otherwise count towards.
        probe_part = await probe.demo_part(ctx)
        shared.append(probe_part)
        for i in range(args.fabric_shards):
            cfg = fabric_config(fabric_part.sources["gnmi"], i, args.fabric_shards, args.interval)
            config_mod.load_text(yaml.safe_dump(cfg), f"fabric-{i}.yaml")  # fail here, not in the test
            (workdir / f"fabric-{i}.yaml").write_text(yaml.safe_dump(cfg))
        for hostname, port in zip(hostnames, args.node_port):
            node_dir = workdir / hostname
            node_dir.mkdir(parents=True, exist_ok=True)
            node_ctx = DemoContext(workdir=node_dir, scenarios=board, hostname=hostname)
            gpu_part = await gpus.demo_part(node_ctx)
            # each node's own workloads (a pod-resources socket of its own) and kernel log
            own = [gpu_part, await workloads.demo_part(node_ctx), await kmsg.demo_part(node_ctx)]
            per_node += own
            parts = [*node_parts, *own, *([] if daemons else [probe_part])]
            daemon = Daemon(node_config(args.interval, parts, node_dir / "state"),
                            hostname=hostname,
                            listen_override=f"127.0.0.1:{port}", source_options={OPEN_FAKE_KEY: open_fake})
            if not daemons:
                daemon.add_service(scenario_service(board))
            await daemon.start()
            daemons.append(daemon)
        switches = [t["name"] for t in fabric_part.sources["gnmi"]["targets"]]
        description = {
            "nodes": {h: f"http://127.0.0.1:{p}" for h, p in zip(hostnames, args.node_port)},
            "scenarios": f"http://127.0.0.1:{args.node_port[0]}/api/v1/scenarios",
            "switches": switches,
            "fabric_configs": [str(workdir / f"fabric-{i}.yaml") for i in range(args.fabric_shards)],
        }
        (workdir / "cluster.json.tmp").write_text(json.dumps(description))
        (workdir / "cluster.json.tmp").rename(workdir / "cluster.json")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        for daemon in reversed(daemons):
            await daemon.stop()
        await close_parts(per_node + shared)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--node-port", type=int, action="append", required=True,
                        help=f"one node daemon per port (at most {len(DEMO_NODES)})")
    parser.add_argument("--fabric-shards", type=int, default=2)
    parser.add_argument("--interval", default="2s")
    parser.add_argument("--scenario", action="append", default=[])
    args = parser.parse_args(argv)
    if len(args.node_port) > len(DEMO_NODES):
        parser.error(f"at most {len(DEMO_NODES)} nodes (the simulated switches' LLDP neighbours)")
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
