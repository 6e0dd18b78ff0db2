"""Words for a version change (NIC firmware, drivers, kernel, NCCL): what the probe source logs
when the versions a probe runs under change, and what the health sentences say about a
regression since then. One wording for both, beside the store: neither layer owns it."""

from __future__ import annotations

# How sentences name a version component: "since fw 28.39.1002 → 28.41.1000".
COMPONENT_NAMES = {"nic_firmware": "fw", "nic_driver": "NIC driver", "gpu_driver": "GPU driver",
                   "kernel": "kernel", "nccl": "NCCL"}


def describe_change(changes: dict[str, tuple[str, str]]) -> str:
    """"fw 28.39.1002 → 28.41.1000, NCCL 2.21.5 → 2.23.4"."""
    return ", ".join(f"{COMPONENT_NAMES.get(k, k)} {b or 'none'} → {a or 'none'}"
                     for k, (b, a) in sorted(changes.items()))
