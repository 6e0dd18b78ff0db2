"""A bulk-write plan: how the values of one notification shape land in a switch's slots.

A SAMPLE of counters arrives as the same shape (the same update paths in the same order, values
of the same kinds) every interval. Its plan, made once (bulk.py), lists runs of neighbouring
slots; writing a notification is then one slice assignment per run, straight from the value
lists the bulk wire view parsed (see wire.py and columns.py).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from ...columns import Column, LabelValues
from .shared import MAX_SHARED_PLAN_PARTS

# A notification's value kinds, in order, and how many values of each (see `bulk.BulkPath`).
Signature = tuple[tuple[FieldDescriptor, int], ...]
# One slice assignment of a plan: (index of the value kind in the signature, picker of that
# kind's values, first slot, end slot, scale or None).
Run = tuple[int, Callable[[Any], Any], int, int, float | None]
# One leaf of a plan before its runs are made: (kind, scale, index in that kind's values,
# column, labels).
Write = tuple[int, float, int, Column, LabelValues]
# Notification shapes remembered per prefix; a switch varies them (suppress_redundant sends only
# what changed), so keep a few and start over when they run out.
MAX_PLANS_PER_PREFIX = 4
# Signatures and pickers repeat across every port's notification and every switch of a model:
# one shared copy each, process-wide (bounded by MAX_SHARED_PLAN_PARTS).
SIGNATURES: dict[Signature, Signature] = {}
_PICKERS: dict[tuple[int, ...], Callable[[Any], Any]] = {}


class Plan:
    """How the bulk path writes notifications of one shape."""

    __slots__ = ("shape", "signature", "runs", "count", "unmapped", "hits")

    def __init__(self, shape: bytes, signature: Signature, runs: tuple[Run, ...] | None, count: int,
                 unmapped: tuple[tuple[str, str, int], ...] = ()) -> None:
        self.shape = shape  # the update path fields, as the bulk view keeps them
        self.signature = signature  # ((value kind field, how many), ...)
        self.runs = runs  # None: some leaf needs the per-update path
        self.count = count  # updates in such a notification
        self.unmapped = unmapped  # (mapping, sample path, leaves) no rule maps, per notification
        self.hits = 0  # notifications taken with it since its unmapped leaves were last counted


def picker(positions: list[int]) -> Callable[[Any], Any]:
    """A C-level function taking a plan group's values out of the notification's value list,
    shared by every plan picking the same positions. Bounded."""
    first, last = positions[0], positions[-1]
    contiguous = last - first + 1 == len(positions)  # the usual case: one slice
    key = (first, last) if contiguous else (-1, *positions)
    found = _PICKERS.get(key)
    if found is None:
        # at least two positions when not contiguous, so itemgetter returns a tuple
        found = itemgetter(slice(first, last + 1)) if contiguous else itemgetter(*positions)
        if len(_PICKERS) < MAX_SHARED_PLAN_PARTS:
            _PICKERS[key] = found
    return found


def runs_of(writes: list[Write]) -> tuple[Run, ...]:
    """A plan's writes as runs of consecutive slots that share a value kind and scale: each run
    is one slice assignment."""
    targets: dict[tuple[int, float], list[tuple[int, int]]] = {}
    for kind, scale, index, column, labels in writes:
        targets.setdefault((kind, scale), []).append((column.slot(labels), index))
    runs: list[Run] = []
    for (kind, scale), pairs in targets.items():
        pairs.sort()  # by slot; two leaves writing one series keep their order (the last wins)
        first = 0
        for i in range(1, len(pairs) + 1):
            if i == len(pairs) or pairs[i][0] != pairs[i - 1][0] + 1:
                run = pairs[first:i]
                runs.append((kind, picker([index for _, index in run]), run[0][0], run[-1][0] + 1,
                             None if scale == 1.0 else scale))
                first = i
    return tuple(runs)
