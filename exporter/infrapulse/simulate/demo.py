"""`infrapulse demo`: start every simulator, then the daemon scraping them.

Each simulator a source's spec names (`SourceSpec.simulator`, the source registry) defines
`async def demo_part(ctx: DemoContext)` and contributes a `DemoPart`: the `sources:` config that
points the daemon at it, and a `close()`. Adding a simulator therefore needs no edit here.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import random
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from aiohttp import web

from .. import config as config_mod
from ..http import SCENARIOS_KEY, JsonField, json_error, read_json_object
from ..schema import parse_duration
from ..services import RoutesOnly
from ..sources import SPECS
from .scenarios import ScenarioBoard

log = logging.getLogger("infrapulse.demo")

# The simulated cluster: node hostnames that the simulated switches see as LLDP neighbours.
DEMO_NODES = ("gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04")


@dataclass
class DemoContext:
    workdir: Path
    scenarios: ScenarioBoard
    hostname: str = DEMO_NODES[0]  # the node the demo daemon pretends to be
    nodes: tuple[str, ...] = DEMO_NODES
    rng: random.Random = field(default_factory=lambda: random.Random(7))


@dataclass
class DemoPart:
    name: str
    sources: dict[str, Any]  # merged into the daemon config's `sources:`
    close: Callable[[], Awaitable[None]]
    description: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # top-level config keys (e.g. state_dir)


def demo_modules() -> list[ModuleType]:
    """The simulators the source registry names (each source spec's `simulator`), once each, in
    name order: a source without a simulator is not in the demo
    (tests/integration/test_demo_sources.py)."""
    names = sorted({spec.simulator for spec in SPECS if spec.simulator})
    return [importlib.import_module(f"{__package__}.{name}") for name in names]


def known_scenarios() -> dict[str, str]:
    scenarios: dict[str, str] = {}
    for module in demo_modules():
        scenarios.update(getattr(module, "SCENARIOS", {}))
    return scenarios


async def start_parts(ctx: DemoContext) -> list[DemoPart]:
    parts: list[DemoPart] = []
    try:
        for module in demo_modules():
            part: DemoPart = await module.demo_part(ctx)  # each simulator module's entry point
            log.info("simulator started", extra={"part": part.name, "detail": part.description})
            parts.append(part)
    except BaseException:
        await close_parts(parts)
        raise
    return parts


async def close_parts(parts: list[DemoPart]) -> None:
    for part in reversed(parts):
        try:
            await part.close()
        except Exception:
            log.exception("closing simulator failed", extra={"part": part.name})


def demo_config(parts: list[DemoPart], listen: str, interval: str, health: dict[str, Any] | None = None,
                inspect: dict[str, Any] | None = None) -> config_mod.Config:
    """The daemon's config: every simulator's sources, and a `health:` section when given (the
    end-to-end tests shorten the health windows with it)."""
    sources: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    for part in parts:
        sources.update(part.sources)
        settings.update(part.settings)
    import yaml

    doc: dict[str, Any] = {**settings, "listen": listen, "interval": interval, "sources": sources}
    if health:
        doc["health"] = health
    # Like its scenario API, the demo starts inspections for anyone who can reach it; the end-to-end
    # tests add their thresholds and windows.
    doc["inspect"] = {"allow_unauthenticated": True, **(inspect or {})}
    return config_mod.load_text(yaml.safe_dump(doc), "<demo>")


def run_demo(args: argparse.Namespace) -> int:
    from ..daemon import Daemon, run_async
    from ..sources.gpu.nvml import OPEN_FAKE_KEY
    from ..webconfig import web_security as make_web_security
    from .nvml_fake import open_fake

    try:
        web_security = make_web_security(args.web_config_file)
    except ValueError as exc:
        print(f"web config error: {exc}")
        return 2

    unknown = set(args.scenario) - set(known_scenarios())
    if unknown:
        print(f"unknown scenario(s): {', '.join(sorted(unknown))}; "
              f"known: {', '.join(sorted(known_scenarios()))}")
        return 2
    try:
        parse_duration(args.interval)
    except ValueError as exc:
        print(f"--interval: {exc}")
        return 2
    own_workdir = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="infrapulse-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ctx = DemoContext(workdir=workdir, scenarios=ScenarioBoard(set(args.scenario)))

    async def main() -> None:
        parts = await start_parts(ctx)
        try:
            cfg = demo_config(parts, args.listen or "127.0.0.1:9477", args.interval,
                              getattr(args, "health", None), getattr(args, "inspect", None))
            daemon = Daemon(cfg, hostname=ctx.hostname, web_security=web_security,
                            source_options={OPEN_FAKE_KEY: open_fake})
            daemon.add_service(scenario_service(ctx.scenarios))
            if args.duration:
                asyncio.get_running_loop().call_later(args.duration, daemon.request_stop)
            log.info("demo running", extra={"listen": daemon.listen, "workdir": str(workdir),
                                            "scenarios": ctx.scenarios.names()})
            await daemon.run_forever()
        finally:
            await close_parts(parts)

    try:
        return run_async(main)
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


SCENARIO_FIELDS = {"name": JsonField((str,), required=True), "active": JsonField((bool,)),
                   "duration": JsonField((int, float, type(None)))}
MAX_SCENARIO_SECONDS = 7 * 86400


def scenario_service(board: ScenarioBoard) -> RoutesOnly:
    """The scenario toggles as a daemon service (routes only)."""
    return RoutesOnly("scenarios", scenario_routes(board))


def scenario_routes(board: ScenarioBoard) -> Callable[[web.Application], None]:
    """HTTP control of the demo's anomalies (only the demo daemon has these routes).

    POST /api/v1/scenarios takes `Content-Type: application/json` and exactly
    {"name": str, "active": bool (default true), "duration": seconds > 0 or null}: anything else
    is a 400 (415 for another content type), so "false" as a string cannot switch a scenario on
    and a cross-site form post cannot reach a demo on localhost."""

    async def list_scenarios(request: web.Request) -> web.Response:
        return web.json_response({"active": board.names(), "known": known_scenarios()})

    async def set_scenario(request: web.Request) -> web.Response:
        body = await read_json_object(request, SCENARIO_FIELDS)
        name = body["name"]
        duration = body.get("duration")
        if name not in known_scenarios():
            raise json_error(404, f"unknown scenario {name!r}; known: {', '.join(sorted(known_scenarios()))}")
        if duration is not None and not 0 < float(duration) <= MAX_SCENARIO_SECONDS:  # type: ignore[arg-type]
            raise json_error(400, f"field 'duration' must be between 0 and {MAX_SCENARIO_SECONDS} seconds "
                                  "(or null for no end)")
        if body.get("active", True):
            board.activate(str(name), float(duration) if duration is not None else None)  # type: ignore[arg-type]
        else:
            board.deactivate(str(name))
        log.info("scenario changed", extra={"scenario": name, "active": board.active(str(name))})
        return web.json_response({"active": board.names()})

    def extend(app: web.Application) -> None:
        # The status page shows a toggle per scenario (demo daemon only).
        app[SCENARIOS_KEY] = lambda: {"active": board.names(), "known": known_scenarios()}
        app.router.add_get("/api/v1/scenarios", list_scenarios)
        app.router.add_post("/api/v1/scenarios", set_scenario)

    return extend
