"""The column rings (health/rings.py) against the per-series readings they replace.

tests/readings_reference.py is the Readings of 635d75d (one deque of points per series). Both are
fed the same store sequence: gNMI columns whose counters advance by fractional amounts (so the
summation order shows), reset, jump down from near 2^32 (a wrap: without a known width it is a
reset, in both), turn NaN, appear, disappear and come back, slots compacted (renumbered), a whole
switch leaving and returning, health passes closer together than the ring spacing, duplicate
label tuples under two targets, and a node instance with plain-dict series and a sparse counter.
Every windowed increase must be equal to the bit, and the health report identical.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from health_fixtures import health_config
from infrapulse.columns import Column, Slots
from infrapulse.health.readings import RateLists, Readings, rate_lists_of
from infrapulse.health.rings import ColumnRing
from infrapulse.health.scoring import (
    Detractor,
    DetractorPart,
    Report,
    TargetScore,
    _detractor_sentence,
    _scored,
    curve,
    evaluate,
    report_json,
    top_detractors,
)
from infrapulse.health.service import HealthService
from infrapulse.health.signals import SPARSE_COUNTERS, Measurement, counters_by_window
from infrapulse.health.signals.base import at_most_one, paired, ratio, ratios
from infrapulse.rates import Rate
from infrapulse.store import Snapshot, Store
from readings_reference import Readings as ReferenceReadings

QUEUES = "infrapulse_switch_queue_transmitted_packets_total"
ECN = "infrapulse_switch_queue_ecn_marked_packets_total"
PAUSE = "infrapulse_switch_pfc_pause_duration_seconds_total"
CARRIER = "infrapulse_switch_interface_carrier_transitions_total"
XID = "infrapulse_gpu_xid_errors_total"
NIC = "infrapulse_nic_pfc_pause_frames_total"
WINDOWS = {"window": 60.0, "event_window": 300.0, "link_window": 600.0, "link_baseline": 3600.0}


def _labels(family: str, switch: str, port: int, extra: int) -> tuple[str, ...]:
    if family == CARRIER:
        return (switch, f"Ethernet{port}")
    if family == PAUSE:
        return (switch, f"Ethernet{port}", str(extra), "rx" if extra % 2 else "tx")
    return (switch, f"Ethernet{port}", str(extra))


class FakeSwitch:
    """One switch's columns over one Slots, as the gNMI source holds them."""

    def __init__(self, name: str, rng: random.Random) -> None:
        self.name, self.rng = name, rng
        self.slots = Slots()
        self.snapshot = Snapshot(0.0)
        self.columns: dict[str, Column] = {}
        for family in (QUEUES, ECN, PAUSE, CARRIER):
            self.columns[family] = self.snapshot.series[family] = self.slots.column()  # type: ignore
            for port in range(3):
                for extra in range(2):
                    self.add(family, _labels(family, name, port, extra))

    def add(self, family: str, labels: tuple[str, ...]) -> None:
        column = self.columns[family]
        if labels not in column and labels not in column.unset:
            column.acquire(labels)
            column[labels] = float(self.rng.randrange(0, 1000))

    def step(self) -> None:
        rng = self.rng
        for family, column in self.columns.items():
            for labels in list(column):
                roll = rng.random()
                old = column[labels]
                if roll < 0.05:
                    column[labels] = float(rng.randrange(0, 10))  # reset
                elif roll < 0.07:
                    column[labels] = 2.0**32 - 5 if old < 2**31 else 3.0  # a wrap, seen as a reset
                elif roll < 0.08:
                    column[labels] = math.nan
                elif roll < 0.10:
                    column.release(labels)  # the series goes
                elif math.isnan(old):
                    column[labels] = float(rng.randrange(0, 100))
                else:
                    column[labels] = old + rng.choice((0.0, 0.1, 0.3, 1.7, 1e-9, 12345.678))
            if rng.random() < 0.3:  # a series appears (or comes back)
                self.add(family, _labels(family, self.name, rng.randrange(5), rng.randrange(3)))
        if rng.random() < 0.15:
            self.slots.compact(self.columns.values())  # slot numbers change


