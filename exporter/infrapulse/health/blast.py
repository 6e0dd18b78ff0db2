"""Blast radius: the workloads a fault hurts, through the chain switch port -> node NIC (LLDP) ->
the GPUs behind it (PCIe/NUMA topology) -> the pods, Slurm jobs and serving endpoints using
those GPUs and NICs (docs/attribution.md).

Read per pass from the join series the workload source publishes (`infrapulse_workload_gpu_info`,
`infrapulse_workload_nic_info`; the source already folds the GPU -> nearest-NIC topology into the
NIC series) and the switches' LLDP neighbours. A target names only its own workloads: a GPU's,
a NIC's (by RDMA device or netdev), an endpoint's, a switch port's through the NIC it faces;
a node-wide finding (a probe, a mesh peer) names the workloads on this node's NICs. Where the
chain cannot be followed — no attribution here, a switch port facing another host (a fabric
collector has no node data) — the answer is `unknown` with the reason, never an empty "none".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .readings import Readings

GPU_INFO = "infrapulse_workload_gpu_info"
NIC_INFO = "infrapulse_workload_nic_info"
LLDP = "infrapulse_switch_lldp_neighbor_info"
MAX_NAMED = 20  # a detractor names at most this many workloads (then "+N more")

KNOWN, UNKNOWN = "known", "unknown"


@dataclass(frozen=True, order=True)
class Workload:
    kind: str  # pod | slurm_job | endpoint | process
    name: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name}


@dataclass(frozen=True)
class Affected:
    """The workloads one target's fault hurts: `state` known (possibly none) or unknown, and how
    the chain was followed (or why it could not be)."""

    state: str
    workloads: tuple[Workload, ...] = ()
    via: str = ""

    @property
    def more(self) -> int:
        return max(len(self.workloads) - MAX_NAMED, 0)

    def as_json(self) -> dict[str, object]:
        return {"state": self.state, "workloads": [w.as_json() for w in self.workloads[:MAX_NAMED]],
                "more": self.more, "via": self.via}

    def text(self) -> str:
        return affected_text(self.as_json())


def affected_text(affected: Mapping[str, Any] | None) -> str:
    """"affects: slurm:1234, endpoint:vllm-a" from an `Affected.as_json()` (the API's form)."""
    if not affected:
        return ""
    if affected["state"] == UNKNOWN:
        return f"affects: unknown ({affected['via']})"
    names = ", ".join(w["name"] for w in affected["workloads"])
    more = f" (+{affected['more']} more)" if affected.get("more") else ""
    return f"affects: {names}{more}" if names else f"affects: no workload ({affected['via']})"


def _same_host(a: str, b: str) -> bool:
    """LLDP system names may be FQDNs; compare the first label, case-insensitively."""
    a, b = a.strip().lower(), b.strip().lower()
    return bool(a) and (a == b or a.split(".")[0] == b.split(".")[0])


@dataclass
class WorkloadIndex:
    """One pass's attribution, keyed the way the source series are labelled."""

    hostname: str
    present: bool = False  # the workload source publishes here
    by_gpu: dict[str, set[Workload]] = field(default_factory=dict)
    by_device: dict[str, set[Workload]] = field(default_factory=dict)
    by_interface: dict[str, set[Workload]] = field(default_factory=dict)
    by_endpoint: dict[str, set[Workload]] = field(default_factory=dict)
    lldp: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # port -> (system, port)

    @classmethod
    def from_readings(cls, readings: Readings, hostname: str, source: str = "workload") -> WorkloadIndex:
        index = cls(hostname, present=source in readings.sources_present())
        for labels in _series(readings, GPU_INFO):
            index.present = True
            w = _workload(labels)
            if w is None:
                continue
            _add(index.by_gpu, labels.get("gpu", ""), w)
            if labels.get("endpoint"):
                _add(index.by_endpoint, labels["endpoint"], w)
        for labels in _series(readings, NIC_INFO):
            index.present = True
            w = _workload(labels)
            if w is None:
                continue
            _add(index.by_device, labels.get("device", ""), w)
            _add(index.by_interface, labels.get("interface", ""), w)
            if labels.get("endpoint"):
                _add(index.by_endpoint, labels["endpoint"], w)
        for labels in _series(readings, LLDP):
            index.lldp[(labels.get("switch", ""), labels.get("interface", ""))] = (
                labels.get("neighbor_system", ""), labels.get("neighbor_port", ""))
        return index

    def affected(self, labels: Mapping[str, str]) -> Affected:
        """The workloads behind a target, from its labels (the measurement's)."""
        if "switch" in labels:
            return self._switch_port(labels)
        if not self.present:
            return Affected(UNKNOWN, via="no workload attribution on this instance (sources.workload)")
        if "gpu" in labels:
            return self._known(self.by_gpu.get(labels["gpu"], ()), f"GPU {labels['gpu']}")
        if "endpoint" in labels:
            return self._known(self.by_endpoint.get(labels["endpoint"], ()), f"endpoint {labels['endpoint']}")
        if "device" in labels:
            return self._known(self.by_device.get(labels["device"], ()), f"RDMA device {labels['device']}")
        if "interface" in labels:
            netdev = labels["interface"]
            return self._known(self.by_interface.get(netdev, ()), f"netdev {netdev}")
        # A node-wide finding (a probe's path, a mesh peer): what runs on this node's fabric.
        every = {w for ws in self.by_interface.values() for w in ws}
        return self._known(every, f"every RDMA NIC of {self.hostname}")

    def _switch_port(self, labels: Mapping[str, str]) -> Affected:
        switch, port = labels.get("switch", ""), labels.get("interface", "")
        where = f"{switch} {port}".strip()
        if not port:
            return Affected(UNKNOWN, via=f"{switch}: a whole switch; its ports' hosts are not known here")
        neighbour = self.lldp.get((switch, port))
        if neighbour is None:
            return Affected(UNKNOWN, via=f"{where}: no LLDP neighbour")
        system, nic = neighbour
        if not _same_host(system, self.hostname):
            return Affected(UNKNOWN, via=f"{where} faces {system or 'an unnamed host'}: that node's daemon "
                                         "knows its workloads")
        if not self.present:
            return Affected(UNKNOWN, via=f"{where} -> {nic}: no workload attribution on this instance")
        found = self.by_interface.get(nic) or self.by_device.get(nic) or set()
        return self._known(found, f"{where} -> {self.hostname} {nic}")

    @staticmethod
    def _known(found: Iterable[Workload], via: str) -> Affected:
        return Affected(KNOWN, tuple(sorted(set(found))), via)


def _series(readings: Readings, family: str) -> Iterable[dict[str, str]]:
    try:
        for s in readings.series(family):
            if s.value:
                yield s.labels
    except KeyError:  # the family is not declared: that source is not part of this build
        return


def _workload(labels: Mapping[str, str]) -> Workload | None:
    name = labels.get("workload", "")
    return Workload(labels.get("kind", ""), name) if name else None


def _add(index: dict[str, set[Workload]], key: str, w: Workload) -> None:
    if key:
        index.setdefault(key, set()).add(w)
