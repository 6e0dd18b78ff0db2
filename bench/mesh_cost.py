#!/usr/bin/env python3
"""What the latency mesh costs one node: CPU of the mesh at its default rate with 64 peers.

Budget (issue 16): at most 0.2 % of one core per node.

Set-up, all on loopback (127.0.0.0/8), bounded in count (64 peers) and time (--seconds):

* the node: a process running the `mesh` source exactly as the daemon does (its defaults:
  probe_interval 5s, timeout 1s, publishing into a Store every 5s), bound to 127.0.0.1, with
  the 64 peers in its config;
* the peers: one other process with 64 `mesh` sources, one per address 127.0.0.2..65, each
  probing the node at the same default rate, so the node also answers 64 x 1/5s requests
  per second as it would in a symmetric mesh;
* the baseline, side by side: a process running the same event loop and Store with nothing
  in it, measured over the same window (the interpreter's own idle cost).

CPU is the node process's on-CPU time from /proc/<pid>/task/*/schedstat (nanoseconds; every
thread), read before and after the window, minus the same for the baseline process. The peer
process is not measured.

Usage: .venv/bin/python bench/mesh_cost.py [--seconds 60] [--peers 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:  # annotations only: infrapulse is imported where used (the children get PYTHONPATH)
    from infrapulse.sources.probe.mesh_config import MeshSettings

BUDGET = 0.002  # 0.2 % of one core
NODE = "127.0.0.1"


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((NODE, 0))
        return int(s.getsockname()[1])


def cpu_ns(pid: int) -> int:
    """On-CPU nanoseconds of every thread of a process (first field of each task's schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total


def peer_address(k: int) -> str:
    return f"127.0.0.{k + 2}"


def mesh_config(local: str, port: int, peers: list[dict]) -> MeshSettings:
    """A `sources.mesh` section with every rate setting at its default."""
    from infrapulse.config import load_text

    text = yaml.safe_dump({"interval": "5s", "sources": {"mesh": {
        "enabled": True, "local_addresses": [local], "port": port, "peers": peers}}})
    return load_text(text, "<bench>").sources["mesh"]


async def run_sources(configs: list[MeshSettings], seconds: float) -> None:
    from infrapulse.sources.base import SourceContext
    from infrapulse.sources.probe.mesh import MeshSource
    from infrapulse.store import Store

    store = Store()
    sources = [MeshSource(cfg, SourceContext(store=store, interval=5.0)) for cfg in configs]
    tasks = [asyncio.create_task(s.run()) for s in sources]
    print("ready", flush=True)
    await asyncio.sleep(seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    sent = sum(st.sent for s in sources for st in s.prober.stats.values())
    lost = sum(st.lost for s in sources for st in s.prober.stats.values())
    answered = sum(s.responder.outcomes.get("answered", 0) for s in sources)
    print(json.dumps({"sent": sent, "lost": lost, "answered": answered}), flush=True)


def role_node(port: int, peers: int, seconds: float) -> None:
    entries = [{"name": f"peer-{k:02d}", "address": peer_address(k)} for k in range(peers)]
    asyncio.run(run_sources([mesh_config(NODE, port, entries)], seconds))


def role_peers(port: int, peers: int, seconds: float) -> None:
    node = [{"name": "node", "address": NODE}]
    asyncio.run(run_sources([mesh_config(peer_address(k), port, node) for k in range(peers)], seconds))


def role_idle(seconds: float) -> None:
    from infrapulse.store import Store

    async def idle() -> None:
        Store()
        print("ready", flush=True)
        await asyncio.sleep(seconds)
        print(json.dumps({}), flush=True)

    asyncio.run(idle())


def spawn(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "exporter")}
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise SystemExit(f"{args[1]} process did not start: {line!r}")
    return proc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window (default 60)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring (default 10)")
    parser.add_argument("--peers", type=int, default=64, help="peers of the node (default 64, max 250)")
    parser.add_argument("--role", choices=("node", "peers", "idle"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--for", dest="lifetime", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.peers <= 250:
        parser.error("--peers must be 1..250 (127.0.0.2 .. 127.0.0.251)")
    if args.role == "node":
        role_node(args.port, args.peers, args.lifetime)
        return 0
    if args.role == "peers":
        role_peers(args.port, args.peers, args.lifetime)
        return 0
    if args.role == "idle":
        role_idle(args.lifetime)
        return 0

    port = free_udp_port()
    lifetime = str(args.warmup + args.seconds + 5)
    common = ["--port", str(port), "--peers", str(args.peers), "--for", lifetime]
    peers = spawn("--role", "peers", *common)
    node = spawn("--role", "node", *common)
    idle = spawn("--role", "idle", "--for", lifetime)
    try:
        time.sleep(args.warmup)
        t0 = time.monotonic()
        node0, idle0 = cpu_ns(node.pid), cpu_ns(idle.pid)
        time.sleep(args.seconds)
        node1, idle1 = cpu_ns(node.pid), cpu_ns(idle.pid)
        wall = time.monotonic() - t0
        outputs = {name: json.loads(proc.communicate(timeout=60)[0].strip().splitlines()[-1])
                   for name, proc in (("node", node), ("peers", peers), ("idle", idle))}
    finally:
        for proc in (node, peers, idle):
            if proc.poll() is None:
                proc.kill()
    node_share = (node1 - node0) / 1e9 / wall
    idle_share = (idle1 - idle0) / 1e9 / wall
    mesh_share = node_share - idle_share
    stats = outputs["node"]
    print(f"mesh node, {args.peers} peers at the default rate, {wall:.0f} s measured:")
    print(f"  probes sent {stats['sent']}, lost {stats['lost']}, requests answered {stats['answered']} "
          f"(whole run, warm-up included)")
    print(f"  node process CPU      {node_share * 100:.3f} % of one core")
    print(f"  idle baseline process {idle_share * 100:.3f} % of one core")
    print(f"  mesh (difference)     {mesh_share * 100:.3f} % of one core; budget {BUDGET * 100:.1f} %: "
          f"{'within' if mesh_share <= BUDGET else 'OVER'}")
    return 0 if mesh_share <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