def _node(store: Store, rng: random.Random, now: float, xids: dict[tuple[str, ...], float]) -> None:
    snap = Snapshot(now)
    for iface in ("eth0", "eth1"):
        for prio in ("3", "4"):
            snap.add(NIC, (iface, prio, "rx"), float(int(now) % 997 + rng.randrange(3)))
    if rng.random() < 0.2:  # an XID appears mid-life: a sparse counter born from zero
        key = ("0", str(rng.choice((13, 79, 31))))
        xids[key] = xids.get(key, 0.0) + 1.0
    for key, value in xids.items():
        snap.add(XID, key, value)
    store.publish("ethtool" if rng.random() < 0.5 else "nvml", "localhost", snap, stale_after=math.inf)


class _Reference(ReferenceReadings):
    """The reference readings and `rate_lists`, which is `rates()` as lists by definition."""

    def rate_lists(self, family: str, keys: tuple[str, ...], kind: str = "window") -> RateLists:
        return rate_lists_of(self.rates(family, keys, kind))


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)


def _rate_map(rates: dict[tuple[str, ...], Rate]) -> list[tuple[tuple[str, ...], str]]:
    return [(k, repr(r)) for k, r in rates.items()]  # repr: NaN equals NaN, order kept


KEYS = {QUEUES: [("switch", "interface", "queue"), ("switch",), ("interface", "nope")],
        ECN: [("switch", "interface", "queue")],
        PAUSE: [("switch", "interface", "priority", "direction"), ("switch", "interface")],
        CARRIER: [("switch", "interface")], NIC: [("interface", "priority", "direction")],
        XID: [("gpu", "xid")]}


@pytest.mark.parametrize("seed", range(12))
def test_rings_equal_the_per_series_readings(seed: int) -> None:
    rng = random.Random(seed)
    counters = counters_by_window()
    store = Store()
    switches = [FakeSwitch(f"leaf{i}", rng) for i in range(3)]
    twin = FakeSwitch("leaf0", random.Random(seed + 100))  # the same label tuples, another target
    twin_rng = random.Random(seed + 200)
    old, new = ReferenceReadings(WINDOWS, SPARSE_COUNTERS), Readings(WINDOWS, SPARSE_COUNTERS)
    xids: dict[tuple[str, ...], float] = {}
    now = 1000.0
    checked = 0
    from_rings = Counter[bool]()
    for _ in range(70):
        now += rng.choice((0.5, 1.0, 1.5, 7.0, 15.0, 60.0, 61.0))  # some closer than the spacing
        for sw in switches:
            sw.step()
            sw.snapshot.timestamp = now
            if rng.random() < 0.04:
                store.remove("gnmi", sw.name)  # the switch leaves for a pass
            else:
                store.publish("gnmi", sw.name, sw.snapshot, stale_after=math.inf)
        twin.step()
        twin.snapshot.timestamp = now
        if twin_rng.random() < 0.5:  # the twin comes and goes: rate_lists from the rings only without it
            store.publish("gnmi", "leaf0-twin", twin.snapshot, stale_after=math.inf)
        else:
            store.remove("gnmi", "leaf0-twin")
        _node(store, rng, now, xids)
        old.update(store, counters)
        new.update(store, counters)
        for kind in WINDOWS:
            for family, keysets in KEYS.items():
                for keys in keysets:
                    expected = _rate_map(old.rates(family, keys, kind))
                    assert _rate_map(new.rates(family, keys, kind)) == expected, (family, keys, kind)
                    lists = new.rate_lists(family, keys, kind)
                    assert repr(lists) == repr(rate_lists_of(old.rates(family, keys, kind)))
                    if family in (QUEUES, ECN, PAUSE, CARRIER) and keys[-1] != "nope":
                        from_rings[new._ring_lists(family, keys, kind) is not None] += 1
                    checked += sum(1 for _, r in expected if "None" not in r)
                for series in new.series(family):
                    assert repr(new.increase(series, kind)) == repr(old.increase(series, kind))
    assert new.rings, "the column path was not taken"
    assert from_rings[True] and from_rings[False], from_rings  # rate_lists took both ways
    assert checked > 500  # most comparisons compared rates, not two empty dicts


