"""Load and validate the YAML config file.

Any problem — unreadable file, YAML syntax, a key given twice, unknown key, wrong type, bad
duration — becomes a `ConfigError` naming the file, the key path and the reason; the CLI prints it
and exits 2. Every problem of a file is reported at once (`ConfigError.errors`), not just the
first. Keys that are accepted but do nothing (deprecated) come back as warnings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import schema
from .httpsettings import HttpSettings
from .schema import Duration, HostPort, SchemaError, Section, Settings, Str, setting

if TYPE_CHECKING:
    from .health.config import HealthSettings
    from .inspect.config import InspectSettings

DEFAULT_LISTEN = "0.0.0.0:9477"


class ConfigError(Exception):
    """`key`/`reason` are the first problem; `errors` lists every (key, reason) found, and the
    message has one `file: key: reason` line per problem."""

    def __init__(self, file: str, key: str, reason: str,
                 more: list[tuple[str, str]] | None = None) -> None:
        self.file = file
        self.key = key
        self.reason = reason
        self.errors: list[tuple[str, str]] = [(key, reason), *(more or [])]
        super().__init__("\n".join(self.line(k, r) for k, r in self.errors))

    def line(self, key: str, reason: str) -> str:
        where = f"{self.file}: {key}" if key else self.file
        return f"{where}: {reason}"

    def lines(self) -> list[str]:
        return [self.line(k, r) for k, r in self.errors]


def _key_path(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def duplicate_keys(node: yaml.Node | None, path: str = "") -> list[tuple[str, str]]:
    """(key path, reason) for every mapping key written twice in the composed YAML: PyYAML
    would silently keep the last one, so a second `interval:` would win unnoticed."""
    found: list[tuple[str, str]] = []
    if isinstance(node, yaml.MappingNode):
        first_line: dict[object, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in first_line:
                found.append((_key_path(path, key),
                              f"duplicate key (line {line}; first at line {first_line[key]}): "
                              "YAML keeps only the last one"))
            else:
                first_line[key] = line
            found += duplicate_keys(value_node, _key_path(path, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += duplicate_keys(item, f"{path}[{i}]")
    return found


def _parse_yaml(text: str, file: str) -> tuple[Any, list[tuple[str, str]]]:
    """The document and its duplicate keys (composed first, so each key keeps its line)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        duplicates = duplicate_keys(node)
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return data, duplicates


def _sources_section() -> Section:
    from .sources import registry

    return Section(
        doc="One block per telemetry source. A source that is absent keeps its defaults.",
        fields={name: source.CONFIG for name, source in registry().items()},
    )


@dataclass(kw_only=True, slots=True)
class Config(Settings):
    """The whole validated config file. `health` and `inspect` are their subsystems' settings;
    `sources` maps each registered source's name to its settings."""

    listen: str = setting(HostPort("Address the HTTP server listens on (/metrics, /api, /).",
                                   default=DEFAULT_LISTEN))
    interval: float = setting(Duration("Default poll interval of every source that does not set its own.",
                                       default="5s", min=0.05))
    role: str = setting(Str(
        "What this instance is: node (host telemetry), fabric (switches) or both. auto derives it from "
        "the enabled sources; it is exported as infrapulse_node_info{role}.", default="auto",
        choices=("auto", "node", "fabric", "both")))
    hostname: str = setting(Str(
        "Host name exported as infrapulse_node_info{hostname}; it must match the LLDP system name the "
        "switches see for this node. Default: the INFRAPULSE_HOSTNAME environment variable, else the "
        "system host name (set INFRAPULSE_HOSTNAME from spec.nodeName in a Kubernetes pod without "
        "hostNetwork).", default=""))
    state_dir: str = setting(Str(
        "Directory for what must survive restarts, reboots and upgrades (the probe baselines under "
        "probe/). Created when missing; systemd's StateDirectory= and the DaemonSet's hostPath provide "
        "it.", default="/var/lib/infrapulse"))
    http: HttpSettings = setting(HttpSettings.SCHEMA)
    # Declared by their subsystems (root_schema adds their Sections): always given by validation.
    health: HealthSettings = dataclasses.field()
    inspect: InspectSettings = dataclasses.field()
    sources: dict[str, Any] = dataclasses.field()  # source name -> that source's settings


def root_schema() -> Section:
    """The root Section. health, inspect and sources come from their subsystems (imported here,
    not at module level: they import this package's schema, and the registry imports every source)."""
    from .health import config as health_config
    from .inspect import config as inspect_config

    fields = schema.entries(Config)
    fields |= {"health": health_config.CONFIG, "inspect": inspect_config.CONFIG,
               "sources": _sources_section()}
    return Section(fields={f.name: fields[f.name] for f in dataclasses.fields(Config)}, settings=Config)


def load_text(text: str, file: str = "<config>", warnings: list[str] | None = None) -> Config:
    """Validate `text`; deprecated keys it sets are appended to `warnings` as `file: key: why`."""
    try:
        data, duplicates = _parse_yaml(text, file)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(file, "", f"invalid YAML: {where}{problem}") from None
    except RecursionError:  # PyYAML composes recursively: "[[[[..." deeper than the stack
        raise ConfigError(file, "", "invalid YAML: nested too deeply") from None
    if data is None:
        data = {}
    problems = list(duplicates)
    root = root_schema()
    try:
        cfg: Config = root.validate(data, "")
    except SchemaError as exc:
        problems += [(e.path or "<top level>", e.reason) for e in exc.errors]
    if problems:
        raise ConfigError(file, problems[0][0], problems[0][1], problems[1:])
    if warnings is not None:
        warnings += [f"{file}: {key}: {why}" for key, why in schema.deprecated_keys(root, data)]
    return cfg


def load_file(path: str | Path, warnings: list[str] | None = None) -> Config:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "", "file not found") from None
    except IsADirectoryError:
        raise ConfigError(str(path), "", "is a directory, not a config file") from None
    except PermissionError:
        raise ConfigError(str(path), "", "permission denied") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "", f"not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    return load_text(text, str(path), warnings)


def default_config() -> Config:
    return load_text("", "<defaults>")


__all__ = ["Config", "ConfigError", "HttpSettings", "load_file", "load_text", "default_config", "root_schema",
           "schema"]
