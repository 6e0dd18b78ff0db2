"""The bulk path: a notification of plain numbers written as a few slice assignments.

One parse with the bulk wire view (wire.py) yields a notification's values by kind and its update
path fields as one bytes object, its shape. The shape finds a plan cached on the prefix
(plans.py; the prefix remembers its last plan, so a steady stream costs one comparison), and the
plan writes the values into runs of neighbouring slots. A shape is planned once: its leaves are
bound, and their new series get neighbouring slots, grouped by value kind and scale. Whatever a
plan cannot take (strings, enums, JSON subtrees, mixed or damaged values) is left to the
per-update path (per_update.py).
"""

from __future__ import annotations

from array import array
from itertools import repeat
from operator import itemgetter, mul
from typing import Any

from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb

from . import wire
from .binder import Binder
from .bindings import MISSING, Binding, Prefix
from .coverage import SwitchCoverage
from .plans import SIGNATURES, Plan, Signature, Write, runs_of
from .shared import MAX_SHARED_PLAN_PARTS, MAX_SHARED_SHAPES, SHAPES, relative_path, shared
from .values import JSON_FIELDS


class BulkPath:
    __slots__ = ("binder", "slots", "strip")

    def __init__(self, binder: Binder, strip: bool) -> None:
        self.binder = binder
        self.slots = binder.slots
        self.strip = strip

    def apply(self, pctx: Prefix, merged: Any, raw: bytes) -> int | None:
        """All updates at once, when their shape and value kinds match a plan (see `wire`):
        `merged` is the notification's updates merged into one message by the bulk view.
        Returns how many updates were taken, or None when nothing was written: take the
        per-update path."""
        kinds = merged.val.ListFields()
        merged.ClearField("val")  # the value lists stay ours; what is left is the shape
        shape = merged.SerializeToString()
        if not shape:
            return None if kinds else 0  # values without paths: malformed; none: only deletes
        # Which kinds, how many of each: a leaf's type is fixed by its YANG schema, so an
        # unchanged signature means every value sits where the plan expects it (and so every
        # run below gets exactly as many values as it has slots).
        signature = tuple([(field, len(values)) for field, values in kinds])
        plan = pctx.last
        if plan is None or plan.shape != shape or plan.signature != signature:
            plan = pctx.plans.get(shape) if pctx.plans is not None else None
            if plan is None or plan.signature != signature:
                plan = self._plan(pctx, shape, signature, raw)
                if plan is None:
                    return None
            pctx.last = plan
        runs = plan.runs
        if runs is None:
            return None
        values = self.slots.values
        for kind, pick, start, stop, scale in runs:
            picked = pick(kinds[kind][1])
            values[start:stop] = array("d", picked if scale is None else map(mul, picked, repeat(scale)))
        if plan.unmapped:  # one increment per notification; see count_plan_hits
            plan.hits += 1
        return plan.count

    def _plan(self, pctx: Prefix, shape: bytes, signature: Signature, raw: bytes) -> Plan | None:
        """Plan a notification shape once: which values go to which run of slots.

        The plan is cached on the prefix; each of its runs is (index of the value kind in
        `signature`, picker of that kind's values, first slot, end slot, scale or None), one
        slice assignment into the switch's `Slots`. Its runs are None when some leaf needs
        per-leaf handling (an enum, an `_info` part, a value that is not a number, a JSON
        subtree). Returns None when the shape cannot be planned now: an update without exactly
        one path and one value (or with other fields), an undecodable value, or binding every
        path could cross the series limit (the per-update path counts those)."""
        binder = self.binder
        try:
            updates = [wire.Update.FromString(u) for u in wire.raw_updates(raw)]
            kinds = [pb.TypedValue.FromString(u.val).WhichOneof("value") for u in updates]
        except DecodeError:
            return None
        paths = [u.path for u in updates]
        if (binder.bound + len(paths) > binder.max_series or sum(n for _, n in signature) != len(paths)
                or wire.Shape(path=paths).SerializeToString() != shape):
            return None
        slots = {field.name: slot for slot, (field, _) in enumerate(signature)}
        seen = dict.fromkeys(slots, 0)  # values of each kind before this position
        writes: list[Write] | None = []
        fresh: list[tuple[tuple[int, float, int], Binding]] = []  # bindings made here, by slot order
        bindings = pctx.bindings
        unmapped: dict[str, list[Any]] = {}  # mapping -> [sample, leaves]
        try:
            for position, (path, kind) in enumerate(zip(paths, kinds)):
                if kind not in slots:
                    return None
                index = seen[kind]
                seen[kind] = index + 1
                if kind in JSON_FIELDS:  # a subtree: its leaves bind one by one
                    writes = None
                if writes is None:
                    continue
                b = bindings.get(path, MISSING)
                if b is MISSING:
                    try:
                        path, rel = relative_path(path, self.strip)
                    except DecodeError:
                        return None
                    b = binder.bind(rel, path, pctx, hold=False, note_miss=pctx.note_miss)
                    if b is not None:
                        fresh.append(((slots[kind], b.rule.scale, position), b))
                if b is None:  # an unmapped leaf (or one held back)
                    miss = pctx.misses.get(path)
                    if miss is not None:
                        unmapped.setdefault(miss[0], [miss[1], 0])[1] += 1
                    continue
                if b.column is None or kind not in wire.NUMERIC_KINDS:
                    writes = None
                    continue
                writes.append((slots[kind], b.rule.scale, index, b.column, b.labels))
        finally:
            # New series get neighbouring slots, grouped by value kind and scale: one run each.
            fresh.sort(key=itemgetter(0))
            for _, b in fresh:
                binder.hold(b)
        if writes is not None:
            for *_, column, labels in writes:
                column.reveal(labels)  # the bulk write that follows fills every one
        shape = shared(SHAPES, shape, MAX_SHARED_SHAPES)
        signature = shared(SIGNATURES, signature, MAX_SHARED_PLAN_PARTS)
        plan = Plan(shape, signature, None if writes is None else runs_of(writes), len(paths),
                    tuple((mapping, sample, n) for mapping, (sample, n) in unmapped.items()))
        pctx.keep_plan(shape, plan, binder.retired)
        return plan


def count_plan_hits(binder: Binder, coverage: SwitchCoverage) -> None:
    """The bulk path only counts notifications per plan; turn them into unmapped leaves."""
    plans = [plan for pctx in binder.prefixes.values() for plan in pctx.all_plans() if plan.hits]
    plans += binder.retired
    binder.retired.clear()
    for plan in plans:
        for mapping, sample, leaves in plan.unmapped:
            coverage.count_unmapped(mapping, sample, leaves * plan.hits)
        plan.hits = 0
