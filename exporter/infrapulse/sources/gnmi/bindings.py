"""Where each leaf's value goes: a switch's bindings, and the notification prefixes caching them.

A `Binding` points straight at the column (or `_info` dict) and label tuple one leaf path writes;
it is made once per path (binder.py) and cached by the path's raw bytes under its notification
`Prefix`, or, for a leaf of a JSON value, by its decoded path (`JsonBinding`). A `Prefix` also
keeps the bulk plans of the notification shapes it sends (plans.py).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

from ...columns import Column, LabelValues
from .paths import ElemPath
from .plans import MAX_PLANS_PER_PREFIX, Plan
from .profile import Rule


class _Missing(enum.Enum):
    """A `dict.get` default the type checker tells apart from a cached None (an unmapped path)."""

    MISSING = enum.auto()


MISSING: Final = _Missing.MISSING


class Entity:
    """One `_info` series whose labels come from several sibling leaves (an LLDP neighbour)."""

    __slots__ = ("series", "fixed", "values", "current", "label_order")

    def __init__(self, series: dict[LabelValues, float], fixed: dict[str, str],
                 label_order: tuple[str, ...]) -> None:
        self.series = series
        self.fixed = fixed  # switch + labels captured from keys + constants
        self.values: dict[str, str] = {}
        self.current: tuple[str, ...] | None = None
        self.label_order = label_order

    def refresh(self, value_labels: tuple[str, ...]) -> None:
        if all(label in self.values for label in value_labels):
            merged = {**self.fixed, **self.values}
            labels: tuple[str, ...] | None = tuple(merged[name] for name in self.label_order)
        else:
            labels = None
        if labels != self.current:
            if self.current is not None:
                self.series.pop(self.current, None)
            if labels is not None:
                self.series[labels] = 1.0
            self.current = labels


class Binding:
    """Where one leaf path's value goes."""

    # Memory matters (one per series, 250k+ per instance): what the notification prefix's state
    # (`owner`) holds is not kept again here. The path is that prefix's plus a process-wide
    # shared relative path; the dict holding the binding is the owner's. 10 slots: 112 bytes
    # with the object and GC headers (13 took 144, pymalloc rounding to 16).
    __slots__ = ("rel", "rule", "series", "labels", "column", "sample", "entity", "key", "owner",
                 "mapping")

    def __init__(self, rel: ElemPath, rule: Rule, series: Column | dict[LabelValues, float],
                 labels: LabelValues, sample: bool, key: Any, entity: Entity | None = None,
                 owner: Prefix | None = None, mapping: str = "", column: Column | None = None) -> None:
        self.rel = rel
        self.rule = rule
        self.series = series  # a Column; the _info dict for the parts of an entity
        self.labels = labels  # (the scale is the rule's: not kept here, 8 bytes per series)
        # `series` again (the caller passes it when `series` is a Column), for plain numbers only:
        # the hot paths write these straight into their column; enums, _info parts, time stamps
        # and per-speed values take `SeriesWriter.set`
        plain = rule.values is None and not (rule.time_format or rule.per_port_speed)
        self.column = column if plain else None
        self.sample = sample
        self.entity = entity
        self.key = key  # its key in the dict holding it (the owner's bindings, or the JSON ones)
        # PROTO leaves are refreshed per notification prefix (one store per notification instead
        # of one per leaf); JSON leaves (no owner: `JsonBinding`) carry their own tick.
        self.owner = owner
        self.mapping = mapping  # the subscribed path it came under (coverage)

    @property
    def counts_as_series(self) -> bool:
        """An `_info` series is fed by one binding per value label: count it once."""
        return self.entity is None or self.rule.info_label == self.rule.info_labels[0]

    @property
    def last_seen(self) -> int:
        return self.owner.seen if self.owner is not None else 0

    @property
    def path(self) -> ElemPath:
        return self.owner.elems + self.rel if self.owner is not None else self.rel


class JsonBinding(Binding):
    """A leaf of a JSON value: its path is whole in `rel` (its key in the switch's JSON bindings)
    and it carries its own tick, the time it was last written."""

    __slots__ = ("seen",)

    def __init__(self, rel: ElemPath, rule: Rule, series: Column | dict[LabelValues, float],
                 labels: LabelValues, sample: bool, entity: Entity | None = None, mapping: str = "",
                 column: Column | None = None) -> None:
        super().__init__(rel, rule, series, labels, sample, rel, entity, None, mapping, column)
        self.seen = 0

    @property
    def last_seen(self) -> int:
        return self.seen


def make_binding(rel: ElemPath, rule: Rule, series: Column | dict[LabelValues, float],
                 labels: LabelValues, sample: bool, key: Any, entity: Entity | None,
                 owner: Prefix | None, mapping: str, column: Column | None) -> Binding:
    """A leaf's binding: under a notification prefix (`owner`), or a JSON leaf's (no owner)."""
    if owner is None:
        return JsonBinding(rel, rule, series, labels, sample, entity, mapping, column)
    return Binding(rel, rule, series, labels, sample, key, entity, owner, mapping, column)


_NO_MISSES: Mapping[bytes, tuple[str, str]] = MappingProxyType({})


class Prefix:
    """One notification prefix (raw bytes as sent): its bindings by raw update path, and plans
    for the bulk path by notification shape (its update path fields, in order)."""

    # 6 slots: 80 bytes with the headers, one per prefix of every switch (7 took 96). Dropped
    # plans whose hits are not counted yet go to the switch's `retired` list, passed in.
    __slots__ = ("elems", "bindings", "plans", "last", "seen", "misses")

    def __init__(self, elems: ElemPath) -> None:
        self.elems = elems
        self.bindings: dict[bytes, Binding | None] = {}
        # unmapped paths cached as None in `bindings` that no `ignore` pattern covers:
        # raw path -> (subscribed path, full path as text), for the coverage counts. Most
        # prefixes have no miss and one shape: `misses` is made at the first miss and `plans` at
        # the second shape (`last` holds the first), ~300 B saved a prefix.
        self.misses: Mapping[bytes, tuple[str, str]] = _NO_MISSES
        self.plans: dict[bytes, Plan] | None = None
        self.last: Plan | None = None  # the plan used last: a prefix mostly sends one shape
        self.seen = 0

    def note_miss(self, key: bytes, what: tuple[str, str]) -> None:
        misses = self.misses
        if not isinstance(misses, dict):
            misses = self.misses = {}
        misses[key] = what

    def all_plans(self) -> Iterable[Plan]:
        if self.plans is not None:
            return self.plans.values()
        return (self.last,) if self.last is not None else ()

    def keep_plan(self, shape: bytes, plan: Plan, retired: list[Plan]) -> None:
        """Make `plan` the one for `shape` (and `last`). One shape needs no dict: `last` holds
        it; a second shape makes `plans`. A replaced plan's uncounted hits are retired."""
        plans, last = self.plans, self.last
        if plans is None and (last is None or last.shape == shape):
            replaced = last
        else:
            if plans is None:
                plans = self.plans = {last.shape: last} if last is not None else {}
            elif len(plans) >= MAX_PLANS_PER_PREFIX:
                self.forget_plans(retired)  # a switch whose updates vary in shape: keep only recent ones
                plans = self.plans = {}
            replaced = plans.get(shape)
            plans[shape] = plan
        if replaced is not None and replaced is not plan and replaced.hits:
            retired.append(replaced)
        self.last = plan

    def forget_plans(self, retired: list[Plan]) -> None:
        retired.extend(plan for plan in self.all_plans() if plan.hits)
        self.plans = None
        self.last = None
