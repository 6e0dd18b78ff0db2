"""The compute layer: per GPU, utilisation, SM clock and memory use, plus the GPU signals
(XIDs, uncorrectable ECC, throttle reasons, lost GPUs, row remapping)."""

from __future__ import annotations

from collections.abc import Iterator

from ..store import Histogram
from .sample import Meta, Sampled, View, from_signals

LAYER = "compute"
UTIL_FLOOR = 0.1
CLOCK_FLOOR_HZ = 200e6
MEMORY_FLOOR = 0.05


def _by_gpu(view: View, family: str, where: tuple[int, str] | None = None) -> dict[str, float]:
    out: dict[str, float] = {}
    for _source, _target, values, value in view.store.iter_family(family):
        if not values or isinstance(value, Histogram):
            continue
        if where is not None and (len(values) <= where[0] or values[where[0]] != where[1]):
            continue
        out[values[0]] = max(out.get(values[0], float(value)), float(value))
    return out


def collect(view: View) -> Iterator[Sampled]:
    yield from from_signals(view, LAYER)
    for gpu, value in _by_gpu(view, "infrapulse_gpu_utilization_ratio").items():
        yield Meta(LAYER, "utilization", f"GPU {gpu}", "ratio", UTIL_FLOOR, worse=-1), value
    for gpu, value in _by_gpu(view, "infrapulse_gpu_clock_hertz", (2, "sm")).items():
        yield Meta(LAYER, "sm_clock", f"GPU {gpu}", "hertz", CLOCK_FLOOR_HZ, worse=-1), value
    used = _by_gpu(view, "infrapulse_gpu_memory_used_bytes")
    total = _by_gpu(view, "infrapulse_gpu_memory_total_bytes")
    for gpu, value in used.items():
        if total.get(gpu):
            yield Meta(LAYER, "memory_used", f"GPU {gpu}", "ratio", MEMORY_FLOOR), value / total[gpu]
