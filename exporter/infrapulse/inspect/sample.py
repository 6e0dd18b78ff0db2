"""What one health pass gives an inspection: (series, value) pairs, one per layer target.

A series is one value of one target in one layer: ("network", "pfc_pause_ratio",
"ens1f0np0 priority 3 rx"). Most come from the health report of the pass (every signal's value
for every target, already windowed by the health readings); each layer module adds what the
signals do not carry (waiting and running requests, GPU clocks). `Meta` says how a series is
compared: a gauge by its mean, a counter by its rate, and which direction is worse.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..health.scoring import Report
from ..store import Store

LAYERS = ("queue", "compute", "network")  # the order a report reads in
# Health components -> the layer whose evidence they are.
COMPONENT_LAYER = {"serving": "queue", "gpu": "compute", "network": "network", "rdma": "network",
                   "topology": "network", "probe": "network"}
GAUGE, COUNTER = "gauge", "counter"


@dataclass(frozen=True)
class Meta:
    layer: str
    metric: str  # a health signal's name, or an extra value's ("waiting", "sm_clock")
    target: str  # what the verdict names: "endpoint vllm-llama-70b", "GPU 3", "ens1f0np0 priority 3 rx"
    unit: str  # the signal units of health.signals.base (ratio, per_second, count, flag, seconds, factor)
    floor: float  # the level below which a change is noise: change = log2((since+floor)/(before+floor))
    worse: int = 1  # +1: higher is worse; -1: lower is worse
    kind: str = GAUGE
    good: float | None = None  # a signal's good threshold: it moved only if it left the good side
    evidence: bool = False  # a hardware event (XID, lost GPU, uncorrectable ECC): enough on its own
    labels: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    note: str = field(default="", compare=False)  # the latest pass's detail: "XID 79", "hw_thermal"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.layer, self.metric, self.target)

    def label(self, name: str) -> str:
        return dict(self.labels).get(name, "")


@dataclass
class View:
    """One pass: the health report, the store, and how this node is cabled."""

    report: Report
    store: Store
    hostname: str
    facing: dict[tuple[str, str], str]  # (switch, interface) -> this node's port on the other end
    netdevs: dict[tuple[str, str], str]  # (RDMA device, port) -> its netdev
    node_side: bool  # this daemon reads node-local sources (not only switches)


Sampled = tuple[Meta, float]
COMPUTE_EVIDENCE = frozenset({"xid_critical", "xid_other", "ecc_uncorrectable", "gpu_lost",
                              "row_remap_failure", "throttle_active", "kmsg_gpu_fault",
                              "kmsg_pcie_uncorrected"})
# Switch-side targets of a fabric-only daemon: its worst few per signal (a fabric has 100k queues).
FABRIC_TARGETS_PER_SIGNAL = 20


def floor_of(good: float, bad: float) -> float:
    """Noise level of a signal: half its good threshold (or a tenth of the good-bad span at 0)."""
    span = abs(bad - good)
    if good > 0:
        return max(min(good, span) * 0.5, 1e-12)
    return max(span * 0.1, 1e-12)


def decorate(view: View, labels: dict[str, str], target: str) -> str | None:
    """The target as the report names it; None for a switch port that does not face this node
    (on a daemon with node-side sources)."""
    switch, interface = labels.get("switch"), labels.get("interface")
    if switch is not None and interface is not None:
        peer = view.facing.get((switch, interface))
        if peer is not None:
            return f"{target} (facing {view.hostname} {peer})"
        return None if view.node_side else target
    device, port = labels.get("device"), labels.get("port")
    if device is not None and port is not None:
        netdev = view.netdevs.get((device, port))
        return f"{target} ({netdev})" if netdev else target
    return target


def from_signals(view: View, layer: str) -> Iterator[Sampled]:
    """Every target of every signal of the components that feed `layer`."""
    for name, comp in view.report.components.items():
        if COMPONENT_LAYER.get(name) != layer:
            continue
        for result in comp.signals:
            if not result.known:
                continue
            sig = result.signal
            good, bad = result.settings.good, result.settings.bad
            switch_targets = 0
            for scored in result.targets:  # worst first
                m = scored.measurement
                if not math.isfinite(m.value):
                    continue
                if "switch" in m.labels and not view.node_side:
                    switch_targets += 1
                    if switch_targets > FABRIC_TARGETS_PER_SIGNAL:
                        continue
                target = decorate(view, m.labels, m.target)
                if target is None:
                    continue
                meta = Meta(layer, sig.name, target, sig.unit, floor_of(good, bad),
                            1 if good <= bad else -1, GAUGE, good,
                            evidence=sig.name in COMPUTE_EVIDENCE,
                            labels=tuple(sorted(m.labels.items())), note=m.note)
                yield meta, float(m.value)


def lldp_facing(store: Store, hostname: str) -> dict[tuple[str, str], str]:
    """(switch, interface) -> neighbour port, for the switch ports whose LLDP neighbour is this host."""
    out: dict[tuple[str, str], str] = {}
    if not hostname:
        return out
    host = hostname.lower()
    short = host.split(".", 1)[0]
    for _source, _target, values, _value in store.iter_family("infrapulse_switch_lldp_neighbor_info"):
        if len(values) < 4:
            continue
        switch, interface, system, port = values[:4]
        name = system.lower()
        if name == host or name.split(".", 1)[0] == short:
            out[(switch, interface)] = port
    return out


def rdma_netdevs(store: Store) -> dict[tuple[str, str], str]:
    out = {}
    for _source, _target, values, _value in store.iter_family("infrapulse_rdma_port_info"):
        if len(values) >= 4 and values[3]:
            out[(values[0], values[1])] = values[3]
    return out


def node_side(store: Store) -> bool:
    """Whether this daemon runs a node-side source (then only switch ports facing it count)."""
    from ..sources import registry

    roles = {name: cls.role for name, cls in registry().items()}
    return any(roles.get(source) == "node" for source, _ in store.status) or any(
        roles.get(source) == "node" for (source, _), _ in store.snapshots())
