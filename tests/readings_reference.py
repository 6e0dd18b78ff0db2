"""The health readings as they were before the column rings (635d75d), kept as the reference the
differential test (tests/test_health_rings.py) compares the fast path with. Do not optimise.

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

from infrapulse import catalog
from infrapulse.health.readings import TargetNames
from infrapulse.rates import CounterHistory, Rate
from infrapulse.store import Histogram, LabelValues, Store, Value

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
        self._label_cache: dict[str, tuple[str, ...]] = {}
        self.store: Store | None = None

    # -- feeding -----------------------------------------------------------------------------

    def update(self, store: Store, counters: dict[str, set[str]]) -> None:
        """Observe every counter family in `counters` ({window kind: families}) from the store."""
        self.store = store
        self._rate_cache.clear()
        live: dict[str, set[SeriesKey]] = {kind: set() for kind in counters}
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
        for born in [b for b in self._born if b[1:] not in live.get(b[0], ())]:
            del self._born[born]
        for observed in [k for k in self._last_observed if (k[1], k[2]) not in live_instances]:
            del self._last_observed[observed]

    # -- reading -----------------------------------------------------------------------------

    def end_pass(self) -> None:
        """The service's hook after each pass (the fast path drops per-pass caches): nothing here."""

    def target_names(self, name: Callable[[LabelValues], str],
                     labels: Callable[[LabelValues], dict[str, str]]) -> TargetNames:
        """Names and label dicts built afresh on every call, as every pass did before they were
        kept (not what this reference is about: the reports must not tell the two apart)."""
        return TargetNames(name, labels)

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
            history = self.histories[kind]
            born = bool(self._born) and family in self.sparse
            for source, target, values, _value in self.store.iter_family(family):
                if source == HEALTH_SOURCE:
                    continue
                if born:
                    rate = self.increase(Series(family, source, target, values, {}, _value), kind)
                else:
                    rate = history.rate((family, source, target, values))
                if rate is None:
                    continue
                key = tuple(values[i] if i is not None and i < len(values) else "" for i in index)
                prev = out.get(key)
                out[key] = rate if prev is None else Rate(
                    prev.per_second + rate.per_second, prev.increase + rate.increase,
                    max(prev.seconds, rate.seconds), prev.saturated or rate.saturated,
                    prev.resets + rate.resets)
        self._rate_cache[cache_key] = out
        return out

    def sources_present(self) -> set[str]:
        """Source names this instance runs (from their status or their data)."""
        if self.store is None:
            return set()
        present = {src for src, _ in self.store.status}
        present.update(src for (src, _), _ in self.store.snapshots())
        present.discard(HEALTH_SOURCE)
        return present
