"""gNMI profiles: declarative YAML maps from a vendor's paths to infrapulse's switch families.

A profile says what to subscribe to (paths, SAMPLE or ON_CHANGE, optional per-path interval),
which encodings the platform speaks (in order of preference), and how each leaf becomes a
sample: which family, which path keys / name parts become labels, constant labels, a scale
factor, an enum map, or (for `_info` families) which sibling leaves become labels. Where two leaves
measure the same thing (`in-fcs-errors` / `in-crc-errors`), `rank` says which one a series takes:
the best-ranked leaf the switch sends, never their sum (see `prefer`).

Built-in profiles live in `profiles/*.yaml` next to this module; `profiles_dir` adds
more (a file with a built-in's name replaces it). Every problem is a `ProfileError` naming the
file, the key path inside it and the reason. See docs/gnmi.md for the format.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from ... import catalog
from ...schema import parse_duration
from .families import BY_NAME
from .paths import ElemPath, PathPattern, PathSyntaxError, expand_ranges


class _Missing(enum.Enum):
    """A `dict.get` default the type checker tells apart from a cached None."""

    MISSING = enum.auto()


_MISSING: Final = _Missing.MISSING
BUILTIN_DIR = Path(__file__).resolve().parent / "profiles"
ENCODINGS = ("proto", "json_ietf", "json")
MODES = ("sample", "on_change", "target_defined")
MIN_SAMPLE_INTERVAL = 1.0  # SONiC and Cumulus reject anything faster

_TOP_KEYS = {"name", "description", "encodings", "strip_module_prefixes", "origin", "target",
             "subscriptions", "streams", "metrics", "ignore", "interface_table", "extends", "models"}
_STREAM_KEYS = {"origin", "target", "subscriptions", "optional", "alias_keys", "empty_entry_deletes"}
_SUB_KEYS = {"path", "mode", "sample_interval", "heartbeat_interval", "suppress_redundant", "expire"}
_METRIC_KEYS = {"path", "family", "labels", "scale", "values", "default", "value_labels", "rank",
                "time_format", "divide_by_port_speed"}
_TABLE_KEYS = {"path", "alias", "speed_mbps"}


class ProfileError(Exception):
    def __init__(self, file: str, key: str, reason: str) -> None:
        self.file = file
        self.key = key
        self.reason = reason
        super().__init__(f"{file}: {key}: {reason}" if key else f"{file}: {reason}")


# Builds the ProfileError for a key path and a reason, naming the file being read.
_Fail = Callable[[str, str], ProfileError]


@dataclass
class SubscriptionSpec:
    path: str
    mode: str = "sample"
    sample_interval: float | None = None  # None: the switch's configured interval
    heartbeat_interval: float | None = None
    suppress_redundant: bool = False
    # Expire series under this path like SAMPLE series when nothing refreshes them, whatever the
    # mode: for event streams (EOS LANZ congestion records) whose last event is no current state.
    expire: bool = False
    alias_keys: bool = False  # copied from its stream (see StreamSpec)
    empty_entry_deletes: bool = False  # copied from its stream

    @property
    def expires(self) -> bool:
        return self.mode == "sample" or self.expire


@dataclass
class InterfaceTable:
    """Where a platform lists its ports (SONiC: APPL_DB PORT_TABLE, keyed by port name): a JSON
    table whose entries give each port's vendor alias and speed in Mb/s."""

    path: str
    pattern: PathPattern
    alias: str = ""  # field holding the alias
    speed_mbps: str = ""  # field holding the speed (Mb/s)


@dataclass
class StreamSpec:
    """One Subscribe RPC: SONiC needs one per database (the DB is the prefix target)."""

    origin: str = ""
    target: str = ""
    subscriptions: list[SubscriptionSpec] = field(default_factory=list)
    # A switch may refuse this stream (a feature it lacks or has not enabled, e.g. EOS's
    # eos_native provider): the session goes on without it and says so in its status.
    optional: bool = False
    # SONiC COUNTERS_DB wildcard paths key ports by CONFIG_DB alias (etp10, Ethernet1/1) where
    # one is configured: an `{interface}` captured under such a stream is translated to the port
    # name through the profile's interface_table.
    alias_keys: bool = False
    # SONiC whole-table ON_CHANGE: a deleted key arrives as an empty object ({"Ethernet0": {}});
    # it drops the series below that key.
    empty_entry_deletes: bool = False

    def describe(self) -> str:
        where = ":".join(p for p in (self.origin, self.target) if p)
        paths = (", ".join(s.path for s in self.subscriptions[:3])
                 + (", ..." if len(self.subscriptions) > 3 else ""))
        return f"{where + ' ' if where else ''}{paths}"


