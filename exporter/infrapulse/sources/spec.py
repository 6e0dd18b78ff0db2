"""What one source is, in one place: its class (name, config section, role, routes) and what the
rest of the product hangs on it — the health signal modules that score it, its `doctor` probe,
its demo simulator, the dashboards and rule files that read it. Each `sources/<x>/spec.py`
exports `SPECS`; `sources/__init__.py` lists those, and everything that walks sources (the
config schema, the daemon, the catalogue, docs generation, `doctor`, the demo, the health score,
tests/test_source_wiring.py) walks that one registry.

The layers above a source (health, doctor, simulate) are named here, not imported: a spec is
read by those layers, and a source never imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import catalog
from .base import Source


@dataclass(frozen=True)
class SourceSpec:
    source: type[Source[Any]]
    # Health signal modules (infrapulse.health.signals.<name>) with the signals that read it.
    signals: tuple[str, ...] = ()
    # Its `doctor` probe, "module:function" under infrapulse.doctor ("" = the generic one for a
    # polling source: one collection, timed).
    doctor: str = ""
    # Its demo simulator: a module under infrapulse.simulate with `demo_part` ("" = none).
    simulator: str = ""
    dashboards: tuple[str, ...] = ()  # dashboards/<file>: boards with panels on its families
    alerts: tuple[str, ...] = ()  # alerts/<file>: rule files with rules on its families

    @property
    def name(self) -> str:
        return self.source.name

    def families(self) -> list[catalog.Family]:
        """The families it exports (shared ones, "nvml, dcgm", count for each)."""
        return [f for f in catalog.all_families()
                if self.name in (s.strip() for s in f.source.split(","))]
