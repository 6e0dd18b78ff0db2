"""Telemetry sources: one subpackage per subsystem, one `Source` class per source.

Owns: `SOURCES`, the registry the config schema, the daemon, the CLI and the docs read. Adding a
source means adding its class here (and its subsystem folder); nothing is discovered by scanning.

Imports: each subpackage may import `base`, `budget` (the series budget), the top-level plumbing
(`schema`, `store`, `catalog`, `scrape`, `textparse`, `rates`, `backoff`) and its own modules.
Never `simulate`, `health`, `daemon` or `cli`.

  nic/      RDMA ports from /sys/class/infiniband, NIC driver stats through the ethtool ioctl
  gpu/      NVML (poller + XID watcher) and dcgm-exporter ingestion, sharing one family set
  gnmi/     switch telemetry over gNMI streams, vendor profiles, sharding
  serving/  LLM serving engines (vLLM, SGLang, TensorRT-LLM, TGI) in one schema
  probe/    active probes: nccl-tests, perftest and dropped job results with baselines; the
            always-on UDP latency mesh between the nodes' RDMA addresses
"""

from __future__ import annotations

from .base import Source
from .gnmi.source import GnmiSource
from .gpu.dcgm import DcgmSource
from .gpu.nvml import NvmlSource
from .nic.ethtool import EthtoolSource
from .nic.infiniband import InfinibandSource
from .nic.roce_config import RoceConfigSource
from .probe.mesh import MeshSource
from .probe.source import ProbeSource
from .serving.source import ServingSource

SOURCES: tuple[type[Source], ...] = (
    InfinibandSource,
    EthtoolSource,
    NvmlSource,
    DcgmSource,
    GnmiSource,
    ServingSource,
    ProbeSource,
    MeshSource,
    RoceConfigSource,
)


def registry() -> dict[str, type[Source]]:
    """Source name -> class, in the documented order (sorted by name)."""
    return {cls.name: cls for cls in sorted(SOURCES, key=lambda cls: cls.name)}