@dataclass
class Rule:
    index: int  # position in `metrics`, for error messages and docs
    family: catalog.Family
    pattern: PathPattern
    const: dict[str, str]
    scale: float = 1.0
    values: dict[str, float] | None = None  # enum text -> number
    default: float | None = None  # for enum text not in `values`
    info_label: str = ""  # set on the parts of an _info rule: the label this leaf's value fills
    entity_len: int = 0  # _info rules: path length of the entity (the container)
    info_labels: tuple[str, ...] = ()  # _info rules: every value label of the entity
    sample: bool | None = None  # SAMPLE or ON_CHANGE when every subscription covering it agrees
    # Preference among rules feeding the same series (lower wins; see `prefer`). None: the
    # family has no ranked rule; set to 0 on the unranked rules of a family that has one.
    rank: int | None = None
    time_format: str = ""  # the value is a UTC time in this strptime format -> Unix seconds
    per_port_speed: bool = False  # value x scale / the port's speed in bit/s (accumulated)
    alias_keys: bool = False  # its {interface} may be a vendor alias (set from the streams)


@dataclass
class Profile:
    name: str
    file: str
    description: str
    encodings: list[str]
    strip_modules: bool
    streams: list[StreamSpec]
    rules: list[Rule]
    ignore: list[PathPattern] = field(default_factory=list)  # leaves dropped on purpose (not "unmapped")
    interface_table: InterfaceTable | None = None
    # The YANG models (Capabilities supported_models names) a switch this profile fits announces:
    # `doctor` compares them with what the target announces.
    models: list[str] = field(default_factory=list)
    list_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _by_names: dict[tuple[str, ...], list[Rule]] = field(default_factory=dict, repr=False)
    _by_len: dict[int, list[Rule]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        subs = [(PathPattern(s.path, self.strip_modules), s.expires, s.alias_keys)
                for st in self.streams for s in st.subscriptions]
        self._resolved: dict[ElemPath, tuple[Rule, dict[str, str]] | None] = {}
        ranked = {rule.family.name for rule in self.rules if rule.rank is not None}
        for rule in self.rules:
            if rule.rank is None and rule.family.name in ranked:
                rule.rank = 0
            modes = {sample for pattern, sample, _ in subs if pattern.may_contain(rule.pattern)}
            rule.sample = modes.pop() if len(modes) == 1 else None
            rule.alias_keys = "interface" in rule.pattern.labels() and any(
                aliased for pattern, _, aliased in subs if pattern.may_contain(rule.pattern))
            if rule.pattern.literal_names is not None:
                self._by_names.setdefault(rule.pattern.literal_names, []).append(rule)
            else:
                self._by_len.setdefault(len(rule.pattern), []).append(rule)
            # The same list name may be keyed differently in two trees (qos interface[interface-id],
            # interfaces interface[name]): keep every candidate; JSON entries carry the ones they have.
            for name, keys in rule.pattern.list_keys().items():
                self.list_keys[name] = tuple(sorted(set(self.list_keys.get(name, ())) | set(keys)))

    def resolve(self, elems: ElemPath) -> tuple[Rule, dict[str, str]] | None:
        """The first rule matching a concrete leaf path, with its captured labels (cached: switches
        of one profile usually share port names, so one resolution serves the whole fabric)."""
        found = self._resolved.get(elems, _MISSING)
        if found is _MISSING:
            found = self._match(elems)
            if len(self._resolved) < 200_000:
                self._resolved[elems] = found
        return found

    def _match(self, elems: ElemPath) -> tuple[Rule, dict[str, str]] | None:
        for rule in self._by_names.get(tuple(name for name, _ in elems), ()):
            captured = rule.pattern.match(elems)
            if captured is not None:
                return rule, captured
        for rule in self._by_len.get(len(elems), ()):
            captured = rule.pattern.match(elems)
            if captured is not None:
                return rule, captured
        return None

    def ignored(self, elems: ElemPath) -> bool:
        """Whether a leaf no rule maps is dropped on purpose (`ignore`), rather than unmapped."""
        return any(len(p) == len(elems) and p.match(elems) is not None for p in self.ignore)

    def sample_intervals(self, default: float) -> list[float]:
        return [s.sample_interval or default for st in self.streams for s in st.subscriptions
                if s.mode == "sample"]


# -- loading --------------------------------------------------------------------------------


_SAFE_LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    file = str(path)
    try:
        # libyaml's parser where PyYAML has it: the built-in profiles are read on every config
        # validation (check-config, start, SIGHUP), and the pure-Python one takes ~15 ms a file.
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
    except OSError as exc:
        raise ProfileError(file, "", f"cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise ProfileError(file, "", f"invalid YAML: {where}{getattr(exc, 'problem', None) or exc}") from None


def load_profile_file(path: Path, files: dict[str, Path] | None = None) -> Profile:
    """One profile file; `extends:` names another profile among `files` (default: the built-in
    profiles and the file's own directory)."""
    if files is None:
        files = {**_profile_files(BUILTIN_DIR), **_profile_files(path.parent)}
    files = {**files, path.stem: path}
    return parse_profile(_resolved_data(path.stem, files, ()), path.stem, str(path))


def _profile_files(directory: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))}


