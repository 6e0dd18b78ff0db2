"""gNMI paths: the string form, the protobuf form, and the patterns profiles match against.

Inside infrapulse a concrete path is a tuple of elements, each `(name, keys)` where `keys` is a
tuple of `(key, value)` pairs sorted by key name (hashable, so it can key caches). Module
prefixes (`openconfig-interfaces:interfaces`, `arista-intf-augments:pfc`) are stripped when the
profile asks for it, so OpenConfig paths match whether or not a device qualifies them.

A profile *pattern* is written like a path, with two additions:
  - `{label}` captures a whole element name or key value as a label (`{label:REGEX}` narrows it:
    `{interface}:{queue:\\d+}` splits SONiC's `Ethernet0:3`);
  - `*` is a glob (`Ethernet*`, `[name=*]`); a key that is not mentioned matches any value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pygnmi.spec.v080 import gnmi_pb2 as pb

Keys = tuple[tuple[str, str], ...]
Elem = tuple[str, Keys]
ElemPath = tuple[Elem, ...]

# RFC 7951 module-qualified member name: both halves are YANG identifiers. SONiC's
# "Ethernet68:3" is not one (an identifier cannot start with a digit), so it survives.
_MODULE_QUALIFIED = re.compile(r"[A-Za-z_][\w.-]*:([A-Za-z_][\w.-]*)")
_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_CAPTURE = re.compile(r"\{([A-Za-z_]\w*)(?::([^{}]+))?\}")


class PathSyntaxError(ValueError):
    pass


def strip_module(name: str) -> str:
    match = _MODULE_QUALIFIED.fullmatch(name)
    return match.group(1) if match else name


def split_elems(text: str) -> list[str]:
    """Split '/a/b[k=x/y]/c' on '/' outside brackets; '\\' escapes ']' and '\\' inside keys."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and depth and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if ch == "[" and not depth:  # inside a key value '[' is literal (format_path leaves it)
            depth += 1
        elif ch == "]":
            if not depth:
                raise PathSyntaxError(f"unbalanced ']' in {text!r}")
            depth -= 1
        if ch == "/" and not depth:
            if current:
                parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if depth:
        raise PathSyntaxError(f"unclosed '[' in {text!r}")
    if current:
        parts.append("".join(current))
    return parts


def parse_elem(text: str) -> tuple[str, dict[str, str]]:
    """'queue[name=3]' -> ('queue', {'name': '3'}); '[name]' alone means "any value"."""
    bracket = text.find("[")
    if bracket < 0:
        if not text:
            raise PathSyntaxError("empty path element")
        return text, {}
    name = text[:bracket]
    if not name:
        raise PathSyntaxError(f"path element without a name: {text!r}")
    keys: dict[str, str] = {}
    rest = text[bracket:]
    pos = 0
    while pos < len(rest):
        if rest[pos] != "[":
            raise PathSyntaxError(f"unexpected {rest[pos]!r} in {text!r}")
        end = pos + 1
        value: list[str] = []
        while end < len(rest) and rest[end] != "]":
            if rest[end] == "\\" and end + 1 < len(rest):
                value.append(rest[end + 1])
                end += 2
                continue
            value.append(rest[end])
            end += 1
        if end >= len(rest):
            raise PathSyntaxError(f"unclosed '[' in {text!r}")
        body = "".join(value)
        key, sep, val = body.partition("=")
        if not key:
            raise PathSyntaxError(f"empty key name in {text!r}")
        keys[key] = val if sep else "*"
        pos = end + 1
    return name, keys


def parse_path(text: str) -> list[tuple[str, dict[str, str]]]:
    return [parse_elem(part) for part in split_elems(text.strip())]


def expand_ranges(text: str) -> list[str]:
    """'PFC_{0..2}_RX' -> ['PFC_0_RX', 'PFC_1_RX', 'PFC_2_RX'] (subscription paths only)."""
    match = _RANGE.search(text)
    if not match:
        return [text]
    low, high = int(match.group(1)), int(match.group(2))
    out = []
    for n in range(low, high + 1):
        out.extend(expand_ranges(text[:match.start()] + str(n) + text[match.end():]))
    return out


def to_proto(text: str, origin: str = "", target: str = "") -> pb.Path:
    elems = [pb.PathElem(name=name, key=keys) for name, keys in parse_path(text)] if text.strip("/") else []
    return pb.Path(origin=origin, target=target, elem=elems)


def from_proto(path: pb.Path, strip: bool) -> ElemPath:
    out = []
    for elem in path.elem:
        name = strip_module(elem.name) if strip else elem.name
        out.append((name, tuple(sorted(elem.key.items())) if elem.key else ()))
    return tuple(out)


def format_path(elems: Iterable[Elem]) -> str:
    parts = []
    for name, keys in elems:
        part = name + "".join(f"[{k}={v.replace(chr(92), chr(92) * 2).replace(']', chr(92) + ']')}]"
                              for k, v in keys)
        parts.append(part)
    return "/" + "/".join(parts)


def path_covers(outer: ElemPath, inner: ElemPath) -> bool:
    """True when `inner` lies at or below `outer` (a delete path); '*' and absent keys match any."""
    if len(outer) > len(inner):
        return False
    for (oname, okeys), (iname, ikeys) in zip(outer, inner):
        if oname != iname and oname not in ("*", "..."):
            return False
        if okeys:
            have = dict(ikeys)
            for key, value in okeys:
                if value != "*" and have.get(key) != value:
                    return False
    return True


# -- patterns -------------------------------------------------------------------------------


class _Matcher:
    """Matches one element name or key value; returns captured labels (dict) or None."""

    __slots__ = ("kind", "text", "label", "regex")

    def __init__(self, text: str, context: str) -> None:
        self.text = text
        self.label = ""
        self.regex: re.Pattern[str] | None = None
        whole = _CAPTURE.fullmatch(text)
        if text in ("", "*"):
            self.kind = "any"
        elif whole and not whole.group(2):
            self.kind, self.label = "capture", whole.group(1)
        elif _CAPTURE.search(text) or "*" in text:
            self.kind = "regex"
            self.regex = _compile_template(text, context)
        else:
            self.kind = "literal"

    @property
    def labels(self) -> list[str]:
        return [m.group(1) for m in _CAPTURE.finditer(self.text) if m.group(1) != "_"]

    def match(self, value: str, out: dict[str, str]) -> bool:
        kind = self.kind
        if kind == "literal":
            return value == self.text
        if kind == "any":
            return True
        if kind == "capture":
            if self.label != "_":
                out[self.label] = value
            return True
        regex = self.regex  # set on every "regex" matcher, the only kind left here
        found = regex.fullmatch(value) if regex is not None else None
        if not found:
            return False
        for name, captured in found.groupdict().items():
            if not name.startswith("_ignored"):
                out[name] = captured
        return True


def _compile_template(text: str, context: str) -> re.Pattern[str]:
    pieces = []
    pos = 0
    ignored = 0
    for m in _CAPTURE.finditer(text):
        pieces.append(_glob_to_regex(text[pos:m.start()]))
        name = m.group(1)
        if name == "_":
            name = f"_ignored{ignored}"
            ignored += 1
        pieces.append(f"(?P<{name}>{m.group(2) or '.+?'})")
        pos = m.end()
    pieces.append(_glob_to_regex(text[pos:]))
    try:
        return re.compile("".join(pieces))
    except re.error as exc:
        raise PathSyntaxError(f"{context}: bad capture pattern in {text!r}: {exc}") from None


def _glob_to_regex(text: str) -> str:
    return ".*".join(re.escape(part) for part in text.split("*"))


class PathPattern:
    """A compiled profile path: `match(elems)` -> captured labels, or None."""

    def __init__(self, text: str, strip: bool = True) -> None:
        self.text = text
        self.elems: list[tuple[_Matcher, list[tuple[str, _Matcher]]]] = []
        for name, keys in parse_path(text):
            if strip:
                name = strip_module(name)
            self.elems.append((_Matcher(name, text), [(k, _Matcher(v, text)) for k, v in keys.items()]))
        if not self.elems:
            raise PathSyntaxError("empty path")
        # Patterns whose element names are all literal are looked up by name tuple (fast).
        self.literal_names: tuple[str, ...] | None = (
            tuple(m.text for m, _ in self.elems) if all(m.kind == "literal" for m, _ in self.elems) else None)

    def __len__(self) -> int:
        return len(self.elems)

    def labels(self) -> list[str]:
        out = []
        for name_m, keys in self.elems:
            out += name_m.labels
            for _, key_m in keys:
                out += key_m.labels
        return out

    def list_keys(self) -> dict[str, tuple[str, ...]]:
        """Element name -> key names, for turning JSON list entries into keyed elements."""
        return {m.text: tuple(k for k, _ in keys) for m, keys in self.elems if keys and m.kind == "literal"}

    def match(self, elems: ElemPath, start: int = 0) -> dict[str, str] | None:
        """Match `elems[start:start+len(self)]`; the caller checks lengths."""
        captured: dict[str, str] = {}
        for (name_m, key_ms), (name, keys) in zip(self.elems, elems[start:]):
            if not name_m.match(name, captured):
                return None
            if key_ms:
                have = dict(keys)
                for key, key_m in key_ms:
                    value = have.get(key)
                    if value is None:
                        if key_m.kind == "any":
                            continue
                        return None
                    if not key_m.match(value, captured):
                        return None
        return captured

    def may_contain(self, other: PathPattern) -> bool:
        """Whether a subscription path (self) can deliver leaves this rule pattern matches."""
        if len(self.elems) > len(other.elems):
            return False
        for (sub_m, _), (rule_m, _) in zip(self.elems, other.elems):
            if sub_m.kind != "literal":
                continue  # a wildcard or glob subscription element: assume it may
            if rule_m.kind == "literal":
                if sub_m.text != rule_m.text:
                    return False
            elif not rule_m.match(sub_m.text, {}):
                return False
        return True
