"""Windowed TTFT / ITL quantiles and request rate per serving endpoint, for the health score.

These are NOT Prometheus series (dashboards use `histogram_quantile` on the exported
histograms). The health service owns one `QuantileTracker`: every pass it observes the
snapshots the serving source published (`observe_store`: successful scrapes only, with the
engine label and `infrapulse_llm_process_start_time_seconds` they carry) and asks for its
window (`endpoint_latency`). Nothing under sources/ imports this module.

    tracker = QuantileTracker(window=60)
    tracker.observe_store(store)        # each health pass
    tracker.quantiles(window=60)
    -> {"llama-70b": {
          "engine": "vllm",
          "window": 57.5,                # seconds actually covered by the readings (<= window)
          "ttft": {"p50": 0.21, "p95": 0.9, "p99": 1.7, "mean": 0.3, "count": 812.0} | None,
          "itl":  {... same keys ...} | None,
          "request_rate": 2.7 | None,    # finished requests per second over the window
          "resets": 0,                   # engine restarts seen inside the window
        }, ...}
    tracker.endpoint_latency(60)        # the same as EndpointLatency values, for the score

None means "unknown" (no requests in the window, or fewer than two readings), never "good".

How the window is computed: consecutive cumulative histograms are differenced pair by pair,
like Prometheus' increase(). A pair where any bucket or the count went down, the bucket
layout changed, or the process start time moved is an engine restart: that pair contributes
the new cumulative counts (observations since the restart), never a negative delta — so a
restart inside the window is not a latency spike. Quantiles interpolate linearly inside a
bucket as histogram_quantile does; a quantile in the +Inf bucket reports the highest finite
bound. Series of all models of an endpoint are merged on their common bucket bounds (request
counts of Triton take the max over models: an ensemble counts each request once per step).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from .. import catalog
from ..rates import counter_increase
from ..store import Histogram, Snapshot, Store

# The serving families read here, by name: the serving source declares them (the catalogue has
# them once the source registry is loaded); health reads the store, never a source module.
TTFT = "infrapulse_llm_time_to_first_token_seconds"
ITL = "infrapulse_llm_inter_token_latency_seconds"
E2E = "infrapulse_llm_e2e_request_latency_seconds"
ENDPOINT_UP = "infrapulse_llm_endpoint_up"
REQUESTS = "infrapulse_llm_requests_total"
PROCESS_START = "infrapulse_llm_process_start_time_seconds"

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


def summarise(h: Histogram | None) -> dict[str, float | None] | None:
    if h is None or h.count <= 0:
        return None
    buckets = list(h.buckets)
    out: dict[str, float | None] = {name: histogram_quantile(q, buckets) for name, q in QUANTILES}
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

    def summary(self, window: float | None = None) -> dict[str, Any]:
        readings = list(self.readings)
        if window is not None and readings:
            horizon = readings[-1].timestamp - window
            start = 0
            while start + 1 < len(readings) and readings[start + 1].timestamp <= horizon:
                start += 1
            readings = readings[start:]
        restarted = [False] + [cur.started is not None and prev.started is not None
                               and cur.started != prev.started for prev, cur in zip(readings, readings[1:])]
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
    """Readings of every serving endpoint over the health window; the health service owns one."""

    def __init__(self, window: float = 300.0) -> None:
        self.window = window
        self.endpoints: dict[str, EndpointWindow] = {}

    def set_window(self, window: float) -> None:
        """A new health.window (config reload): the readings kept so far stay."""
        self.window = window
        for w in self.endpoints.values():
            w.window = window

    def observe(self, endpoint: str, engine: str, snapshot: Snapshot, started: float | None = None) -> None:
        window = self.endpoints.get(endpoint)
        if window is None:
            window = self.endpoints[endpoint] = EndpointWindow(self.window)
        window.engine = engine
        window.observe(Reading(snapshot.timestamp, _merged(snapshot, TTFT),
                               _merged(snapshot, ITL), _requests(snapshot, engine), started))

    def observe_store(self, store: Store) -> None:
        """Observe the latest snapshot of every serving endpoint in `store`.

        Only successful scrapes count (endpoint_up 1): a failed one carries no histograms, and a
        gap must not break the chain of deltas. A snapshot already seen is ignored (same
        timestamp), so calling this more often than the endpoint is scraped is harmless.
        Endpoints whose snapshot left the store (stale, or the endpoint was removed) are
        forgotten."""
        live = set()
        serving = catalog.get(ENDPOINT_UP).source  # the source that publishes the endpoints
        for (source, target), snapshot in store.snapshots():
            if source != serving:
                continue
            live.add(target)
            up = snapshot.series.get(ENDPOINT_UP) or {}
            engine = next((labels[1] for labels, value in up.items() if value == 1.0), None)
            if engine is None:
                continue
            started = next(iter((snapshot.series.get(PROCESS_START) or {}).values()), None)
            self.observe(target, engine, snapshot, None if isinstance(started, Histogram) else started)
        for endpoint in [e for e in self.endpoints if e not in live]:
            self.forget(endpoint)

    def forget(self, endpoint: str) -> None:
        self.endpoints.pop(endpoint, None)

    def quantiles(self, window: float | None = None) -> dict[str, dict[str, Any]]:
        return {name: w.summary(window) for name, w in sorted(self.endpoints.items())}

    def endpoint_latency(self, window: float | None = None) -> dict[str, EndpointLatency]:
        """Per endpoint over the last `window` seconds, as the score reads it."""
        out = {}
        for endpoint, s in self.quantiles(window).items():
            out[endpoint] = EndpointLatency(endpoint, _by_quantile(s["ttft"]), _by_quantile(s["itl"]),
                                            s["request_rate"], s["window"], s["engine"], s["resets"])
        return out


@dataclass(frozen=True)
class EndpointLatency:
    endpoint: str
    ttft: dict[float, float | None]  # quantile -> seconds (None: no requests in the window)
    itl: dict[float, float | None]
    requests_per_second: float | None
    window_seconds: float
    engine: str = ""
    resets: int = 0

    def as_json(self) -> dict[str, Any]:
        def q(by_quantile: dict[float, float | None]) -> dict[str, float | None]:
            values = {name: by_quantile.get(quantile) for name, quantile in QUANTILES}
            return {name: None if v is None else round(v, 6) for name, v in values.items()}

        return {"engine": self.engine, "ttft_seconds": q(self.ttft), "itl_seconds": q(self.itl),
                "requests_per_second": None if self.requests_per_second is None
                else round(self.requests_per_second, 4),
                "window_seconds": round(self.window_seconds, 3), "restarts": self.resets}


def _by_quantile(summary: dict[str, float | None] | None) -> dict[float, float | None]:
    return {q: (summary or {}).get(name) for name, q in QUANTILES}


def _merged(snapshot: Snapshot, family: str) -> Histogram | None:
    series = snapshot.series.get(family)
    return merge_histograms([h for h in series.values() if isinstance(h, Histogram)]) if series else None


def _requests(snapshot: Snapshot, engine: str) -> float | None:
    """Cumulative finished requests: requests_total over outcomes, else the e2e/TTFT count."""
    per_model: dict[str, float] = {}
    series = snapshot.series.get(REQUESTS)
    if series:
        for labels, value in series.items():
            if not isinstance(value, Histogram):
                per_model[labels[2]] = per_model.get(labels[2], 0.0) + value
    else:
        for family in (E2E, TTFT):
            hists = snapshot.series.get(family)
            if hists:
                for labels, h in hists.items():
                    if isinstance(h, Histogram):
                        per_model[labels[2]] = per_model.get(labels[2], 0.0) + h.count
                break
    if not per_model:
        return None
    return max(per_model.values()) if engine in ("triton", "trtllm") else sum(per_model.values())


__all__ = ["EndpointLatency", "QuantileTracker", "histogram_quantile", "merge_histograms", "windowed_delta"]