def _resolved_data(name: str, files: dict[str, Path], chain: tuple[str, ...]) -> Any:
    """A profile's YAML with what it `extends` merged in: the base's subscriptions (per stream,
    by origin and target), metrics and ignore list come first, its own are added; any other key
    it sets replaces the base's."""
    path = files[name]
    data = _read_yaml(path)
    if not isinstance(data, dict) or "extends" not in data:
        return data
    base = data["extends"]

    def fail(key: str, reason: str) -> ProfileError:
        return ProfileError(str(path), key, reason)

    if not isinstance(base, str) or base not in files:
        raise fail("extends", f"unknown profile {base!r} (known: {', '.join(sorted(files))})")
    if base == name or base in chain:
        raise fail("extends", f"profiles extend each other in a loop ({' -> '.join((*chain, name, base))})")
    base_data = _resolved_data(base, files, (*chain, name))
    if not isinstance(base_data, dict):
        raise fail("extends", f"profile {base!r} is not a mapping")
    merged = {k: v for k, v in base_data.items() if k != "name"}
    own = {k: v for k, v in data.items() if k != "extends"}
    base_streams, own_streams = _streams_of(merged, fail), _streams_of(own, fail)
    for key, value in own.items():
        if key in ("metrics", "ignore"):
            if not isinstance(value, list):
                raise fail(key, "expected a list")
            merged[key] = list(merged.get(key) or []) + value
        else:
            merged[key] = value
    for stream in own_streams:
        match = next((s for s in base_streams if (s.get("origin", ""), s.get("target", ""))
                      == (stream.get("origin", ""), stream.get("target", ""))), None)
        if match is None:
            base_streams.append(stream)
        else:
            match.update({k: v for k, v in stream.items() if k != "subscriptions"})
            match["subscriptions"] = (list(match.get("subscriptions") or [])
                                      + list(stream.get("subscriptions") or []))
    merged["streams"] = base_streams
    return merged


def _streams_of(data: dict[str, Any], fail: _Fail) -> list[dict[str, Any]]:
    """The streams of a raw profile, moving top-level origin/target/subscriptions into one."""
    if "streams" in data:
        streams = data.pop("streams")
        if not isinstance(streams, list) or not all(isinstance(s, dict) for s in streams):
            raise fail("streams", "expected a list of mappings")
        return [dict(s) for s in streams]
    top: dict[str, Any] = {k: data.pop(k) for k in ("origin", "target", "subscriptions") if k in data}
    return [top] if top else []


