"""Decoding gNMI values: PROTO TypedValue scalars and JSON / JSON_IETF subtrees.

Switches send the same counter three ways: `uint_val: 12` (PROTO), `json_val: 12` (JSON) or
`json_ietf_val: "12"` (RFC 7951 puts 64-bit numbers in strings; SONiC puts *every* value in
one). A container path brings a whole subtree in one JSON value; `flatten_json` turns it into
leaves, turning list entries into keyed path elements (their keys become labels later, never
parts of a metric name) and stripping RFC 7951 module prefixes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from .paths import Elem, ElemPath, strip_module

NUMERIC_FIELDS = frozenset({"uint_val", "int_val", "double_val", "float_val", "bool_val"})
JSON_FIELDS = frozenset({"json_val", "json_ietf_val"})
STRING_FIELDS = frozenset({"string_val", "ascii_val"})


class MalformedValue(ValueError):
    """A value that cannot mean what its path says (counted as a malformed update, skipped)."""


def scalar(tv: Any, which: str | None) -> Any:
    """The Python value of a non-JSON TypedValue."""
    if which in NUMERIC_FIELDS or which in STRING_FIELDS:
        return getattr(tv, which)
    if which == "decimal_val":
        # Past 10**400 every int64 quotient is 0.0; the cap keeps a hostile precision (up to
        # 2**32-1) from computing a billion-digit power.
        return tv.decimal_val.digits / 10 ** min(tv.decimal_val.precision, 400)
    if which == "leaflist_val":
        return [scalar(e, e.WhichOneof("value")) for e in tv.leaflist_val.element]
    raise MalformedValue(f"unsupported value type {which or 'empty'}")


def load_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deep
        raise MalformedValue(f"invalid JSON: {exc}") from None


def to_number(value: Any) -> float:
    """A counter or gauge value as float: numbers, numeric strings ("12", SONiC) and booleans."""
    if isinstance(value, float):
        return value
    if isinstance(value, (int, bool)):
        try:
            return float(value)
        except OverflowError:  # a JSON integer beyond any float
            raise MalformedValue(f"number out of range: {str(value)[:40]}...") from None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise MalformedValue(f"not a number: {value[:40]!r}") from None
    raise MalformedValue(f"not a number: {type(value).__name__}")


def utc_timestamp(value: Any, fmt: str) -> float:
    """Unix seconds of a time stamp written as text in UTC, e.g. SONiC's PORT_TABLE
    last_down_time "Fri Jul 18 19:59:28 2025" with fmt "%a %b %d %H:%M:%S %Y". Runs of blanks
    count as one (C's ctime() pads the day with a space) and a trailing newline is ignored
    (sonic-swss wrote one before May 2024)."""
    if not isinstance(value, str):
        raise MalformedValue(f"not a time stamp: {type(value).__name__}")
    try:
        parsed = datetime.strptime(" ".join(value.split()), fmt)
    except ValueError:
        raise MalformedValue(f"not a time in {fmt!r}: {value[:40]!r}") from None
    return parsed.replace(tzinfo=timezone.utc).timestamp()


def flatten_json(base: ElemPath, doc: Any, list_keys: dict[str, tuple[str, ...]],
                 strip: bool) -> Iterator[tuple[ElemPath, Any]]:
    """Yield (leaf path, scalar) for every leaf of a JSON subtree rooted at `base`.

    `{"a": {"b": 1}}` -> (base/a/b, 1). A list `"queue": [{"name": "3", ...}]` becomes the element
    `queue[name=3]` when the profile knows `queue`'s keys (from its patterns); entries of a list
    without any known key are skipped rather than mislabelled. Leaf-lists are skipped too.
    An object the profile keys the same way and that carries every one of those keys is keyed
    too, the subtree's root included: a record such as EOS LANZ's `congestionRecord` (sent as the
    JSON value of the path `LANZ/congestion/congestionRecord`) names its queue in its own fields.
    """
    if base and not base[-1][1]:
        base = base[:-1] + (_record_elem(base[-1][0], doc, list_keys, strip),)
    return _flatten(base, doc, list_keys, strip)


def _flatten(base: ElemPath, doc: Any, list_keys: dict[str, tuple[str, ...]],
             strip: bool) -> Iterator[tuple[ElemPath, Any]]:
    if isinstance(doc, dict):
        for member, value in doc.items():
            name = strip_module(member) if strip else member
            if isinstance(value, list):
                keys = list_keys.get(name)
                if not keys:
                    continue
                for entry in value:
                    if not isinstance(entry, dict):
                        continue
                    pairs = []
                    for key in keys:
                        text = _key_text(entry, key, strip)
                        if text is not None:
                            pairs.append((key, text))
                    if not pairs:
                        continue
                    elem: Elem = (name, tuple(pairs))
                    yield from _flatten(base + (elem,), entry, list_keys, strip)
            else:
                yield from _flatten(base + (_record_elem(name, value, list_keys, strip),), value,
                                    list_keys, strip)
    elif not isinstance(doc, list):
        yield base, doc


def _record_elem(name: str, value: Any, list_keys: dict[str, tuple[str, ...]], strip: bool) -> Elem:
    """`name`, keyed by its own fields when it is an object holding every key the profile gives it."""
    keys = list_keys.get(name) if isinstance(value, dict) else None
    if not keys:
        return (name, ())
    pairs = []
    for key in keys:
        text = _key_text(value, key, strip)
        if text is None:
            return (name, ())
        pairs.append((key, text))
    return (name, tuple(sorted(pairs)))


def _key_text(entry: dict[str, Any], key: str, strip: bool) -> str | None:
    if key in entry:
        value = entry[key]
    elif strip:
        # the key member itself may be module-qualified
        for member, candidate in entry.items():
            if strip_module(member) == key:
                value = candidate
                break
        else:
            return None
    else:
        return None
    if isinstance(value, (dict, list)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
