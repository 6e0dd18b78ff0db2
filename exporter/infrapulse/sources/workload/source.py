"""Source `workload`: each pass reads the GPUs and their compute processes (NVML), the kubelet's
device grants (pod-resources `List`), the cgroup of each GPU process (Slurm job and step), the
processes behind each configured serving endpoint, and the PCIe topology (sysfs); attribution.py
joins them into `infrapulse_workload_gpu_info`, `..._nic_info` and `infrapulse_topology_gpu_nic_info`.

One target (`workload`). A source of truth that is configured but unreachable (the kubelet
socket, NVML) is a partial error with its reason, and its coverage mapping reads 0: the blast
radius then says what it could not follow instead of an empty list.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from ...schema import AutoBool, Bool, Duration, Int, ListOf, Settings, Str, setting, settings
from ...store import Snapshot
from ..base import PollingSettings, PollingSource, SourceContext, TargetResult
from ..gpu.nvml_api import InitError, NvmlApi, RealNvml
from . import families as F
from .attribution import Attribution, EndpointRule, Gpu, Nic, attribute
from .cgroups import read_process
from .podresources import DEFAULT_SOCKET, DeviceGrant, list_grants
from .procs import descends_from, listening_pid
from .slurm import GresAllocation, read_allocations
from .topology import gpu_place, rdma_places

TARGET = "workload"
OPEN_FAKE_KEY = "nvml.open_fake"  # the same injected opener as sources.nvml.fake (sources/gpu/nvml.py)
COVERAGE = ("pod_resources", "gpu_processes", "endpoints", "topology")
AUTO_SCONTROL = "auto"

@settings("How one serving endpoint's GPUs are found (any of port, pods, gpus; they add up).")
@dataclass(kw_only=True, slots=True)
class WorkloadEndpointSettings(Settings):
    name: str = setting(Str("The endpoint's name, as in sources.serving.endpoints[].name.", required=True))
    port: int = setting(Int("The engine's listening TCP port: the process holding it and its descendants "
                            "are looked up on the GPUs (0 = not used).", default=0, min=0, max=65535))
    pods: list[str] = setting(ListOf("The pods that run it: the GPUs the kubelet granted them.", item=Str(),
                                     default=[]))
    namespace: str = setting(Str("The pods' namespace.", default="default"))
    gpus: list[int] = setting(ListOf("GPU indexes it uses, as written (an explicit attribution).",
                                     item=Int(min=0), default=[]))


ENDPOINT = WorkloadEndpointSettings.SCHEMA


@settings("Workload attribution: the pods, Slurm jobs and serving endpoints using this node's GPUs and "
          "NICs, as join series (docs/attribution.md).")
@dataclass(kw_only=True, slots=True)
class WorkloadSettings(PollingSettings):
    enabled: bool | str = setting(AutoBool("auto: on when the kubelet pod-resources socket exists, NVML is "
                                           "present (/dev/nvidiactl) or `nvml_fake` or `endpoints` are set."))
    interval: float = setting(Duration("How often attribution is refreshed (pods and jobs start and stop in "
                                       "minutes, not seconds).", default="15s", min=0.05))
    pod_resources_socket: str = setting(Str("The kubelet pod-resources API socket (\"\" = not read).",
                                            default=DEFAULT_SOCKET))
    pod_resources_timeout: float = setting(Duration("Timeout of one List call.", default="2s", min=0.01))
    proc_root: str = setting(Str("Where procfs is mounted (the host's, for a containerised daemon: "
                                 "/host/proc with hostPID).", default="/proc"))
    sysfs_root: str = setting(Str("Where sysfs is mounted (PCIe topology, RDMA devices).", default="/sys"))
    nvml: bool = setting(Bool("Read the GPUs and their compute processes from NVML.", default=True))
    nvml_fake: str = setting(Str("Simulation and testing only: a GPU data file for the NVML fake (as "
                                 "sources.nvml.fake).", default=""))
    scontrol: str = setting(Str(
        "Slurm's scontrol, for the GPU indexes each running job holds here (`scontrol show job --details "
        "--oneliner`, its GRES IDX): a job is named on a GPU it holds even where none of its processes "
        "runs. auto: scontrol from PATH where slurmd runs on this node (a Slurm compute node), else not "
        "read; a path: that binary (missing = an error); \"\": not read.", default=AUTO_SCONTROL))
    scontrol_interval: float = setting(Duration(
        "How often scontrol is asked (each call is one request to slurmctld, answered with every job of "
        "the cluster: keep it slow on large clusters).", default="60s", min=1.0))
    scontrol_timeout: float = setting(Duration("Timeout of one scontrol call.", default="10s", min=0.1))
    slurm_node_name: str = setting(Str("This node's Slurm NodeName (\"\" = the host name up to the first "
                                       "dot).", default=""))
    user_names: bool = setting(Bool("Export slurm_user (the job owner's name). Off: user names are personal "
                                    "data; job ids are kept.", default=False))
    endpoints: list[WorkloadEndpointSettings] = setting(ListOf(
        "Serving endpoints and how their GPUs are found.", item=ENDPOINT, default=[]))
    max_series: int = setting(Int("Most join series per pass; past it the rest is dropped and reported.",
                                  default=4000, min=1))


class WorkloadSource(PollingSource[WorkloadSettings]):
    name = F.SRC
    role = "node"
    CONFIG = WorkloadSettings.SCHEMA

    def __init__(self, config: WorkloadSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.proc_root = Path(config.proc_root)
        self.sysfs_root = Path(config.sysfs_root)
        self.rules = [EndpointRule(e.name, e.port, tuple(e.pods), e.namespace, tuple(str(g) for g in e.gpus))
                      for e in config.endpoints]
        self._listeners: dict[int, int] = {}  # endpoint port -> the PID found listening last time
        self._nvml: NvmlApi | None = None
        self._nvml_error = ""
        self.scontrol = _scontrol(config.scontrol, self.proc_root)
        self.slurm_node = config.slurm_node_name or socket.gethostname().split(".")[0]
        self._gres: list[GresAllocation] = []
        self._gres_error = ""
        self._gres_read_at = -float("inf")
        self._gres_task: asyncio.Task[list[GresAllocation]] | None = None

    @classmethod
    def absent_reason(cls, config: WorkloadSettings) -> str:
        # auto looks for any source of truth
        return (f"enabled: auto and no kubelet socket ({config.pod_resources_socket or 'none'}), "
                "NVML device or endpoints here")

    @classmethod
    def wanted(cls, config: WorkloadSettings) -> bool:
        enabled = config.enabled
        if enabled == "auto":
            socket = config.pod_resources_socket
            return bool(config.nvml_fake or config.endpoints or (socket and os.path.exists(socket))
                        or (config.nvml and os.path.exists("/dev/nvidiactl")))
        return enabled is True

    # -- reading ----------------------------------------------------------------------------

    def _open_nvml(self) -> NvmlApi:
        if self.config.nvml_fake:
            open_fake: Callable[[str], NvmlApi] | None = self.ctx.options.get(OPEN_FAKE_KEY)
            if open_fake is None:
                raise InitError("no_fake", "sources.workload.nvml_fake is set, but this daemon was given "
                                           "no NVML fake")
            return open_fake(self.config.nvml_fake)
        return RealNvml()

    def _read_gpus(self, errors: list[str]) -> list[Gpu]:
        if not self.config.nvml:
            return []
        try:
            if self._nvml is None:
                api = self._open_nvml()
                api.init()
                self._nvml = api
            return _gpus(self._nvml, self.sysfs_root)
        except InitError as exc:
            self._nvml_error = exc.message
        except Exception as exc:  # NVMLError and friends: one pass lost, retried next pass
            self._nvml_error = f"{type(exc).__name__}: {exc}"
            self._close_nvml()
        errors.append(f"nvml: {self._nvml_error}")
        return []

    def _read_nics(self) -> tuple[list[Nic], dict[str, str]]:
        places = rdma_places(self.sysfs_root)
        nics = [Nic(dev, _netdev(self.sysfs_root, dev), p) for dev, p in places.items()]
        by_pci = {p.address: dev for dev, p in places.items()}
        # A VF granted to a pod: bus/pci/devices/<vf>/infiniband/<dev> names its RDMA device.
        devices = self.sysfs_root / "bus" / "pci" / "devices"
        try:
            for address in os.listdir(devices):
                try:
                    for dev in os.listdir(devices / address / "infiniband"):
                        by_pci.setdefault(address, dev)
                except OSError:
                    continue
        except OSError:
            pass
        return nics, by_pci

    def _endpoint_gpus(self, gpus: list[Gpu]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for rule in self.rules:
            if not rule.port:
                continue
            pid = listening_pid(self.proc_root, rule.port, self._listeners.get(rule.port))
            if pid is None:
                self._listeners.pop(rule.port, None)
                continue
            self._listeners[rule.port] = pid
            out[rule.name] = {g.index for g in gpus
                              if any(descends_from(self.proc_root, p, pid) for p in g.pids)}
        return out

    def _user_of(self, uid: int) -> str:
        if not self.config.user_names:
            return ""
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return str(uid)

    def _attribute(self, grants: list[DeviceGrant], gres: list[GresAllocation],
                   errors: list[str]) -> Attribution:
        gpus = self._read_gpus(errors)
        nics, by_pci = self._read_nics()
        return attribute(gpus, nics, grants, lambda pid: read_process(self.proc_root, pid), self._user_of,
                         self.rules, self._endpoint_gpus(gpus), by_pci, gres)

    async def _slurm_gres(self, errors: list[str]) -> list[GresAllocation]:
        """The jobs' GRES as scontrol last answered. The call runs beside the passes, started every
        scontrol_interval (a slow slurmctld never holds a pass up); a failed call is reported and
        leaves no stale allocation."""
        if not self.scontrol:
            return []
        task = self._gres_task
        if task is not None and task.done():
            self._gres_task = None
            try:
                self._gres, self._gres_error = task.result(), ""
            except (OSError, asyncio.TimeoutError, RuntimeError) as exc:
                self._gres, self._gres_error = [], f"{type(exc).__name__}: {exc}"
        now = time.monotonic()
        if self._gres_task is None and now - self._gres_read_at >= self.config.scontrol_interval:
            self._gres_read_at = now
            self._gres_task = asyncio.create_task(
                read_allocations(self.scontrol, self.slurm_node, self.config.scontrol_timeout))
        if self._gres_error:
            errors.append(f"scontrol: {self._gres_error}")
        return self._gres

    async def _grants(self, errors: list[str]) -> list[DeviceGrant]:
        socket = self.config.pod_resources_socket
        if not socket:
            return []
        if not os.path.exists(socket):
            if socket != DEFAULT_SOCKET:  # asked for explicitly: its absence is an error
                errors.append(f"pod_resources: {socket} does not exist")
            return []
        try:
            return await list_grants(socket, self.config.pod_resources_timeout)
        except grpc.aio.AioRpcError as exc:
            errors.append(f"pod_resources: {exc.code().name}: {exc.details()}")
        except (TimeoutError, OSError) as exc:
            errors.append(f"pod_resources: {type(exc).__name__}: {exc}")
        return []

    async def collect(self) -> list[TargetResult]:
        errors: list[str] = []
        grants = await self._grants(errors)
        gres = await self._slurm_gres(errors)
        found = await asyncio.to_thread(self._attribute, grants, gres, errors)
        snap, dropped = self._snapshot(found)
        if dropped:
            errors.append(f"budget: {dropped} join series over max_series {self.config.max_series} "
                          "dropped")
        coverage = COVERAGE + (("slurm_gres",) if self.scontrol else ())
        self.store.set_coverage(self.name, TARGET, {k: found.counts.get(k, 0) for k in coverage})
        return [TargetResult(TARGET, snap, partial_errors=errors)]

    def _snapshot(self, found: Attribution) -> tuple[Snapshot, int]:
        snap = Snapshot()
        netdevs = {row[1]: row[2] for row in found.topology}
        # (family, the labels before the workload's) per join row, GPUs first: the budget keeps
        # the first max_series of them, in this stable order
        rows = [(F.GPU_INFO, (index, found.gpu_uuids.get(index, "")), who)
                for index, whos in sorted(found.gpu_rows.items()) for who in sorted(whos)]
        rows += [(F.NIC_INFO, (device, netdevs.get(device, "")), who)
                 for device, whos in sorted(found.nic_rows.items()) for who in sorted(whos)]
        kept = rows[:self.config.max_series]
        for family, keys, who in kept:
            mig = who.mig() if family == F.GPU_INFO else ()
            snap.add(family, (*keys, who.kind, who.workload, *who.details(), *mig), 1.0)
        dropped = len(rows) - len(kept)
        for row in found.topology:
            snap.add(F.TOPOLOGY, row, 1.0)
        attributed = len(found.gpu_rows)
        snap.add(F.ATTRIBUTED_GPUS, ("attributed",), float(attributed))
        snap.add(F.ATTRIBUTED_GPUS, ("unattributed",), float(len(found.unattributed_gpus)))
        snap.add(F.ATTRIBUTED_GPUS, ("idle",), float(max(found.counts.get("gpus", 0) - attributed
                                                         - len(found.unattributed_gpus), 0)))
        return snap, dropped

    def _close_nvml(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.shutdown()
            except Exception:  # noqa: BLE001 - shutting down a library that already failed
                pass
            self._nvml = None

    async def close(self) -> None:
        if self._gres_task is not None:
            self._gres_task.cancel()
            await asyncio.gather(self._gres_task, return_exceptions=True)
        await asyncio.to_thread(self._close_nvml)


def _gpus(api: NvmlApi, sysfs_root: Path) -> list[Gpu]:
    out = []
    for i in range(api.device_count()):
        h = api.handle_by_index(i)
        bus = api.pci_bus_id(h)
        migs: list[tuple[str, str]] = []  # (MIG uuid, GPU instance id)
        try:
            if api.mig_mode(h):
                for m in range(api.max_mig_device_count(h)):
                    try:
                        mig = api.mig_device_handle(h, m)
                        migs.append((api.uuid(mig), str(api.gpu_instance_id(mig))))
                    except Exception:  # noqa: BLE001 - an empty MIG slot answers NOT_FOUND
                        continue
        except Exception:  # noqa: BLE001 - MIG unsupported on this GPU
            migs = []
        out.append(Gpu(str(i), api.uuid(h), bus, mig_uuids=tuple(u for u, _ in migs),
                       mig_instances=tuple(g for _, g in migs), pids=tuple(api.compute_processes(h)),
                       place=gpu_place(sysfs_root, bus)))
    return out


def _scontrol(configured: str, proc_root: Path) -> str:
    """The scontrol to run. auto: only on a Slurm compute node (slurmd runs here, read once at
    start) with scontrol on PATH, so a node without Slurm is not an error; a path as written, so
    a missing one fails with its name."""
    if configured != AUTO_SCONTROL:
        return configured
    found = shutil.which("scontrol")
    return found if found and _runs(proc_root, "slurmd") else ""


def _runs(proc_root: Path, comm: str) -> bool:
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return False
    for entry in entries:
        if entry.isdigit():
            try:
                if (proc_root / entry / "comm").read_text().strip() == comm:
                    return True
            except OSError:
                continue
    return False


def _netdev(sysfs_root: Path, device: str) -> str:
    """The netdev behind an RDMA device's first RoCE port ("" for InfiniBand)."""
    ports = sysfs_root / "class" / "infiniband" / device / "ports"
    try:
        for port in sorted(os.listdir(ports)):
            ndevs = ports / port / "gid_attrs" / "ndevs"
            for entry in sorted(os.listdir(ndevs), key=lambda n: int(n) if n.isdigit() else 0):
                try:
                    name = (ndevs / entry).read_text().strip()
                except OSError:
                    continue
                if name:
                    return name
    except OSError:
        return ""
    return ""


SOURCE = WorkloadSource