def test_a_ring_keeps_8_bytes_per_series_and_observation() -> None:
    slots = Slots()
    column = slots.column()
    for i in range(1000):
        column.acquire(("s", str(i), "0"))
        column[("s", str(i), "0")] = float(i)
    ring = ColumnRing()
    for t in range(100):
        ring.follow(column)
        ring.observe(column, 10.0 * t, 60.0, 48)
    # one point at or before the window start (t-60) and every point after it: 7 rows
    assert len(ring.rows) == 7 and ring.retained_bytes() == 7 * 8 * 1000
    rate = ring.rates()[5]
    assert rate == Rate(0.0, 0.0, 60.0, False, 0)


def _fabric_service(reference: bool) -> tuple[HealthService, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import health_pass

    fabric = health_pass.Fabric(2, ports=4, seed=7)
    service = HealthService(fabric.store, health_config(), "node000", 15.0)
    if reference:
        service.readings = _Reference(
            {"window": service.config.window, "event_window": service.config.event_window,
             "link_window": service.config.link.window,
             "link_baseline": service.config.link.baseline_window},
            SPARSE_COUNTERS)  # type: ignore[assignment]
    return service, fabric


def test_health_report_identical_on_a_simulated_fabric() -> None:
    """The whole pass (signals, scores, detractors) over the gNMI source's own columns."""
    (old, old_fabric), (new, new_fabric) = _fabric_service(True), _fabric_service(False)
    now = 10_000.0
    for i in range(30):
        now += 15.0
        for fabric in (old_fabric, new_fabric):
            fabric.advance(now)
        a, b = old.tick(now), new.tick(now)
        assert _same(report_json(b), report_json(a)), f"pass {i}"
    assert b.score is not None and len(b.detractors) > 0  # a report that says something
    # the switch queues' lists came straight from the rings
    assert new.readings._ring_lists(ECN, ("switch", "interface", "queue"), "window") is not None


# -- the ranking of targets, against the sort it replaces -----------------------------------------

def _reference_scored(values: list[Measurement], good: float, bad: float) -> list[tuple[str, float, float]]:
    """scoring.evaluate's ranking as of 635d75d: curve, round, sort on a key function."""
    scored = [(m, round(curve(m.value, good, bad), 2)) for m in values]
    toward_bad = 1.0 if bad >= good else -1.0
    scored.sort(key=lambda t: (t[1], -toward_bad * t[0].value, t[0].target))
    return [(m.target, m.value, s) for m, s in scored]


VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.001, 0.05, 1.0]))


NAMES = st.one_of(st.sampled_from(["a", "b", "c"]), st.text(max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NAMES, VALUES), max_size=30),
       st.sampled_from([(0.001, 0.05), (1.0, 0.0), (0.0, 1.0), (5.0, 5.0)]))
def test_targets_ranked_as_before(targets: list[tuple[str, float]], thresholds: tuple[float, float]) -> None:
    good, bad = thresholds
    values = [Measurement(name, value, labels={"i": str(i)}) for i, (name, value) in enumerate(targets)]
    ranked = _scored(values, good, bad)
    got = [(t.measurement.target, t.measurement.value, t.score) for t in ranked]
    assert repr(got) == repr(_reference_scored(values, good, bad))  # repr: NaN equals NaN, bit for bit
    # ties keep the measured order: the labels say which measurement came first
    expected_order = sorted(range(len(values)), key=lambda i: (
        round(curve(values[i].value, good, bad), 2),
        -(1.0 if bad >= good else -1.0) * values[i].value, values[i].target))
    if not any(math.isnan(m.value) for m in values):
        assert [t.measurement.labels["i"] for t in ranked] == [str(i) for i in expected_order]


