"""What the signals read from the store: latest values, and counter increases over a window.

The scorer runs every daemon interval. Each pass, `Readings.update()` feeds the counter
families the signals need into one `CounterHistory` per window length (so counter resets,
32/64-bit wraps and saturated legacy counters are handled once, in infrapulse.rates), and
signals then ask for the labels, the latest value or the windowed increase of a series.

Label names come from the catalogue (`catalog.get(name).labels`): the signals package imports
the modules that declare every family it reads, so they are known whichever sources run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, cast

from .. import catalog
from ..columns import Column
from ..rates import CounterHistory, Rate
from ..store import Histogram, LabelValues, Store, Value
from .rings import ColumnRing

HEALTH_SOURCE = "health"
# At most this many points per window and series: a gNMI stream may publish far more often
# than the score needs, and memory must follow the series count, not the update rate.
POINTS_PER_WINDOW = 40


@dataclass(frozen=True)
class Series:
    family: str
    source: str
    target: str
    values: LabelValues
    labels: dict[str, str]
    value: Value


SeriesKey = tuple[str, str, str, LabelValues]  # (family, source, target, label values)
BornKey = tuple[str, str, str, str, LabelValues]  # (window kind,) + SeriesKey
RingKey = tuple[str, str, str, str]  # (window kind, source, target, family)


class RateLists(NamedTuple):
    """`Readings.rates()` as parallel lists: the same keys in the same order, each one's
    per_second and increase (what the per-queue signals read, without a `Rate` per queue).
    Cached for the pass and shared: read-only."""

    keys: list[LabelValues]
    per_second: list[float]
    increase: list[float]


def rate_lists_of(rates: dict[LabelValues, Rate]) -> RateLists:
    """The lists of a `rates()` dict."""
    return RateLists(list(rates), [r.per_second for r in rates.values()],
                     [r.increase for r in rates.values()])


class TargetNames(dict[LabelValues, tuple[str, dict[str, str]]]):
    """Label key -> (target name, its labels), built on first use and kept from pass to pass: a
    fabric's switch queues and ports are the same every pass, and building a name and a label
    dict per queue was a tenth of a pass. A hit is one dict subscript in C. The labels dict is
    shared by every measurement of that target: read-only."""

    __slots__ = ("name", "labels", "used")

    def __init__(self, name: Callable[[LabelValues], str],
                 labels: Callable[[LabelValues], dict[str, str]]) -> None:
        super().__init__()
        self.name, self.labels, self.used = name, labels, True

    def __missing__(self, key: LabelValues) -> tuple[str, dict[str, str]]:
        found = self[key] = (self.name(key), self.labels(key))
        return found


class _History(CounterHistory):
    def first_point(self, key: SeriesKey) -> tuple[float, float] | None:
        ring = self._points.get(key)
        return ring[0] if ring else None

    def last_point(self, key: SeriesKey) -> tuple[float, float] | None:
        ring = self._points.get(key)
        return ring[-1] if ring else None


class Readings:
    def __init__(self, windows: dict[str, float], sparse: frozenset[str] = frozenset()) -> None:
        # Counter families whose series only appear once an event happened (absence = zero).
        self.sparse = sparse
        self.histories = {kind: _History(seconds, max_points=POINTS_PER_WINDOW + 8)
                          for kind, seconds in windows.items()}
        self._last_observed: dict[tuple[str, str, str], float] = {}
        # key -> (previous observation of its instance, first timestamp, first value)
        self._born: dict[BornKey, tuple[float, float, float]] = {}
        self._rate_cache: dict[tuple[str, tuple[str, ...], str], dict[tuple[str, ...], Rate]] = {}
        self._lists_cache: dict[tuple[str, tuple[str, ...], str], RateLists] = {}
        self._label_cache: dict[str, tuple[str, ...]] = {}
        # Counter families held in gNMI columns (not sparse): one ring per column (see rings.py).
        self.rings: dict[RingKey, ColumnRing] = {}
        self._ring_index: dict[RingKey, dict[LabelValues, int]] = {}  # for increase(), per pass
        self.store: Store | None = None
        # by (naming, labelling) function pair; see target_names()
        self._targets: dict[tuple[Callable[..., object], Callable[..., object]], TargetNames] = {}

    # -- feeding -----------------------------------------------------------------------------

    def update(self, store: Store, counters: dict[str, set[str]]) -> None:
        """Observe every counter family in `counters` ({window kind: families}) from the store."""
        self.store = store
        self._rate_cache.clear()
        self._lists_cache.clear()
        self._ring_index.clear()
        live: dict[str, set[SeriesKey]] = {kind: set() for kind in counters}
        live_rings: set[RingKey] = set()
        live_instances: set[tuple[str, str]] = set()
        for (source, target), snap in store.snapshots():
            if source == HEALTH_SOURCE:
                continue
            live_instances.add((source, target))
            for kind, families in counters.items():
                history = self.histories[kind]
                seen = self._last_observed.get((kind, source, target))
                spacing = history.window / POINTS_PER_WINDOW
                observe = seen is None or snap.timestamp - seen >= spacing
                if observe:
                    self._last_observed[(kind, source, target)] = snap.timestamp
                keys = live[kind]
                for family in families:
                    series = snap.series.get(family)
                    if not series:
                        continue
                    if isinstance(series, Column) and family not in self.sparse:
                        ring_key = (kind, source, target, family)
                        live_rings.add(ring_key)
                        ring = self.rings.get(ring_key)
                        if ring is None:
                            ring = self.rings[ring_key] = ColumnRing()
                        ring.follow(series)
                        if observe:
                            ring.observe(series, snap.timestamp, history.window, history.max_points)
                        continue
                    for values, value in series.items():
                        key = (family, source, target, values)
                        keys.add(key)
                        if observe and not isinstance(value, Histogram):
                            if (family in self.sparse and seen is not None
                                    and history.last_point(key) is None):
                                self._born[(kind,) + key] = (seen, snap.timestamp, float(value))
                            history.observe(key, snap.timestamp, float(value))
        for kind, keys in live.items():
            self.histories[kind].forget_missing(keys)
        for ring_key in [k for k in self.rings if k not in live_rings]:
            del self.rings[ring_key]
        for born in [b for b in self._born if b[1:] not in live.get(b[0], ())]:
            del self._born[born]
        for observed in [k for k in self._last_observed if (k[1], k[2]) not in live_instances]:
            del self._last_observed[observed]

    def end_pass(self) -> None:
        """Drop what only one pass reads (rates, ring indexes): rebuilt on the next read, and
        cleared by the next `update` anyway, so nothing changes but the memory held between
        passes (a Rate and an index entry per counter series of a fabric)."""
        self._rate_cache.clear()
        self._lists_cache.clear()
        self._ring_index.clear()
        for ring in self.rings.values():
            ring.forget_rates()
        # Bounded: a naming no signal used this pass goes; one holding more targets than the
        # store has series keeps gone ones (switches or ports removed) and starts afresh.
        limit = (self.store.series_count() if self.store is not None else 0) + 1024
        self._targets = {k: names for k, names in self._targets.items() if names.used}
        for names in self._targets.values():
            names.used = False
            if len(names) > limit:
                names.clear()

    def target_names(self, name: Callable[[LabelValues], str],
                     labels: Callable[[LabelValues], dict[str, str]]) -> TargetNames:
        """The kept (target name, labels) of every label key named by `name` and `labels`."""
        names = self._targets.get((name, labels))
        if names is None:
            names = self._targets[(name, labels)] = TargetNames(name, labels)
        names.used = True
        return names

    # -- reading -----------------------------------------------------------------------------

    def label_names(self, family: str) -> tuple[str, ...]:
        names = self._label_cache.get(family)
        if names is None:
            try:
                declared = catalog.get(family)
            except KeyError:
                raise KeyError(f"health reads {family}, which no imported module declares") from None
            names = self._label_cache[family] = declared.labels + declared.optional_labels
        return names

    def series(self, family: str) -> Iterator[Series]:
        if self.store is None:
            return
        names = self.label_names(family)
        for source, target, values, value in self.store.iter_family(family):
            if source == HEALTH_SOURCE:
                continue
            yield Series(family, source, target, values, dict(zip(names, values)), value)

    def increase(self, series: Series, kind: str = "window") -> Rate | None:
        """The series' increase and rate over the window `kind`; None until two points exist.

        A sparse counter that appeared while its source instance was already publishing
        started from zero, so its first value counts as increase (while still in the window).
        """
        ring_key = (kind, series.source, series.target, series.family)
        ring = self.rings.get(ring_key)
        if ring is not None:
            index = self._ring_index.get(ring_key)
            if index is None:
                index = self._ring_index[ring_key] = {lab: i for i, lab in enumerate(ring.labels)}
            position = index.get(series.values)
            return None if position is None else ring.rates()[position]
        key = (series.family, series.source, series.target, series.values)
        history = self.histories[kind]
        rate = history.rate(key)
        born = self._born.get((kind,) + key)
        if born is None:
            return rate
        before, first_ts, first_value = born
        first, last = history.first_point(key), history.last_point(key)
        if first is None or last is None or first[0] != first_ts:
            del self._born[(kind,) + key]  # the birth point left the ring: an ordinary counter now
            return rate
        if last[0] - first_ts > history.window:
            return rate  # born before the window began
        seconds = last[0] - before
        increase = first_value + (rate.increase if rate is not None else 0.0)
        return Rate(increase / seconds if seconds > 0 else 0.0, increase, seconds,
                    rate.saturated if rate else False, rate.resets if rate else 0)

    def rates(self, family: str, keys: tuple[str, ...], kind: str = "window") -> dict[tuple[str, ...], Rate]:
        """Windowed increases of a counter family summed per `keys`, cached for this pass.

        The fast path of the signals: tens of thousands of switch queues are read by several
        signals (ECN ratio, drops, topology), so each sum is built once per pass and without
        per-series objects."""
        cache_key = (family, keys, kind)
        cached = self._rate_cache.get(cache_key)
        if cached is not None:
            return cached
        out: dict[tuple[str, ...], Rate] = {}
        if self.store is not None:
            names = self.label_names(family)
            index = [names.index(k) if k in names else None for k in keys]
            whole = index == list(range(len(names)))  # keys are every label, in order
            history = self.histories[kind]
            born = bool(self._born) and family in self.sparse
            for (source, target), snap in self.store.snapshots():
                if source == HEALTH_SOURCE:
                    continue
                series = snap.series.get(family)
                if not series:
                    continue
                ring = self.rings.get((kind, source, target, family))
                if ring is not None:
                    self._add_ring(out, ring, index, whole and ring.width == len(names))
                    continue
                for values, _value in series.items():
                    if born:
                        rate = self.increase(Series(family, source, target, values, {}, _value), kind)
                    else:
                        rate = history.rate((family, source, target, values))
                    if rate is None:
                        continue
                    key = tuple(values[i] if i is not None and i < len(values) else "" for i in index)
                    prev = out.get(key)
                    out[key] = rate if prev is None else _sum(prev, rate)
        self._rate_cache[cache_key] = out
        return out

    def rate_lists(self, family: str, keys: tuple[str, ...], kind: str = "window") -> RateLists:
        """`rates()` as parallel lists, cached for this pass. Straight from the rings' sums where
        that gives the same lists, which is a fabric's common case; else from `rates()`."""
        cache_key = (family, keys, kind)
        cached = self._lists_cache.get(cache_key)
        if cached is None:
            cached = self._ring_lists(family, keys, kind)
            if cached is None:
                cached = rate_lists_of(self.rates(family, keys, kind))
            self._lists_cache[cache_key] = cached
        return cached

    def _ring_lists(self, family: str, keys: tuple[str, ...], kind: str) -> RateLists | None:
        """The rings' label tuples and sums, one instance after another, where that is what
        `rates()` holds: the keys are every label in order, every instance holding the family
        has a ring with a rate for each series, and no two instances share a first label (the
        switch), so no key is summed over instances or left out. Else None."""
        names = self.label_names(family)
        if self.store is None or not names or keys != names:
            return None
        out = RateLists([], [], [])
        heads: set[str] = set()
        for (source, target), snap in self.store.snapshots():
            if source == HEALTH_SOURCE or not snap.series.get(family):
                continue
            ring = self.rings.get((kind, source, target, family))
            if ring is None or ring.width != len(names):
                return None
            sums = ring.sums()
            if sums is None:
                return None
            if not heads.isdisjoint(ring.heads):
                return None
            heads |= ring.heads
            out.keys.extend(ring.labels)
            out.per_second.extend(sums[0])
            out.increase.extend(sums[1])
        return out

    @staticmethod
    def _add_ring(out: dict[tuple[str, ...], Rate], ring: ColumnRing, index: list[int | None],
                  whole: bool) -> None:
        """A column's rates into `out`, keyed and summed as the per-series path does."""
        rates = ring.rates()
        pairs: list[tuple[LabelValues, Rate]]
        if None in rates:
            pairs = [(lab, r) for lab, r in zip(ring.labels, rates) if r is not None]
        else:
            pairs = list(zip(ring.labels, cast("list[Rate]", rates)))
        if whole and out.keys().isdisjoint(ring.labels):
            out.update(pairs)  # keys are the label tuples themselves, none seen yet: no sum
            return
        for values, rate in pairs:
            key = values if whole else tuple(
                values[i] if i is not None and i < len(values) else "" for i in index)
            prev = out.get(key)
            out[key] = rate if prev is None else _sum(prev, rate)

    def sources_present(self) -> set[str]:
        """Source names this instance runs (from their status or their data)."""
        if self.store is None:
            return set()
        present = {src for src, _ in self.store.status}
        present.update(src for (src, _), _ in self.store.snapshots())
        present.discard(HEALTH_SOURCE)
        return present


def _sum(a: Rate, b: Rate) -> Rate:
    """Two windowed increases under one key, in the order they were met."""
    return Rate(a.per_second + b.per_second, a.increase + b.increase, max(a.seconds, b.seconds),
                a.saturated or b.saturated, a.resets + b.resets)
