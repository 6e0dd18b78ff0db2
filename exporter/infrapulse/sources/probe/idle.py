"""Whether the node may be probed now: no GPU compute processes (NVML), no requests running or
waiting on the node's serving endpoints (what the serving source published), or an explicit
maintenance flag file, which makes the node count as idle whatever the rest says.

NVML sits behind `GpuActivity` so tests and the demo inject what they need
(`SourceContext.options["probe.gpu_activity"]`); the real one uses nvidia-ml-py directly.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...store import Store

# SourceContext.options key: a callable() -> GpuActivity replacing NVML (tests, the demo).
GPU_ACTIVITY_KEY = "probe.gpu_activity"
SERVING_BUSY_FAMILIES = ("infrapulse_llm_requests_running", "infrapulse_llm_requests_waiting")

log = logging.getLogger("infrapulse.source.probe")


class GpuActivity(Protocol):
    def compute_processes(self) -> int | None:
        """Compute processes on this node's GPUs; 0 without GPUs; None when NVML cannot tell."""


class NvmlActivity:
    """nvmlDeviceGetComputeRunningProcesses over every GPU. Without an NVML library there is no
    GPU to be busy (0); any other NVML error means "cannot tell" (None: the node is not idle)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nvml: Any = None
        self._absent = False

    def _init(self) -> Any:
        import pynvml

        if self._nvml is None:
            pynvml.nvmlInit()
            self._nvml = pynvml
        return self._nvml

    def compute_processes(self) -> int | None:
        with self._lock:
            if self._absent:
                return 0
            try:
                nvml = self._init()
                total = 0
                for i in range(nvml.nvmlDeviceGetCount()):
                    handle = nvml.nvmlDeviceGetHandleByIndex(i)
                    total += len(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
                return total
            except Exception as exc:  # NVMLError subclasses, or no nvidia-ml-py at all
                if type(exc).__name__ in ("NVMLError_LibraryNotFound", "ModuleNotFoundError"):
                    self._absent = True
                    return 0
                log.debug("NVML cannot list compute processes", extra={"error": str(exc)})
                return None


@dataclass(frozen=True)
class Idleness:
    idle: bool
    why: str  # what keeps the node busy, or why it counts as idle


def serving_activity(store: Store) -> list[str]:
    """Endpoints of this node with requests running or waiting."""
    busy = set()
    for family in SERVING_BUSY_FAMILIES:
        for source, target, _labels, value in store.iter_family(family):
            if source == "serving" and isinstance(value, float | int) and not math.isnan(value) and value > 0:
                busy.add(target)
    return sorted(busy)


def check(store: Store, gpu: GpuActivity | None, serving: bool, maintenance_file: str) -> Idleness:
    """GPU processes first (the strongest sign of work), then serving requests."""
    if maintenance_file and Path(maintenance_file).exists():
        return Idleness(True, f"maintenance flag {maintenance_file} present")
    if gpu is not None:
        processes = gpu.compute_processes()
        if processes is None:
            return Idleness(False, "NVML cannot tell whether the GPUs are in use")
        if processes:
            return Idleness(False, f"{processes} GPU compute process(es) running")
    if serving:
        endpoints = serving_activity(store)
        if endpoints:
            return Idleness(False, f"requests running or waiting on {', '.join(endpoints)}")
    return Idleness(True, "idle")
