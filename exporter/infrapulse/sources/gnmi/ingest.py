"""Turning one switch's gNMI notifications into live series.

Each switch has one `SwitchState`, which owns a `Snapshot` published into the store once and
then updated in place: everything runs on the event-loop thread, so /metrics always reads a
consistent view, and an update costs a few C-level operations rather than a new snapshot.
Numeric families are `columns.Column`s over the switch's `Slots` (one array of doubles);
`_info` families are plain dicts.

The hot path takes each SubscribeResponse as raw bytes. A notification whose updates all carry
plain numbers (a SAMPLE of counters) goes in bulk: one parse with the `gnmi_wire` bulk view
yields its values by kind and its update path fields as one bytes object (the notification's
"shape"), which finds a cached plan, and the plan writes the values into runs of neighbouring slots,
one slice assignment each (the slots were allocated side by side, by value kind and scale, when
the shape was first planned). Everything else (strings and enums, LLDP parts, JSON subtrees,
mixed or missing values) goes update by update: raw path bytes key a per-prefix cache of
`Binding`s, each pointing straight at the column (or dict) and label tuple it writes. A new
leaf path is matched against the profile once and cached (unmapped leaves cache `None`, so they
cost one lookup). JSON values are flattened into leaves and bound the same way, keyed by their
path tuple.

Series lifetime follows gNMI semantics:
  - the initial sync of a (re)connected stream is the full state: at sync_response every series
    not refreshed since the stream started is dropped (a port that vanished while we were
    disconnected leaves no stale series);
  - `delete` paths drop every series at or below them;
  - SAMPLE series not refreshed for two sweep periods (about three sample intervals) expire
    (PROTO leaves count as refreshed when a notification for their prefix arrives, which also
    keeps suppress_redundant leaves alive);
    ON_CHANGE series (oper-status, LLDP) are kept: silence is their normal state.

What each subscribed path yields is reported to the store (`coverage.SwitchCoverage`): series
per path, and leaves no rule maps (counted per notification on the bulk path's plan, added up
every sweep). Platforms that key ports by a vendor alias on some paths (SONiC) have their keys
translated to port names through the profile's interface table (`ports.PortTable`); JSON values
that arrive before that table are held and applied once it is in.
"""

from __future__ import annotations

import enum
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import repeat
from operator import itemgetter, mul
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb

from ...columns import Column, Slots
from ...store import LabelValues, Snapshot, Store
from . import wire
from .coverage import SwitchCoverage
from .families import (
    FAMILY_SOURCE,
    LAST_UPDATE,
    MALFORMED,
    RECONNECTS,
    SERIES_DROPPED,
    STATUS_FAMILIES,
    SWITCH_UP,
    UPDATES,
)
from .paths import Elem, ElemPath, PathPattern, format_path, from_proto, path_covers, strip_module
from .ports import PortTable
from .prefer import Preferences
from .profile import Profile, Rule, SubscriptionSpec
from .values import (
    JSON_FIELDS,
    NUMERIC_FIELDS,
    MalformedValue,
    flatten_json,
    load_json,
    scalar,
    to_number,
    utc_timestamp,
)


class _Missing(enum.Enum):
    """A `dict.get` default the type checker tells apart from a cached None (an unmapped path)."""

    MISSING = enum.auto()


_MISSING: Final = _Missing.MISSING
_T = TypeVar("_T")
# A notification's value kinds, in order, and how many values of each (see `_apply_bulk`).
_Signature = tuple[tuple[FieldDescriptor, int], ...]
# One slice assignment of a plan: (index of the value kind in the signature, picker of that
# kind's values, first slot, end slot, scale or None); see `SwitchState._plan`.
_Run = tuple[int, Callable[[Any], Any], int, int, float | None]
# Notification shapes remembered per prefix; a switch varies them (suppress_redundant sends only
# what changed), so keep a few and start over when they run out.
MAX_PLANS_PER_PREFIX = 4
_STATUS_NAMES = frozenset(f.name for f in STATUS_FAMILIES)
# Unmapped leaf paths are cached as None so they cost one lookup; past this many, stop caching
# them (a device streaming ever-new paths must not grow memory without bound).
MAX_UNMAPPED_CACHED = 200_000
# Update paths relative to their prefix repeat across ports and switches ("state/counters/
# in-octets"): one decoded, shared copy per distinct serialized path, process-wide. Bounded.
_REL_PATHS: dict[tuple[bytes, bool], tuple[bytes, ElemPath]] = {}
MAX_SHARED_PATHS = 100_000
# Notification prefixes repeat across switches (every switch has its swp1 ... and queue 3 under
# them) and their elements across a switch's prefixes (one port's queues share its interface
# element): one shared copy of each decoded prefix and element, process-wide. Bounded. A decoded
# prefix is ~1 kB of small tuples and strings; a 64-port switch sends ~2,600 of them.
_PREFIX_PATHS: dict[ElemPath, ElemPath] = {}
_PREFIX_ELEMS: dict[Elem, Elem] = {}
# The serialized prefixes too (each switch's key for its prefix state): equal across switches
# unless the target puts its own name in the prefix.
_RAW_PREFIXES: dict[bytes, bytes] = {}
MAX_SHARED_PREFIXES = 200_000
# Notification shapes (every update path of a notification, as sent) repeat across the ports and
# switches of one model: one shared copy each, process-wide. Bounded.
_SHAPES: dict[bytes, bytes] = {}
MAX_SHARED_SHAPES = 20_000
# So do a plan's value signature and the pickers of its runs (the same positions in every port's
# notification): one shared copy each, process-wide. Bounded.
_SIGNATURES: dict[_Signature, _Signature] = {}
_PICKERS: dict[tuple[int, ...], Callable[[Any], Any]] = {}
MAX_SHARED_PLAN_PARTS = 20_000
# Default per-switch limit on live series (one binding each); a 128-port switch with 8 queues
# and every family needs about 12k.
DEFAULT_MAX_SERIES = 50_000


