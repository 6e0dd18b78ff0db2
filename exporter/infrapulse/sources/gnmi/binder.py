"""Binding a switch's leaf paths to series, and unbinding them: the one place series come and go.

A leaf path is matched against the profile once (`Binder.bind`); what it maps to becomes a
`Binding` cached under its notification prefix (or, for a JSON leaf, by its path). On the way:
vendor port aliases are translated to port names (a key not placeable yet is held back, see
ports.py), the switch's series limit is kept, ranked rules settle which leaf feeds a series
(prefer.py), `_info` parts join their entity, and coverage counts what each subscribed path
yields. Removal undoes each of those; anything that holds slot numbers or skipped a leaf (the
bulk plans) is forgotten with it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

from ...columns import Column, LabelValues, Slots
from .bindings import Binding, Entity, Prefix, make_binding
from .coverage import SwitchCoverage
from .paths import ElemPath, PathPattern, format_path
from .plans import Plan
from .ports import PortTable
from .prefer import Preferences
from .profile import Profile, SubscriptionSpec
from .series_writes import SeriesWriter

# Unmapped leaf paths are cached as None so they cost one lookup; past this many, stop caching
# them (a device streaming ever-new paths must not grow memory without bound).
MAX_UNMAPPED_CACHED = 200_000


class Binder:
    def __init__(self, name: str, profile: Profile, max_series: int, families: dict[str, Any],
                 slots: Slots, coverage: SwitchCoverage, subs: list[tuple[PathPattern, SubscriptionSpec]],
                 ports: PortTable | None, writer: SeriesWriter, dropped: dict[LabelValues, float]) -> None:
        self.name = name
        self.profile = profile
        self.max_series = max_series
        self.bound = 0  # live bindings, i.e. series this switch holds
        self.unmapped = 0  # unmapped leaf paths cached as None
        # The snapshot's families (see SwitchState): Columns over `slots`, and dicts.
        self.families = families
        self.slots = slots
        self.coverage = coverage
        self.subs = subs
        self.ports = ports
        self.writer = writer
        self.dropped = dropped
        self.key = (name,)
        self.prefixes: dict[bytes, Prefix] = {}
        self.json_bindings: dict[ElemPath, Binding | None] = {}
        self.entities: dict[tuple[str, ElemPath], Entity] = {}
        self.label_tuples: dict[LabelValues, LabelValues] = {}
        self.ranks: Preferences[Binding] = Preferences()  # ranked rules: one leaf per series
        self.retired: list[Plan] = []  # forgotten plans with uncounted hits (see bulk.count_plan_hits)
        self.held_back = False  # set when a bind waited for the port table (see json_values.py)

    # -- binding ------------------------------------------------------------------------------

    def bind(self, rel: ElemPath, key: Any, owner: Prefix | None, hold: bool = True,
             note_miss: Callable[[Any, tuple[str, str]], None] | None = None) -> Binding | None:
        """The binding of a leaf path, `rel` under the notification prefix `owner` (None: a
        JSON leaf, `rel` is its whole path), cached in its home dict under `key`; None when it
        is unmapped, over the series limit or held back (its port is not known yet). With
        hold=False the caller gives the series its slot. Unmapped paths no `ignore` pattern
        covers are noted in through `note_miss(key, (subscribed path, path text))` for the
        coverage counts."""
        home = self.home(owner)
        path = owner.elems + rel if owner is not None else rel
        found = self.profile.resolve(path)
        if found is None:
            if self.unmapped < MAX_UNMAPPED_CACHED:
                self.unmapped += 1
                home[key] = None
                if note_miss is not None and not self.profile.ignored(path):
                    sub = self.subscription_of(path)
                    if sub is not None:  # a path we never asked for is not a mapping's loss
                        note_miss(key, (sub.path, format_path(path)))
            return None
        if self.bound >= self.max_series:
            self.dropped[self.key] += 1
            self.coverage.count_dropped(1)
            return None  # not cached: the path binds once series are freed again
        rule, captured = found
        if rule.alias_keys and self.ports is not None:
            raw = captured["interface"]
            port = self.ports.name(raw)
            if port is None:
                if not self.ports.known:
                    self.held_back = True
                    return None  # held back, not cached: binds once the port table is in
                port = raw  # a key the table does not list: exported as sent
            if port != raw:
                captured = {**captured, "interface": port}
        family = rule.family
        sub = self.subscription_of(path)
        mapping = sub.path if sub is not None else ""
        if rule.sample is not None:
            sample = rule.sample
        else:
            sample = sub is None or sub.expires
        fixed = {"switch": self.name, **rule.const, **{k: sys.intern(v) for k, v in captured.items()}}
        if rule.info_label:  # a part of an `_info` family's entity (the profile gives each one)
            info = self.dict_series(family.name)
            entity_path = path[:rule.entity_len]
            ekey = (family.name, entity_path)
            entity = self.entities.get(ekey)
            if entity is None:
                entity = self.entities[ekey] = Entity(info, fixed, family.labels)
            binding = make_binding(rel, rule, info, (), sample, key, entity, owner, mapping, None)
        else:
            column = self.column(family.name)
            labels = tuple(fixed[name] for name in family.labels)
            labels = self.label_tuples.setdefault(labels, labels)  # share equal tuples
            binding = make_binding(rel, rule, column, labels, sample, key, None, owner, mapping, column)
            if rule.rank is not None and not self.ranks.claim(binding, owner):
                self.coverage.outranked(mapping)
                return None  # a better-ranked leaf feeds this series; not cached: it may bind later
            if hold:
                self.hold(binding)
        home[key] = binding
        self.bound += 1
        if binding.counts_as_series:
            self.coverage.bound(mapping, 1)
        return binding

    def home(self, owner: Prefix | None) -> dict[Any, Binding | None]:
        """The dict bindings under `owner` are cached in (by raw update path; JSON leaves: by path)."""
        return owner.bindings if owner is not None else self.json_bindings

    def column(self, family: str) -> Column:
        """A numeric family's series: a column over the switch's slots."""
        column: Column | None = self.families.get(family)
        if column is None:
            column = self.families[family] = self.slots.column()
        return column

    def dict_series(self, family: str) -> dict[LabelValues, float]:
        """A status or `_info` family's series: a plain dict (`_info` labels come from values,
        churned by entities)."""
        info: dict[LabelValues, float] | None = self.families.get(family)
        if info is None:
            info = self.families[family] = {}
        return info

    @staticmethod
    def hold(b: Binding) -> None:
        if isinstance(b.series, Column):
            b.series.acquire(b.labels)

    def subscription_of(self, path: ElemPath) -> SubscriptionSpec | None:
        """The subscription a leaf path came under (the first whose path covers it)."""
        for pattern, sub in self.subs:
            if len(pattern) <= len(path) and pattern.match(path) is not None:
                return sub
        return None

    # -- removal ------------------------------------------------------------------------------

    def bindings(self) -> Iterator[Binding]:
        for pctx in self.prefixes.values():
            for b in pctx.bindings.values():
                if b is not None:
                    yield b
        for b in self.json_bindings.values():
            if b is not None:
                yield b

    def drop(self, doomed: Callable[[Binding], object]) -> None:
        for b in [b for b in self.bindings() if doomed(b)]:
            self.remove(b)
        columns = [s for s in self.families.values() if isinstance(s, Column)]
        if self.slots.compact_if_sparse(columns):  # slot numbers changed: no plan may keep them
            self.forget_plans()

    def remove(self, b: Binding) -> None:
        if self.home(b.owner).pop(b.key, None) is not None:
            self.bound -= 1
            if b.counts_as_series:
                self.coverage.bound(b.mapping, -1)
        if b.rule.rank is not None:
            for owner in self.ranks.release(b):  # prefixes whose plans skipped a worse-ranked leaf
                owner.forget_plans(self.retired)
        if b.rule.per_port_speed:
            self.writer.forget(b)
        if b.owner is not None:
            b.owner.forget_plans(self.retired)  # plans write straight into slots: none may outlive a binding
        entity = b.entity
        if entity is not None:
            # The entity itself stays: its other parts' bindings still point at it.
            if entity.values.pop(b.rule.info_label, None) is not None:
                entity.refresh(b.rule.info_labels)
        elif isinstance(b.series, Column):
            b.series.release(b.labels)
        else:
            b.series.pop(b.labels, None)

    def forget_plans(self) -> None:
        for pctx in self.prefixes.values():
            pctx.forget_plans(self.retired)

    def release(self) -> None:
        """Drop every binding and cache at once (see SwitchState.release)."""
        for pctx in self.prefixes.values():
            pctx.bindings.clear()
            pctx.forget_plans(self.retired)
        self.prefixes.clear()
        self.retired.clear()
        self.json_bindings.clear()
        self.entities.clear()
        self.label_tuples.clear()
        self.ranks.clear()
        self.bound = 0
