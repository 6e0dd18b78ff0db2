"""One pass of attribution, as plain data: what each source of truth says (GPUs and their
processes, pod-resources grants, cgroups, endpoints, PCIe topology) joined into rows of
(GPU or NIC, workload). No I/O here: source.py reads, this joins, the tests feed it shapes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from .cgroups import ProcessCgroup
from .podresources import DeviceGrant
from .slurm import GresAllocation
from .topology import RANK, PciPlace, link

_PCI_ID = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str
    bus_id: str = ""
    mig_uuids: tuple[str, ...] = ()
    mig_instances: tuple[str, ...] = ()  # the GPU instance id of each MIG uuid, in the same order
    pids: tuple[int, ...] = ()
    place: PciPlace | None = None


@dataclass(frozen=True)
class Nic:
    device: str  # RDMA device, mlx5_0
    interface: str  # its netdev ("" for an InfiniBand port)
    place: PciPlace | None = None


@dataclass(frozen=True, order=True)
class Who:
    """A workload with the labels that name it (empty ones are left off the series)."""

    kind: str
    workload: str
    pod: str = ""
    namespace: str = ""
    container: str = ""
    slurm_job_id: str = ""
    slurm_step: str = ""
    slurm_user: str = ""
    endpoint: str = ""
    gpu_instance: str = ""  # a MIG instance granted (kubelet), its GPU instance id ...
    mig_uuid: str = ""  # ... and MIG uuid: joins the per-instance series (gpu, gpu_instance)

    def details(self) -> tuple[str, ...]:
        return (self.pod, self.namespace, self.container, self.slurm_job_id, self.slurm_step,
                self.slurm_user, self.endpoint)

    def mig(self) -> tuple[str, str]:
        return (self.gpu_instance, self.mig_uuid)

    def whole_gpu(self) -> Who:
        """The same workload without its MIG instance (as carried to a NIC)."""
        return replace(self, gpu_instance="", mig_uuid="") if self.mig_uuid else self


@dataclass(frozen=True)
class EndpointRule:
    """sources.workload.endpoints[]: how one serving endpoint's GPUs are found."""

    name: str
    port: int = 0  # the engine's listening TCP port: its process and descendants on the GPUs
    pods: tuple[str, ...] = ()  # or the pods that run it (their pod-resources grants)
    namespace: str = ""
    gpus: tuple[str, ...] = ()  # or the GPU indexes, as written


@dataclass
class Attribution:
    gpu_rows: dict[str, set[Who]] = field(default_factory=dict)  # GPU index -> workloads
    nic_rows: dict[str, set[Who]] = field(default_factory=dict)  # RDMA device -> workloads
    topology: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    gpu_uuids: dict[str, str] = field(default_factory=dict)  # GPU index -> UUID, every GPU seen
    unattributed_gpus: set[str] = field(default_factory=set)  # processes on it, nobody named
    counts: dict[str, int] = field(default_factory=dict)  # what each source of truth yielded

    def add_gpu(self, index: str, who: Who) -> None:
        self.gpu_rows.setdefault(index, set()).add(who)


