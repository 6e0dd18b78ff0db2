"""Columnar storage for one switch's streamed series: a store-level series type (the gNMI
source writes it, the health readings and /metrics read it like any series dict).

A switch's numeric series live in one `array('d')` (its `Slots`), one slot per series. Each
family's `Column` maps label tuples to slots and reads as a `Mapping` of label tuple -> value,
so the store's readers (the /metrics collector, the health score, the API) see it like any
other series dict.

Why: the series of one SAMPLE notification get neighbouring slots when its shape is first
planned, so taking in a sample of counters is one C-level slice assignment per run of slots
(see `sources/gnmi/bulk.py`): 8 bytes written per leaf, no label tuple hashed, no float object kept per
series. With 64 switches streaming at once, the dict-per-family layout this replaces spent
most of each update on cache misses (tuple hash, dict probe, the old float's refcount).

Slots are appended and never reused in place: a freed slot stays dead until `compact()` packs
the live ones in their old order. Compaction renumbers slots, so the owner must then drop
everything that holds slot numbers (its plans); `compact_if_sparse` says when it did.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

LabelValues = tuple[str, ...]

# Pack the slots once dead ones outnumber live ones (and there are enough to matter).
MIN_DEAD_TO_COMPACT = 1024

# Slot numbers, one int object per number for the whole process: every switch numbers its slots
# from 0, and an int above 256 is its own 32-byte object, so sharing them saves ~32 bytes per
# series in a fabric instance (the index dicts hold one per series).
_SLOT_NUMBERS: list[int] = []


def _slot_number(n: int) -> int:
    """The shared int object for slot number `n`."""
    numbers = _SLOT_NUMBERS
    if n >= len(numbers):
        numbers.extend(range(len(numbers), max(n + 1, 2 * len(numbers))))
    return numbers[n]


class Slots:
    """One switch's values: a flat array of doubles, shared by all its columns (which point
    here; nothing points back, so a dropped switch state is freed at once, without the GC)."""

    __slots__ = ("values", "live")

    def __init__(self) -> None:
        self.values = array("d")
        self.live = 0

    def column(self) -> Column:
        return Column(self)

    def _allocate(self) -> int:
        self.live += 1
        self.values.append(0.0)
        return _slot_number(len(self.values) - 1)

    @property
    def dead(self) -> int:
        return len(self.values) - self.live

    def compact_if_sparse(self, columns: Iterable[Column]) -> bool:
        """Compact when dead slots outnumber live ones; True when slot numbers changed.
        `columns` are all the columns using these slots."""
        dead = self.dead
        if dead and (self.live == 0 or (dead >= MIN_DEAD_TO_COMPACT and dead > self.live)):
            self.compact(columns)
            return True
        return False

    def compact(self, columns: Iterable[Column]) -> None:
        """Pack the live slots, keeping their order (a notification's slots stay neighbours)."""
        owners = sorted((slot, held, labels) for column in columns
                        for held in (column.index, column.unset) for labels, slot in held.items())
        values = self.values
        packed = array("d", (values[slot] for slot, _, _ in owners))
        for new, (_, held, labels) in enumerate(owners):
            held[labels] = _slot_number(new)
        values[:] = packed  # in place: readers holding `values` keep a valid array
        self.live = len(owners)


class Column(Mapping[LabelValues, float]):
    """One family's series of one switch: label tuple -> slot in the switch's `Slots`.

    A series is held by the bindings that write it (usually one; two leaf paths can map to the
    same labels): `acquire` and `release` count them, and the series goes when the last one
    lets go. A series held but never written is not shown (a leaf whose first value was
    malformed must not appear as 0): the first `column[labels] = value`, or `reveal` ahead of a
    bulk write into its slot, makes it visible.
    """

    __slots__ = ("_slots", "index", "unset", "extra_refs", "keys_version")

    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        self.index: dict[LabelValues, int] = {}  # visible series
        self.unset: dict[LabelValues, int] = {}  # held, not written yet
        self.extra_refs: dict[LabelValues, int] = {}  # holders beyond the first, rare
        # Bumped whenever a visible series comes or goes (`keys()` changes): the exposition
        # encoder then knows its kept prefixes still line up, without a copy of the keys.
        self.keys_version = 0

    def acquire(self, labels: LabelValues) -> None:
        if labels in self.index or labels in self.unset:
            self.extra_refs[labels] = self.extra_refs.get(labels, 0) + 1
        else:
            self.unset[labels] = self._slots._allocate()

    def release(self, labels: LabelValues) -> None:
        extra = self.extra_refs.get(labels)
        if extra:
            if extra == 1:
                del self.extra_refs[labels]
            else:
                self.extra_refs[labels] = extra - 1
        elif self.index.pop(labels, None) is not None:
            self._slots.live -= 1
            self.keys_version += 1
        elif self.unset.pop(labels, None) is not None:
            self._slots.live -= 1

    def reveal(self, labels: LabelValues) -> None:
        slot = self.unset.pop(labels, None)
        if slot is not None:
            self.index[labels] = slot
            self.keys_version += 1

    def slot(self, labels: LabelValues) -> int:
        slot = self.index.get(labels)
        return self.unset[labels] if slot is None else slot

    def __setitem__(self, labels: LabelValues, value: float) -> None:
        slot = self.index.get(labels)
        if slot is None:
            slot = self.index[labels] = self.unset.pop(labels)  # KeyError: never acquired
            self.keys_version += 1
        self._slots.values[slot] = value

    # -- Mapping: what readers use ------------------------------------------------------------

    def __getitem__(self, labels: LabelValues) -> float:
        return self._slots.values[self.index[labels]]

    def __iter__(self) -> Iterator[LabelValues]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, labels: Any) -> bool:
        return labels in self.index

    def items(self) -> Any:  # an iterator of (labels, value), built in C
        index = self.index
        return zip(index.keys(), map(self._slots.values.__getitem__, index.values()))

    def values(self) -> Any:
        return map(self._slots.values.__getitem__, self.index.values())

    def keys(self) -> Any:  # the index's own view: iterated in C by the exposition encoder
        return self.index.keys()

    # -- bulk reads: a whole column at once, in its order (the health rings) --------------------

    def labels(self) -> tuple[LabelValues, ...]:
        """Every visible series' label tuple, in the order `gather` returns their values."""
        return tuple(self.index)

    def gather(self) -> array[float]:
        """Every visible series' value, in `labels()` order, copied into one array."""
        return array("d", map(self._slots.values.__getitem__, self.index.values()))

    def __repr__(self) -> str:
        return f"Column({dict(self.items())!r})"


__all__ = ["Column", "Slots", "MIN_DEAD_TO_COMPACT"]
