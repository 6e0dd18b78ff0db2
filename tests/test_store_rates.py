"""Store snapshots, staleness, rendering, and reset/wrap/saturation-aware rates."""

from __future__ import annotations

import math

import pytest

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
