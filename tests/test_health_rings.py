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
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from health_fixtures import health_config
from infrapulse.health.readings import Readings
from infrapulse.health.rings import ColumnRing
from infrapulse.health.scoring import _scored, curve, report_json
from infrapulse.health.service import HealthService
from infrapulse.health.signals import SPARSE_COUNTERS, Measurement, counters_by_window
from infrapulse.rates import Rate
from infrapulse.sources.gnmi.columns import Column, Slots
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
    old, new = ReferenceReadings(WINDOWS, SPARSE_COUNTERS), Readings(WINDOWS, SPARSE_COUNTERS)
    xids: dict[tuple[str, ...], float] = {}
    now = 1000.0
    checked = 0
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
        store.publish("gnmi", "leaf0-twin", twin.snapshot, stale_after=math.inf)
        _node(store, rng, now, xids)
        old.update(store, counters)
        new.update(store, counters)
        for kind in WINDOWS:
            for family, keysets in KEYS.items():
                for keys in keysets:
                    expected = _rate_map(old.rates(family, keys, kind))
                    assert _rate_map(new.rates(family, keys, kind)) == expected, (family, keys, kind)
                    checked += sum(1 for _, r in expected if "None" not in r)
                for series in new.series(family):
                    assert repr(new.increase(series, kind)) == repr(old.increase(series, kind))
    assert new.rings, "the column path was not taken"
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
        service.readings = ReferenceReadings(
            {"window": service.config["window"], "event_window": service.config["event_window"],
             "link_window": service.config["link"]["window"],
             "link_baseline": service.config["link"]["baseline_window"]},
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