def test_measurement_equality_ignores_labels_as_before() -> None:
    a = Measurement("leaf01 Ethernet1", 0.5, "FCS", labels={"switch": "leaf01"})
    b = Measurement("leaf01 Ethernet1", 0.5, "FCS")
    assert a == b and hash(a) == hash(b) and not a != b and len({a, b}) == 1
    assert a != Measurement("leaf01 Ethernet1", 0.5, "CRC") and b.labels == {}
    assert Measurement("x", 1.0).labels is not Measurement("x", 1.0).labels  # never a shared default
    assert a != ("leaf01 Ethernet1", 0.5, "FCS", {"switch": "leaf01"})  # only another Measurement


def test_target_names_are_kept_from_pass_to_pass_and_bounded_by_the_store() -> None:
    """A switch queue's name and label dict are built once and reused by the next passes; a
    naming no signal asks for in a pass is dropped, and one holding more targets than the store
    has series (queues that went away) starts afresh."""
    store = Store()
    snap = Snapshot(0.0)
    for queue in range(3):
        snap.add(QUEUES, ("leaf1", "Ethernet0", str(queue)), 1.0)
    store.publish("gnmi", "leaf1", snap, 1e9)
    readings = Readings(WINDOWS)
    readings.update(store, {"window": {QUEUES}})
    built: list[tuple[str, ...]] = []

    def name(k: tuple[str, ...]) -> str:
        built.append(k)
        return " ".join(k)

    def labels(k: tuple[str, ...]) -> dict[str, str]:
        return {"switch": k[0], "queue": k[2]}

    key = ("leaf1", "Ethernet0", "1")
    first = readings.target_names(name, labels)[key]
    assert first == ("leaf1 Ethernet0 1", {"switch": "leaf1", "queue": "1"})
    readings.end_pass()
    again = readings.target_names(name, labels)[key]
    assert again[1] is first[1] and built == [key]  # kept: not built a second time
    readings.end_pass()
    readings.end_pass()  # a pass that did not ask for this naming drops it
    assert readings.target_names(name, labels)[key][1] is not first[1] and built == [key, key]
    gone = readings.target_names(name, labels)
    for port in range(3 + 1024):  # more than the store's 3 series + 1024: some went away
        gone[("leaf1", f"Ethernet{port}", "0")]
    readings.end_pass()
    assert len(readings.target_names(name, labels)) == 0


def test_ranked_targets_read_as_the_list_of_targets() -> None:
    """`_scored` makes each TargetScore when read; what is read is the list it stands for."""
    ranked = _scored([Measurement(n, v) for n, v in (("b", 0.2), ("a", 0.0), ("c", 0.9))], 0.1, 0.5)
    as_list = list(ranked)
    assert [(t.measurement.target, t.score) for t in as_list] == [("c", 0.0), ("b", 75.0), ("a", 100.0)]
    assert all(isinstance(t, TargetScore) for t in as_list)
    assert len(ranked) == 3 and ranked[0] == as_list[0] and ranked[-1] == as_list[-1]
    assert ranked[:2] == as_list[:2] and ranked[1:] == as_list[1:] and ranked[5:] == []
    assert ranked == as_list and as_list == ranked and ranked != as_list[:2] and ranked != tuple(as_list)
    assert as_list[1] in ranked and ranked.index(as_list[2]) == 2
    with pytest.raises(IndexError):
        ranked[3]


# -- the bulk forms of the per-target rules ---------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(VALUES, VALUES), max_size=20))
def test_bulk_ratio_and_cap_are_the_per_target_rules(pairs: list[tuple[float, float]]) -> None:
    parts, wholes = [p for p, _ in pairs], [w for _, w in pairs]
    assert repr(ratios(parts, wholes)) == repr([ratio(p, w) for p, w in pairs])  # -0.0 and NaN too
    assert repr(at_most_one(parts)) == repr([min(p, 1.0) for p in parts])


