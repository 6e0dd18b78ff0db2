"""A series budget for sources that rebuild their snapshot on every collection (serving, dcgm).

An engine with `passthrough: true` that starts labelling by request or adapter, or a dcgm-exporter
with a huge counters file and many MIG instances, must not grow the daemon's memory and the
Prometheus it feeds without bound. `SeriesBudget(limit).apply(snapshot)` keeps at most `limit`
series of one source instance: first the series it kept last time (a series never flaps in and
out), then new ones in the snapshot's own order (the families a source adds first win: serving
adds its normalised infrapulse_llm_* before the passthrough families), and removes the rest. It
returns how many it removed; the source counts them with `store.count_dropped_series`
(infrapulse_source_series_dropped_total) and reports the instance `partial`.

Series are counted as the store counts them: a histogram is one series per label set, as in
infrapulse_exporter_series.
"""

from __future__ import annotations

from ..store import LabelValues, Snapshot, Value


class SeriesBudget:
    __slots__ = ("limit", "_previous")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # The series of the last snapshot after trimming (the same dict the store now serves).
        self._previous: dict[str, dict[LabelValues, Value]] = {}

    def apply(self, snapshot: Snapshot) -> int:
        """Trim `snapshot` in place to the budget; returns the number of series removed."""
        previous = self._previous
        self._previous = snapshot.series
        if len(snapshot) <= self.limit:
            return 0
        room = self.limit
        newcomers: list[tuple[str, LabelValues]] = []
        for family, series in snapshot.series.items():
            kept_before = previous.get(family, {})
            for key in series:
                if key in kept_before and room > 0:
                    room -= 1
                else:
                    newcomers.append((family, key))
        dropped = 0
        for family, key in newcomers:
            if room > 0:
                room -= 1
            else:
                del snapshot.series[family][key]
                dropped += 1
        for family in [f for f, series in snapshot.series.items() if not series]:
            del snapshot.series[family]
        return dropped

    @staticmethod
    def message(dropped: int, limit: int) -> str:
        return f"series budget: {dropped} series past max_series={limit} dropped"
