"""Store snapshots, staleness, rendering, and reset/wrap/saturation-aware rates."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import render_store, samples_of, value
from infrapulse import catalog
from infrapulse.rates import CounterHistory, counter_increase
from infrapulse.store import Histogram, Snapshot, Store

T_COUNTER = catalog.declare("infrapulse_test_things_total", catalog.COUNTER, "Things.", ("device",),
                            source="test")
T_GAUGE = catalog.declare("infrapulse_test_level", catalog.GAUGE, "Level.", ("device",), source="test",
                          optional_labels=("pod",))
T_HIST = catalog.declare("infrapulse_test_latency_seconds", catalog.HISTOGRAM, "Latency.", ("endpoint",),
                         unit="seconds", source="test")
T_INFO = catalog.declare("infrapulse_test_info", catalog.INFO, "Info.", ("name",), source="test")


def test_render_all_types():
    store = Store()
    snap = Snapshot()
    snap.add(T_COUNTER, ("mlx5_0",), 42.0)
    snap.add(T_GAUGE, ("mlx5_0", ""), 1.5)
    snap.add(T_GAUGE, ("mlx5_1", "p1"), 2.5)
    snap.add(T_HIST, ("vllm-a",), Histogram(((0.1, 3.0), (1.0, 5.0), (math.inf, 6.0)), 4.25, 6.0))
    snap.add(T_INFO, ("x",), 1.0)
    store.publish("test", "t1", snap, stale_after=60)
    values = render_store(store)
    assert value(values, "infrapulse_test_things_total", device="mlx5_0") == 42.0
    assert value(values, "infrapulse_test_level", device="mlx5_0") == 1.5  # empty optional label dropped
    assert value(values, "infrapulse_test_level", device="mlx5_1", pod="p1") == 2.5
    assert value(values, "infrapulse_test_latency_seconds_bucket", endpoint="vllm-a", le="0.1") == 3.0
    assert value(values, "infrapulse_test_latency_seconds_bucket", endpoint="vllm-a", le="+Inf") == 6.0
    assert value(values, "infrapulse_test_latency_seconds_count", endpoint="vllm-a") == 6.0
    assert value(values, "infrapulse_test_latency_seconds_sum", endpoint="vllm-a") == 4.25
    assert value(values, "infrapulse_test_info", name="x") == 1.0
    assert value(values, "infrapulse_exporter_series", source="test") == 5


def test_same_family_from_two_targets_is_merged():
    store = Store()
    for target, v in (("a", 1.0), ("b", 2.0)):
        snap = Snapshot()
        snap.add(T_COUNTER, (target,), v)
        store.publish("test", target, snap, stale_after=60)
    assert samples_of(render_store(store), "infrapulse_test_things_total") == {
        frozenset({("device", "a")}): 1.0, frozenset({("device", "b")}): 2.0}


def test_stale_snapshots_disappear_and_status_is_exported():
    store = Store()
    snap = Snapshot(timestamp=1000.0)
    snap.add(T_COUNTER, ("old",), 1.0)
    store.publish("test", "old", snap, stale_after=30)
    store.record_failure("test", "old", "timeout", "took too long")
    store.expire(now=1029.0)
    assert store.snapshot("test", "old") is not None
    store.expire(now=1031.0)
    assert store.snapshot("test", "old") is None
    values = render_store(store)
    assert samples_of(values, "infrapulse_test_things_total") == {}
    assert value(values, "infrapulse_source_up", source="test", target="old") == 0
    assert value(values, "infrapulse_source_status_info", source="test", target="old", reason="timeout") == 1
    assert value(values, "infrapulse_source_errors_total", source="test", target="old") == 1


def test_partial_success_reason():
    store = Store()
    store.record_success("test", "dev", 0.01, ["dev/counters: unreadable"])
    st = store.status[("test", "dev")]
    assert st.up and st.reason == "partial" and "unreadable" in st.message


@pytest.mark.parametrize("prev,cur,width,sat,expected", [
    (10, 15, None, False, (5, False)),
    (15, 3, None, False, (3, False)),                 # reset
    (2**32 - 10, 5, 32, False, (15, False)),          # 32-bit wrap
    (100, 5, 32, False, (5, False)),                  # small value drop on a 32-bit counter: reset
    (65530, 65535, 16, True, (5, True)),              # saturated legacy counter
    (65535, 65535, 16, True, (0, True)),
])
def test_counter_increase(prev, cur, width, sat, expected):
    assert counter_increase(prev, cur, width, sat) == expected


def test_history_rate_with_reset_and_window():
    h = CounterHistory(window=60)
    for t, v in [(0, 0), (10, 100), (20, 200), (30, 50), (40, 150)]:  # reset at t=30
        h.observe("k", t, v)
    r = h.rate("k")
    assert r.increase == 100 + 100 + 50 + 100
    assert r.seconds == 40
    assert r.per_second == pytest.approx(350 / 40)
    assert r.resets == 1
    for t in range(50, 200, 10):
        h.observe("k", t, 150 + (t - 40) * 2)
    r = h.rate("k")
    assert r.seconds <= 70 and r.per_second == pytest.approx(2.0)


def test_history_forgets_dead_series():
    h = CounterHistory(window=60)
    h.observe("a", 0, 1)
    h.observe("b", 0, 1)
    h.forget_missing({"a"})
    assert len(h) == 1 and h.rate("a") is None


def _reference_rate(points: list[tuple[float, float]], width_bits: int | None, saturates: bool):
    """CounterHistory.rate before its fast path: the loop over every pair of readings."""
    increase, saturated, resets = 0.0, False, 0
    for (_, prev), (_, cur) in zip(points, points[1:]):
        delta, at_max = counter_increase(prev, cur, width_bits, saturates)
        if cur < prev and delta == cur:
            resets += 1
        increase += delta
        saturated = saturated or at_max
    seconds = points[-1][0] - points[0][0]
    return None if seconds <= 0 else (increase / seconds, increase, seconds, saturated, resets)


readings = st.one_of(st.integers(0, 2**64), st.integers(2**32 - 50, 2**32 + 50), st.integers(-5, 300),
                     st.floats(allow_nan=True, allow_infinity=True),
                     # each width's limit, and an int and a float above 2**53 that compare apart
                     # but subtract to 0.0
                     st.sampled_from([254, 255, 2**16 - 1, 2**32 - 1, 2**54 + 3, float(2**54 + 4)]))


@settings(max_examples=500, deadline=None)
@example([0, float(2**54 + 4), 2**54 + 3, 2**54 + 10], None, False, "any")  # a reset float - int hides
@example([0, 200, 255, 255], 8, True, "any")  # saturated at exactly the limit
@given(st.lists(readings, min_size=2, max_size=14), st.sampled_from([None, 8, 16, 32, 64]), st.booleans(),
       st.sampled_from(["any", "sorted"]))
def test_history_rate_is_the_pairwise_loop_to_the_bit(values, width_bits, saturates, order):
    """The fast path (a window in which the counter only rose) and the loop (resets, wraps, NaN)
    give exactly what the loop over every pair of readings gave: same floats, flags and counts."""
    if order == "sorted":  # the common case, through the fast path: limits hit exactly, ties
        values = sorted(v for v in values if v == v)
        if len(values) < 2:
            return
    history = CounterHistory(window=1e9)
    points = [(float(t), v) for t, v in enumerate(values)]
    for t, v in points:
        history.observe("k", t, v)
    got = history.rate("k", width_bits, saturates)
    want = _reference_rate(points, width_bits, saturates)
    assert repr(None if got is None else tuple(got)) == repr(want)
