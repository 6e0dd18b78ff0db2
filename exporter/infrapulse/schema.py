"""A small declarative schema for the YAML config.

Every key is declared once, with its type, default and documentation, as an attribute of a
settings class (a dataclass whose fields are declared with `setting(<schema entry>)`; the
`settings` decorator derives the class's `Section` from them). Validation returns instances of
those classes with defaults filled in, so code reads `cfg.http.max_connections` and mypy sees a
typo; every error names the key path and the reason. docs/configuration.md is generated from the
same declarations (see `infrapulse.docs`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class SchemaError(Exception):
    """A value that does not fit its declaration. `path` is the dotted key path; `errors` lists
    every problem found (this one first), so a config with three mistakes reports all three."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path or '<top level>'}: {reason}")
        self.path = path
        self.reason = reason
        self.errors: list[SchemaError] = [self]

    @classmethod
    def of(cls, errors: list[SchemaError]) -> SchemaError:
        """One exception standing for all of `errors` (in order, nested lists flattened)."""
        flat = [e for err in errors for e in err.errors]
        first = SchemaError(flat[0].path, flat[0].reason)
        first.errors = flat
        if len(flat) > 1:
            first.args = ("\n".join(f"{e.path or '<top level>'}: {e.reason}" for e in flat),)
        return first


class _Collector:
    """Runs validations and keeps every SchemaError instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[SchemaError] = []

    def validate(self, decl: Field, value: Any, path: str) -> Any:
        try:
            return decl.validate(value, path)
        except SchemaError as exc:
            self.errors.append(exc)
            return None

    def add(self, path: str, reason: str) -> None:
        self.errors.append(SchemaError(path, reason))

    def raise_if_any(self) -> None:
        if self.errors:
            raise SchemaError.of(self.errors)


def parse_duration(text: str) -> float:
    """'5s' -> 5.0, '250ms' -> 0.25, '1m30s' -> 90.0. Raises ValueError on anything else."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"expected a duration such as 5s or 250ms, got {text!r}")
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"expected a duration such as 5s or 250ms, got {text!r}")
    return total


def format_duration(seconds: float) -> str:
    """A duration the way people write them: the largest unit that divides it (90 -> 90s,
    3600 -> 1h, 3.6e8 -> 100000h), never in exponent notation."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{_plain(seconds * 1000)}ms"
    for unit in ("d", "h", "m"):
        count = seconds / _UNIT_SECONDS[unit]
        if abs(count - round(count)) < 1e-9 and round(count) >= 1:
            return f"{round(count)}{unit}"
    return f"{_plain(seconds)}s"


def _plain(value: float) -> str:
    """A float without exponent notation or trailing zeros (1.5, 250, 0.001)."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping"}.get(type(value), type(value).__name__)


@dataclass
class Field:
    """Base of all key declarations."""

    doc: str = ""
    default: Any = None
    required: bool = False
    # Non-empty: the key is still accepted but does nothing; `deprecated_keys` reports it with
    # this explanation (check-config and `run` print it as a warning).
    deprecated: str = ""

    def type_doc(self) -> str:
        return type(self).__name__.lower()

    def validate(self, value: Any, path: str) -> Any:
        raise NotImplementedError

    def default_value(self) -> Any:
        return self.default


@dataclass
class Str(Field):
    choices: tuple[str, ...] = ()
    pattern: str = ""

    def type_doc(self) -> str:
        return " | ".join(self.choices) if self.choices else "string"

    def validate(self, value: Any, path: str) -> Any:
        if not isinstance(value, str):
            raise SchemaError(path, f"expected a string, got {_type_name(value)}")
        if self.choices and value not in self.choices:
            raise SchemaError(path, f"must be one of {', '.join(self.choices)}; got {value!r}")
        if self.pattern and not re.fullmatch(self.pattern, value):
            raise SchemaError(path, f"{value!r} does not look right (expected {self.pattern})")
        return value


@dataclass
class Bool(Field):
    def type_doc(self) -> str:
        return "boolean"

    def validate(self, value: Any, path: str) -> Any:
        if not isinstance(value, bool):
            raise SchemaError(path, f"expected true or false, got {_type_name(value)} {value!r}")
        return value


@dataclass
class AutoBool(Field):
    """`auto`, `true` or `false`: auto means "on if the thing is available"."""

    default: Any = "auto"

    def type_doc(self) -> str:
        return "auto | true | false"

    def validate(self, value: Any, path: str) -> Any:
        if value in (True, False, "auto"):
            return value
        raise SchemaError(path, f"expected auto, true or false, got {value!r}")