def test_paired_keys_are_the_dict_lookup() -> None:
    a = RateLists([("x",), ("y",), ("z",)], [0.0] * 3, [1.0, 2.0, 3.0])
    b = RateLists([("z",), ("x",), ("w",)], [0.0] * 3, [30.0, 10.0, 40.0])
    assert paired(a, b) == ([("x",), ("z",)], [1.0, 3.0], [10.0, 30.0])
    assert paired(a, RateLists(list(a.keys), [], [4.0, 5.0, 6.0])) == (a.keys, a.increase, [4.0, 5.0, 6.0])


# -- the detractors, against the ranking they replace ---------------------------------------------

def _reference_detractors(report: Report, count: int) -> list[Detractor]:
    """scoring.top_detractors as of 0d3cac9: a DetractorPart per unhealthy target, a key function."""
    import heapq

    def part_order(item: tuple[bool, DetractorPart]) -> tuple[int, float, str]:
        firing, part = item
        return (0 if firing else 1, -part.impact, part.result.signal.name)

    known = [c for c in report.components.values() if c.score is not None and c.weight > 0]
    total = sum(c.weight for c in known)
    if total <= 0:
        return []
    by_target: dict[str, list[tuple[bool, DetractorPart]]] = {}
    for comp in known:
        signals = [s for s in comp.signals if s.known]
        weight_sum = sum(s.settings.weight for s in signals)
        for result in signals:
            share = (comp.weight / total) * (result.settings.weight / weight_sum)
            for target in result.targets:
                if target.score >= 100.0:
                    break
                firing = result.settings.critical and target.score <= 0.0
                part = DetractorPart(comp.name, result, target, share * (100.0 - target.score))
                by_target.setdefault(target.measurement.target, []).append((firing, part))

    def rank_key(item: tuple[str, list[tuple[bool, DetractorPart]]]) -> tuple[int, float, float, str, str]:
        name, parts = item
        firing, first = min(parts, key=part_order)
        impact = sum(p.impact for _, p in parts)
        return (0 if firing else 1, -impact, first.target.score, first.result.signal.name, name)

    out = []
    for rank, (_, parts) in enumerate(heapq.nsmallest(count, by_target.items(), key=rank_key), start=1):
        ordered = [p for _, p in sorted(parts, key=part_order)]
        first, others = ordered[0], ordered[1:]
        out.append(Detractor(rank, first.component, first.result, first.target,
                             sum(p.impact for p in ordered), _detractor_sentence(first, others), others))
    return out


# Signals of three components, one critical, two pairs measuring the same targets (a switch queue
# and its uplink view): targets named alike across signals are one detractor.
DETRACTOR_SIGNALS = ("ecn_marked_ratio", "queue_drop_ratio", "pfc_pause_ratio", "uplink_ecn_marked_ratio",
                     "uplink_pfc_pause_ratio")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(DETRACTOR_SIGNALS), st.sampled_from(["q1", "q2", "q3", "q4"]),
                          st.sampled_from([0.0, 0.0005, 0.002, 0.01, 0.05, 0.1, 0.3, 1.0])), max_size=24),
       st.integers(1, 6))
def test_detractors_ranked_as_before(rows: list[tuple[str, str, float]], count: int) -> None:
    by_signal: dict[str, list[Measurement]] = {name: [] for name in DETRACTOR_SIGNALS}
    for name, target, value in rows:
        by_signal[name].append(Measurement(target, value, labels={"switch": "leaf1"}))
    report = evaluate(dict(by_signal), health_config(), timestamp=0.0)

    def told(detractors: list[Detractor]) -> list[tuple[Any, ...]]:
        return [(d.rank, d.component, d.signals, d.target, repr(d.impact), d.sentence) for d in detractors]

    assert told(top_detractors(report, count)) == told(_reference_detractors(report, count))
