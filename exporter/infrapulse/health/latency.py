"""Windowed TTFT / ITL quantiles and request rate per serving endpoint, for the health score.

These are NOT Prometheus series (dashboards use `histogram_quantile` on the exported
histograms). The serving source feeds every successful scrape's normalised snapshot into a
`QuantileTracker`; the health scorer reads it:

    from .latency import serving_quantiles
    serving_quantiles(store)            # or the ServingSource instance; optional window=seconds
    -> {"llama-70b": {
          "engine": "vllm",
          "window": 297.5,               # seconds actually covered by the readings (<= window)
          "ttft": {"p50": 0.21, "p95": 0.9, "p99": 1.7, "mean": 0.3, "count": 812.0} | None,
          "itl":  {... same keys ...} | None,
          "request_rate": 2.7 | None,    # finished requests per second over the window
          "resets": 0,                   # engine restarts seen inside the window
        }, ...}

None means "unknown" (no requests in the window, or fewer than two readings), never "good".

How the window is computed: consecutive cumulative histograms are differenced pair by pair,
like Prometheus' increase(). A pair where any bucket or the count went down, the bucket
layout changed, or `process_start_time_seconds` moved is an engine restart: that pair
contributes the new cumulative counts (observations since the restart), never a negative
delta — so a restart inside the window is not a latency spike. Quantiles interpolate linearly
inside a bucket as histogram_quantile does; a quantile in the +Inf bucket reports the highest
finite bound. Series of all models of an endpoint are merged on their common bucket bounds
(request counts of Triton take the max over models: an ensemble counts each request once per
step).
"""

from __future__ import annotations

import math
import weakref
from collections import deque
from dataclasses import dataclass

from ..rates import counter_increase
from ..sources.serving import normalize as norm
from ..store import Histogram, Snapshot, Store

QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


@dataclass(frozen=True)
class Reading:
    timestamp: float
    ttft: Histogram | None
    itl: Histogram | None
    requests: float | None  # cumulative finished requests
    started: float | None  # process_start_time_seconds, if the engine exposes it


def merge_histograms(histograms: list[Histogram]) -> Histogram | None:
    """Sum histograms on the bucket bounds they share (exact; never invents a bound)."""
    if not histograms:
        return None
    if len(histograms) == 1:
        return histograms[0]
    common = set(b for b, _ in histograms[0].buckets)
    for h in histograms[1:]:
        common &= {b for b, _ in h.buckets}
    totals = dict.fromkeys(common, 0.0)
    for h in histograms:
        for bound, count in h.buckets:
            if bound in totals:
                totals[bound] += count
    return Histogram(tuple(sorted(totals.items())), sum(h.sum for h in histograms),
                     sum(h.count for h in histograms))


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus histogram_quantile over cumulative (bound, count) pairs ending with +Inf."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(bound):
                return buckets[i - 1][0] if i > 0 else None
            if i == 0 and bound <= 0:
                return bound
            in_bucket = count - prev_count
            if in_bucket <= 0:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / in_bucket
        prev_bound, prev_count = bound, count
    return None


def _is_reset(prev: Histogram, cur: Histogram) -> bool:
    if len(prev.buckets) != len(cur.buckets) or cur.count < prev.count:
        return True
    for (b1, c1), (b2, c2) in zip(prev.buckets, cur.buckets):
        if b1 != b2 or c2 < c1:
            return True
    return False


def windowed_delta(readings: list[Histogram | None], restarted: list[bool]) -> tuple[Histogram | None, int]:
    """Sum of reset-aware increases between consecutive readings, and how many resets."""
    acc: dict[float, float] | None = None
    acc_sum = acc_count = 0.0
    resets = 0
    for i in range(1, len(readings)):
        prev, cur = readings[i - 1], readings[i]
        if cur is None or prev is None:
            continue
        if restarted[i] or _is_reset(prev, cur):
            resets += 1
            delta = {b: c for b, c in cur.buckets}
            d_sum, d_count = cur.sum, cur.count
            if acc is not None and set(acc) != set(delta):
                acc = None  # new bucket layout: only what came after the restart is comparable
        else:
            delta = {b: c2 - c1 for (b, c1), (_, c2) in zip(prev.buckets, cur.buckets)}
            d_sum, d_count = cur.sum - prev.sum, cur.count - prev.count
        if acc is None:
            acc, acc_sum, acc_count = dict(delta), d_sum, d_count
        else:
            for b, c in delta.items():
                acc[b] += c
            acc_sum += d_sum
            acc_count += d_count
    if acc is None:
        return None, resets
    return Histogram(tuple(sorted(acc.items())), acc_sum, acc_count), resets


def summarise(h: Histogram | None) -> dict | None:
    if h is None or h.count <= 0:
        return None
    buckets = list(h.buckets)
    out = {name: histogram_quantile(q, buckets) for name, q in QUANTILES}
    out["mean"] = h.sum / h.count
    out["count"] = h.count
    return out


