"""PCI addresses in the two spellings infrapulse reads: NVML/DCGM's `00000000:B3:00.0` (eight
hex digits of domain, upper case) and the kernel's / sysfs's `0000:b3:00.0`. Shared by the
readers that join a GPU to a kernel-log event (health signals, inspections)."""

from __future__ import annotations


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
