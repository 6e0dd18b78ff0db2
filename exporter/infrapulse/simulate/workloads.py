"""The demo node's workloads, as the real sources of truth show them to the `workload` source:

- a kubelet pod-resources API (a real gRPC server on a unix socket, speaking the published v1
  proto) granting the serving pods their GPUs: vllm-llama-70b-0/1 on GPUs 3 and 4 (as the demo's
  dcgm-exporter labels them), sglang-qwen-0 on GPU 1;
- a procfs tree with the GPUs' compute processes: two Slurm training jobs in slurmd's cgroup v2
  layout (job 4242 on GPU 0, job 4243 on GPUs 5-7; GPU 2 idle) and the pods' processes under
  kubepods;
- a sysfs PCIe tree: four PCIe switches, each with two GPUs and one RoCE NIC (mlx5_0..3), two
  per NUMA node, so each NIC is nearest (PXB) to its two GPUs;
- the NVML fake's GPUs with those processes (`processes:` in a copy of the GPU data).

So a fault on the stormed port (leaf01 swp1 -> ens1f0np0 -> mlx5_0 -> GPUs 0 and 1) hurts Slurm
job 4242 and the sglang-qwen endpoint, and no other workload.
"""

from __future__ import annotations

import os
import shutil
import uuid as uuid_mod
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc.aio
import yaml

from ..pci import sysfs_address
from ..sources.workload.podresources import stubs
from .nvml_fake import DEFAULT_DATA

if TYPE_CHECKING:
    from .demo import DemoContext, DemoPart

NAMESPACE = "llm"
# GPU index -> (pod, container) as the kubelet grants them (nvidia.com/gpu, by UUID).
PODS = {1: ("sglang-qwen-0", "sglang"), 3: ("vllm-llama-70b-0", "vllm"), 4: ("vllm-llama-70b-1", "vllm")}
JOBS = {"4242": (0,), "4243": (5, 6, 7)}  # Slurm job -> GPU indexes
JOB_UID = 1001
ENDPOINT_PODS = {"sglang-qwen": ("sglang-qwen-0",),
                 "vllm-llama-70b": ("vllm-llama-70b-0", "vllm-llama-70b-1")}
# (host bridge, NUMA node, RDMA device, netdev) per PCIe switch; GPUs 2k and 2k+1 sit beside it.
SWITCHES = (("pci0000:15", 0, "mlx5_0", "ens1f0np0"), ("pci0000:37", 0, "mlx5_1", "ens2f0np0"),
            ("pci0000:97", 1, "mlx5_2", "ens3f0np0"), ("pci0000:b7", 1, "mlx5_3", "ens4f0np0"))


def _pod_uid(pod: str) -> str:
    return str(uuid_mod.uuid5(uuid_mod.NAMESPACE_DNS, f"{NAMESPACE}/{pod}"))


def gpu_processes() -> dict[int, list[int]]:
    """GPU index -> the PIDs NVML lists on it."""
    out: dict[int, list[int]] = {}
    for n, (_job, gpus) in enumerate(sorted(JOBS.items())):
        for k, gpu in enumerate(gpus):
            out.setdefault(gpu, []).append(21000 + 100 * n + k)
    for gpu in PODS:
        out.setdefault(gpu, []).append(30000 + gpu)
    return out