class EndpointWindow:
    def __init__(self, window: float, max_points: int = 512) -> None:
        self.window = window
        self.engine = ""
        self.readings: deque[Reading] = deque(maxlen=max_points)

    def observe(self, reading: Reading) -> None:
        if self.readings and reading.timestamp <= self.readings[-1].timestamp:
            return
        self.readings.append(reading)
        horizon = reading.timestamp - self.window
        # Keep one reading at or before the horizon so the whole window is covered.
        while len(self.readings) > 2 and self.readings[1].timestamp <= horizon:
            self.readings.popleft()

    def summary(self, window: float | None = None) -> dict:
        readings = list(self.readings)
        if window is not None and readings:
            horizon = readings[-1].timestamp - window
            start = 0
            while start + 1 < len(readings) and readings[start + 1].timestamp <= horizon:
                start += 1
            readings = readings[start:]
        restarted = [False] + [cur.started is not None and prev.started is not None and cur.started != prev.started
                               for prev, cur in zip(readings, readings[1:])]
        ttft, ttft_resets = windowed_delta([r.ttft for r in readings], restarted)
        itl, itl_resets = windowed_delta([r.itl for r in readings], restarted)
        covered = readings[-1].timestamp - readings[0].timestamp if len(readings) > 1 else 0.0
        rate = None
        resets = max(ttft_resets, itl_resets)
        counts = [(r.timestamp, r.requests) for r in readings if r.requests is not None]
        if len(counts) > 1 and counts[-1][0] > counts[0][0]:
            increase = 0.0
            for (_, prev), (_, cur) in zip(counts, counts[1:]):
                delta, _ = counter_increase(prev, cur)
                increase += delta
            rate = increase / (counts[-1][0] - counts[0][0])
        return {"engine": self.engine, "window": covered, "ttft": summarise(ttft), "itl": summarise(itl),
                "request_rate": rate, "resets": resets}


class QuantileTracker:
    """Readings of every endpoint of one serving source over the health window."""

    def __init__(self, window: float = 300.0) -> None:
        self.window = window
        self.endpoints: dict[str, EndpointWindow] = {}

    def observe(self, endpoint: str, engine: str, snapshot: Snapshot, started: float | None = None) -> None:
        window = self.endpoints.get(endpoint)
        if window is None:
            window = self.endpoints[endpoint] = EndpointWindow(self.window)
        window.engine = engine
        window.observe(Reading(snapshot.timestamp, _merged(snapshot, norm.TTFT.name),
                               _merged(snapshot, norm.ITL.name), _requests(snapshot, engine), started))

    def forget(self, endpoint: str) -> None:
        self.endpoints.pop(endpoint, None)

    def quantiles(self, window: float | None = None) -> dict[str, dict]:
        return {name: w.summary(window) for name, w in sorted(self.endpoints.items())}


def _merged(snapshot: Snapshot, family: str) -> Histogram | None:
    series = snapshot.series.get(family)
    return merge_histograms(list(series.values())) if series else None


def _requests(snapshot: Snapshot, engine: str) -> float | None:
    """Cumulative finished requests: requests_total over outcomes, else the e2e/TTFT count."""
    per_model: dict[str, float] = {}
    series = snapshot.series.get(norm.REQUESTS.name)
    if series:
        for labels, value in series.items():
            per_model[labels[2]] = per_model.get(labels[2], 0.0) + value
    else:
        for family in (norm.E2E.name, norm.TTFT.name):
            hists = snapshot.series.get(family)
            if hists:
                for labels, h in hists.items():
                    per_model[labels[2]] = per_model.get(labels[2], 0.0) + h.count
                break
    if not per_model:
        return None
    return max(per_model.values()) if engine in ("triton", "trtllm") else sum(per_model.values())


# One tracker per store: the health scorer only holds the store.
_TRACKERS: weakref.WeakKeyDictionary[Store, QuantileTracker] = weakref.WeakKeyDictionary()


def tracker_for(store: Store, window: float) -> QuantileTracker:
    tracker = _TRACKERS.get(store)
    if tracker is None:
        tracker = _TRACKERS[store] = QuantileTracker(window)
    tracker.window = window
    for w in tracker.endpoints.values():
        w.window = window
    return tracker


def serving_quantiles(store_or_source, window: float | None = None) -> dict[str, dict]:
    """Windowed p50/p95/p99 TTFT and ITL and the request rate per endpoint (see module doc)."""
    tracker = getattr(store_or_source, "tracker", None)
    if not isinstance(tracker, QuantileTracker):
        tracker = _TRACKERS.get(store_or_source)
    if tracker is None:
        return {}
    return tracker.quantiles(window)


__all__ = ["QuantileTracker", "histogram_quantile", "merge_histograms", "serving_quantiles", "tracker_for",
           "windowed_delta"]