def attribute(gpus: list[Gpu], nics: list[Nic], grants: list[DeviceGrant],
              cgroup_of: Callable[[int], ProcessCgroup | None], user_of: Callable[[int], str],
              endpoints: Iterable[EndpointRule], endpoint_gpus: Mapping[str, set[str]],
              nic_by_pci: Mapping[str, str], gres: Iterable[GresAllocation] = ()) -> Attribution:
    """Join the sources of truth. `endpoint_gpus`: GPUs found for a port rule (source.py follows
    the listening PID); `nic_by_pci`: PCI address (a VF's too) -> RDMA device; `gres`: the
    running Slurm jobs' GPU indexes here (scontrol), for GPUs a job holds without a process."""
    out = Attribution(gpu_uuids={g.index: g.uuid for g in gpus})
    out.counts["gpus"] = len(gpus)
    by_uuid = {g.uuid: g.index for g in gpus}
    by_mig = {m: (g.index, inst) for g in gpus for m, inst in zip(g.mig_uuids, g.mig_instances, strict=False)}
    # (namespace, pod) -> (GPU index, GPU instance id, MIG uuid) it was granted ("" for a whole GPU)
    pod_gpus: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for grant in grants:
        who = Who("pod", f"{grant.namespace}/{grant.pod}", grant.pod, grant.namespace, grant.container)
        for device_id in grant.device_ids:
            if device_id in by_uuid:
                out.add_gpu(by_uuid[device_id], who)
                pod_gpus.setdefault((grant.namespace, grant.pod), set()).add((by_uuid[device_id], "", ""))
            elif device_id in by_mig:
                index, instance = by_mig[device_id]
                out.add_gpu(index, replace(who, gpu_instance=instance, mig_uuid=device_id))
                pod_gpus.setdefault((grant.namespace, grant.pod), set()).add((index, instance, device_id))
            elif _PCI_ID.match(device_id):
                address = device_id.lower() if device_id.count(":") == 2 else f"0000:{device_id.lower()}"
                if address in nic_by_pci:
                    out.nic_rows.setdefault(nic_by_pci[address], set()).add(who)
    out.counts["pod_resources"] = len(grants)
    processes = 0
    for gpu in gpus:
        named = gpu.index in out.gpu_rows
        for pid in gpu.pids:
            processes += 1
            cg = cgroup_of(pid)
            if cg is not None and cg.slurm_job_id:
                user = user_of(cg.uid) if cg.uid is not None else ""
                out.add_gpu(gpu.index, Who("slurm_job", cg.slurm_job_id, slurm_job_id=cg.slurm_job_id,
                                           slurm_step=cg.slurm_step, slurm_user=user))
                named = True
        if gpu.pids and not named:
            out.unattributed_gpus.add(gpu.index)
    out.counts["gpu_processes"] = processes
    held = 0
    for job in gres:  # a job already named through its processes keeps that row (with its step)
        user = user_of(job.uid) if job.uid is not None else ""
        for index in job.gpus:
            if index not in out.gpu_uuids:
                continue
            held += 1
            if not any(w.slurm_job_id == job.job_id for w in out.gpu_rows.get(index, ())):
                out.add_gpu(index, Who("slurm_job", job.job_id, slurm_job_id=job.job_id, slurm_user=user))
            out.unattributed_gpus.discard(index)
    out.counts["slurm_gres"] = held
    known = {g.index for g in gpus}
    endpoint_rows = 0
    for rule in endpoints:
        found: set[str] = set(rule.gpus) & known if rule.gpus else set()
        for pod in rule.pods:
            for index, instance, mig in pod_gpus.get((rule.namespace, pod), set()):
                out.add_gpu(index, Who("endpoint", rule.name, pod=pod, namespace=rule.namespace,
                                       endpoint=rule.name, gpu_instance=instance, mig_uuid=mig))
                endpoint_rows += 1
        found |= endpoint_gpus.get(rule.name, set())
        for index in found:
            out.add_gpu(index, Who("endpoint", rule.name, endpoint=rule.name))
            endpoint_rows += 1
    out.counts["endpoints"] = endpoint_rows
    _carry_to_nics(out, gpus, nics)
    return out


def _carry_to_nics(out: Attribution, gpus: list[Gpu], nics: list[Nic]) -> None:
    """Each GPU's workloads go to the NIC(s) nearest it; every GPU x NIC pair is a topology row."""
    placed = [n for n in nics if n.place is not None]
    for gpu in gpus:
        if gpu.place is None or not placed:
            continue
        links = {n.device: link(gpu.place, n.place) for n in placed if n.place is not None}
        best = min(RANK[v] for v in links.values())
        numa = str(gpu.place.numa_node)
        for nic in placed:
            nearest = RANK[links[nic.device]] == best
            out.topology.append((gpu.index, nic.device, nic.interface, numa, links[nic.device],
                                 "true" if nearest else "false"))
            if nearest:
                for who in out.gpu_rows.get(gpu.index, ()):
                    out.nic_rows.setdefault(nic.device, set()).add(who.whole_gpu())
    out.counts["topology"] = len(out.topology)
