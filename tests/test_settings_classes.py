"""The settings classes agree with the schema they declare: every Section of the config (but the
registry-keyed `sources`) validates into its class, whose fields are the Section's keys in order,
and whose annotations admit what validation returns (the default and a value given in a file).
mypy then checks every attribute read against those annotations."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from infrapulse import config as config_mod
from infrapulse.schema import ListOf, MapOf, Section


def sections(section: Section, path: str = "") -> Iterator[tuple[str, Section]]:
    yield path or "<root>", section
    for key, decl in section.fields.items():
        sub = f"{path}.{key}" if path else key
        if isinstance(decl, ListOf):
            decl = decl.item
            sub += "[]"
        elif isinstance(decl, MapOf):
            decl = decl.value
            sub += ".<name>"
        if isinstance(decl, Section):
            yield from sections(decl, sub)


ALL = dict(sections(config_mod.root_schema()))
TYPED = {path: s for path, s in ALL.items() if s.settings is not None}


def conforms(value: Any, hint: Any) -> bool:
    """Whether `value` is an instance of the type annotation `hint` (the forms settings use)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arm) for arm in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(conforms(v, item) for v in value)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return isinstance(value, tuple) and all(conforms(v, args[0]) for v in value)
        return isinstance(value, tuple) and len(value) == len(args) and all(map(conforms, value, args))
    if origin is dict:
        key, item = typing.get_args(hint)
        return isinstance(value, dict) and all(conforms(k, key) and conforms(v, item)
                                               for k, v in value.items())
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint)


def test_the_schema_has_typed_sections() -> None:
    # Only `sources` (keyed by the registry) validates to a plain dict: every other section,
    # each source's included, has its class.
    assert sorted(path for path, s in ALL.items() if s.settings is None) == ["sources"]
    assert len(TYPED) >= 30


@pytest.mark.parametrize("path", sorted(TYPED))
def test_fields_are_the_sections_keys_in_order(path: str) -> None:
    section = TYPED[path]
    cls = section.settings
    assert cls is not None
    assert sorted(f.name for f in dataclasses.fields(cls)) == sorted(section.fields)
    # Key order: inherited fields not redeclared, then the class body's own, as written.
    own = list(cls.__annotations__)
    inherited = [k for k in section.fields if k not in own]
    assert list(section.fields) == inherited + [k for k in own if k in section.fields]


# Annotations name classes imported only for type checking (Config.health): resolve them here.
NAMESPACE = {s.settings.__name__: s.settings for s in TYPED.values() if s.settings is not None}


@pytest.mark.parametrize("path", sorted(TYPED))
def test_each_default_fits_its_annotation(path: str) -> None:
    """What validation gives for a key left out (cross-field checks fill some in) is of its type."""
    section = TYPED[path]
    cls = section.settings
    assert cls is not None
    hints = typing.get_type_hints(cls, localns=NAMESPACE)
    built = config_mod.default_config() if path == "<root>" else section.default_value()
    for key, decl in section.fields.items():
        if decl.required:
            continue
        default = getattr(built, key) if built is not None else decl.default_value()
        assert conforms(default, hints[key]), f"{path}.{key}: default {default!r} is not a {hints[key]}"


def test_a_validated_file_gives_instances_all_the_way_down() -> None:
    cfg = config_mod.load_text("http: {max_connections: 9}\nsources: {}\n")
    assert isinstance(cfg, config_mod.Config) and cfg.http.max_connections == 9
    assert cfg.http.render_cache == 1.0  # the default, from the Duration "1s"
    for name, source_settings in cfg.sources.items():
        assert type(source_settings) is config_mod.root_schema().fields["sources"].fields[name].settings, name
    with pytest.raises(AttributeError):
        cfg.http.max_conections = 1  # type: ignore[attr-defined]  # slots: a typo is an error, not a new key


def test_the_mechanism_on_a_small_class() -> None:
    from dataclasses import dataclass

    from infrapulse.schema import Duration, Int, SchemaError, Settings, Str, setting, settings

    def check(pair: Pair, path: str) -> None:
        if pair.low > pair.high:
            raise SchemaError(path, "low must not exceed high")

    @settings("A pair.", check=check)
    @dataclass(kw_only=True, slots=True)
    class Pair(Settings):
        low: int = setting(Int("Low.", default=1))
        high: int = setting(Int("High.", default=5))
        name: str = setting(Str("Name.", required=True))
        every: float | None = setting(Duration("How often."))

    assert list(Pair.SCHEMA.fields) == ["low", "high", "name", "every"]
    assert Pair.SCHEMA.doc == "A pair."
    given = Pair.SCHEMA.validate({"name": "x", "every": "2m"}, "p")
    assert given == Pair(low=1, high=5, name="x", every=120.0)
    with pytest.raises(SchemaError) as missing:
        Pair.SCHEMA.validate({}, "p")
    assert (missing.value.path, missing.value.reason) == ("p.name", "required key is missing")
    with pytest.raises(SchemaError) as crossed:
        Pair.SCHEMA.validate({"name": "x", "low": 9}, "p")
    assert (crossed.value.path, crossed.value.reason) == ("p", "low must not exceed high")
    assert Pair.SCHEMA.default_value() is None  # a required key: no default instance

    @settings("A pair with a tag.")
    @dataclass(kw_only=True, slots=True)
    class Tagged(Pair):
        tag: str = setting(Str("Tag.", default=""))
        low: int = setting(Int("Low, redeclared after tag.", default=2))

    # Inherited keys it does not redeclare first, then its own body's order.
    assert list(Tagged.SCHEMA.fields) == ["high", "name", "every", "tag", "low"]
    assert Tagged.SCHEMA.validate({"name": "y"}, "t") == Tagged(low=2, high=5, name="y", every=None, tag="")