def _interned(elem: Elem) -> Elem:
    """A path element with its name, key names and key values interned."""
    name, keys = elem
    return sys.intern(name), tuple((sys.intern(k), sys.intern(v)) for k, v in keys)


def _relative_path(pk: bytes, strip: bool) -> tuple[bytes, ElemPath]:
    """(shared copy of the path bytes, decoded path) of an update path, shared by every binding
    using it. Raises DecodeError for bytes that are not a gnmi.Path."""
    found = _REL_PATHS.get((pk, strip))
    if found is None:
        path = pb.Path.FromString(pk)
        found = (pk, tuple(_interned(elem) for elem in from_proto(path, strip)))
        if len(_REL_PATHS) < MAX_SHARED_PATHS:
            _REL_PATHS[(pk, strip)] = found
    return found


def _shared(table: dict[_T, _T], value: _T, limit: int) -> _T:
    """One copy of `value` for every prefix and switch sending it (serialized prefixes, shapes,
    signatures). Bounded: past `limit` entries a value keeps its own copy."""
    found = table.get(value)
    if found is None:
        found = value
        if len(table) < limit:
            table[value] = value
    return found


def _shared_prefix(path: ElemPath) -> ElemPath:
    """One copy of a decoded notification prefix (and of each of its elements) for every prefix
    and switch sending it. Bounded: past the limit a prefix keeps its own copy."""
    found = _PREFIX_PATHS.get(path)
    if found is not None:
        return found
    if len(_PREFIX_PATHS) >= MAX_SHARED_PREFIXES:
        return path
    found = _PREFIX_PATHS[path] = tuple(_PREFIX_ELEMS.setdefault(e, e) for e in map(_interned, path))
    return found


def _raw_updates(raw: bytes) -> Any:
    """Each update of the notification in SubscribeResponse bytes `raw`, as its own raw bytes."""
    return wire.RawSubscribeResponse.FromString(raw).update.update


def _picker(positions: list[int]) -> Callable[[Any], Any]:
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


def _runs(writes: list[tuple[int, float, int, Column, LabelValues]]) -> tuple[_Run, ...]:
    """A plan's writes, (kind, scale, index in that kind's values, column, labels), as runs of
    consecutive slots that share a value kind and scale: each run is one slice assignment."""
    targets: dict[tuple[int, float], list[tuple[int, int]]] = {}
    for kind, scale, index, column, labels in writes:
        targets.setdefault((kind, scale), []).append((column.slot(labels), index))
    runs: list[_Run] = []
    for (kind, scale), pairs in targets.items():
        pairs.sort()  # by slot; two leaves writing one series keep their order (the last wins)
        first = 0
        for i in range(1, len(pairs) + 1):
            if i == len(pairs) or pairs[i][0] != pairs[i - 1][0] + 1:
                run = pairs[first:i]
                runs.append((kind, _picker([index for _, index in run]), run[0][0], run[-1][0] + 1,
                             None if scale == 1.0 else scale))
                first = i
    return tuple(runs)


def _under(target: ElemPath) -> Callable[[Binding], bool]:
    """Whether a binding's path is at or below `target`: what deleting `target` drops."""
    return lambda b: path_covers(target, b.path)


