"""Load and validate the YAML config file.

Any problem — unreadable file, YAML syntax, a key given twice, unknown key, wrong type, bad
duration — becomes a `ConfigError` naming the file, the key path and the reason; the CLI prints it
and exits 2. Every problem of a file is reported at once (`ConfigError.errors`), not just the
first. Keys that are accepted but do nothing (deprecated) come back as warnings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from . import schema
from .schema import Duration, HostPort, Int, SchemaError, Section, Str

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


def _health_section() -> Section:
    from .health import config as health_config

    return health_config.CONFIG


def _inspect_section() -> Section:
    from .inspect import config as inspect_config

    return inspect_config.CONFIG


def root_schema() -> Section:
    return Section(
        fields={
            "listen": HostPort("Address the HTTP server listens on (/metrics, /api, /).",
                               default=DEFAULT_LISTEN),
            "interval": Duration("Default poll interval of every source that does not set its own.",
                                 default="5s", min=0.05),
            "role": Str("What this instance is: node (host telemetry), fabric (switches) or both. "
                        "auto derives it from the enabled sources; it is exported as "
                        "infrapulse_node_info{role}.", default="auto",
                        choices=("auto", "node", "fabric", "both")),
            "hostname": Str("Host name exported as infrapulse_node_info{hostname}; it must match the LLDP "
                            "system name the switches see for this node. Default: the INFRAPULSE_HOSTNAME "
                            "environment variable, else the system host name (set INFRAPULSE_HOSTNAME from "
                            "spec.nodeName in a Kubernetes pod without hostNetwork).", default=""),
            "state_dir": Str("Directory for what must survive restarts, reboots and upgrades (the probe "
                             "baselines under probe/). Created when missing; systemd's StateDirectory= and "
                             "the DaemonSet's hostPath provide it.", default="/var/lib/infrapulse"),
            "http": Section(doc="HTTP server limits.", fields={
                "max_connections": Int("Open connections accepted at once. When all are taken, the oldest "
                                       "connection that has not sent a request yet is closed to admit a new "
                                       "one; a new one is refused only when every connection is busy.",
                                       default=256, min=1),
                "max_connections_per_client": Int("Open connections accepted from one client address (an "
                                                  "IPv6 client: its /64) at once; more are closed on "
                                                  "arrival.", default=64, min=1),
                "handshake_timeout": Duration("A TLS connection that has not finished its handshake this "
                                              "long after connecting is closed.", default="5s", min=0.1),
                "header_timeout": Duration("A connection must send a complete request line and headers "
                                           "within this long of connecting (after the TLS handshake), and "
                                           "of the first byte of every later request, or it is closed.",
                                           default="5s", min=0.1),
                "idle_timeout": Duration("A keep-alive connection that sends no new request for this long "
                                         "after a response is closed.", default="15s", min=0.1),
                "csp_report_uri": Str("Where browsers report Content-Security-Policy violations of the "
                                      "status page (the policy's report-uri); empty sends no reports.",
                                      default="", pattern=r"(https?://[^\s;,'\"]+|/[^\s;,'\"]*)?"),
                "render_cache": Duration("Scrapes within this long of a /metrics render share its bytes "
                                         "unless a source published new data since (0s renders every "
                                         "scrape). Keeps bursts of scrapers cheap on large fabric "
                                         "instances, whose streamed gNMI values can then be up to this "
                                         "old.", default="1s", min=0),
            }),
            "health": _health_section(),
            "inspect": _inspect_section(),
            "sources": _sources_section(),
        }
    )


def load_text(text: str, file: str = "<config>", warnings: list[str] | None = None) -> dict[str, Any]:
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
        cfg: dict[str, Any] = root.validate(data, "")  # the root Section's mapping
    except SchemaError as exc:
        problems += [(e.path or "<top level>", e.reason) for e in exc.errors]
    if problems:
        raise ConfigError(file, problems[0][0], problems[0][1], problems[1:])
    if warnings is not None:
        warnings += [f"{file}: {key}: {why}" for key, why in schema.deprecated_keys(root, data)]
    return cfg


def load_file(path: str | Path, warnings: list[str] | None = None) -> dict[str, Any]:
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


def default_config() -> dict[str, Any]:
    return load_text("", "<defaults>")


__all__ = ["ConfigError", "load_file", "load_text", "default_config", "root_schema", "schema"]
