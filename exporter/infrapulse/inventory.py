"""What hardware this instance sees right now: GPUs, RDMA ports and the network interfaces it reads.

Built from the live store (the same snapshots /metrics serves), so it lists exactly what the
sources found on this host: `/api/v1/sources` returns it under "inventory" and the status page
shows it. A person bringing up a node checks here that every mlx5_* device and every GPU is there.
"""

from __future__ import annotations

from typing import Any

from . import catalog
from .store import Store

PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
GPU_INFO, GPU_HEALTHY = "infrapulse_gpu_info", "infrapulse_gpu_healthy"
RDMA_DEVICE, RDMA_PORT = "infrapulse_rdma_device_info", "infrapulse_rdma_port_info"
RDMA_STATE, RDMA_RATE = "infrapulse_rdma_port_state", "infrapulse_rdma_port_rate_bytes_per_second"
NIC_STATS = "infrapulse_nic_driver_stats"


def _labelled(store: Store, family: str) -> list[tuple[str, dict[str, str], float]]:
    """(source, labels by name, value) of every live series of `family` (declared or not)."""
    try:
        fam = catalog.get(family)
    except KeyError:
        return []
    names = tuple(fam.labels) + tuple(fam.optional_labels)
    out = []
    for source, _, values, value in store.iter_family(family):
        if isinstance(value, (int, float)):
            out.append((source, dict(zip(names, values)), float(value)))
    return out


def gpus(store: Store) -> list[dict[str, Any]]:
    """Physical GPUs (MIG instances counted per GPU), each with its health where NVML reports it."""
    healthy = {(labels["gpu"], labels.get("gpu_instance", "")): value
               for _, labels, value in _labelled(store, GPU_HEALTHY)}
    found: dict[str, dict[str, Any]] = {}
    mig: dict[str, int] = {}
    for source, labels, _ in _labelled(store, GPU_INFO):
        if labels.get("gpu_instance"):
            mig[labels["gpu"]] = mig.get(labels["gpu"], 0) + 1
            continue
        state = healthy.get((labels["gpu"], ""))
        found.setdefault(labels["gpu"], {
            "gpu": labels["gpu"], "uuid": labels["uuid"], "name": labels["name"],
            "pci_bus_id": labels["pci_bus_id"], "driver_version": labels["driver_version"],
            "healthy": None if state is None else state == 1.0, "source": source})
    for gpu, count in mig.items():
        if gpu in found:
            found[gpu]["mig_instances"] = count
    return sorted(found.values(), key=lambda g: (len(g["gpu"]), g["gpu"]))


def rdma_ports(store: Store) -> list[dict[str, Any]]:
    """Every RDMA port with its device's identity, link layer, netdev, state and rate."""
    devices = {labels["device"]: labels for _, labels, _ in _labelled(store, RDMA_DEVICE)}
    states = {(labels["device"], labels["port"]): value for _, labels, value in _labelled(store, RDMA_STATE)}
    rates = {(labels["device"], labels["port"]): value for _, labels, value in _labelled(store, RDMA_RATE)}
    out = []
    for _, labels, _ in _labelled(store, RDMA_PORT):
        key = (labels["device"], labels["port"])
        device = devices.get(labels["device"], {})
        state = states.get(key)
        rate = rates.get(key)
        out.append({
            "device": labels["device"], "port": labels["port"], "link_layer": labels["link_layer"],
            "netdev": labels["netdev"], "hca_type": device.get("hca_type", ""),
            "firmware_version": device.get("firmware_version", ""),
            "state": PORT_STATES.get(int(state), str(state)) if state is not None else None,
            "rate_gbps": None if rate is None else round(rate * 8 / 1e9, 1),
        })
    return sorted(out, key=lambda p: (p["device"], p["port"]))


def interfaces(store: Store) -> list[dict[str, Any]]:
    """Network interfaces the ethtool source reads, with how many driver statistics each has."""
    out = []
    for _, labels, value in _labelled(store, NIC_STATS):
        out.append({"interface": labels["interface"], "driver_stats": int(value)})
    return sorted(out, key=lambda i: i["interface"])


def inventory(store: Store) -> dict[str, list[dict[str, Any]]]:
    return {"gpus": gpus(store), "rdma_ports": rdma_ports(store), "interfaces": interfaces(store)}
