"""The per-update path: a notification taken one update at a time, from its raw bytes.

Everything the bulk path (bulk.py) leaves: strings and enums, LLDP parts, JSON subtrees, mixed or
missing values, damaged updates. Each update's raw path bytes key its prefix's cache of bindings
(bindings.py), so a known leaf costs one lookup; a new one is bound once (binder.py), an unmapped
one is cached as None.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb

from . import wire
from .binder import Binder
from .bindings import MISSING, Prefix
from .coverage import SwitchCoverage
from .json_values import JsonValues
from .series_writes import SeriesWriter
from .shared import relative_path
from .values import JSON_FIELDS, NUMERIC_FIELDS, MalformedValue, load_json, scalar


class UpdatePath:
    __slots__ = ("_bind", "_set", "_apply_json", "coverage", "strip")

    def __init__(self, binder: Binder, writer: SeriesWriter, json: JsonValues, coverage: SwitchCoverage,
                 strip: bool) -> None:
        # bound methods kept, not their objects: one lookup fewer per leaf
        self._bind = binder.bind
        self._set = writer.set
        self._apply_json = json.apply
        self.coverage = coverage
        self.strip = strip

    def apply(self, pctx: Prefix, raw_updates: Any, tick: int) -> int:
        """Take each update; returns the number of malformed ones."""
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
            b = get(u.path, MISSING)
            if b is None or b is MISSING:
                if which in JSON_FIELDS:  # a JSON value binds per leaf inside it
                    bad += self._apply_json(pctx.elems, u.path, val, which, tick)
                    continue
                if b is MISSING:
                    try:
                        pk, rel = relative_path(u.path, self.strip)
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
