"""PCI addresses in the two spellings infrapulse reads: NVML/DCGM's `00000000:B3:00.0` (eight
hex digits of domain, upper case) and the kernel's / sysfs's `0000:b3:00.0`. Shared by the
readers that join a GPU to a kernel-log event (health signals, inspections)."""

from __future__ import annotations

import os
import re

# A PCI function as sysfs names it: domain (4 hex digits, more behind a VMD), bus, slot.function.
_FUNCTION = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def sysfs_address(bus_id: str) -> str:
    """`00000000:B3:00.0` -> `0000:b3:00.0`; a missing function is `.0` ("" when not an address)."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return ""
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return ""
    return f"{domain:04x}:{parts[1]}:{parts[2] if '.' in parts[2] else parts[2] + '.0'}"


def device_link_address(device_link: str | os.PathLike[str]) -> str:
    """The PCI function a sysfs `device` link points at (`../../../0000:0d:00.0` -> `0000:0d:00.0`).

    "" when there is no link or it names no PCI function (a software RDMA device or netdev whose
    parent is a virtual device). A VF's link names the VF's own function."""
    try:
        target = os.readlink(device_link)
    except OSError:
        return ""
    name = os.path.basename(target.rstrip("/")).lower()
    return name if _FUNCTION.fullmatch(name) else ""
