"""Workload attribution: who uses this node's GPUs and NICs (Kubernetes pods through the kubelet
pod-resources API, Slurm jobs through the cgroups of the GPUs' processes, serving endpoints),
the GPU <-> NIC PCIe topology, and the join series that carry them (docs/attribution.md).

Imports: `..base`, `..gpu.nvml_api` (the NVML calls, shared with the nvml source) and the
top-level plumbing only. The NVML fake is injected through `SourceContext.options`.
"""