class _Entity:
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
                 labels: LabelValues, sample: bool, key: Any, entity: _Entity | None = None,
                 owner: _Prefix | None = None, mapping: str = "", column: Column | None = None) -> None:
        self.rel = rel
        self.rule = rule
        self.series = series  # a Column; the _info dict for the parts of an entity
        self.labels = labels  # (the scale is the rule's: not kept here, 8 bytes per series)
        # `series` again (the caller passes it when `series` is a Column), for plain numbers only:
        # the hot paths write these straight into their column; enums, _info parts, time stamps
        # and per-speed values take `_set`
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
                 labels: LabelValues, sample: bool, entity: _Entity | None = None, mapping: str = "",
                 column: Column | None = None) -> None:
        super().__init__(rel, rule, series, labels, sample, rel, entity, None, mapping, column)
        self.seen = 0

    @property
    def last_seen(self) -> int:
        return self.seen


def _binding(rel: ElemPath, rule: Rule, series: Column | dict[LabelValues, float], labels: LabelValues,
             sample: bool, key: Any, entity: _Entity | None, owner: _Prefix | None, mapping: str,
             column: Column | None) -> Binding:
    """A leaf's binding: under a notification prefix (`owner`), or a JSON leaf's (no owner)."""
    if owner is None:
        return JsonBinding(rel, rule, series, labels, sample, entity, mapping, column)
    return Binding(rel, rule, series, labels, sample, key, entity, owner, mapping, column)


class _Plan:
    """How the bulk path writes notifications of one shape (see `SwitchState._plan`)."""

    __slots__ = ("shape", "signature", "runs", "count", "unmapped", "hits")

    def __init__(self, shape: bytes, signature: _Signature, runs: tuple[_Run, ...] | None, count: int,
                 unmapped: tuple[tuple[str, str, int], ...] = ()) -> None:
        self.shape = shape  # the update path fields, as the bulk view keeps them
        self.signature = signature  # ((value kind field, how many), ...)
        self.runs = runs  # None: some leaf needs the per-update path
        self.count = count  # updates in such a notification
        self.unmapped = unmapped  # (mapping, sample path, leaves) no rule maps, per notification
        self.hits = 0  # notifications taken with it since its unmapped leaves were last counted


_NO_MISSES: Mapping[bytes, tuple[str, str]] = MappingProxyType({})


class _Prefix:
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
        self.plans: dict[bytes, _Plan] | None = None
        self.last: _Plan | None = None  # the plan used last: a prefix mostly sends one shape
        self.seen = 0

    def note_miss(self, key: bytes, what: tuple[str, str]) -> None:
        misses = self.misses
        if not isinstance(misses, dict):
            misses = self.misses = {}
        misses[key] = what

    def all_plans(self) -> Iterable[_Plan]:
        if self.plans is not None:
            return self.plans.values()
        return (self.last,) if self.last is not None else ()

    def keep_plan(self, shape: bytes, plan: _Plan, retired: list[_Plan]) -> None:
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

    def forget_plans(self, retired: list[_Plan]) -> None:
        retired.extend(plan for plan in self.all_plans() if plan.hits)
        self.plans = None
        self.last = None


class _JsonUpdate:
    """What a JSON value's update path is, looked up once per path."""

    __slots__ = ("empty_entry_deletes", "port_table")

    def __init__(self, empty_entry_deletes: bool, port_table: bool) -> None:
        self.empty_entry_deletes = empty_entry_deletes
        self.port_table = port_table


