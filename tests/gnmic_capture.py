"""Turn gnmic's printed output (real captures in ../shared/real/gnmi) back into gNMI messages.

gnmic prints each notification as JSON: `prefix` ("origin:path"), `updates` with a relative `Path`
and `values` ({path: value}); a Get prints a list of such notifications without a prefix. It
prints PROTO scalars as JSON numbers, strings and booleans and JSON values as objects, so each
value goes back as the TypedValue it stood for: an object as a JSON value (json_ietf_val when
its member names are module-qualified, as RFC 7951 wants, else json_val), an integer as
uint_val (int_val when negative), a fraction as double_val, text as string_val. A capture cut
short with a `...` line is closed where it was cut (the complete updates before it are kept).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2 as pb

from infrapulse.simulate.gnmi_target import scalar_value
from infrapulse.sources.gnmi.paths import to_proto

_QUALIFIED = re.compile(r"^[A-Za-z_][\w.-]*:[A-Za-z_]")


def sections(path: Path) -> list[str]:
    """The capture's blocks (PROVENANCE: separated by `=====` lines)."""
    return [block.strip() for block in re.split(r"^=====\s*$", path.read_text(encoding="utf-8"), flags=re.M)]


def json_values(block: str) -> list[Any]:
    """Every JSON value printed one after another in `block`; brackets left open at its end (a
    printout cut by `...`, or the EOS Get reply's unmatched "[[") are closed there."""
    cut = re.search(r"^\.\.\.\s*$", block, flags=re.M)
    text = _close(block[:cut.start()] if cut else block)  # the EOS Get printout opens "[[", closes "]"
    decoder = json.JSONDecoder()
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        value, pos = decoder.raw_decode(text, pos)
        out.append(value)


def _close(text: str) -> str:
    """Close the brackets left open where a printout was cut (strings respected)."""
    text = text.rstrip().rstrip(",")
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}":
            stack.pop()
    return text + "".join(reversed(stack))


def typed(value: Any) -> pb.TypedValue:
    if isinstance(value, (dict, list)):
        raw = json.dumps(value).encode()
        members = value if isinstance(value, dict) else {}
        if any(_QUALIFIED.match(k) for k in members):
            return pb.TypedValue(json_ietf_val=raw)
        return pb.TypedValue(json_val=raw)
    return scalar_value(value)


def notification(event: dict) -> pb.Notification:
    """One printed notification; `prefix` is "origin:path" or a plain path."""
    prefix = event.get("prefix", "")
    first = prefix.split("/", 1)[0]
    origin, path = (prefix.split(":", 1) if ":" in first else ("", prefix))
    updates = []
    for update in event["updates"]:
        (value,) = update["values"].values()
        updates.append(pb.Update(path=to_proto(update["Path"]), val=typed(value)))
    return pb.Notification(timestamp=event["timestamp"], prefix=to_proto(path, origin), update=updates)


def notifications(block: str) -> list[pb.Notification]:
    """Every notification of a printed Subscribe stream or Get reply (lists flattened)."""
    out: list[pb.Notification] = []

    def walk(value: Any) -> None:
        if isinstance(value, list):
            for item in value:
                walk(item)
        else:
            out.append(notification(value))

    for value in json_values(block):
        walk(value)
    return out
