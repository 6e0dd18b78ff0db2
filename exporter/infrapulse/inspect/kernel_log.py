"""The kernel log's word on the verdict's device: the last kernel-log event (kind, code, fixed
summary, when it was read) of the GPU, NIC or PCI function the verdict names, from
`infrapulse_kmsg_last_event_info` and `..._last_event_timestamp_seconds` (the kmsg source).

The device is found by its labels: `pci_address` (a kernel-log signal's target) directly, `gpu`
through `infrapulse_gpu_info{pci_bus_id}` (NVML's 00000000:B3:00.0 is the kernel's 0000:b3:00.0),
an RDMA device (`device`) through `infrapulse_rdma_device_info{pci_address}` (its sysfs `device`
link), a netdev (`interface`) through the RDMA port that names it
(`infrapulse_rdma_port_info{netdev}`) and then its device. A switch's interface is not this node's
netdev; a netdev with no RDMA device, or a device without a PCI function, has no evidence here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..pci import sysfs_address
from ..store import Histogram, Store

LAST_EVENT = "infrapulse_kmsg_last_event_info"
LAST_EVENT_TIME = "infrapulse_kmsg_last_event_timestamp_seconds"
GPU_INFO = "infrapulse_gpu_info"  # gpu, uuid, name, pci_bus_id, ...
# device, hca_type, board_id, firmware_version, node_guid, pci_address
RDMA_DEVICE = "infrapulse_rdma_device_info"
RDMA_PORT = "infrapulse_rdma_port_info"  # device, port, link_layer, netdev


def address_of(store: Store, labels: Mapping[str, str]) -> str:
    """The kernel PCI address of the device the labels name ("" when none is known)."""
    if labels.get("pci_address"):
        return labels["pci_address"]
    gpu = labels.get("gpu")
    if gpu is not None:
        for _source, _target, values, _value in store.iter_family(GPU_INFO):
            if len(values) >= 4 and values[0] == gpu:
                address = sysfs_address(values[3])
                if address:
                    return address
        return ""
    if "switch" in labels:  # a switch port's interface, not a netdev of this node
        return ""
    device = labels.get("device") or _device_of_netdev(store, labels.get("interface", ""))
    if not device:
        return ""
    for _source, _target, values, _value in store.iter_family(RDMA_DEVICE):
        if len(values) >= 6 and values[0] == device and values[5]:
            return values[5]
    return ""


def _device_of_netdev(store: Store, netdev: str) -> str:
    """The RDMA device whose port names this netdev (the lowest by name, port)."""
    if not netdev:
        return ""
    found = sorted((values[0], values[1]) for _source, _target, values, _value in store.iter_family(RDMA_PORT)
                   if len(values) >= 4 and values[3] == netdev)
    return found[0][0] if found else ""


def last_event(store: Store, labels: Mapping[str, str]) -> dict[str, Any] | None:
    """{pci_address, kind, code, summary, timestamp} of the device's last kernel-log event."""
    address = address_of(store, labels)
    if not address:
        return None
    found: dict[str, Any] | None = None
    for _source, _target, values, value in store.iter_family(LAST_EVENT):
        if len(values) >= 4 and values[0] == address and value:
            found = {"pci_address": address, "kind": values[1], "code": values[2], "summary": values[3],
                     "timestamp": None}
    if found is None:
        return None
    for _source, _target, values, value in store.iter_family(LAST_EVENT_TIME):
        if values and values[0] == address and not isinstance(value, Histogram):
            found["timestamp"] = float(value)
    return found
