"""Every health signal: what it reads, its formula, window, thresholds, weight and wording.

One module per component (network, rdma, gpu, serving, probe, topology), each with its measure
functions and its `SIGNALS` list; `base` holds what they share. `SIGNALS` here is all of them,
in component order (topology last: it reuses the network measurements of the same pass).

Imports: `..readings`, `..latency`, `rates`, `store`, `sources.gpu.xid` and the sources' family
modules (read-only, so the catalogue is complete before labels are looked up); never `service`,
`scoring` or `page`.

docs/health.md documents these definitions; tests/test_health_docs.py keeps them in sync.
"""

from __future__ import annotations

# The modules that declare the families the signals read: importing them fills the catalogue,
# whose label names the readings use, whichever sources this instance runs.
from ...sources.gnmi import families as _gnmi_families  # noqa: F401
from ...sources.gpu import families as _gpu_families  # noqa: F401
from ...sources.nic import ethtool as _ethtool  # noqa: F401
from ...sources.nic import infiniband as _infiniband  # noqa: F401
from ...sources.nic import roce_families as _roce_families  # noqa: F401
from ...sources.probe import families as _probe_families  # noqa: F401
from ...sources.serving import normalize as _serving_families  # noqa: F401
from . import gpu, link, network, probe, rdma, roce_config, serving, topology
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
from .gpu import SPARSE_COUNTERS

SIGNALS: dict[str, Signal] = {
    s.name: s
    for module in (network, link, rdma, roce_config, gpu, serving, probe, topology)
    for s in module.SIGNALS
}


def counters_by_window() -> dict[str, set[str]]:
    """{window kind: counter families} the readings must keep history for."""
    out: dict[str, set[str]] = {"window": set(), "event_window": set(), "link_window": set(),
                                 "link_baseline": set(link.BASELINE_COUNTERS)}
    for s in SIGNALS.values():
        kind = s.window if s.window in out else "window"
        out[kind].update(s.counters)
    return out


__all__ = ["COUNT", "FACTOR", "FLAG", "PER_SECOND", "RATIO", "SECONDS",
           "SIGNALS", "SPARSE_COUNTERS", "Context", "Measurement", "Signal", "counters_by_window",
           "format_seconds"]
