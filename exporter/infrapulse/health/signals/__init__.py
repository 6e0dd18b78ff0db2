"""Every health signal: what it reads, its formula, window, thresholds, weight and wording.

One module per component (network, rdma, gpu, serving, probe, topology) or source (link,
roce_config, kmsg), each with its measure
functions and its `SIGNALS` list; `base` holds what they share. The source registry
(`sources.SPECS`) names the modules that score each source; `SIGNALS` here is all of them, in
`ORDER` (topology last: it reuses the network measurements of the same pass), a module a new
source names coming before topology.

Imports: `..readings`, `..latency`, `rates`, `store`, `xid`, `changes` and the source registry
(`sources`: loading it declares every family, so the catalogue is complete before labels are
looked up); never a source's own modules, `service`, `scoring` or `page`.

docs/health.md documents these definitions; tests/test_health_docs.py keeps them in sync.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Loading the registry imports every source, whose modules declare the families the signals
# read: the catalogue (label names) is complete whichever sources this instance runs.
from ...sources import SPECS
from .base import (
    COUNT,
    FACTOR,
    FLAG,
    PER_SECOND,
    RATIO,
    SECONDS,
    Context,
    Measurement,
    Signal,
    format_seconds,
)
from .gpu import SPARSE_COUNTERS as _GPU_SPARSE
from .kmsg import EVENTS as _KMSG_EVENTS
from .link import BASELINE_COUNTERS

# The order components and signals are listed and evaluated in (the API, docs/health.md).
ORDER = ("network", "link", "rdma", "roce_config", "gpu", "kmsg", "serving", "probe", "topology")
# Counter families whose series only appear once an event happened (absence = zero).
SPARSE_COUNTERS = _GPU_SPARSE | {_KMSG_EVENTS}


def _modules() -> list[ModuleType]:
    named = dict.fromkeys(name for spec in SPECS for name in spec.signals)
    last = ORDER.index("topology")
    ranked = sorted(named, key=lambda n: ORDER.index(n) if n in ORDER else last - 0.5)
    return [importlib.import_module(f"{__name__}.{name}") for name in ranked]


SIGNALS: dict[str, Signal] = {s.name: s for module in _modules() for s in module.SIGNALS}


def counters_by_window() -> dict[str, set[str]]:
    """{window kind: counter families} the readings must keep history for."""
    out: dict[str, set[str]] = {"window": set(), "event_window": set(), "link_window": set(),
                                 "link_baseline": set(BASELINE_COUNTERS)}
    for s in SIGNALS.values():
        kind = s.window if s.window in out else "window"
        out[kind].update(s.counters)
    return out


__all__ = ["COUNT", "FACTOR", "FLAG", "PER_SECOND", "RATIO", "SECONDS",
           "SIGNALS", "SPARSE_COUNTERS", "Context", "Measurement", "Signal", "counters_by_window",
           "format_seconds"]
