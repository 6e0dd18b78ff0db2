"""`infrapulse simulate ...`: run one simulator on its own (the demo runs them all).

  infrapulse simulate scenarios                      list the anomalies the demo can inject
  infrapulse simulate sysfs DIR [--devices N]        write a static sysfs tree (a fixture)
  infrapulse simulate gnmi --switches N --ports M    serve N simulated switches over gNMI and
        [--profile P] [--targets-file F]             write a targets file for the daemon
  infrapulse simulate serving --engine vllm          serve one engine's /metrics
  infrapulse simulate mesh --address 127.0.0.2       latency-mesh responders on loopback
        [--allow 127.0.0.1] [--drop-every N]         (every N-th request unanswered)
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml


def cmd_scenarios(args: argparse.Namespace) -> int:
    from .demo import known_scenarios

    scenarios = known_scenarios()
    width = max(map(len, scenarios), default=0)
    for name, description in sorted(scenarios.items()):
        print(f"{name:{width}}  {description}")
    return 0


def cmd_sysfs(args: argparse.Namespace) -> int:
    from .sysfs_tree import demo_devices, write_tree

    devices = args.devices if args.devices else demo_devices()
    tree = write_tree(args.dir, devices)
    print(f"wrote {tree.class_dir}")
    return 0


async def _serve_until_signal(start: Callable[[], Awaitable[None]],
                              stop: Callable[[], Awaitable[None]]) -> None:
    await start()
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)
    try:
        await done.wait()
    finally:
        await stop()


def cmd_gnmi(args: argparse.Namespace) -> int:
    from .gnmi_target import SimFabric, SimSwitch

    switches = [SimSwitch(f"{args.prefix}{i + 1:03d}", args.profile, ports=args.ports, seed=i)
                for i in range(args.switches)]
    fabric = SimFabric(switches, min_sample_interval=1.0)

    async def start() -> None:
        await fabric.start()
        targets = [{"name": t.switch.name, "address": t.address, "profile": t.switch.profile}
                   for t in fabric.targets]
        if args.targets_file:
            Path(args.targets_file).write_text(yaml.safe_dump({"targets": targets}))
        print(f"serving {len(targets)} switches x {args.ports} ports ({args.profile}, plaintext) on "
              f"{targets[0]['address']} .. {targets[-1]['address']}"
              + (f"; targets in {args.targets_file}" if args.targets_file else ""), flush=True)

    asyncio.run(_serve_until_signal(start, fabric.close))
    return 0


def cmd_serving(args: argparse.Namespace) -> int:
    from .serving_engines import EngineServer

    server = EngineServer(args.engine, arrival_rate=args.rate)

    async def start() -> None:
        await server.start(args.port)
        print(f"serving {args.engine} metrics on {server.url}", flush=True)

    asyncio.run(_serve_until_signal(start, server.stop))
    return 0


def cmd_mesh(args: argparse.Namespace) -> int:
    from .mesh import loopback_only, serve

    try:
        addresses = [loopback_only(a) for a in args.address]
        allow = [loopback_only(a) for a in args.allow or ["127.0.0.1"]]
    except (OSError, ValueError) as exc:
        print(f"simulate mesh: {exc}")
        return 2
    asyncio.run(serve(addresses, allow, args.drop_every, args.seconds))
    return 0


def main(argv: list[str]) -> int:
    """`infrapulse simulate ARGS`: the exporter's CLI hands the rest of the line here."""
    parser = argparse.ArgumentParser(prog="infrapulse simulate", description=__doc__.split("\n\n")[0])
    cmds = parser.add_subparsers(dest="simulator", metavar="SIMULATOR", required=True)

    p = cmds.add_parser("scenarios", help="list the scenarios `infrapulse demo --scenario` accepts")
    p.set_defaults(func=cmd_scenarios)

    p = cmds.add_parser("sysfs", help="write a simulated /sys tree (class/infiniband) into DIR")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--devices", type=int, default=0,
                   help="N plain mlx5 devices (default: the demo's mixed set)")
    p.set_defaults(func=cmd_sysfs)

    p = cmds.add_parser("gnmi", help="serve simulated switches over gNMI on loopback until interrupted")
    p.add_argument("--switches", type=int, default=4)
    p.add_argument("--ports", type=int, default=32)
    p.add_argument("--profile", default="openconfig",
                   choices=("openconfig", "sonic", "nvidia-cumulus", "arista-eos"))
    p.add_argument("--prefix", default="leaf", help="switch name prefix (default leaf -> leaf001 ...)")
    p.add_argument("--targets-file", metavar="FILE",
                   help="write the daemon's sources.gnmi targets_file here")
    p.set_defaults(func=cmd_gnmi)

    p = cmds.add_parser("serving", help="serve one simulated engine's /metrics until interrupted")
    p.add_argument("--engine", default="vllm",
                   help="vllm, vllm-v0, vllm-ray, sglang, triton-trtllm, trtllm-serve, tgi")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--rate", type=float, default=2.0, help="request arrival rate per second")
    p.set_defaults(func=cmd_serving)

    p = cmds.add_parser("mesh", help="serve latency-mesh responders on loopback addresses until interrupted")
    p.add_argument("--address", action="append", required=True,
                   help="a 127.0.0.0/8 address to answer on (repeat for several); the port is printed")
    p.add_argument("--allow", action="append", default=None,
                   help="a prober address to answer (repeatable; default 127.0.0.1)")
    p.add_argument("--drop-every", type=int, default=0, help="leave every N-th answerable request unanswered")
    p.add_argument("--seconds", type=float, default=600.0, help="stop after this long (default 600)")
    p.set_defaults(func=cmd_mesh)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code
