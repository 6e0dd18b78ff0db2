"""Windowed TTFT/ITL quantiles: histogram deltas, reset-aware (an engine restart is no spike)."""

from __future__ import annotations

import math

import pytest

from infrapulse.health.latency import QuantileTracker, histogram_quantile, merge_histograms
from infrapulse.sources.serving import normalize as norm
from infrapulse.sources.serving.source import PROCESS_START
from infrapulse.store import Histogram, Snapshot, Store

INF = math.inf
BOUNDS = (0.1, 0.5, 1.0, 5.0)
KEY = ("ep", "vllm", "m") + ("",) * len(norm.KEEPABLE)


def hist(counts, total_sum, bounds=BOUNDS) -> Histogram:
    """Histogram from non-cumulative counts per bucket (last one is +Inf)."""
    running, buckets = 0.0, []
    for bound, c in zip(tuple(bounds) + (INF,), counts):
        running += c
        buckets.append((bound, running))
    return Histogram(tuple(buckets), total_sum, running)


def snap(ts: float, ttft: Histogram, requests: float | None = None) -> Snapshot:
    s = Snapshot(timestamp=ts)
    s.add(norm.TTFT, KEY, ttft)
    s.add(norm.ITL, KEY, ttft)
    if requests is not None:
        s.add(norm.REQUESTS, KEY[:3] + ("success",) + KEY[3:], requests)
    return s


