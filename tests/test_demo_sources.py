"""The demo simulates every source: the simulators' `demo_part`s together configure each source in
`infrapulse.sources.SOURCES`, and the merged config is valid."""

from __future__ import annotations

from pathlib import Path

from infrapulse.simulate.demo import DemoContext, close_parts, demo_config, start_parts
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
    wanted = {name for name, cls in registry().items() if cls.wanted(cfg["sources"][name])}
    assert wanted == set(registry())