def parse_profile(data: Any, name: str, file: str) -> Profile:
    def fail(key: str, reason: str) -> ProfileError:
        return ProfileError(file, key, reason)

    if not isinstance(data, dict):
        raise fail("", "a profile is a YAML mapping")
    _no_unknown(data, _TOP_KEYS, "", fail)
    if data.get("name", name) != name:
        raise fail("name", f"must match the file name ({name!r}), got {data.get('name')!r}")
    encodings = data.get("encodings", ["proto", "json_ietf", "json"])
    if not isinstance(encodings, list) or not encodings:
        raise fail("encodings", "expected a non-empty list")
    for i, enc in enumerate(encodings):
        if enc not in ENCODINGS:
            raise fail(f"encodings[{i}]", f"must be one of {', '.join(ENCODINGS)}; got {enc!r}")
    strip = data.get("strip_module_prefixes", True)
    if not isinstance(strip, bool):
        raise fail("strip_module_prefixes", "expected true or false")

    if "streams" in data:
        if any(k in data for k in ("subscriptions", "origin", "target")):
            raise fail("streams", "use either streams or top-level origin/target/subscriptions, not both")
        raw_streams = data["streams"]
        if not isinstance(raw_streams, list) or not raw_streams:
            raise fail("streams", "expected a non-empty list")
        streams = [_parse_stream(s, f"streams[{i}]", fail) for i, s in enumerate(raw_streams)]
    else:
        streams = [_parse_stream({k: data[k] for k in _STREAM_KEYS if k in data}, "", fail)]

    raw_metrics = data.get("metrics")
    if not isinstance(raw_metrics, list) or not raw_metrics:
        raise fail("metrics", "expected a non-empty list of path -> family mappings")
    rules: list[Rule] = []
    sub_patterns = [(PathPattern(s.path, strip)) for st in streams for s in st.subscriptions]
    table = _parse_interface_table(data.get("interface_table"), strip, sub_patterns, fail)
    if any(st.alias_keys for st in streams) and (table is None or not table.alias):
        raise fail("streams",
                   "alias_keys needs interface_table with its alias field (where the aliases come from)")
    for i, raw in enumerate(raw_metrics):
        rules += _parse_rule(raw, i, strip, sub_patterns, fail, table)
    ignore = _parse_ignore(data.get("ignore", []), strip, sub_patterns, fail)
    models = data.get("models", [])
    if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
        raise fail("models", "expected a list of YANG model names (as Capabilities announces them)")
    return Profile(name=name, file=file, description=str(data.get("description", "")), encodings=encodings,
                   strip_modules=strip, streams=streams, rules=rules, ignore=ignore, interface_table=table,
                   models=list(models))


def _under_subscription(text: str, key: str, strip: bool, subs: list[PathPattern],
                        fail: _Fail) -> PathPattern:
    try:
        pattern = PathPattern(text, strip)
    except PathSyntaxError as exc:
        raise fail(key, str(exc)) from None
    if not any(sub.may_contain(pattern) for sub in subs):
        raise fail(key, f"{text!r} is not under any subscribed path")
    return pattern


def _parse_ignore(raw: Any, strip: bool, subs: list[PathPattern], fail: _Fail) -> list[PathPattern]:
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise fail("ignore", "expected a list of leaf path patterns")
    return [_under_subscription(text, f"ignore[{i}]", strip, subs, fail) for i, text in enumerate(raw)]


def _parse_interface_table(raw: Any, strip: bool, subs: list[PathPattern],
                           fail: _Fail) -> InterfaceTable | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
        raise fail("interface_table", "expected a mapping with path (and alias / speed_mbps field names)")
    _no_unknown(raw, _TABLE_KEYS, "interface_table", fail)
    for key in ("alias", "speed_mbps"):
        if not isinstance(raw.get(key, ""), str):
            raise fail(f"interface_table.{key}", "expected a field name")
    pattern = _under_subscription(raw["path"], "interface_table.path", strip, subs, fail)
    return InterfaceTable(raw["path"], pattern, raw.get("alias", ""), raw.get("speed_mbps", ""))


def _no_unknown(data: dict[Any, Any], known: set[str], where: str, fail: _Fail) -> None:
    for key in data:
        if key not in known:
            prefix = f"{where}." if where else ""
            raise fail(f"{prefix}{key}", f"unknown key (known keys here: {', '.join(sorted(known))})")


