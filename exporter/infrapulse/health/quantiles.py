"""Windowed p50/p95/p99 of TTFT and ITL per serving endpoint, from histogram deltas.

Prometheus dashboards use `histogram_quantile(rate(...))`; the score needs the same figure
in-process over the health window. Each pass the histograms the serving source published are
remembered per series; the window's delta is summed pair by pair so that an engine restart
(counts going down, or bucket bounds changing) starts a new segment instead of showing up as
a latency spike. Quantiles interpolate linearly inside a bucket, exactly as
`histogram_quantile` does, so the score and the dashboards agree.

`ServingLatency` is the one seam to the serving source: when that source offers its own
windowed quantiles the scorer can use them instead (see `service.py`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass

from ..store import Histogram, Store

TTFT_FAMILY = "infrapulse_llm_time_to_first_token_seconds"
ITL_FAMILY = "infrapulse_llm_inter_token_latency_seconds"
QUANTILES = (0.5, 0.95, 0.99)
# Serving histogram label order fixed by the serving issue.
SERVING_LABELS = ("endpoint", "engine", "model")


def histogram_quantile(q: float, buckets: tuple[tuple[float, float], ...]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (le, count) buckets ending with +Inf."""
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0 or math.isnan(total):
        return None
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(bound):
                # Beyond the last finite bucket nothing is known: report that bound, as Prometheus does.
                return buckets[i - 1][0] if i > 0 else None
            if i == 0 and bound <= 0:
                return bound
            in_bucket = count - lower_count
            if in_bucket <= 0:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / in_bucket
        lower_bound, lower_count = bound, count
    return None


def _subtract(cur: Histogram, prev: Histogram) -> Histogram:
    return Histogram(tuple((b, c - p) for (b, c), (_, p) in zip(cur.buckets, prev.buckets)),
                     cur.sum - prev.sum, cur.count - prev.count)


def _add(a: Histogram, b: Histogram) -> Histogram:
    return Histogram(tuple((bound, x + y) for (bound, x), (_, y) in zip(a.buckets, b.buckets)),
                     a.sum + b.sum, a.count + b.count)


def _bounds(h: Histogram) -> tuple[float, ...]:
    return tuple(b for b, _ in h.buckets)


def _is_reset(prev: Histogram, cur: Histogram) -> bool:
    if _bounds(prev) != _bounds(cur) or cur.count < prev.count:
        return True
    return any(c < p for (_, c), (_, p) in zip(cur.buckets, prev.buckets))


@dataclass(frozen=True)
class WindowDelta:
    histogram: Histogram
    seconds: float
    resets: int


class HistogramWindow:
    """Readings of many histogram series over a sliding window."""

    def __init__(self, window: float, max_points: int = 64) -> None:
        self.window = window
        self._points: dict[Hashable, deque[tuple[float, Histogram]]] = {}
        self.max_points = max_points

    def observe(self, key: Hashable, timestamp: float, hist: Histogram) -> None:
        ring = self._points.get(key)
        if ring is None:
            ring = self._points[key] = deque(maxlen=self.max_points)
        if ring and timestamp <= ring[-1][0]:
            return
        ring.append((timestamp, hist))
        horizon = timestamp - self.window
        while len(ring) > 2 and ring[1][0] <= horizon:
            ring.popleft()

    def delta(self, key: Hashable) -> WindowDelta | None:
        ring = self._points.get(key)
        if ring is None or len(ring) < 2:
            return None
        points = list(ring)
        total: Histogram | None = None
        resets = 0
        for (_, prev), (_, cur) in zip(points, points[1:]):
            if _is_reset(prev, cur):
                resets += 1
                step = cur  # everything since the restart is new
            else:
                step = _subtract(cur, prev)
            if total is None or _bounds(total) != _bounds(step):
                total = step  # new bucket layout: only the newest segment is comparable
            else:
                total = _add(total, step)
        seconds = points[-1][0] - points[0][0]
        if total is None or seconds <= 0:
            return None
        return WindowDelta(total, seconds, resets)

    def forget_missing(self, live: set) -> None:
        for key in [k for k in self._points if k not in live]:
            del self._points[key]


@dataclass(frozen=True)
class EndpointLatency:
    endpoint: str
    ttft: dict[float, float | None]  # quantile -> seconds (None: no requests in the window)
    itl: dict[float, float | None]
    requests_per_second: float | None
    window_seconds: float

    def as_json(self) -> dict:
        def q(d: dict[float, float | None]) -> dict:
            return {f"p{round(k * 100)}": (None if v is None else round(v, 6)) for k, v in d.items()}

        return {"ttft_seconds": q(self.ttft), "itl_seconds": q(self.itl),
                "requests_per_second": None if self.requests_per_second is None
                else round(self.requests_per_second, 4),
                "window_seconds": round(self.window_seconds, 3)}


class ServingLatency:
    """p50/p95/p99 TTFT and ITL and the request rate per endpoint over the window."""

    def __init__(self, window: float, label_names=None) -> None:
        self.window = window
        self.history = HistogramWindow(window)
        self._label_names = label_names or (lambda family: SERVING_LABELS)

    def update(self, store: Store) -> None:
        live = set()
        for family in (TTFT_FAMILY, ITL_FAMILY):
            for source, target, values, value in store.iter_family(family):
                if not isinstance(value, Histogram):
                    continue
                snap = store.snapshot(source, target)
                key = (family, source, target, values)
                live.add(key)
                if snap is not None:
                    self.history.observe(key, snap.timestamp, value)
        self.history.forget_missing(live)

    def _per_endpoint(self, family: str) -> dict[str, WindowDelta]:
        """Window deltas summed over the series of each endpoint (models, engines)."""
        names = self._label_names(family) or SERVING_LABELS
        index = names.index("endpoint") if "endpoint" in names else 0
        best: dict[str, dict[tuple, WindowDelta]] = {}
        for key in list(self.history._points):  # noqa: SLF001 - same module family
            fam, _source, _target, values = key
            if fam != family:
                continue
            delta = self.history.delta(key)
            if delta is None:
                continue
            endpoint = values[index] if index < len(values) else ""
            layouts = best.setdefault(endpoint, {})
            bounds = _bounds(delta.histogram)
            known = layouts.get(bounds)
            if known is None:
                layouts[bounds] = delta
            else:
                layouts[bounds] = WindowDelta(_add(known.histogram, delta.histogram),
                                              max(known.seconds, delta.seconds), known.resets + delta.resets)
        # Series with different bucket layouts cannot be summed: keep the busiest layout.
        return {ep: max(layouts.values(), key=lambda d: d.histogram.count) for ep, layouts in best.items()}

    def endpoints(self) -> dict[str, EndpointLatency]:
        ttft = self._per_endpoint(TTFT_FAMILY)
        itl = self._per_endpoint(ITL_FAMILY)
        out = {}
        for endpoint in sorted(set(ttft) | set(itl)):
            t, i = ttft.get(endpoint), itl.get(endpoint)
            out[endpoint] = EndpointLatency(
                endpoint,
                {q: histogram_quantile(q, t.histogram.buckets) if t else None for q in QUANTILES},
                {q: histogram_quantile(q, i.histogram.buckets) if i else None for q in QUANTILES},
                (t.histogram.count / t.seconds) if t else None,
                t.seconds if t else (i.seconds if i else 0.0),
            )
        return out
