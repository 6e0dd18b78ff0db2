"""The network layer: the node's NIC and RDMA ports (PFC pause ratios, ECN marks, CNPs,
retransmissions, out-of-buffer, link events and BER, RoCE congestion-control config changes),
the switch ports facing it through LLDP (ECN, PFC, drops, flaps, queue depth) and the probe and
mesh results, from the health signals; the queue depth of the facing switch ports and each
port's link class (health/signals/link.py: flapping, half-dead, degraded) are added here."""

from __future__ import annotations

from collections.abc import Iterator

from ..store import Histogram
from .sample import Meta, Sampled, View, floor_of, from_signals

LAYER = "network"
QUEUE_DEPTH_FLOOR = 256 * 1024  # bytes
HEALTHY_LINK = "healthy"


def collect(view: View) -> Iterator[Sampled]:
    yield from from_signals(view, LAYER)
    yield from link_states(view)
    depth: dict[tuple[str, str], float] = {}
    for _source, _target, values, value in view.store.iter_family("infrapulse_switch_queue_depth_bytes"):
        key = (values[0], values[1]) if len(values) >= 2 else None
        if key is None or key not in view.facing or isinstance(value, Histogram):
            continue
        depth[key] = max(depth.get(key, 0.0), float(value))
    for (switch, interface), value in depth.items():
        target = f"{switch} {interface} (facing {view.hostname} {view.facing[(switch, interface)]})"
        yield Meta(LAYER, "queue_depth", target, "bytes", QUEUE_DEPTH_FLOOR,
                   labels=(("interface", interface), ("switch", switch))), value


def link_states(view: View) -> Iterator[Sampled]:
    """Each classified port as a flag (0 healthy, 1 flapping/half-dead/degraded), the class and its
    evidence as the note: the report says "half-dead: 3 retrains without carrier loss", not only
    the signals behind it."""
    for link in view.report.links:
        state, evidence = link.get("state", ""), link.get("evidence", "")
        note = f"{state}: {evidence}" if evidence else state
        yield Meta(LAYER, "link_state", link.get("port", ""), "flag", floor_of(0.0, 1.0), good=0.0,
                   note=note), 0.0 if state == HEALTHY_LINK else 1.0