def test_histogram_quantile_matches_prometheus_interpolation():
    buckets = [(0.1, 50.0), (0.5, 90.0), (1.0, 100.0), (INF, 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.7, buckets) == pytest.approx(0.1 + 0.4 * 20 / 40)
    assert histogram_quantile(0.95, buckets) == pytest.approx(0.5 + 0.5 * 5 / 10)
    assert histogram_quantile(0.99, [(0.1, 1.0), (INF, 100.0)]) == 0.1  # +Inf bucket -> highest bound
    assert histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None


def test_quantiles_from_window_deltas():
    tracker = QuantileTracker(window=300)
    tracker.observe("ep", "vllm", snap(1000, hist([500, 0, 0, 0, 0], 20.0), 500))  # old, slow history...
    tracker.observe("ep", "vllm", snap(1010, hist([500, 0, 0, 100, 0], 250.0), 600))  # ...then 100 slow ones
    q = tracker.quantiles()["ep"]
    assert q["ttft"]["count"] == 100.0 and q["ttft"]["p50"] == pytest.approx(1.0 + 4.0 * 0.5)
    assert q["ttft"]["mean"] == pytest.approx(2.3)
    assert q["request_rate"] == pytest.approx(10.0)
    assert q["window"] == 10 and q["resets"] == 0 and q["engine"] == "vllm"


def test_engine_restart_inside_the_window_is_not_a_spike():
    tracker = QuantileTracker(window=300)
    # Before the restart: 10,000 fast requests accumulated.
    tracker.observe("ep", "vllm", snap(0, hist([10000, 0, 0, 0, 0], 500.0), 10000))
    tracker.observe("ep", "vllm", snap(10, hist([10100, 0, 0, 0, 0], 505.0), 10100))
    # Restart: counters start again from zero, and keep serving fast requests.
    tracker.observe("ep", "vllm", snap(20, hist([40, 0, 0, 0, 0], 2.0), 40))
    tracker.observe("ep", "vllm", snap(30, hist([90, 0, 0, 0, 0], 4.5), 90))
    q = tracker.quantiles()["ep"]
    assert q["resets"] == 1
    assert q["ttft"]["count"] == 100 + 40 + 50
    assert q["ttft"]["p99"] <= 0.1 and q["ttft"]["p50"] <= 0.1  # still fast: no spike
    assert q["request_rate"] == pytest.approx((100 + 40 + 50) / 30)
    # What a naive last-minus-first would have made of it: negative counts, nonsense quantiles.
    naive = hist([90 - 10000, 0, 0, 0, 0], 4.5 - 500.0)
    assert naive.count < 0


def test_restart_with_new_bucket_layout_keeps_only_what_came_after():
    tracker = QuantileTracker(window=300)
    tracker.observe("ep", "vllm", snap(0, hist([100, 0, 0, 0, 0], 5.0)))
    tracker.observe("ep", "vllm", snap(10, hist([150, 0, 0, 0, 0], 7.5)))
    tracker.observe("ep", "vllm", snap(20, hist([0, 10, 0, 0], 3.0, bounds=(0.05, 0.4, 2.0))))
    tracker.observe("ep", "vllm", snap(30, hist([0, 30, 0, 0], 9.0, bounds=(0.05, 0.4, 2.0))))
    q = tracker.quantiles()["ep"]
    assert q["ttft"]["count"] == 30 and q["ttft"]["p50"] == pytest.approx(0.05 + 0.35 * 0.5)


def test_process_start_time_change_marks_a_restart_even_when_counts_grew():
    tracker = QuantileTracker(window=300)
    tracker.observe("ep", "vllm", snap(0, hist([10, 0, 0, 0, 0], 0.5)), started=100.0)
    # Restarted and already served more than before: counts alone would not reveal it.
    tracker.observe("ep", "vllm", snap(60, hist([0, 0, 0, 20, 0], 60.0)), started=150.0)
    q = tracker.quantiles()["ep"]
    assert q["resets"] == 1 and q["ttft"]["count"] == 20


def test_window_argument_and_no_data_is_unknown():
    tracker = QuantileTracker(window=600)
    tracker.observe("ep", "vllm", snap(0, hist([10, 0, 0, 0, 0], 0.5)))
    tracker.observe("ep", "vllm", snap(100, hist([10, 0, 0, 10, 0], 30.5)))
    tracker.observe("ep", "vllm", snap(200, hist([20, 0, 0, 10, 0], 31.0)))
    assert tracker.quantiles(window=100)["ep"]["ttft"]["count"] == 10
    assert tracker.quantiles(window=100)["ep"]["ttft"]["p99"] <= 0.1
    assert tracker.quantiles()["ep"]["ttft"]["count"] == 20
    idle = QuantileTracker(window=60)
    idle.observe("ep", "vllm", snap(0, hist([5, 0, 0, 0, 0], 0.1)))
    idle.observe("ep", "vllm", snap(10, hist([5, 0, 0, 0, 0], 0.1)))
    assert idle.quantiles()["ep"]["ttft"] is None  # no requests: unknown, not "fast"


def _scrape(store: Store, endpoint: str, ts: float, ttft: Histogram | None, engine: str = "sglang",
            started: float | None = None) -> None:
    """What the serving source publishes: a successful scrape (endpoint_up 1, histograms, start
    time) or, with ttft None, a failed one (endpoint_up 0 only)."""
    s = Snapshot(timestamp=ts)
    s.add(norm.ENDPOINT_UP, (endpoint, engine), 0.0 if ttft is None else 1.0)
    if ttft is not None:
        s.add(norm.TTFT, (endpoint, engine, "m") + KEY[3:], ttft)
    if started is not None:
        s.add(PROCESS_START, (endpoint, engine), started)
    store.publish("serving", endpoint, s, 1e9)


def test_tracker_observes_the_serving_snapshots_in_the_store():
    store = Store()
    tracker = QuantileTracker(300)
    _scrape(store, "a", 0, hist([1, 0, 0, 0, 0], 0.05), started=100.0)
    tracker.observe_store(store)
    tracker.observe_store(store)  # the same snapshot twice: one reading
    _scrape(store, "a", 5, None)  # a failed scrape in between does not break the chain
    tracker.observe_store(store)
    _scrape(store, "a", 10, hist([3, 0, 0, 0, 0], 0.15), started=100.0)
    tracker.observe_store(store)
    q = tracker.quantiles()["a"]
    assert q["engine"] == "sglang" and q["window"] == 10 and q["resets"] == 0
    assert q["ttft"]["count"] == 2 and q["request_rate"] == pytest.approx(0.2)
    # The published process start time moved: a restart although the counts grew.
    _scrape(store, "a", 20, hist([0, 0, 0, 9, 0], 30.0), started=115.0)
    tracker.observe_store(store)
    q = tracker.quantiles()["a"]
    assert q["resets"] == 1 and q["ttft"]["count"] == 2 + 9
    latency = tracker.endpoint_latency(300)["a"]
    assert latency.ttft[0.95] == pytest.approx(q["ttft"]["p95"]) and latency.resets == 1
    assert latency.as_json()["ttft_seconds"]["p95"] == round(q["ttft"]["p95"], 6)
    # Other sources are not serving endpoints; a removed endpoint is forgotten.
    store.publish("gnmi", "a", Snapshot(timestamp=20), 1e9)
    store.remove("serving", "a")
    tracker.observe_store(store)
    assert tracker.quantiles() == {} and QuantileTracker(300).quantiles() == {}


def test_merge_histograms_on_common_bounds():
    merged = merge_histograms([hist([1, 2, 0, 0, 0], 1.0), hist([1, 1, 0], 2.0, bounds=(0.1, 1.0))])
    assert merged.buckets == ((0.1, 2.0), (1.0, 5.0), (INF, 5.0)) and merged.count == 5.0
