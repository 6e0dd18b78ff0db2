"""The demo simulates every source: the simulators' `demo_part`s together configure each source in
`infrapulse.sources.SOURCES`, the merged config is valid, and every scenario a simulator
implements can be switched on in the demo."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import infrapulse.simulate
from infrapulse.simulate.demo import DemoContext, close_parts, demo_config, known_scenarios, start_parts
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources import registry


async def test_every_source_has_a_simulator_in_the_demo(tmp_path: Path) -> None:
    parts = await start_parts(DemoContext(workdir=tmp_path, scenarios=ScenarioBoard()))
    try:
        configured = {name for part in parts for name in part.sources}
        cfg = demo_config(parts, "127.0.0.1:0", "1s")
    finally:
        await close_parts(parts)
    assert configured == set(registry()), f"no simulator configures: {set(registry()) - configured}"
    wanted = {name for name, cls in registry().items() if cls.wanted(cfg.sources[name])}
    assert wanted == set(registry())


def test_every_simulated_scenario_is_known_to_the_demo() -> None:
    """`known_scenarios()` reads SCENARIOS from the modules with a demo_part: one that moved away
    from its simulator's SCENARIOS (as the GPU part did) would make them unreachable."""
    declared: dict[str, str] = {}
    for info in pkgutil.iter_modules(infrapulse.simulate.__path__):
        declared.update(getattr(importlib.import_module(f"infrapulse.simulate.{info.name}"), "SCENARIOS", {}))
    assert {"xid", "gpu-thermal", "pfc-storm", "ttft-surge"} <= set(declared)
    assert known_scenarios() == declared
