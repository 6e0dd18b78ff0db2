"""Families of the `workload` source: join series (value 1) that attribute GPUs and NICs to the
workloads using them, and the GPU <-> NIC PCIe topology that carries a GPU's workloads to the NIC
its traffic leaves by. Join on `gpu` / `device` / `interface` (docs/metrics.md, "Joins");
never a workload label on every series."""

from __future__ import annotations

from ... import catalog

SRC = "workload"

# What names a workload: `kind` (pod, slurm_job, endpoint) and `workload` (its name: namespace/pod,
# the Slurm job id, the endpoint name) always; the kind's own labels where they apply.
WORKLOAD_LABELS = ("kind", "workload")
DETAIL_LABELS = ("pod", "namespace", "container", "slurm_job_id", "slurm_step", "slurm_user", "endpoint")
# A pod granted a MIG instance: its GPU instance id and MIG uuid, as the per-instance GPU series
# carry them (infrapulse_gpu_info{gpu_instance, mig_uuid}, dcgm's GPU_I_ID): GPU rows only.
MIG_LABELS = ("gpu_instance", "mig_uuid")

GPU_INFO = catalog.declare(
    "infrapulse_workload_gpu_info", catalog.INFO,
    "1 for each workload using the GPU: a pod holding it (kubelet pod-resources), a Slurm job whose "
    "processes run on it (/proc/PID/cgroup), a serving endpoint (its engine's processes, its pod, or "
    "`gpus:` in sources.workload.endpoints, a Slurm job's GRES). kind = pod | slurm_job | endpoint; "
    "slurm_user only when sources.workload.user_names is on; gpu_instance and mig_uuid on a pod (and "
    "its endpoint) granted a MIG instance of the GPU.",
    ("gpu", "uuid", *WORKLOAD_LABELS), source=SRC, optional_labels=DETAIL_LABELS + MIG_LABELS)
NIC_INFO = catalog.declare(
    "infrapulse_workload_nic_info", catalog.INFO,
    "1 for each workload whose traffic uses the RDMA NIC: the workloads of the GPUs this NIC is "
    "nearest to (infrapulse_topology_gpu_nic_info{nearest=\"true\"}) and pods holding the NIC (an "
    "RDMA/SR-IOV device-plugin resource).",
    ("device", "interface", *WORKLOAD_LABELS), source=SRC, optional_labels=DETAIL_LABELS)
TOPOLOGY = catalog.declare(
    "infrapulse_topology_gpu_nic_info", catalog.INFO,
    "1 for each GPU and RDMA NIC pair: the PCIe path between them (link = PIX one bridge, PXB several "
    "bridges, PHB the host bridge, NODE the same NUMA node, SYS across NUMA nodes, as nvidia-smi topo), "
    "the GPU's NUMA node, and nearest=\"true\" on the NIC(s) with the shortest path.",
    ("gpu", "device", "interface", "numa_node", "link", "nearest"), source=SRC)
ATTRIBUTED_GPUS = catalog.declare(
    "infrapulse_workload_gpus", catalog.GAUGE,
    "GPUs on this node by attribution state: attributed (a workload is known), idle (no process, no "
    "pod), unattributed (processes run on it that no source of truth names).",
    ("state",), source=SRC)
