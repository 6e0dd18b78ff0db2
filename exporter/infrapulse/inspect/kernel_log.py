"""The kernel log's word on the verdict's device: the last kernel-log event (kind, code, fixed
summary, when it was read) of the GPU, NIC or PCI function the verdict names, from
`infrapulse_kmsg_last_event_info` and `..._last_event_timestamp_seconds` (the kmsg source).

The device is found by its labels: `pci_address` (a kernel-log signal's target) directly, `gpu`
through `infrapulse_gpu_info{pci_bus_id}` (NVML's 00000000:B3:00.0 is the kernel's 0000:b3:00.0).
A netdev or an RDMA port is not mapped: no series names a NIC's PCI function yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..pci import sysfs_address
from ..store import Histogram, Store

LAST_EVENT = "infrapulse_kmsg_last_event_info"
LAST_EVENT_TIME = "infrapulse_kmsg_last_event_timestamp_seconds"
GPU_INFO = "infrapulse_gpu_info"


def address_of(store: Store, labels: Mapping[str, str]) -> str:
    """The kernel PCI address of the device the labels name ("" when none is known)."""
    if labels.get("pci_address"):
        return labels["pci_address"]
    gpu = labels.get("gpu")
    if gpu is None:
        return ""
    for _source, _target, values, _value in store.iter_family(GPU_INFO):
        if len(values) >= 4 and values[0] == gpu:
            address = sysfs_address(values[3])
            if address:
                return address
    return ""


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
