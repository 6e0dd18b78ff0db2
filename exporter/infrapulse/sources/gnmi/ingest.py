"""Turning one switch's gNMI notifications into live series.

Each switch has one `SwitchState`, which owns a `Snapshot` published into the store once and
then updated in place: everything runs on the event-loop thread, so /metrics always reads a
consistent view, and an update costs a few C-level operations rather than a new snapshot.
Numeric families are `columns.Column`s over the switch's `Slots` (one array of doubles);
`_info` families are plain dicts.

`SwitchState` coordinates; the work is done by its parts, one concern each:

  bulk.py           the hot path: a notification of plain numbers (a SAMPLE of counters) written
                    through a cached plan (plans.py) as a few slice assignments
  per_update.py     everything else, update by update from the raw bytes
  json_values.py    JSON subtrees flattened into leaves; values held until the port table is in
  binder.py         leaf paths bound to series (profile match, aliases, limits, preferences,
                    coverage counts) and unbound again
  bindings.py       what a binding is, and the notification prefixes caching them
  series_writes.py  values that need a meaning first: enums, time stamps, `_info` parts, bit times
  deletes.py        gNMI deletes
  shared.py         one process-wide copy of the paths, prefixes and shapes every switch sends

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

import time
from typing import Any

from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb

from ...columns import Slots
from ...store import LabelValues, Snapshot, Store
from . import wire
from .binder import Binder
from .bindings import Binding, Prefix
from .bulk import BulkPath, count_plan_hits
from .coverage import SwitchCoverage
from .deletes import delete_targets, under
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
from .json_values import JsonValues
from .paths import ElemPath, PathPattern, from_proto
from .per_update import UpdatePath
from .ports import PortTable
from .profile import Profile
from .series_writes import SeriesWriter
from .shared import MAX_SHARED_PREFIXES, RAW_PREFIXES, shared, shared_prefix
from .wire import raw_updates as _raw_updates

_STATUS_NAMES = frozenset(f.name for f in STATUS_FAMILIES)
# Default per-switch limit on live series (one binding each); a 128-port switch with 8 queues
# and every family needs about 12k.
DEFAULT_MAX_SERIES = 50_000


class SwitchState:
    def __init__(self, name: str, profile: Profile, max_series: int = DEFAULT_MAX_SERIES,
                 store: Store | None = None, source: str = FAMILY_SOURCE) -> None:
        self.name = name
        self.profile = profile
        self.max_series = max_series
        self.strip = profile.strip_modules
        self.snapshot = Snapshot()
        # The snapshot's families as this state fills them: status and `_info` families in dicts
        # of floats, numeric ones in Columns, which the store's readers take as the Mappings they
        # are (see Snapshot). Typed Any at this one boundary; what comes out is typed again.
        families: dict[str, Any] = self.snapshot.series
        self.slots = Slots()  # every numeric series' value (see columns.py)
        for family in STATUS_FAMILIES:
            families[family.name] = {}
        self._key = key = (name,)
        self._up: dict[LabelValues, float] = families[SWITCH_UP.name]
        self._updates: dict[LabelValues, float] = families[UPDATES.name]
        self._malformed: dict[LabelValues, float] = families[MALFORMED.name]
        self._last: dict[LabelValues, float] = families[LAST_UPDATE.name]
        self._reconnects: dict[LabelValues, float] = families[RECONNECTS.name]
        self._dropped: dict[LabelValues, float] = families[SERIES_DROPPED.name]
        for counter in (self._dropped, self._up, self._updates, self._malformed, self._reconnects):
            counter[key] = 0.0
        # Every subscription with its pattern: which one a leaf came under (SAMPLE or ON_CHANGE,
        # its stream's flags, and the "mapping" its coverage is reported under).
        subs = [(PathPattern(sub.path, self.strip), sub)
                for stream in profile.streams for sub in stream.subscriptions]
        self.coverage = SwitchCoverage(list(dict.fromkeys(sub.path for _, sub in subs)), store, source, name)
        table = profile.interface_table
        self.ports = PortTable(table.alias, table.speed_mbps) if table is not None else None
        writer = SeriesWriter(self.ports)
        self._binder = binder = Binder(name, profile, max_series, families, self.slots, self.coverage, subs,
                                       self.ports, writer, self._dropped)
        self._json = JsonValues(profile, binder, writer, self.coverage)
        # What the hot path reaches for every notification, kept here as direct references
        # (the same objects the parts hold): no extra attribute hop per notification.
        self._prefixes: dict[bytes, Prefix] = binder.prefixes
        self._ranks = binder.ranks
        self._apply_bulk = BulkPath(binder, self.strip).apply
        self._apply_each = UpdatePath(binder, writer, self._json, self.coverage, self.strip).apply
        self.tick = 1  # sweep generation; bindings remember the tick they were last written in
        self._session_tick = 1
        self.last_rx = 0.0  # wall time of the last notification

    @property
    def bound(self) -> int:
        """Live bindings, i.e. series this switch holds."""
        return self._binder.bound

    @property
    def _unmapped(self) -> int:
        """Unmapped leaf paths cached as None (bounded by binder.MAX_UNMAPPED_CACHED)."""
        return self._binder.unmapped

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
        self._binder.drop(lambda b: b.last_seen < start)
        if self.ports is not None and not self.ports.known:
            # every stream sent its initial state and the port table was not in it: keys that are
            # not known aliases are port names from now on
            self.ports.known = True
            self._malformed[self._key] += self._json.release_held(self.tick)
        self.publish_coverage()

    def sweep(self) -> None:
        """Called every sweep period: expire SAMPLE series not refreshed for two periods."""
        self.tick += 1
        limit = self.tick - 2
        self._binder.drop(lambda b: b.sample and b.last_seen < limit)
        self.publish_coverage()

    def publish_coverage(self) -> None:
        """Hand the coverage to the store (series per subscribed path, unmapped leaves)."""
        count_plan_hits(self._binder, self.coverage)
        self.coverage.publish()

    def clear_data(self) -> None:
        """The switch has been unreachable past the staleness window: drop every data series."""
        self._binder.drop(lambda b: True)  # empties every column
        for name, series in self.snapshot.series.items():
            if name not in _STATUS_NAMES and isinstance(series, dict):
                series.clear()

    def release(self) -> None:
        """The switch is gone (removed from the targets, or the source stops): drop everything
        now. Bindings point back at the dicts holding them; without this a whole switch state
        would wait for Python's cyclic GC, and a fabric-wide resync would hold two of them."""
        self._binder.release()
        self._json.release()

    # -- ingest -------------------------------------------------------------------------------

    def apply(self, n: Any) -> None:
        """Take one decoded `gnmi.Notification` (tests, tools); streams use `apply_wire`."""
        raw = pb.SubscribeResponse(update=n).SerializeToString()
        self.apply_wire(wire.SubscribeResponse.FromString(raw).update, raw)

    def apply_wire(self, n: Any, raw: bytes) -> None:
        """Take one notification into the live series: the hot path. `n` is the bulk view
        (`gnmi_wire.SubscribeResponse`) of the SubscribeResponse bytes `raw`, or None when the
        bulk view could not parse them (an update inside is damaged). Counter samples go in bulk
        (`bulk.BulkPath`); anything else update by update, from `raw` (`per_update.UpdatePath`)."""
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
            bad = self._apply_each(pctx, raw_updates, self.tick)
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
        binder = self._binder
        for b in self._ranks.take_displaced():
            if binder.home(b.owner).get(b.key) is b:
                binder.remove(b)
        key = self._key
        counted = self._updates[key], self._malformed[key]
        self.apply_wire(None, raw)
        self._updates[key], self._malformed[key] = counted

    def _new_prefix(self, raw_prefix: bytes, raw: bytes) -> Prefix | None:
        """The state of a prefix seen for the first time, or None when it cannot be kept: its
        updates are then counted (as dropped, or malformed) and skipped."""
        over_limit = self._binder.bound >= self.max_series or len(self._prefixes) >= self.max_series
        if not over_limit:  # a new prefix could only bring new series (or unmapped paths to remember)
            try:
                pctx = self._prefixes[shared(RAW_PREFIXES, raw_prefix, MAX_SHARED_PREFIXES)] = Prefix(
                    shared_prefix(from_proto(pb.Path.FromString(raw_prefix), self.strip)))
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

    def _delete_raw(self, prefix: ElemPath, raw_prefix: bytes, deletes: Any) -> None:
        """Drop the series at or below each delete path (see deletes.py)."""
        try:
            targets = delete_targets(prefix, raw_prefix, deletes, self.strip)
        except DecodeError:
            self._malformed[self._key] += 1
            return
        for target in targets:
            self._binder.drop(under(target))

    def mapped_rules(self) -> set[int]:
        """The profile's metrics entries (by index) that feed at least one series now (`doctor`
        counts the mappings a switch answers with this)."""
        return {b.rule.index for b in self._binder.bindings()}

    def series_count(self) -> int:
        return len(self.snapshot)


__all__ = ["DEFAULT_MAX_SERIES", "Binding", "SwitchState"]
