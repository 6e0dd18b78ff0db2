"""Hand-built snapshots for the health tests: two readings of counters a window apart."""

from __future__ import annotations

import math
import time

from infrapulse import config as config_mod
from infrapulse.health.config import HealthSettings
from infrapulse.health.service import HealthService
from infrapulse.store import Histogram, Snapshot, Store

HOST = "gpu-node-01"
GPU_LABELS = ("0", "GPU-aaaa")
WINDOW = 60.0
STALE = 10_000.0  # hand-built snapshots carry past timestamps: never expire them in a test


def health_config(extra: str = "") -> HealthSettings:
    # link.window 1m: two readings a window apart cover it, as they cover `window`.
    return config_mod.load_text("interval: 5s\nhealth:\n  window: 1m\n  event_window: 5m\n"
                                "  link: {window: 1m, baseline_window: 10m}\n" + extra).health


class Feed:
    """Publishes series at chosen timestamps; `counter` values are (first, last) readings."""

    def __init__(self, store: Store | None = None, start: float | None = None) -> None:
        self.store = store or Store()
        self.start = time.time() - WINDOW if start is None else start
        # (source, target) -> per step {family: {labels: v}}
        self.readings: dict[tuple[str, str], list[dict]] = {}

    def series(self, source: str, family: str, labels: tuple, values: list,
               target: str | None = None) -> Feed:
        steps = self.readings.setdefault((source, target or source), [])
        while len(steps) < len(values):
            steps.append({})
        for i, v in enumerate(values):
            if v is not None:
                steps[i].setdefault(family, {})[tuple(labels)] = v
        return self

    def counter(self, source, family, labels, first, last, target=None) -> Feed:
        return self.series(source, family, labels, [float(first), float(last)], target)

    def gauge(self, source, family, labels, value, target=None) -> Feed:
        return self.series(source, family, labels, [float(value), float(value)], target)

    def publish(self, service: HealthService | None = None, step_seconds: float = WINDOW) -> Store:
        """Publish step i of every instance at start + i*step_seconds (ticking `service` after each)."""
        steps = max(len(s) for s in self.readings.values())
        for i in range(steps):
            ts = self.start + i * step_seconds
            for (source, target), per_step in self.readings.items():
                if i >= len(per_step):
                    continue
                snap = Snapshot(ts)
                for family, series in per_step[i].items():
                    for labels, value in series.items():
                        snap.add(family, labels, value)
                self.store.publish(source, target, snap, STALE)
                self.store.record_success(source, target, 0.001)
            if service is not None:
                service.tick(ts)
        return self.store


def latency_histogram(p95: float, count: float = 100.0) -> Histogram:
    """A cumulative histogram whose histogram_quantile(0.95) is exactly `p95`."""
    return Histogram(((p95, 0.95 * count), (p95 * 2, count), (math.inf, count)), p95 * count, count)


def empty_histogram(p95: float) -> Histogram:
    return Histogram(((p95, 0.0), (p95 * 2, 0.0), (math.inf, 0.0)), 0.0, 0.0)


def service_for(store: Store, extra: str = "", hostname: str = HOST) -> HealthService:
    return HealthService(store, health_config(extra), hostname, 5.0)


def signal(report, name):
    for comp in report.components.values():
        for result in comp.signals:
            if result.signal.name == name:
                return result
    raise KeyError(name)
