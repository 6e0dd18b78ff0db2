"""What every signal is made of: `Signal`, `Measurement`, `Context`, units and the helpers the
component modules share (windowed increases and latest values keyed by labels, target names).

A signal measures one value per target (a switch queue, a NIC priority, an RDMA port, a GPU,
a serving endpoint). `scoring.py` turns each value into a 0-100 sub-score between the
signal's good and bad thresholds; the signal's score is that of its worst target.

A target with no data is simply absent (unknown), never reported as healthy. Signals that
read event counters whose series only appear once an event happened (XID counts) treat a
series that appears mid-life as having started from zero, so a first XID is not missed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import NamedTuple

from ...rates import Rate
from ..latency import EndpointLatency
from ..readings import RateLists, Readings, TargetNames


class _MeasurementFields(NamedTuple):
    target: str  # human name: "leaf03 Ethernet12 queue 3", "mlx5_0 port 1", "GPU 3", "endpoint llama"
    value: float
    note: str  # extra context for the sentence: "XID 79", "state DOWN", "SLO 1.5 s"
    labels: dict[str, str]


class Measurement(_MeasurementFields):
    """One target's value for one signal. Immutable; equal (and hashed) by target, value and note,
    not labels. A tuple rather than a dataclass: a fabric pass makes one per switch queue and port
    (tens of thousands), and a tuple is built about twice as fast."""

    __slots__ = ()

    def __new__(cls, target: str, value: float, note: str = "",
                labels: dict[str, str] | None = None) -> Measurement:
        return tuple.__new__(cls, (target, value, note, {} if labels is None else labels))

    def __eq__(self, other: object) -> bool:  # never equal to a plain tuple
        return other.__class__ is self.__class__ and self[:3] == other[:3]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self[:3])


# Measurement(*fields) without a Python-level call (all four fields; labels may be a dict kept
# from pass to pass, Readings.target_names): the hot loops build one per switch queue and port.
measurement: Callable[[tuple[str, float, str, dict[str, str]]], Measurement] = partial(
    tuple.__new__, Measurement)
_name_of, _labels_of = itemgetter(0), itemgetter(1)


def measurements(names: TargetNames, keys: list[tuple[str, ...]], values: Iterable[float],
                 notes: Iterable[str]) -> list[Measurement]:
    """One Measurement per key, named and labelled by `names`, with its value and note: built
    in C, no Python-level call per switch queue or port."""
    found = list(map(names.__getitem__, keys))
    return list(map(measurement, zip(map(_name_of, found), values, notes, map(_labels_of, found))))


@dataclass
class Context:
    readings: Readings
    hostname: str = ""
    latency: dict[str, EndpointLatency] = field(default_factory=dict)
    slo: dict[str, float] = field(default_factory=lambda: {"ttft": 1.5, "itl": 0.05})
    # Measurements of signals already measured in this pass (topology reuses the network ones).
    results: dict[str, list[Measurement] | None] = field(default_factory=dict)
    pre_fec_ber_floor: float = 1e-9  # health.link.pre_fec_ber_floor


# Units decide how values and thresholds are written in sentences.
RATIO, PER_SECOND, COUNT, FLAG, SECONDS, FACTOR = "ratio", "per_second", "count", "flag", "seconds", "factor"


@dataclass(frozen=True)
class Signal:
    name: str
    component: str
    title: str
    formula: str  # for docs/health.md and the API
    unit: str
    window: str  # "window", "event_window", "link_window" or "instant"
    good: float
    bad: float
    weight: float
    phrase: str  # "{value} of packets ECN-marked": what the sentence says about a target
    hint: str  # what a person can do about it
    measure: Callable[[Context], list[Measurement] | None]  # None: does not apply here
    families: tuple[str, ...]
    sources: tuple[str, ...]  # sources that provide it: the signal applies when one of them runs
    counters: tuple[str, ...] = ()  # families read as windowed increases
    critical: bool = False
    # A latency objective (TTFT/ITL p95): past `good` the status is at best degraded, at or past
    # `bad` it caps its component as a critical signal would, but never the overall score.
    slo: bool = False
    thresholds_from: str = ""  # reuse another signal's configured thresholds by default
    requires_all_sources: bool = False
    # Labels whose values are members of one problem (a probe's message sizes): the targets that
    # differ only in them form one detractor, led by the worst member, so one regression over
    # eight sizes does not crowd distinct problems out of the top detractors.
    group_by: tuple[str, ...] = ()
    group_noun: str = "targets"
    member_text: Callable[[dict[str, str]], str] | None = None  # how a member is named in the sentence

    def applicable(self, present: set[str]) -> bool:
        if self.requires_all_sources:
            return all(any(s in present for s in group.split("|")) for group in self.sources)
        return any(s in present for s in self.sources)


# -- small helpers -----------------------------------------------------------------------------

def add_rates(a: Rate | None, b: Rate) -> Rate:
    """Two windowed increases as one (a sum over labels or families)."""
    if a is None:
        return b
    return Rate(a.per_second + b.per_second, a.increase + b.increase, max(a.seconds, b.seconds),
                a.saturated or b.saturated, a.resets + b.resets)


def rates_by(ctx: Context, family: str, keys: tuple[str, ...], kind: str = "window",
             where: Callable[[dict[str, str]], bool] | None = None) -> dict[tuple[str, ...], Rate]:
    """Windowed increases of a counter family, summed per `keys` (e.g. over `reason`)."""
    if where is None:
        return ctx.readings.rates(family, keys, kind)
    out: dict[tuple[str, ...], Rate] = {}
    for series in ctx.readings.series(family):
        if where is not None and not where(series.labels):
            continue
        rate = ctx.readings.increase(series, kind)
        if rate is None:
            continue
        key = tuple(series.labels.get(k, "") for k in keys)
        out[key] = add_rates(out.get(key), rate)
    return out


def gauges_by(ctx: Context, family: str, keys: tuple[str, ...],
              combine: Callable[[float, float], float] = max) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for series in ctx.readings.series(family):
        if not isinstance(series.value, int | float) or math.isnan(series.value):
            continue
        key = tuple(series.labels.get(k, "") for k in keys)
        out[key] = combine(out[key], float(series.value)) if key in out else float(series.value)
    return out


def present_keys(ctx: Context, family: str, keys: tuple[str, ...]) -> set[tuple[str, ...]]:
    store = ctx.readings.store
    if store is None:
        return set()
    names = ctx.readings.label_names(family)
    if tuple(names[:len(keys)]) == keys:  # the common case: keys are the leading labels
        leading = itemgetter(slice(0, len(keys)))
        out: set[tuple[str, ...]] = set()
        for _, snap in store.snapshots():
            series = snap.series.get(family)
            if series:
                out.update(map(leading, series))
        return out
    return {tuple(s.labels.get(k, "") for k in keys) for s in ctx.readings.series(family)}


@dataclass(frozen=True)
class RdmaPort:
    """What infrapulse_rdma_port_info says about one RDMA port."""

    device: str
    port: str
    link_layer: str  # "InfiniBand", "Ethernet" (RoCE) or "" when not reported
    netdev: str  # the RoCE port's netdev ("" on InfiniBand)

    @property
    def roce(self) -> bool:
        return self.link_layer == "Ethernet"


def rdma_ports(ctx: Context) -> dict[tuple[str, str], RdmaPort]:
    """Every RDMA port the infiniband source describes, by (device, port)."""
    out = {}
    for s in ctx.readings.series("infrapulse_rdma_port_info"):
        key = (s.labels.get("device", ""), s.labels.get("port", ""))
        out[key] = RdmaPort(key[0], key[1], s.labels.get("link_layer", ""), s.labels.get("netdev", ""))
    return out


def label_maker(keys: tuple[str, ...]) -> Callable[[tuple[str, ...]], dict[str, str]]:
    """`dict(zip(keys, k))`, built as a dict display for the common widths: a fabric pass labels
    one measurement per switch queue and port, and the display is about twice as fast."""
    if len(keys) == 2:
        a, b = keys
        return lambda k: {a: k[0], b: k[1]}
    if len(keys) == 3:
        a, b, c = keys
        return lambda k: {a: k[0], b: k[1], c: k[2]}
    if len(keys) == 4:
        a, b, c, d = keys
        return lambda k: {a: k[0], b: k[1], c: k[2], d: k[3]}
    return lambda k: dict(zip(keys, k))


def ratio(part: float, whole: float) -> float:
    """part / whole, 0 when nothing happened; never above 1 even if counters disagree."""
    if whole <= 0:
        return 0.0 if part <= 0 else 1.0
    return min(part / whole, 1.0)


def ratios(parts: Iterable[float], wholes: Iterable[float]) -> list[float]:
    """`ratio` of each pair, its rule written out: a call per switch queue costs more than it."""
    return [(0.0 if p <= 0 else 1.0) if w <= 0 else (1.0 if (r := p / w) > 1.0 else r)
            for p, w in zip(parts, wholes)]


def at_most_one(values: list[float]) -> list[float]:
    """`min(v, 1.0)` of each value; the list itself when none is above 1 (the common case,
    one C-level `max`: a NaN is never above, and `min` keeps it too)."""
    if not values or max(values) <= 1.0:
        return values
    return [1.0 if v > 1.0 else v for v in values]


def paired(a: RateLists, b: RateLists) -> tuple[list[tuple[str, ...]], list[float], list[float]]:
    """The keys of `a` that `b` has too, in `a`'s order, with the increase of each in both."""
    if a.keys == b.keys:  # the same queues in both families: a fabric's case
        return a.keys, a.increase, b.increase
    at = dict(zip(b.keys, b.increase))
    both = [i for i, k in enumerate(a.keys) if k in at]
    keys = [a.keys[i] for i in both]
    return keys, [a.increase[i] for i in both], [at[k] for k in keys]


SWQ = ("switch", "interface", "queue")
SWP = ("switch", "interface", "priority", "direction")
SWI = ("switch", "interface")
NICP = ("interface", "priority", "direction")
NICD = ("interface", "direction")
PORT = ("device", "port")
GPU = ("gpu",)
EP = ("endpoint",)


def queue_name(k: tuple[str, ...]) -> str:
    return f"{k[0]} {k[1]} queue {k[2]}"


def switch_prio_name(k: tuple[str, ...]) -> str:
    return f"{k[0]} {k[1]} priority {k[2]} {k[3]}"


def nic_prio_name(k: tuple[str, ...]) -> str:
    return f"{k[0]} priority {k[1]} {k[2]}"


def port_name(k: tuple[str, ...]) -> str:
    return f"{k[0]} port {k[1]}"


def gpu_name(k: tuple[str, ...]) -> str:
    return f"GPU {k[0]}"


def endpoint_name(k: tuple[str, ...]) -> str:
    return f"endpoint {k[0]}"



def format_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    return f"{seconds:.3g} s"
