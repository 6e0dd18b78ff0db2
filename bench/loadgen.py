"""The load generator of bench/capacity.py: many simulated nodes' expositions from one process.

A template is two scrapes, one scrape interval apart, of a real infrapulse node daemon running
on the demo's simulators (8 GPUs through NVML and dcgm-exporter, RDMA ports and NICs from a
simulated sysfs/ethtool tree, four serving engines; the node role only, no switches). Each
simulated node serves that exposition with its own hostname in infrapulse_node_info and its own
values, moving the way the template's did: a series that changed between the two scrapes changes
on every scrape here (counters grow by 0.5-1.5 times the template's step, gauges swing around
the first value by up to that step), one that did not stays constant. So a simulated node has the
demo node's series, and the same share of them moving.

    python bench/loadgen.py capture TEMPLATE.json [--interval 15]
    python bench/loadgen.py serve TEMPLATE.json --nodes 1000 --port 19500
        GET /node/<k>/metrics for k in 0..nodes-1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exporter"))

MONOTONIC_SUFFIXES = ("_total", "_count", "_sum", "_bucket")
TEMPLATE_HOST = "gpu-node-01"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series_text(name: str, labels: dict[str, str]) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}}"


def parse_scrape(text: str) -> dict[str, tuple[float, str]]:
    """series text -> (value, family type)."""
    out: dict[str, tuple[float, str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[_series_text(sample.name, sample.labels)] = (sample.value, family.type)
    return out


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - loopback only
        return response.read().decode()


async def run_node_daemon(interval: float, workdir: Path, ready: asyncio.Event, stop: asyncio.Event,
                          port: int, probes: bool = False) -> None:
    """The demo's node-role simulators and one node daemon on `port` until `stop` is set; with
    `probes`, the active probes and the latency mesh too (the series table counts them, the
    capacity runs keep the node as measured without them)."""
    import yaml

    from infrapulse import config as config_mod
    from infrapulse.daemon import Daemon
    from infrapulse.simulate import gpus, mesh, node, probe, serving_engines
    from infrapulse.simulate.demo import DemoContext, close_parts
    from infrapulse.simulate.nvml_fake import open_fake
    from infrapulse.simulate.scenarios import ScenarioBoard
    from infrapulse.sources.gpu.nvml import OPEN_FAKE_KEY

    ctx = DemoContext(workdir=workdir, scenarios=ScenarioBoard(), hostname=TEMPLATE_HOST)
    parts = []
    try:
        for module in (node, gpus, serving_engines, *((probe, mesh) if probes else ())):
            parts.append(await module.demo_part(ctx))
        sources: dict[str, Any] = {}
        for part in parts:
            sources.update(part.sources)
        # render_cache 0: every scrape renders (bench/capacity.py daemon measures the render)
        cfg = config_mod.load_text(yaml.safe_dump({"interval": f"{interval:g}s", "sources": sources,
                                                   "http": {"render_cache": "0s"}}), "<capacity node>")
        daemon = Daemon(cfg, hostname=TEMPLATE_HOST, listen_override=f"127.0.0.1:{port}",
                        source_options={OPEN_FAKE_KEY: open_fake})
        await daemon.start()
        ready.set()
        await stop.wait()
        await daemon.stop()
    finally:
        await close_parts(parts)


def capture(path: Path, interval: float, warmup: float = 20.0, probes: bool = False) -> dict[str, Any]:
    """Run a node daemon, scrape it twice `interval` apart, write the template."""
    import socket
    import tempfile
    import threading

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    loop = asyncio.new_event_loop()
    ready, stop = asyncio.Event(), asyncio.Event()
    with tempfile.TemporaryDirectory(prefix="capacity-node-") as workdir:
        node = run_node_daemon(min(interval, 5.0), Path(workdir), ready, stop, port, probes)
        thread = threading.Thread(target=loop.run_until_complete, args=(node,), daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not ready.is_set():
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the template node daemon did not start")
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/metrics"
        time.sleep(warmup)
        first = parse_scrape(scrape(url))
        time.sleep(interval)
        second_text = scrape(url)
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
    second = parse_scrape(second_text)
    series = [[text, first[text][0], value, kind] for text, (value, kind) in second.items() if text in first]
    template = {"interval": interval, "host": TEMPLATE_HOST, "series": series,
                "exposition_bytes": len(second_text.encode())}
    path.write_text(json.dumps(template))
    return template


class SimulatedNode:
    """One node's exposition: the template's series with this node's hostname and values."""

    def __init__(self, template: dict[str, Any], name: str, seed: int) -> None:
        rng = self.rng = random.Random(seed)
        host = template["host"]
        self.prefixes: list[str] = []
        self.values: list[float] = []
        self.moving: list[tuple[int, float, float, bool, bool]] = []  # index, base, step, monotonic, integral
        for i, (text, first, second, _kind) in enumerate(template["series"]):
            self.prefixes.append(text.replace(f'hostname="{host}"', f'hostname="{name}"') + " ")
            step = second - first
            name_part = text.split("{", 1)[0]
            monotonic = name_part.endswith(MONOTONIC_SUFFIXES) and step >= 0
            integral = float(first).is_integer() and float(second).is_integer()
            start = second * rng.uniform(0.5, 1.5) if monotonic and step else second
            self.values.append(float(round(start)) if integral else start)
            if step:
                self.moving.append((i, first, step, monotonic, integral))

    def render(self) -> bytes:
        uniform = self.rng.uniform
        values = self.values
        for i, base, step, monotonic, integral in self.moving:
            value = values[i] + step * uniform(0.5, 1.5) if monotonic else base + step * uniform(-1.0, 1.0)
            values[i] = float(round(value)) if integral else value
        return "".join(f"{p}{v!r}\n" for p, v in zip(self.prefixes, values)).encode()


async def serve(template: dict[str, Any], nodes: int, port: int) -> None:
    from aiohttp import web

    simulated = [SimulatedNode(template, f"gpu-node-{k:04d}", seed=k) for k in range(nodes)]

    async def metrics(request: web.Request) -> web.Response:
        k = int(request.match_info["k"])
        if not 0 <= k < nodes:
            raise web.HTTPNotFound()
        return web.Response(body=simulated[k].render(),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    app = web.Application()
    app.router.add_get("/node/{k}/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    print(f"serving {nodes} nodes x {len(template['series'])} series on 127.0.0.1:{port}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="record a template from a node daemon on the demo's simulators")
    cap.add_argument("template", type=Path)
    cap.add_argument("--interval", type=float, default=15.0, help="seconds between the two scrapes")
    srv = sub.add_parser("serve", help="serve simulated nodes from a template")
    srv.add_argument("template", type=Path)
    srv.add_argument("--nodes", type=int, required=True)
    srv.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "capture":
        template = capture(args.template, args.interval)
        moving = sum(1 for _, a, b, _ in template["series"] if a != b)
        print(f"{len(template['series'])} series, {moving} moving over {args.interval:g}s")
        return 0
    asyncio.run(serve(json.loads(args.template.read_text()), args.nodes, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
