"""One copy per process of what every switch sends alike: paths, prefixes, notification shapes.

A fabric instance holds the state of hundreds of switches of a few models, and they all send the
same update paths ("state/counters/in-octets"), the same prefixes (every switch has its swp1 and
queue 3 under it) and the same notification shapes. Each table below keeps one shared copy of
such a value for every switch (and every prefix of a switch) that sends it. Every table is
bounded: past its limit a value keeps its own copy, so a device streaming ever-new paths costs
memory per switch, never without bound per process.
"""

from __future__ import annotations

import sys
from typing import TypeVar

from pygnmi.spec.v080 import gnmi_pb2 as pb

from .paths import Elem, ElemPath, from_proto

_T = TypeVar("_T")

# Update paths relative to their prefix, by (serialized path, strip module prefixes): the shared
# bytes and the decoded path.
_REL_PATHS: dict[tuple[bytes, bool], tuple[bytes, ElemPath]] = {}
MAX_SHARED_PATHS = 100_000
# Decoded notification prefixes, and their elements across a switch's prefixes (one port's queues
# share its interface element). A decoded prefix is ~1 kB of small tuples and strings; a 64-port
# switch sends ~2,600 of them.
_PREFIX_PATHS: dict[ElemPath, ElemPath] = {}
_PREFIX_ELEMS: dict[Elem, Elem] = {}
# The serialized prefixes too (each switch's key for its prefix state): equal across switches
# unless the target puts its own name in the prefix.
RAW_PREFIXES: dict[bytes, bytes] = {}
MAX_SHARED_PREFIXES = 200_000
# Notification shapes (every update path of a notification, as sent), one model's ports alike.
SHAPES: dict[bytes, bytes] = {}
MAX_SHARED_SHAPES = 20_000
# A plan's value signature and the pickers of its runs (the same positions in every port's
# notification); see plans.py.
MAX_SHARED_PLAN_PARTS = 20_000


def interned(elem: Elem) -> Elem:
    """A path element with its name, key names and key values interned."""
    name, keys = elem
    return sys.intern(name), tuple((sys.intern(k), sys.intern(v)) for k, v in keys)


def relative_path(pk: bytes, strip: bool) -> tuple[bytes, ElemPath]:
    """(shared copy of the path bytes, decoded path) of an update path, shared by every binding
    using it. Raises DecodeError for bytes that are not a gnmi.Path."""
    found = _REL_PATHS.get((pk, strip))
    if found is None:
        path = pb.Path.FromString(pk)
        found = (pk, tuple(interned(elem) for elem in from_proto(path, strip)))
        if len(_REL_PATHS) < MAX_SHARED_PATHS:
            _REL_PATHS[(pk, strip)] = found
    return found


def shared(table: dict[_T, _T], value: _T, limit: int) -> _T:
    """One copy of `value` for every prefix and switch sending it (serialized prefixes, shapes,
    signatures). Bounded: past `limit` entries a value keeps its own copy."""
    found = table.get(value)
    if found is None:
        found = value
        if len(table) < limit:
            table[value] = value
    return found


def shared_prefix(path: ElemPath) -> ElemPath:
    """One copy of a decoded notification prefix (and of each of its elements) for every prefix
    and switch sending it. Bounded: past the limit a prefix keeps its own copy."""
    found = _PREFIX_PATHS.get(path)
    if found is not None:
        return found
    if len(_PREFIX_PATHS) >= MAX_SHARED_PREFIXES:
        return path
    found = _PREFIX_PATHS[path] = tuple(_PREFIX_ELEMS.setdefault(e, e) for e in map(interned, path))
    return found