def write_procs(root: Path) -> None:
    """/proc/<pid>/{cgroup,status,stat} for every GPU process."""
    jobs = {21000 + 100 * n + k: job for n, (job, gpus) in enumerate(sorted(JOBS.items()))
            for k in range(len(gpus))}
    for gpu, pids in gpu_processes().items():
        for pid in pids:
            d = root / str(pid)
            d.mkdir(parents=True, exist_ok=True)
            if pid in jobs:
                cgroup = f"0::/system.slice/slurmstepd.scope/job_{jobs[pid]}/step_0/user/task_0\n"
                uid, comm = JOB_UID, "python"
            else:
                pod, _ = PODS[gpu]
                uid_part = _pod_uid(pod).replace("-", "_")
                cgroup = (f"0::/kubepods.slice/kubepods-burstable.slice/"
                          f"kubepods-burstable-pod{uid_part}.slice/cri-containerd-{pid:064x}.scope\n")
                uid, comm = 0, "python3"
            (d / "cgroup").write_text(cgroup)
            (d / "status").write_text(f"Name:\t{comm}\nPid:\t{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
            (d / "stat").write_text(f"{pid} ({comm}) S 1 {pid} {pid} 0 -1\n")


def write_topology(root: Path, bus_ids: list[str]) -> None:
    """bus/pci/devices, devices/pci*/... and class/infiniband/<dev>/{device,ports/1/gid_attrs}."""
    for s, (host, numa, device, netdev) in enumerate(SWITCHES):
        bus = host.split(":")[1]
        root_port = f"0000:{bus}:01.0"
        upstream = f"0000:{int(bus, 16) + 1:02x}:00.0"
        down_bus = int(bus, 16) + 2
        switch_dir = root / "devices" / host / root_port / upstream
        members = [(bus_ids[2 * s], 0), (bus_ids[2 * s + 1], 1)]
        nic_address = f"0000:{down_bus + 3:02x}:00.0"
        for address, port in [*members, (nic_address, 2)]:
            downstream = f"0000:{down_bus:02x}:{port * 4:02x}.0"
            dev_dir = switch_dir / downstream / address
            dev_dir.mkdir(parents=True, exist_ok=True)
            (dev_dir / "numa_node").write_text(f"{numa}\n")
            link = root / "bus" / "pci" / "devices" / address
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(os.path.relpath(dev_dir, link.parent))
        ib = root / "class" / "infiniband" / device
        (ib / "ports" / "1" / "gid_attrs" / "ndevs").mkdir(parents=True, exist_ok=True)
        (ib / "ports" / "1" / "gid_attrs" / "ndevs" / "0").write_text(f"{netdev}\n")
        if not (ib / "device").is_symlink():
            nic_dir = switch_dir / f"0000:{down_bus:02x}:08.0" / nic_address
            (ib / "device").symlink_to(os.path.relpath(nic_dir, ib))


class PodResourcesServer:
    """The kubelet's pod-resources service on a unix socket, answering List (and Get)."""

    def __init__(self, socket_path: Path, grants: dict[str, list[tuple[str, str, list[str]]]]) -> None:
        self.socket_path = socket_path
        self.grants = grants  # pod -> [(container, resource, device ids)]
        self.server: grpc.aio.Server | None = None
        self.calls = 0

    def _pod(self, messages: Any, pod: str) -> Any:
        containers: dict[str, Any] = {}
        for container, resource, ids in self.grants[pod]:
            c = containers.setdefault(container, messages.ContainerResources(name=container))
            c.devices.append(messages.ContainerDevices(resource_name=resource, device_ids=ids))
        return messages.PodResources(name=pod, namespace=NAMESPACE, containers=list(containers.values()))

    async def start(self) -> None:
        messages, services = stubs()
        outer = self

        # The services module is generated from the .proto at run time: mypy sees no class here.
        class Lister(services.PodResourcesListerServicer):  # type: ignore[name-defined,misc]
            async def List(self, request: Any, context: Any) -> Any:  # noqa: N802 - the RPC's name
                outer.calls += 1
                return messages.ListPodResourcesResponse(
                    pod_resources=[outer._pod(messages, p) for p in sorted(outer.grants)])

            async def Get(self, request: Any, context: Any) -> Any:  # noqa: N802
                if request.pod_name not in outer.grants or request.pod_namespace != NAMESPACE:
                    await context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} not found")
                return messages.GetPodResourcesResponse(pod_resources=outer._pod(messages, request.pod_name))

        self.server = grpc.aio.server()
        services.add_PodResourcesListerServicer_to_server(Lister(), self.server)
        self.server.add_insecure_port(f"unix://{self.socket_path}")
        await self.server.start()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.stop(None)


def demo_grants(uuids: list[str]) -> dict[str, list[tuple[str, str, list[str]]]]:
    out: dict[str, list[tuple[str, str, list[str]]]] = {}
    for gpu, (pod, container) in PODS.items():
        out.setdefault(pod, []).append((container, "nvidia.com/gpu", [uuids[gpu]]))
    return out


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart
    from .nvml_fake import FakeNvml

    data = ctx.workdir / "workload-gpus.yaml"
    spec = yaml.safe_load(DEFAULT_DATA.read_text())
    for index, pids in gpu_processes().items():
        spec["gpus"][index]["processes"] = pids
    data.write_text(yaml.safe_dump(spec, sort_keys=False))
    fake = FakeNvml.from_file(data)
    bus_ids = [sysfs_address(g.pci_bus_id) for g in fake.gpus]
    sysfs, proc = ctx.workdir / "workload-sysfs", ctx.workdir / "workload-proc"
    for d in (sysfs, proc):
        shutil.rmtree(d, ignore_errors=True)
    write_topology(sysfs, bus_ids)
    write_procs(proc)
    socket_path = ctx.workdir / "kubelet-pod-resources.sock"
    server = PodResourcesServer(socket_path, demo_grants([g.uuid for g in fake.gpus]))
    await server.start()
    sources = {"workload": {
        "enabled": True, "interval": "5s", "nvml_fake": str(data), "pod_resources_socket": str(socket_path),
        "proc_root": str(proc), "sysfs_root": str(sysfs),
        "endpoints": [{"name": name, "pods": list(pods), "namespace": NAMESPACE}
                      for name, pods in sorted(ENDPOINT_PODS.items())]}}
    return DemoPart("workloads", sources, server.close,
                    description=f"pod-resources API at {socket_path}; Slurm jobs {', '.join(sorted(JOBS))}; "
                                f"pods {', '.join(p for p, _ in PODS.values())}")
