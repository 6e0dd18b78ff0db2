"""The network layer: the node's NIC and RDMA ports (PFC pause ratios, ECN marks, CNPs,
retransmissions, out-of-buffer, link events), the switch ports facing it through LLDP (ECN,
PFC, drops, flaps, queue depth) and the probe and mesh results, from the health signals; the
queue depth of the facing switch ports is added here."""

from __future__ import annotations

from collections.abc import Iterator

from ..store import Histogram
from .sample import Meta, Sampled, View, from_signals

LAYER = "network"
QUEUE_DEPTH_FLOOR = 256 * 1024  # bytes


def collect(view: View) -> Iterator[Sampled]:
    yield from from_signals(view, LAYER)
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