@dataclass
class Int(Field):
    min: int | None = None
    max: int | None = None

    def type_doc(self) -> str:
        return "integer"

    def validate(self, value: Any, path: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(path, f"expected an integer, got {_type_name(value)} {value!r}")
        if self.min is not None and value < self.min:
            raise SchemaError(path, f"must be >= {self.min}, got {value}")
        if self.max is not None and value > self.max:
            raise SchemaError(path, f"must be <= {self.max}, got {value}")
        return value


@dataclass
class Float(Field):
    min: float | None = None
    max: float | None = None

    def type_doc(self) -> str:
        return "number"

    def validate(self, value: Any, path: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(path, f"expected a number, got {_type_name(value)} {value!r}")
        value = float(value)
        if self.min is not None and value < self.min:
            raise SchemaError(path, f"must be >= {self.min:g}, got {value:g}")
        if self.max is not None and value > self.max:
            raise SchemaError(path, f"must be <= {self.max:g}, got {value:g}")
        return value


@dataclass
class Duration(Field):
    """A duration string ('5s', '250ms', '1m30s'); validated to seconds (float)."""

    min: float | None = None
    max: float | None = None

    def type_doc(self) -> str:
        return "duration"

    def default_value(self) -> Any:
        return parse_duration(self.default) if isinstance(self.default, str) else self.default

    def validate(self, value: Any, path: str) -> Any:
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise SchemaError(path, str(exc)) from None
        if self.min is not None and seconds < self.min:
            raise SchemaError(path, f"must be at least {format_duration(self.min)}, got {value}")
        if self.max is not None and seconds > self.max:
            raise SchemaError(path, f"must be at most {format_duration(self.max)}, got {value}")
        return seconds


@dataclass
class HostPort(Field):
    def type_doc(self) -> str:
        return "host:port"

    def validate(self, value: Any, path: str) -> Any:
        if not isinstance(value, str):
            raise SchemaError(path, f"expected \"host:port\", got {_type_name(value)}")
        return parse_host_port(value, path)


def parse_host_port(value: str, path: str = "listen") -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SchemaError(path, f"expected \"host:port\" with a port 0-65535, got {value!r}")
    return value


@dataclass
class Regex(Field):
    def type_doc(self) -> str:
        return "regex"

    def validate(self, value: Any, path: str) -> Any:
        if not isinstance(value, str):
            raise SchemaError(path, f"expected a regular expression string, got {_type_name(value)}")
        try:
            re.compile(value)
        except re.error as exc:
            raise SchemaError(path, f"invalid regular expression {value!r}: {exc}") from None
        return value


@dataclass
class ListOf(Field):
    item: Field = field(default_factory=Str)

    def type_doc(self) -> str:
        return f"list of {self.item.type_doc()}"

    def default_value(self) -> Any:
        # Validated like a configured value: a default written as mappings (as the docs show it)
        # gives settings instances, a fresh list each time.
        return self.validate(list(self.default), "") if self.default is not None else None

    def validate(self, value: Any, path: str) -> Any:
        if not isinstance(value, list):
            raise SchemaError(path, f"expected a list, got {_type_name(value)}")
        errors = _Collector()
        out = [errors.validate(self.item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        errors.raise_if_any()
        return out


@dataclass
class MapOf(Field):
    """A mapping with free-form keys (e.g. HTTP header names) and typed values."""

    value: Field = field(default_factory=Str)

    def type_doc(self) -> str:
        return f"mapping of string to {self.value.type_doc()}"

    def default_value(self) -> Any:
        return self.validate(dict(self.default or {}), "")

    def validate(self, value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise SchemaError(path, f"expected a mapping, got {_type_name(value)}")
        out = {}
        errors = _Collector()
        for k, v in value.items():
            if not isinstance(k, str):
                errors.add(path, f"keys must be strings, got {k!r}")
                continue
            out[k] = errors.validate(self.value, v, f"{path}.{k}")
        errors.raise_if_any()
        return out


@dataclass
class Section(Field):
    """A mapping with a fixed set of keys; unknown keys are errors (they are usually typos).
    Validated to an instance of `settings` (the class `settings()` derived it from), or to a dict
    where none is set (the `sources` section, whose keys are the registry's)."""

    fields: dict[str, Field] = field(default_factory=dict)
    check: Callable[[Any, str], None] | None = None  # cross-field validation, on the built instance
    settings: type[Any] | None = None

    def type_doc(self) -> str:
        return "mapping"

    def default_value(self) -> Any:
        if self.default is None and any(f.required for f in self.fields.values()):
            return None
        return self.validate({}, "")

    def validate(self, value: Any, path: str) -> Any:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise SchemaError(path, f"expected a mapping, got {_type_name(value)}")
        out: dict[str, Any] = {}
        errors = _Collector()
        for key in value:
            if key not in self.fields:
                known = ", ".join(sorted(self.fields)) or "none"
                errors.add(_join(path, str(key)), f"unknown key (known keys here: {known})")
        for key, decl in self.fields.items():
            sub = _join(path, key)
            if key in value and value[key] is not None:
                out[key] = errors.validate(decl, value[key], sub)
            elif decl.required:
                errors.add(sub, "required key is missing")
            else:
                out[key] = decl.default_value()
        errors.raise_if_any()  # cross-field checks need every field valid
        built = self.settings(**out) if self.settings is not None else out
        if self.check is not None:
            self.check(built, path)
        return built


_SCHEMA = "infrapulse.schema"
SettingsT = TypeVar("SettingsT", bound="Settings")


class Settings:
    """Base of the settings classes: `SCHEMA` is the Section `settings()` derived from the fields."""

    __slots__ = ()
    SCHEMA: ClassVar[Section]


def setting(decl: Field) -> Any:
    """A settings-class field declared by its schema entry: the entry's default is the field's
    (a fresh copy per instance for lists, mappings and sections), its docs are the key's docs."""
    if decl.required:
        return dataclasses.field(metadata={_SCHEMA: decl})
    if isinstance(decl, (ListOf, MapOf, Section)):
        return dataclasses.field(default_factory=decl.default_value, metadata={_SCHEMA: decl})
    return dataclasses.field(default=decl.default_value(), metadata={_SCHEMA: decl})


def entries(cls: type[Any]) -> dict[str, Field]:
    """The schema entry of each field of a settings class declared with `setting()`, in key order:
    the inherited fields the class does not redeclare, then those of its own body as it lists
    them (a source redeclaring `enabled` and `interval` puts them where its docs want them; the
    dataclass keeps base fields first, which only matters to positional arguments: there are none)."""
    own = list(cls.__dict__.get("__annotations__", {}))
    fields = {f.name: f for f in dataclasses.fields(cls) if _SCHEMA in f.metadata}
    order = [name for name in fields if name not in own] + [name for name in own if name in fields]
    return {name: fields[name].metadata[_SCHEMA] for name in order}


def settings(doc: str = "", *, check: Callable[[Any, str], None] | None = None,
             default: Any = None) -> Callable[[type[SettingsT]], type[SettingsT]]:
    """Class decorator (above `@dataclass(kw_only=True, slots=True)`): sets `SCHEMA`, the Section
    whose keys are the class's fields in `entries` order, validated into an instance."""

    def attach(cls: type[SettingsT]) -> type[SettingsT]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__}: @settings goes above @dataclass")
        cls.SCHEMA = Section(doc=doc, fields=entries(cls), check=check, settings=cls, default=default)
        return cls

    return attach


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def deprecated_keys(section: Section, value: Any, path: str = "") -> list[tuple[str, str]]:
    """(key path, explanation) of every deprecated key that `value` (raw, unvalidated) sets."""
    found: list[tuple[str, str]] = []
    if not isinstance(value, dict):
        return found
    for key, decl in section.fields.items():
        if key not in value or value[key] is None:
            continue
        sub = _join(path, key)
        if decl.deprecated:
            found.append((sub, decl.deprecated))
        if isinstance(decl, Section):
            found += deprecated_keys(decl, value[key], sub)
        elif isinstance(decl, ListOf) and isinstance(decl.item, Section) and isinstance(value[key], list):
            for i, item in enumerate(value[key]):
                found += deprecated_keys(decl.item, item, f"{sub}[{i}]")
    return found


def walk(section: Section, prefix: str = "") -> Iterator[tuple[str, Field]]:
    """Yield (key path, field) for every declared key, depth first, for documentation."""
    for key, decl in section.fields.items():
        path = _join(prefix, key)
        yield path, decl
        if isinstance(decl, Section):
            yield from walk(decl, path)
        elif isinstance(decl, ListOf) and isinstance(decl.item, Section):
            yield from walk(decl.item, path + "[]")
