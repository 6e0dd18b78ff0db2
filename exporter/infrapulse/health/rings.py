"""Counter history of a whole gNMI column at once: one row of values per observation.

A switch's numeric families are `Column`s (columns.py): every series of one family
of one switch is observed at the same instant, the snapshot's timestamp. So instead of one ring of
(timestamp, value) tuples per series (`rates.CounterHistory`), a `ColumnRing` keeps the
timestamps once and one `array('d')` row per observation, aligned with the column's label tuples:
8 bytes per series and observation, and a pass's windowed increases are a few C-level `map`s over
rows instead of a Python loop per series.

The result is the same `Rate` that `CounterHistory.rate()` computes, to the bit: the same
trimming (one point at or before the window's start, at most `max_points` per series), the same
reset rule (a value below the previous one counts from zero; no width is known for these
counters) and the same left-to-right summation. A series that appears later than the ring's
first row is "late": it starts at its own first row and is computed alone.
"""

from __future__ import annotations

from array import array
from functools import partial
from itertools import compress, repeat
from operator import add, lt, ne, sub, truediv
from typing import TYPE_CHECKING

from ..rates import Rate

if TYPE_CHECKING:
    from ..columns import Column

LabelValues = tuple[str, ...]


def _step(acc: float, prev: float, cur: float) -> float:
    return acc + (cur - prev if cur >= prev else cur)


_new_rate = partial(tuple.__new__, Rate)  # Rate(*fields) without a Python-level call per series