class SwitchState:
    def __init__(self, name: str, profile: Profile, max_series: int = DEFAULT_MAX_SERIES,
                 store: Store | None = None, source: str = FAMILY_SOURCE) -> None:
        self.name = name
        self.profile = profile
        self.max_series = max_series
        self.bound = 0  # live bindings, i.e. series this switch holds
        self.strip = profile.strip_modules
        self.snapshot = Snapshot()
        # The snapshot's families as this state fills them: status and `_info` families in dicts
        # of floats, numeric ones in Columns, which the store's readers take as the Mappings they
        # are (see Snapshot). Typed Any at this one boundary; what comes out is typed again.
        self._families: dict[str, Any] = self.snapshot.series
        self.slots = Slots()  # every numeric series' value (see columns.py)
        for family in STATUS_FAMILIES:
            self._families[family.name] = {}
        self._key = (name,)
        self._up = self._dict_series(SWITCH_UP.name)
        self._updates = self._dict_series(UPDATES.name)
        self._malformed = self._dict_series(MALFORMED.name)
        self._last = self._dict_series(LAST_UPDATE.name)
        self._reconnects = self._dict_series(RECONNECTS.name)
        self._dropped = self._dict_series(SERIES_DROPPED.name)
        self._dropped[self._key] = 0.0
        self._up[self._key] = 0.0
        self._updates[self._key] = 0.0
        self._malformed[self._key] = 0.0
        self._reconnects[self._key] = 0.0
        self._prefixes: dict[bytes, _Prefix] = {}
        self._json_bindings: dict[ElemPath, Binding | None] = {}
        self._entities: dict[tuple[str, ElemPath], _Entity] = {}
        self._label_tuples: dict[LabelValues, LabelValues] = {}
        self._unmapped = 0
        self._json_misses: dict[ElemPath, tuple[str, str]] = {}
        self._json_updates: dict[ElemPath, _JsonUpdate] = {}
        # Every subscription with its pattern: which one a leaf came under (SAMPLE or ON_CHANGE,
        # its stream's flags, and the "mapping" its coverage is reported under).
        self._subs = [(PathPattern(sub.path, self.strip), sub)
                      for stream in profile.streams for sub in stream.subscriptions]
        self.coverage = SwitchCoverage(list(dict.fromkeys(sub.path for _, sub in self._subs)),
                                       store, source, name)
        table = profile.interface_table
        self.ports = PortTable(table.alias, table.speed_mbps) if table is not None else None
        self._quanta: dict[tuple[str, tuple[str, ...]], float] = {}  # per-speed series: last raw value
        self._retired: list[_Plan] = []  # forgotten plans with uncounted hits (_count_plan_hits)
        # JSON values that arrived before the port table, latest per path (see _apply_doc)
        self._held: dict[ElemPath, Any] = {}
        self._held_back = False
        self._ranks: Preferences[Binding] = Preferences()  # ranked rules: one leaf per series (see prefer.py)
        self.tick = 1  # sweep generation; bindings remember the tick they were last written in
        self._session_tick = 1
        self.last_rx = 0.0  # wall time of the last notification

    # -- status -----------------------------------------------------------------------------

    def set_up(self, up: bool) -> None:
        self._up[self._key] = 1.0 if up else 0.0

    @property
    def up(self) -> bool:
        return self._up[self._key] == 1.0

    def count_reconnect(self) -> None:
        self._reconnects[self._key] += 1.0

    @property
    def updates(self) -> float:
        return self._updates[self._key]

    @property
    def malformed(self) -> float:
        return self._malformed[self._key]

    # -- stream life cycle --------------------------------------------------------------------

    def begin_session(self) -> None:
        """A new Subscribe session starts: what its initial sync does not refresh is stale."""
        self.tick += 1
        self._session_tick = self.tick

    def on_sync(self) -> None:
        start = self._session_tick
        self._drop(lambda b: b.last_seen < start)
        if self.ports is not None and not self.ports.known:
            # every stream sent its initial state and the port table was not in it: keys that are
            # not known aliases are port names from now on
            self.ports.known = True
            self._release_held()
        self.publish_coverage()

    def sweep(self) -> None:
        """Called every sweep period: expire SAMPLE series not refreshed for two periods."""
        self.tick += 1
        limit = self.tick - 2
        self._drop(lambda b: b.sample and b.last_seen < limit)
        self.publish_coverage()

    def publish_coverage(self) -> None:
        """Hand the coverage to the store (series per subscribed path, unmapped leaves)."""
        self._count_plan_hits()
        self.coverage.publish()

    def _count_plan_hits(self) -> None:
        """The bulk path only counts notifications per plan; turn them into unmapped leaves."""
        plans = [plan for pctx in self._prefixes.values() for plan in pctx.all_plans() if plan.hits]
        plans += self._retired
        self._retired.clear()
        for plan in plans:
            for mapping, sample, leaves in plan.unmapped:
                self.coverage.count_unmapped(mapping, sample, leaves * plan.hits)
            plan.hits = 0

    def clear_data(self) -> None:
        """The switch has been unreachable past the staleness window: drop every data series."""
        self._drop(lambda b: True)  # empties every column
        for name, series in self.snapshot.series.items():
            if name not in _STATUS_NAMES and isinstance(series, dict):
                series.clear()

    def release(self) -> None:
        """The switch is gone (removed from the targets, or the source stops): drop everything
        now. Bindings point back at the dicts holding them; without this a whole switch state
        would wait for Python's cyclic GC, and a fabric-wide resync would hold two of them."""
        for pctx in self._prefixes.values():
            pctx.bindings.clear()
            pctx.forget_plans(self._retired)
        self._prefixes.clear()
        self._retired.clear()
        self._json_bindings.clear()
        self._json_misses.clear()
        self._json_updates.clear()
        self._held.clear()
        self._entities.clear()
        self._label_tuples.clear()
        self._ranks.clear()
        self.bound = 0

    # -- ingest -------------------------------------------------------------------------------

    def apply(self, n: Any) -> None:
        """Take one decoded `gnmi.Notification` (tests, tools); streams use `apply_wire`."""
        raw = pb.SubscribeResponse(update=n).SerializeToString()
        self.apply_wire(wire.SubscribeResponse.FromString(raw).update, raw)

    def apply_wire(self, n: Any, raw: bytes) -> None:
        """Take one notification into the live series: the hot path. `n` is the bulk view
        (`gnmi_wire.SubscribeResponse`) of the SubscribeResponse bytes `raw`, or None when the
        bulk view could not parse them (an update inside is damaged). Counter samples go in bulk
        (`_apply_bulk`); anything else update by update, from `raw`."""
        key = self._key
        if n is None:
            try:
                response = wire.RawSubscribeResponse.FromString(raw)
            except DecodeError:
                response = None
            if response is None or response.WhichOneof("response") != "update":
                self._malformed[key] += 1
                return
            prefix, deletes = response.update.prefix, response.update.delete
        else:
            prefix, deletes = n.prefix, n.delete
        self.last_rx = now = time.time()
        self._last[key] = now
        pctx = self._prefixes.get(prefix)
        if pctx is None:
            pctx = self._new_prefix(prefix, raw)
            if pctx is None:
                if deletes:  # deletes still apply: they are what frees room
                    self._delete_raw((), prefix, deletes)
                return
        pctx.seen = self.tick
        taken = None if n is None else self._apply_bulk(pctx, n.update, raw)
        if taken is not None:
            self._updates[key] += taken
        else:
            raw_updates = _raw_updates(raw)
            self._updates[key] += len(raw_updates)
            bad = self._apply_each(pctx, raw_updates)
            if bad:
                self._malformed[key] += bad
        if deletes:
            self._delete_raw(pctx.elems, b"", deletes)
        if self._ranks.displaced:
            self._settle_preferences(raw)

    def _settle_preferences(self, raw: bytes) -> None:
        """A better-ranked leaf took series over in this notification (see prefer.py): drop the
        bindings it displaced, then apply the notification again without them, so that none of
        them wrote last (its updates are counted once)."""
        for b in self._ranks.take_displaced():
            if self._home(b.owner).get(b.key) is b:
                self._remove(b)
        key = self._key
        counted = self._updates[key], self._malformed[key]
        self.apply_wire(None, raw)
        self._updates[key], self._malformed[key] = counted

    def _new_prefix(self, raw_prefix: bytes, raw: bytes) -> _Prefix | None:
        """The state of a prefix seen for the first time, or None when it cannot be kept: its
        updates are then counted (as dropped, or malformed) and skipped."""
        over_limit = self.bound >= self.max_series or len(self._prefixes) >= self.max_series
        if not over_limit:  # a new prefix could only bring new series (or unmapped paths to remember)
            try:
                pctx = self._prefixes[_shared(_RAW_PREFIXES, raw_prefix, MAX_SHARED_PREFIXES)] = _Prefix(
                    _shared_prefix(from_proto(pb.Path.FromString(raw_prefix), self.strip)))
                return pctx
            except DecodeError:
                pass
        count = len(_raw_updates(raw))
        self._updates[self._key] += count
        if over_limit:
            self._dropped[self._key] += count
            self.coverage.count_dropped(count)
        else:
            self._malformed[self._key] += max(count, 1)
        return None

    def _apply_bulk(self, pctx: _Prefix, merged: Any, raw: bytes) -> int | None:
        """All updates at once, when their shape and value kinds match a plan (see `gnmi_wire`):
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
        if plan.unmapped:  # one increment per notification; see _count_plan_hits
            plan.hits += 1
        return plan.count

    def _plan(self, pctx: _Prefix, shape: bytes, signature: _Signature, raw: bytes) -> _Plan | None:
        """Plan a notification shape once: which values go to which run of slots.

        The plan is cached on the prefix; each of its runs is (index of the value kind in
        `signature`, picker of that kind's values, first slot, end slot, scale or None), one
        slice assignment into the switch's `Slots`. Its runs are None when some leaf needs
        per-leaf handling (an enum, an `_info` part, a value that is not a number, a JSON
        subtree). Returns None when the shape cannot be planned now: an update without exactly
        one path and one value (or with other fields), an undecodable value, or binding every
        path could cross the series limit (the per-update path counts those)."""
        try:
            updates = [wire.Update.FromString(u) for u in _raw_updates(raw)]
            kinds = [pb.TypedValue.FromString(u.val).WhichOneof("value") for u in updates]
        except DecodeError:
            return None
        paths = [u.path for u in updates]
        if (self.bound + len(paths) > self.max_series or sum(n for _, n in signature) != len(paths)
                or wire.Shape(path=paths).SerializeToString() != shape):
            return None
        slots = {field.name: slot for slot, (field, _) in enumerate(signature)}
        seen = dict.fromkeys(slots, 0)  # values of each kind before this position
        # (kind, scale, index, column, labels)
        writes: list[tuple[int, float, int, Column, LabelValues]] | None = []
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
                b = bindings.get(path, _MISSING)
                if b is _MISSING:
                    try:
                        path, rel = _relative_path(path, self.strip)
                    except DecodeError:
                        return None
                    b = self._bind(rel, path, pctx, hold=False, note_miss=pctx.note_miss)
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
                self._hold(b)
        if writes is not None:
            for *_, column, labels in writes:
                column.reveal(labels)  # the bulk write that follows fills every one
        shape = _shared(_SHAPES, shape, MAX_SHARED_SHAPES)
        signature = _shared(_SIGNATURES, signature, MAX_SHARED_PLAN_PARTS)
        plan = _Plan(shape, signature, None if writes is None else _runs(writes), len(paths),
                     tuple((mapping, sample, n) for mapping, (sample, n) in unmapped.items()))
        pctx.keep_plan(shape, plan, self._retired)
        return plan

    def _apply_each(self, pctx: _Prefix, raw_updates: Any) -> int:
        """The general path, one update at a time; returns the number of malformed updates."""
        get = pctx.bindings.get
        bad = 0
        unmapped: dict[str, list[Any]] | None = None  # mapping -> [sample, leaves]
        for raw in raw_updates:
            try:
                u = wire.Update.FromString(raw)
                val = pb.TypedValue.FromString(u.val)
            except DecodeError:
                bad += 1
                continue
            which = val.WhichOneof("value")
            b = get(u.path, _MISSING)
            if b is None or b is _MISSING:
                if which in JSON_FIELDS:  # a JSON value binds per leaf inside it
                    bad += self._apply_json(pctx.elems, u.path, val, which)
                    continue
                if b is _MISSING:
                    try:
                        pk, rel = _relative_path(u.path, self.strip)
                    except DecodeError:
                        bad += 1
                        continue
                    b = self._bind(rel, pk, pctx, note_miss=pctx.note_miss)
                if b is None:
                    miss = pctx.misses.get(u.path)
                    if miss is not None:
                        if unmapped is None:
                            unmapped = {}
                        unmapped.setdefault(miss[0], [miss[1], 0])[1] += 1
                    continue
            if which in NUMERIC_FIELDS and b.column is not None:
                b.column[b.labels] = getattr(val, which) * b.rule.scale
                continue
            try:
                self._set(b, load_json(getattr(val, which)) if which in JSON_FIELDS else scalar(val, which))
            except MalformedValue:
                bad += 1
        if unmapped:
            for mapping, (sample, leaves) in unmapped.items():
                self.coverage.count_unmapped(mapping, sample, leaves)
        return bad

    def _apply_json(self, base: ElemPath, raw_path: bytes, val: Any, which: str) -> int:
        try:
            doc = load_json(getattr(val, which))
            path = base + from_proto(pb.Path.FromString(raw_path), self.strip)
        except (MalformedValue, DecodeError):
            return 1
        update = self._json_update(path)
        if update.empty_entry_deletes and isinstance(doc, dict):
            for key, entry in doc.items():
                if isinstance(entry, dict) and not entry:  # SONiC: {"Ethernet0": {}} = key deleted
                    self._drop(_under(path + ((key, ()),)))
        bad = self._apply_doc(path, doc)
        if update.port_table and self.ports is not None:
            self._take_port_table(self.ports, doc)
        return bad

    def _apply_doc(self, path: ElemPath, doc: Any, replay: bool = False) -> int:
        """Bind and write every leaf of a JSON value at `path`; returns the malformed count.
        A value with leaves held back (their port key is not known yet) is kept, the latest per
        path, and applied again (`replay`: its unmapped leaves were counted already) once the
        port table is in."""
        self._held_back = False
        cache = self._json_bindings
        misses = self._json_misses
        tick = self.tick
        bad = 0
        unmapped = 0
        miss: tuple[str, str] | None = None
        for leaf, value in flatten_json(path, doc, self.profile.list_keys, self.strip):
            b = cache.get(leaf, _MISSING)
            if b is _MISSING:
                b = self._bind(leaf, leaf, None, note_miss=misses.__setitem__)
            if b is None:
                found = misses.get(leaf)
                if found is not None:
                    unmapped += 1
                    miss = miss or found
                continue
            cast(JsonBinding, b).seen = tick
            try:
                self._set(b, value)
            except MalformedValue:
                bad += 1
        if miss is not None and not replay:
            self.coverage.count_unmapped(miss[0], miss[1], unmapped)
        if self._held_back:
            self._held[path] = doc
        return bad

    def _json_update(self, path: ElemPath) -> _JsonUpdate:
        found = self._json_updates.get(path)
        if found is None:
            sub = self._subscription_of(path)
            table = self.profile.interface_table
            found = _JsonUpdate(
                sub is not None and sub.empty_entry_deletes,
                (table is not None and len(table.pattern) == len(path)
                 and table.pattern.match(path) is not None))
            if len(self._json_updates) < MAX_SHARED_PATHS:
                self._json_updates[path] = found
        return found

    def _take_port_table(self, ports: PortTable, doc: Any) -> None:
        """A reply of the interface table: learn names, aliases and speeds; series bound under a
        key whose meaning changed (a new or renamed alias) are bound again on their next sample."""
        was_known = ports.known
        changed = ports.update(doc)
        if not was_known:
            self._release_held()
        elif changed:
            self._drop(lambda b: b.rule.alias_keys and self._raw_interface(b) in changed)

    def _release_held(self) -> None:
        """The port table is known: apply the values that waited for it."""
        self._forget_plans()  # plans made while leaves were held back lack them
        held, self._held = self._held, {}
        for path, doc in held.items():
            self._malformed[self._key] += self._apply_doc(path, doc, replay=True)

    @staticmethod
    def _raw_interface(b: Binding) -> str | None:
        captured = b.rule.pattern.match(b.path)
        return None if captured is None else captured.get("interface")

    def _forget_plans(self) -> None:
        for pctx in self._prefixes.values():
            pctx.forget_plans(self._retired)

    def _set(self, b: Binding, value: Any) -> None:
        entity = b.entity
        if entity is not None:
            if isinstance(value, (dict, list)):
                raise MalformedValue("expected a scalar")
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            if entity.values.get(b.rule.info_label) != text:
                entity.values[b.rule.info_label] = text
                entity.refresh(b.rule.info_labels)
            return
        rule = b.rule
        if rule.values is not None and isinstance(value, str):
            number = rule.values.get(value)
            if number is None:
                number = rule.values.get(strip_module(value))  # identityref values may be qualified
            if number is None:
                if rule.default is None:
                    raise MalformedValue(f"unknown value {value[:40]!r}")
                number = rule.default
            b.series[b.labels] = number
            return
        if rule.time_format:
            b.series[b.labels] = utc_timestamp(value, rule.time_format)
            return
        if rule.per_port_speed:
            self._set_per_speed(b, to_number(value))
            return
        b.series[b.labels] = to_number(value) * b.rule.scale

    def _set_per_speed(self, b: Binding, raw: float) -> None:
        """A counter in bit times (SAI pause quanta x 512): seconds at the port's current speed,
        accumulated delta by delta, so a speed change never makes the counter jump back."""
        rule = b.rule
        port = b.labels[rule.family.labels.index("interface")]
        speed = self.ports.speed_bps.get(port) if self.ports is not None else None
        if speed is None:
            return  # not yet known: no series rather than a wrong one
        key = (rule.family.name, b.labels)
        last = self._quanta.get(key)
        self._quanta[key] = raw
        if last is None or b.labels not in b.series:
            b.series[b.labels] = raw * b.rule.scale / speed
            return
        delta = raw - last if raw >= last else raw  # a reset on the switch starts from 0
        b.series[b.labels] = float(b.series[b.labels]) + delta * b.rule.scale / speed

    def _bind(self, rel: ElemPath, key: Any, owner: _Prefix | None, hold: bool = True,
              note_miss: Callable[[Any, tuple[str, str]], None] | None = None) -> Binding | None:
        """The binding of a leaf path, `rel` under the notification prefix `owner` (None: a
        JSON leaf, `rel` is its whole path), cached in its home dict under `key`; None when it
        is unmapped, over the series limit or held back (its port is not known yet). With
        hold=False the caller gives the series its slot. Unmapped paths no `ignore` pattern
        covers are noted in through `note_miss(key, (subscribed path, path text))` for the
        coverage counts."""
        home = self._home(owner)
        path = owner.elems + rel if owner is not None else rel
        found = self.profile.resolve(path)
        if found is None:
            if self._unmapped < MAX_UNMAPPED_CACHED:
                self._unmapped += 1
                home[key] = None
                if note_miss is not None and not self.profile.ignored(path):
                    sub = self._subscription_of(path)
                    if sub is not None:  # a path we never asked for is not a mapping's loss
                        note_miss(key, (sub.path, format_path(path)))
            return None
        if self.bound >= self.max_series:
            self._dropped[self._key] += 1
            self.coverage.count_dropped(1)
            return None  # not cached: the path binds once series are freed again
        rule, captured = found
        if rule.alias_keys and self.ports is not None:
            raw = captured["interface"]
            port = self.ports.name(raw)
            if port is None:
                if not self.ports.known:
                    self._held_back = True
                    return None  # held back, not cached: binds once the port table is in
                port = raw  # a key the table does not list: exported as sent
            if port != raw:
                captured = {**captured, "interface": port}
        family = rule.family
        sub = self._subscription_of(path)
        mapping = sub.path if sub is not None else ""
        if rule.sample is not None:
            sample = rule.sample
        else:
            sample = sub is None or sub.expires
        fixed = {"switch": self.name, **rule.const, **{k: sys.intern(v) for k, v in captured.items()}}
        if rule.info_label:  # a part of an `_info` family's entity (the profile gives each one)
            info = self._dict_series(family.name)
            entity_path = path[:rule.entity_len]
            ekey = (family.name, entity_path)
            entity = self._entities.get(ekey)
            if entity is None:
                entity = self._entities[ekey] = _Entity(info, fixed, family.labels)
            binding = _binding(rel, rule, info, (), sample, key, entity, owner, mapping, None)
        else:
            column = self._column(family.name)
            labels = tuple(fixed[name] for name in family.labels)
            labels = self._label_tuples.setdefault(labels, labels)  # share equal tuples
            binding = _binding(rel, rule, column, labels, sample, key, None, owner, mapping, column)
            if rule.rank is not None and not self._ranks.claim(binding, owner):
                self.coverage.outranked(mapping)
                return None  # a better-ranked leaf feeds this series; not cached: it may bind later
            if hold:
                self._hold(binding)
        home[key] = binding
        self.bound += 1
        if binding.counts_as_series:
            self.coverage.bound(mapping, 1)
        return binding

    def _home(self, owner: _Prefix | None) -> dict[Any, Binding | None]:
        """The dict bindings under `owner` are cached in (by raw update path; JSON leaves: by path)."""
        return owner.bindings if owner is not None else self._json_bindings

    def _column(self, family: str) -> Column:
        """A numeric family's series: a column over the switch's slots."""
        column: Column | None = self._families.get(family)
        if column is None:
            column = self._families[family] = self.slots.column()
        return column

    def _dict_series(self, family: str) -> dict[LabelValues, float]:
        """A status or `_info` family's series: a plain dict (`_info` labels come from values,
        churned by entities)."""
        info: dict[LabelValues, float] | None = self._families.get(family)
        if info is None:
            info = self._families[family] = {}
        return info

    @staticmethod
    def _hold(b: Binding) -> None:
        if isinstance(b.series, Column):
            b.series.acquire(b.labels)

    def _subscription_of(self, path: ElemPath) -> SubscriptionSpec | None:
        """The subscription a leaf path came under (the first whose path covers it)."""
        for pattern, sub in self._subs:
            if len(pattern) <= len(path) and pattern.match(path) is not None:
                return sub
        return None

    def mapped_rules(self) -> set[int]:
        """The profile's metrics entries (by index) that feed at least one series now (`doctor`
        counts the mappings a switch answers with this)."""
        return {b.rule.index for b in self._bindings()}

    # -- removal ------------------------------------------------------------------------------

    def _bindings(self) -> Iterator[Binding]:
        for pctx in self._prefixes.values():
            for b in pctx.bindings.values():
                if b is not None:
                    yield b
        for b in self._json_bindings.values():
            if b is not None:
                yield b

    def _drop(self, doomed: Callable[[Binding], object]) -> None:
        for b in [b for b in self._bindings() if doomed(b)]:
            self._remove(b)
        columns = [s for s in self._families.values() if isinstance(s, Column)]
        if self.slots.compact_if_sparse(columns):  # slot numbers changed: no plan may keep them
            self._forget_plans()

    def _remove(self, b: Binding) -> None:
        if self._home(b.owner).pop(b.key, None) is not None:
            self.bound -= 1
            if b.counts_as_series:
                self.coverage.bound(b.mapping, -1)
        if b.rule.rank is not None:
            for owner in self._ranks.release(b):  # prefixes whose plans skipped a worse-ranked leaf
                owner.forget_plans(self._retired)
        if b.rule.per_port_speed:
            self._quanta.pop((b.rule.family.name, b.labels), None)
        if b.owner is not None:
            b.owner.forget_plans(self._retired)  # plans write straight into slots: none may outlive a binding
        entity = b.entity
        if entity is not None:
            # The entity itself stays: its other parts' bindings still point at it.
            if entity.values.pop(b.rule.info_label, None) is not None:
                entity.refresh(b.rule.info_labels)
        elif isinstance(b.series, Column):
            b.series.release(b.labels)
        else:
            b.series.pop(b.labels, None)

    def _delete_raw(self, prefix: ElemPath, raw_prefix: bytes, deletes: Any) -> None:
        """Drop the series at or below each delete path (raw gnmi.Path bytes under the prefix,
        given decoded or, for a prefix not seen before, raw)."""
        try:
            if raw_prefix:
                prefix = from_proto(pb.Path.FromString(raw_prefix), self.strip)
            targets = [prefix + from_proto(pb.Path.FromString(d), self.strip) for d in deletes]
        except DecodeError:
            self._malformed[self._key] += 1
            return
        for target in targets:
            self._drop(_under(target))

    def series_count(self) -> int:
        return len(self.snapshot)
