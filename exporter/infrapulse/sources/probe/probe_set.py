"""Which probes the configuration names, and the probe objects of one run: every nccl-tests run,
perftest between pairs of this node's RDMA NICs, perftest against each configured peer.

The probes are built afresh for every run (never kept): the NIC pairs and their models come
from sysfs at that moment, so a NIC that appeared since the last run is probed.
"""

from __future__ import annotations

from pathlib import Path

from ...store import Store
from .config import PeerSettings, PerftestSettings, ProbeSettings
from .peer import PeerPerftestProbe
from .probes import NcclProbe, Pair, PerftestProbe


def names(cfg: ProbeSettings) -> list[str]:
    """The configured probes' names, in run order (the `target` of their status)."""
    out = [r.name for r in cfg.nccl.runs] if cfg.nccl.enabled else []
    if cfg.perftest.enabled:
        out.append(Path(cfg.perftest.latency_binary).name)
        if cfg.perftest.bandwidth_binary:
            out.append(Path(cfg.perftest.bandwidth_binary).name)
        out += [name for name, _test, _binary, _peer in peer_probes(cfg)]
    return out


def peer_probes(cfg: ProbeSettings) -> list[tuple[str, str, str, PeerSettings]]:
    """(probe name `<test>@<peer>`, test, binary, peer) per perftest binary and peer."""
    p = cfg.perftest
    binaries = [b for b in (p.latency_binary, p.bandwidth_binary) if b]
    return [(f"{Path(b).name}@{peer.name}", Path(b).name, b, peer) for peer in p.peers for b in binaries]


def rdma_devices(sysfs_root: str) -> dict[str, str]:
    """RDMA device -> its hca_type (the NIC model floors match on)."""
    base = Path(sysfs_root, "class", "infiniband")
    out = {}
    try:
        devices = sorted(p for p in base.iterdir() if p.is_dir())
    except OSError:
        return {}
    for dev in devices:
        try:
            out[dev.name] = (dev / "hca_type").read_text().strip()
        except OSError:
            out[dev.name] = ""
    return out


def pairs(perftest: PerftestSettings, devices: list[str]) -> list[Pair]:
    """The configured NIC pairs, or neighbours in name order (mlx5_0:mlx5_1, mlx5_2:mlx5_3, ...)."""
    if perftest.pairs:
        return [Pair(*p.split(":", 1)) for p in perftest.pairs]
    return [Pair(devices[i], devices[i + 1]) for i in range(0, len(devices) - 1, 2)][: perftest.max_pairs]


def build(cfg: ProbeSettings) -> list[NcclProbe | PerftestProbe]:
    out: list[NcclProbe | PerftestProbe] = []
    if cfg.nccl.enabled:
        n = cfg.nccl
        out += [NcclProbe(r.name, n.binary, r.args, n.json, n.latency_max_bytes, n.bandwidth_min_bytes)
                for r in n.runs]
    if cfg.perftest.enabled:
        p = cfg.perftest
        models = rdma_devices(cfg.versions.sysfs_root)
        nic_pairs = pairs(p, sorted(models))
        for binary, sizes, iters in ((p.latency_binary, p.latency_sizes, p.latency_iterations),
                                     (p.bandwidth_binary, p.bandwidth_sizes, p.bandwidth_iterations)):
            if binary:
                out.append(PerftestProbe(Path(binary).name, binary, nic_pairs, sizes, iters, p.base_port,
                                         p.server_host, p.json, p.report_gbits, p.extra_args, models))
        for name, test, binary, peer in peer_probes(cfg):
            lat = test.endswith("_lat")
            local = peer.local_device or min(models, default="")
            out.append(PeerPerftestProbe(name, test, binary, peer, local,
                                         p.latency_sizes if lat else p.bandwidth_sizes,
                                         p.latency_iterations if lat else p.bandwidth_iterations,
                                         p.json, p.report_gbits, p.extra_args, models))
    return out


def gpu_count(cfg: ProbeSettings, store: Store) -> int:
    """The GPUs nccl-tests runs on: configured, or those the nvml/dcgm sources see (at least 1)."""
    if cfg.nccl.gpus:
        return cfg.nccl.gpus
    gpus = {labels[0] for src, _t, labels, _v in store.iter_family("infrapulse_gpu_info")
            if src in ("nvml", "dcgm") and labels}
    return max(len(gpus), 1)