class ColumnRing:
    """History of one counter family of one source instance held in a `Column`."""

    __slots__ = ("labels", "width", "heads", "times", "rows", "late", "_rates", "_followed")

    def __init__(self) -> None:
        self.labels: tuple[LabelValues, ...] = ()  # the column's visible series, in its order
        self.width = -1  # len() of every label tuple when they all have the same, else -1
        # The first label of every series (a gNMI column's switch): two rings whose head sets
        # are disjoint cannot hold the same label tuple.
        self.heads: frozenset[str] = frozenset()
        self.times: list[float] = []  # observation timestamps, one per row
        self.rows: list[array[float]] = []  # values per observation, aligned with `labels`
        self.late: dict[int, int] = {}  # series index -> its first row, where that is not row 0
        self._rates: list[Rate | None] | None = None  # this pass's, built on first read
        # The column last followed and its keys_version then (which moves whenever its series do);
        # held until the next follow(), with the switch's slots behind it
        self._followed: tuple[Column, int] | None = None

    def follow(self, column: Column) -> None:
        """Align with the column's current series: history of the series that went is dropped,
        new series have no point yet (their first row is the next one)."""
        self._rates = None
        followed = self._followed
        if followed is not None and followed[0] is column and followed[1] == column.keys_version:
            return  # the same series as last time, without a copy of their labels
        self._followed = (column, column.keys_version)
        labels = column.labels()
        if labels == self.labels:
            return
        old = {lab: i for i, lab in enumerate(self.labels)}
        where = [old.get(lab, -1) for lab in labels]
        # A new series' place in the older rows: never read (it is late), 0.0 keeps rows NaN-free
        self.rows = [array("d", [row[j] if j >= 0 else 0.0 for j in where]) for row in self.rows]
        nrows = len(self.rows)
        late = {}
        for i, j in enumerate(where):
            first = self.late.get(j, 0) if j >= 0 else nrows
            if first:
                late[i] = first
        self.late = late
        self.labels = labels
        widths = {len(lab) for lab in labels}
        self.width = widths.pop() if len(widths) == 1 else -1
        self.heads = frozenset(lab[0] for lab in labels if lab)

    def observe(self, column: Column, timestamp: float, window: float, max_points: int) -> None:
        """Add the column's current values as a row at `timestamp` (after `follow`), then drop the
        rows no series needs: each keeps one point at or before `timestamp - window`, and at most
        `max_points`."""
        self._rates = None
        times, rows = self.times, self.rows
        if times and timestamp <= times[-1]:  # the readings observe an instance only forwards
            return
        times.append(timestamp)
        rows.append(column.gather())
        n = len(times)
        horizon = timestamp - window
        at_or_before = -1
        for i, t in enumerate(times):  # a few dozen rows at most
            if t > horizon:
                break
            at_or_before = i
        drop = max(n - max_points, min(at_or_before, n - 2), 0)
        if drop:
            del times[:drop]
            del rows[:drop]
            self.late = {i: first - drop for i, first in self.late.items() if first - drop > 0}

    def forget_rates(self) -> None:
        """Drop this pass's rates (built again on the next read): not kept between passes."""
        self._rates = None

    def rates(self) -> list[Rate | None]:
        """Each series' windowed increase (None until it has two points), in `labels` order."""
        if self._rates is None:
            self._rates = self._compute()
        return self._rates

    def sums(self) -> tuple[list[float], list[float]] | None:
        """(per_second, increase) of every series, in `labels` order: the fields of `rates()`
        without a `Rate` per series (the signals that read one field of a whole column). None
        while a series has no rate yet: then only `rates()` says which."""
        totals = self._totals()
        if totals is None:
            return None
        increase, _, seconds = totals
        per_second = list(map(truediv, increase, repeat(seconds)))
        for i, first in self.late.items():
            rate = self._late_rate(i, first)
            if rate is None:
                return None
            per_second[i], increase[i] = rate.per_second, rate.increase
        return per_second, increase

    def _compute(self) -> list[Rate | None]:
        out: list[Rate | None]
        totals = self._totals()
        if totals is None:
            out = [None] * len(self.labels)
        else:
            acc, resets, seconds = totals
            out = list(map(_new_rate, zip(map(truediv, acc, repeat(seconds)), acc, repeat(seconds),
                                          repeat(False), resets)))
        for i, first in self.late.items():
            out[i] = self._late_rate(i, first)
        return out

    def _totals(self) -> tuple[list[float], list[int], float] | None:
        """Each series' increase and resets over every row, and the rows' span in seconds; None
        with fewer than two rows. A late series' entries are not its own (see `_late_rate`)."""
        times, rows = self.times, self.rows
        n = len(rows)
        seconds = times[-1] - times[0] if n >= 2 else 0.0
        if n < 2 or seconds <= 0:
            return None
        acc: list[float] = [0.0] * len(self.labels)
        resets = [0] * len(acc)
        values = [row.tolist() for row in rows]  # each value boxed once, not once per map below
        for r in range(1, n):
            prev, cur = values[r - 1], values[r]
            if any(map(lt, cur, prev)):  # a reset somewhere: count it, sum series by series
                for i in compress(range(len(acc)), map(lt, cur, prev)):
                    resets[i] += 1
                acc = list(map(_step, acc, prev, cur))
            elif any(map(ne, prev, prev)):  # a NaN before: the reset rule counts from the value
                acc = list(map(_step, acc, prev, cur))
            else:  # the common case, all in C: every delta is cur - prev
                acc = list(map(add, acc, map(sub, cur, prev)))
        return acc, resets, seconds

    def _late_rate(self, i: int, first: int) -> Rate | None:
        """One series younger than row 0: the same sum over its own rows."""
        times, rows = self.times, self.rows
        if len(rows) - first < 2:
            return None
        increase = 0.0
        resets = 0
        for r in range(first + 1, len(rows)):
            prev, cur = rows[r - 1][i], rows[r][i]
            if cur < prev:
                resets += 1
            increase += cur - prev if cur >= prev else cur
        seconds = times[-1] - times[first]
        if seconds <= 0:
            return None
        return Rate(increase / seconds, increase, seconds, False, resets)

    def retained_bytes(self) -> int:
        """Bytes of values this ring holds (rows only; labels are the column's own tuples)."""
        return sum(row.itemsize * len(row) for row in self.rows)