def _parse_stream(raw: Any, where: str, fail: _Fail) -> StreamSpec:
    if not isinstance(raw, dict):
        raise fail(where, "expected a mapping")
    _no_unknown(raw, _STREAM_KEYS, where, fail)
    key = f"{where}.subscriptions" if where else "subscriptions"
    subs = raw.get("subscriptions")
    if not isinstance(subs, list) or not subs:
        raise fail(key, "expected a non-empty list of subscriptions")
    parsed: list[SubscriptionSpec] = []
    for i, sub in enumerate(subs):
        sub_key = f"{key}[{i}]"
        if isinstance(sub, str):
            sub = {"path": sub}
        if not isinstance(sub, dict) or "path" not in sub:
            raise fail(sub_key, "expected a mapping with a path")
        _no_unknown(sub, _SUB_KEYS, sub_key, fail)
        mode = sub.get("mode", "sample")
        if mode not in MODES:
            raise fail(f"{sub_key}.mode", f"must be one of {', '.join(MODES)}; got {mode!r}")
        interval = _duration(sub.get("sample_interval"), f"{sub_key}.sample_interval", fail)
        if interval is not None and interval < MIN_SAMPLE_INTERVAL:
            raise fail(f"{sub_key}.sample_interval", f"must be at least {MIN_SAMPLE_INTERVAL:g}s")
        if interval is not None and mode != "sample":
            raise fail(f"{sub_key}.sample_interval", "only SAMPLE subscriptions take a sample_interval")
        heartbeat = _duration(sub.get("heartbeat_interval"), f"{sub_key}.heartbeat_interval", fail)
        suppress = sub.get("suppress_redundant", False)
        if not isinstance(suppress, bool):
            raise fail(f"{sub_key}.suppress_redundant", "expected true or false")
        expire = sub.get("expire", False)
        if not isinstance(expire, bool):
            raise fail(f"{sub_key}.expire", "expected true or false")
        if not isinstance(sub["path"], str):
            raise fail(f"{sub_key}.path", "expected a path string")
        for path in expand_ranges(sub["path"]):
            try:
                PathPattern(path)
            except PathSyntaxError as exc:
                raise fail(f"{sub_key}.path", str(exc)) from None
            parsed.append(SubscriptionSpec(path, mode, interval, heartbeat, suppress, expire))
    origin, target = raw.get("origin", ""), raw.get("target", "")
    for k, v in (("origin", origin), ("target", target)):
        if not isinstance(v, str):
            raise fail(f"{where}.{k}" if where else k, "expected a string")
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise fail(f"{where}.optional", "expected true or false")
    flags = {}
    for flag in ("alias_keys", "empty_entry_deletes"):
        flags[flag] = raw.get(flag, False)
        if not isinstance(flags[flag], bool):
            raise fail(f"{where}.{flag}" if where else flag, "expected true or false")
    for spec in parsed:
        spec.alias_keys, spec.empty_entry_deletes = flags["alias_keys"], flags["empty_entry_deletes"]
    return StreamSpec(origin=origin, target=target, subscriptions=parsed, optional=optional, **flags)


def _duration(value: Any, key: str, fail: _Fail) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise fail(key, str(exc)) from None


