"""GPU <-> RDMA NIC PCIe topology from sysfs, classified as `nvidia-smi topo -m` does: PIX (one
PCIe bridge between them), PXB (several bridges, no host bridge), PHB (through the host bridge),
NODE (different host bridges, one NUMA node), SYS (across NUMA nodes).

A device's place is the real path of /sys/bus/pci/devices/<address>
(/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:1b:00.0: the host bridge, then each
bridge down to the device) and its numa_node file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...pci import sysfs_address

RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}
_PCI = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@dataclass(frozen=True)
class PciPlace:
    address: str
    host_bridge: str  # "pci0000:17"
    bridges: tuple[str, ...]  # the PCI bridges above the device, top first
    numa_node: int  # -1 when the platform has none


def place(device_dir: Path) -> PciPlace | None:
    """Where a PCI device sits, from its sysfs directory (or a symlink to it)."""
    try:
        real = Path(os.path.realpath(device_dir))
    except OSError:
        return None
    parts = real.parts
    host = next((p for p in parts if p.startswith("pci") and ":" in p), "")
    chain = [p for p in parts if _PCI.match(p)]
    if not host or not chain:
        return None
    try:
        numa = int((real / "numa_node").read_text().strip())
    except (OSError, ValueError):
        numa = -1
    return PciPlace(chain[-1], host, tuple(chain[:-1]), numa)


def link(a: PciPlace, b: PciPlace) -> str:
    if a.host_bridge != b.host_bridge:
        if a.numa_node >= 0 and a.numa_node == b.numa_node:
            return "NODE"
        return "SYS"
    if not a.bridges or not b.bridges or a.bridges[0] != b.bridges[0]:
        return "PHB"  # they meet only at the host bridge
    if a.bridges[-1] == b.bridges[-1]:
        return "PIX"  # the same bridge right above both
    return "PXB"  # through a PCIe switch: up one downstream port, down another


def gpu_place(sysfs_root: Path, nvml_bus_id: str) -> PciPlace | None:
    address = sysfs_address(nvml_bus_id)
    return place(sysfs_root / "bus" / "pci" / "devices" / address) if address else None


def rdma_places(sysfs_root: Path) -> dict[str, PciPlace]:
    """RDMA device -> its PCI place (class/infiniband/<dev>/device)."""
    out: dict[str, PciPlace] = {}
    base = sysfs_root / "class" / "infiniband"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return out
    for name in names:
        found = place(base / name / "device")
        if found is not None:
            out[name] = found
    return out
