"""JSON and JSON_IETF values: a subtree in one update, flattened and bound leaf by leaf.

Each leaf of a flattened value (values.flatten_json) is bound by its whole path
(`bindings.JsonBinding`, which carries its own tick since no notification prefix refreshes it).
Two SONiC behaviours live here: an empty entry of a table (`{"Ethernet0": {}}`) deletes that
key, and the interface table's replies teach the switch's port aliases and speeds
(ports.PortTable). Values whose leaves need a port alias not known yet are held, the latest per
path, and applied once the table is in.
"""

from __future__ import annotations

from typing import Any, cast

from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb

from .binder import Binder
from .bindings import MISSING, Binding, JsonBinding
from .coverage import SwitchCoverage
from .deletes import under
from .paths import ElemPath, from_proto
from .ports import PortTable
from .profile import Profile
from .series_writes import SeriesWriter
from .shared import MAX_SHARED_PATHS
from .values import MalformedValue, flatten_json, load_json


class _JsonUpdate:
    """What a JSON value's update path is, looked up once per path."""

    __slots__ = ("empty_entry_deletes", "port_table")

    def __init__(self, empty_entry_deletes: bool, port_table: bool) -> None:
        self.empty_entry_deletes = empty_entry_deletes
        self.port_table = port_table


class JsonValues:
    def __init__(self, profile: Profile, binder: Binder, writer: SeriesWriter,
                 coverage: SwitchCoverage) -> None:
        self.profile = profile
        self.strip = profile.strip_modules
        self.binder = binder
        self.ports = binder.ports
        self._set = writer.set
        self.coverage = coverage
        self._misses: dict[ElemPath, tuple[str, str]] = {}  # unmapped leaf -> (mapping, path text)
        self._updates: dict[ElemPath, _JsonUpdate] = {}
        self._held: dict[ElemPath, Any] = {}  # values that arrived before the port table

    def apply(self, base: ElemPath, raw_path: bytes, val: Any, which: str, tick: int) -> int:
        """Take the JSON value `val` of an update (`raw_path` under the prefix `base`); returns
        the malformed count (the held values it released included)."""
        try:
            doc = load_json(getattr(val, which))
            path = base + from_proto(pb.Path.FromString(raw_path), self.strip)
        except (MalformedValue, DecodeError):
            return 1
        update = self._update(path)
        if update.empty_entry_deletes and isinstance(doc, dict):
            for key, entry in doc.items():
                if isinstance(entry, dict) and not entry:  # SONiC: {"Ethernet0": {}} = key deleted
                    self.binder.drop(under(path + ((key, ()),)))
        bad = self.apply_doc(path, doc, tick)
        if update.port_table and self.ports is not None:
            bad += self._take_port_table(self.ports, doc, tick)
        return bad

    def apply_doc(self, path: ElemPath, doc: Any, tick: int, replay: bool = False) -> int:
        """Bind and write every leaf of a JSON value at `path`; returns the malformed count.
        A value with leaves held back (their port key is not known yet) is kept, the latest per
        path, and applied again (`replay`: its unmapped leaves were counted already) once the
        port table is in."""
        binder = self.binder
        binder.held_back = False
        cache = binder.json_bindings
        misses = self._misses
        bad = 0
        unmapped = 0
        miss: tuple[str, str] | None = None
        for leaf, value in flatten_json(path, doc, self.profile.list_keys, self.strip):
            b = cache.get(leaf, MISSING)
            if b is MISSING:
                b = binder.bind(leaf, leaf, None, note_miss=misses.__setitem__)
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
        if binder.held_back:
            self._held[path] = doc
        return bad

    def _update(self, path: ElemPath) -> _JsonUpdate:
        found = self._updates.get(path)
        if found is None:
            sub = self.binder.subscription_of(path)
            table = self.profile.interface_table
            found = _JsonUpdate(
                sub is not None and sub.empty_entry_deletes,
                (table is not None and len(table.pattern) == len(path)
                 and table.pattern.match(path) is not None))
            if len(self._updates) < MAX_SHARED_PATHS:
                self._updates[path] = found
        return found

    def _take_port_table(self, ports: PortTable, doc: Any, tick: int) -> int:
        """A reply of the interface table: learn names, aliases and speeds; series bound under a
        key whose meaning changed (a new or renamed alias) are bound again on their next sample.
        Returns the malformed count of the held values it released."""
        was_known = ports.known
        changed = ports.update(doc)
        if not was_known:
            return self.release_held(tick)
        if changed:
            self.binder.drop(lambda b: b.rule.alias_keys and _raw_interface(b) in changed)
        return 0

    def release_held(self, tick: int) -> int:
        """The port table is known: apply the values that waited for it; returns their malformed
        count."""
        self.binder.forget_plans()  # plans made while leaves were held back lack them
        held, self._held = self._held, {}
        return sum(self.apply_doc(path, doc, tick, replay=True) for path, doc in held.items())

    def release(self) -> None:
        self._misses.clear()
        self._updates.clear()
        self._held.clear()


def _raw_interface(b: Binding) -> str | None:
    captured = b.rule.pattern.match(b.path)
    return None if captured is None else captured.get("interface")