def _parse_rule(raw: Any, index: int, strip: bool, subs: list[PathPattern], fail: _Fail,
                table: InterfaceTable | None = None) -> list[Rule]:
    where = f"metrics[{index}]"
    if not isinstance(raw, dict):
        raise fail(where, "expected a mapping with path and family")
    _no_unknown(raw, _METRIC_KEYS, where, fail)
    for required in ("path", "family"):
        if not isinstance(raw.get(required), str):
            raise fail(f"{where}.{required}", "required string is missing")
    family = BY_NAME.get(raw["family"])
    if family is None:
        raise fail(f"{where}.family",
                   f"unknown family {raw['family']!r} (known: {', '.join(sorted(BY_NAME))})")
    try:
        pattern = PathPattern(raw["path"], strip)
    except PathSyntaxError as exc:
        raise fail(f"{where}.path", str(exc)) from None
    if not any(sub.may_contain(pattern) for sub in subs):
        raise fail(f"{where}.path", f"{raw['path']!r} is not under any subscribed path")
    const = raw.get("labels", {}) or {}
    if not isinstance(const, dict) or not all(isinstance(v, (str, int)) for v in const.values()):
        raise fail(f"{where}.labels", "expected a mapping of label name to constant value")
    const = {str(k): str(v) for k, v in const.items()}
    value_labels = raw.get("value_labels")
    is_info = family.type == catalog.INFO
    if is_info and not isinstance(value_labels, dict):
        raise fail(f"{where}.value_labels", f"{family.name} is an _info family: map labels to the leaves "
                                              "(relative to path) that carry their values")
    if not is_info and value_labels is not None:
        raise fail(f"{where}.value_labels", "only _info families take value_labels")
    captured = pattern.labels()
    provided = captured + list(const) + list(value_labels or {})
    wanted = [lbl for lbl in family.labels if lbl != "switch"]
    dupes = sorted({lbl for lbl in provided if provided.count(lbl) > 1})
    if dupes:
        raise fail(where, f"label(s) {', '.join(dupes)} given more than once")
    if "switch" in provided:
        raise fail(where, "the switch label is set from the target name; do not map it")
    missing = [lbl for lbl in wanted if lbl not in provided]
    extra = [lbl for lbl in provided if lbl not in wanted]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing label(s) {', '.join(missing)}")
        if extra:
            parts.append(f"label(s) {', '.join(extra)} not in {family.name}")
        raise fail(where, "; ".join(parts) + f" (family labels: {', '.join(family.labels)})")
    scale = raw.get("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise fail(f"{where}.scale", f"expected a number, got {scale!r}")
    values = raw.get("values")
    if values is not None:
        if not isinstance(values, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.values()):
            raise fail(f"{where}.values", "expected a mapping of enum text to number")
        values = {str(k): float(v) for k, v in values.items()}
    default = raw.get("default")
    if default is not None and (isinstance(default, bool) or not isinstance(default, (int, float))):
        raise fail(f"{where}.default", f"expected a number, got {default!r}")
    rank = raw.get("rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
        raise fail(f"{where}.rank", f"expected a whole number >= 0 (0 is preferred), got {rank!r}")
    if rank is not None and is_info:
        raise fail(f"{where}.rank", "_info families take no rank")
    time_format = raw.get("time_format", "")
    if not isinstance(time_format, str) or (time_format and (is_info or values is not None)):
        raise fail(f"{where}.time_format", "a strptime format, on a numeric rule without values")
    per_speed = raw.get("divide_by_port_speed", False)
    if not isinstance(per_speed, bool):
        raise fail(f"{where}.divide_by_port_speed", "expected true or false")
    if per_speed and (table is None or not table.speed_mbps or "interface" not in captured or is_info):
        raise fail(f"{where}.divide_by_port_speed", "needs interface_table.speed_mbps and a numeric rule "
                                                    "capturing {interface}")
    if not is_info:
        return [Rule(index, family, pattern, const, float(scale), values,
                     None if default is None else float(default), rank=rank, time_format=time_format,
                     per_port_speed=per_speed)]
    # An _info rule becomes one part per value leaf, each filling one label of the entity.
    assert isinstance(value_labels, dict)  # checked above: an _info family requires value_labels
    info_parts: list[Rule] = []
    labels = tuple(value_labels)
    for label, leaf in value_labels.items():
        if not isinstance(leaf, str) or not leaf:
            raise fail(f"{where}.value_labels.{label}", "expected a leaf path relative to path")
        try:
            part = PathPattern(raw["path"].rstrip("/") + "/" + leaf.strip("/"), strip)
        except PathSyntaxError as exc:
            raise fail(f"{where}.value_labels.{label}", str(exc)) from None
        info_parts.append(Rule(index, family, part, const, info_label=label, entity_len=len(pattern),
                               info_labels=labels))
    return info_parts


def profile_files(extra_dir: str | Path | None) -> dict[str, Path]:
    """Profile name -> file; a file in `extra_dir` named like a built-in replaces it."""
    files = _profile_files(BUILTIN_DIR)
    if extra_dir:
        directory = Path(extra_dir)
        if not directory.is_dir():
            raise ProfileError(str(directory), "", "profiles_dir is not a directory")
        files.update(_profile_files(directory))
    return files


def load_profiles(extra_dir: str | Path | None = None) -> dict[str, Profile]:
    """Built-in profiles plus those in `extra_dir`; raises the first ProfileError."""
    files = profile_files(extra_dir)
    return {name: load_profile_file(path, files) for name, path in files.items()}


def validate_profiles(extra_dir: str | Path | None = None) -> list[ProfileError]:
    """Every problem in every profile file (built-in and `extra_dir`), for check-config."""
    try:
        files = profile_files(extra_dir)
    except ProfileError as exc:
        return [exc]
    errors: list[ProfileError] = []
    for path in files.values():
        try:
            load_profile_file(path, files)
        except ProfileError as exc:
            errors.append(exc)
    return errors
