"""Telemetry sources: one subpackage per subsystem, one `Source` class per source.

Owns: `SPECS`, the one registry of sources (`spec.SourceSpec`: a source's class and what hangs on
it), which the config schema, the daemon, the catalogue, the docs, `doctor`, the demo and the
health score all walk. Adding a source is one folder with its `spec.py` and one line here;
nothing is discovered by scanning.

Imports: each subpackage may import `base`, `spec`, `budget` (the series budget), the top-level plumbing
(`schema`, `store`, `catalog`, `scrape`, `textparse`, `rates`, `backoff`) and its own modules.
Never `simulate`, `health`, `daemon` or `cli`.

  nic/      RDMA ports from /sys/class/infiniband, NIC driver stats through the ethtool ioctl
  gpu/      NVML (poller + XID watcher) and dcgm-exporter ingestion, sharing one family set
  kmsg/     the kernel log (/dev/kmsg): Xid, SXid, mlx5, AER events per PCI function
  gnmi/     switch telemetry over gNMI streams, vendor profiles, sharding
  serving/  LLM serving engines (vLLM, SGLang, TensorRT-LLM, TGI) in one schema
  probe/    active probes: nccl-tests, perftest and dropped job results with baselines; the
            always-on UDP latency mesh between the nodes' RDMA addresses
  workload/ who uses the GPUs and NICs: kubelet pod-resources, Slurm cgroups, serving
            endpoints, PCIe topology (join series for the blast radius)
"""

from __future__ import annotations

from typing import Any

from .base import Source
from .gnmi import spec as gnmi_spec
from .gpu import spec as gpu_spec
from .kmsg import spec as kmsg_spec
from .nic import spec as nic_spec
from .probe import spec as probe_spec
from .serving import spec as serving_spec
from .spec import SourceSpec
from .workload import spec as workload_spec

SPECS: tuple[SourceSpec, ...] = (
    *nic_spec.SPECS,
    *gpu_spec.SPECS,
    *kmsg_spec.SPECS,
    *gnmi_spec.SPECS,
    *serving_spec.SPECS,
    *probe_spec.SPECS,
    *workload_spec.SPECS,
)


def specs() -> dict[str, SourceSpec]:
    """Source name -> spec, in the documented order (sorted by name)."""
    return {spec.name: spec for spec in sorted(SPECS, key=lambda spec: spec.name)}


def registry() -> dict[str, type[Source[Any]]]:
    """Source name -> class, in the documented order (sorted by name)."""
    return {name: spec.source for name, spec in specs().items()}
