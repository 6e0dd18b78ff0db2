"""Load and validate the YAML config file.

Any problem — unreadable file, YAML syntax, unknown key, wrong type, bad duration — becomes a
`ConfigError` naming the file, the key path and the reason; the CLI prints it and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from . import schema
from .schema import Duration, HostPort, Int, SchemaError, Section, Str

DEFAULT_LISTEN = "0.0.0.0:9477"


class ConfigError(Exception):
    def __init__(self, file: str, key: str, reason: str) -> None:
        self.file = file
        self.key = key
        self.reason = reason
        where = f"{file}: {key}" if key else file
        super().__init__(f"{where}: {reason}")


def _sources_section() -> Section:
    from .sources import registry

    return Section(
        doc="One block per telemetry source. A source that is absent keeps its defaults.",
        fields={name: source.CONFIG for name, source in registry().items()},
    )


def _health_section() -> Section:
    from .health import config as health_config

    return health_config.CONFIG


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
            "sources": _sources_section(),
        }
    )


def load_text(text: str, file: str = "<config>") -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(file, "", f"invalid YAML: {where}{problem}") from None
    except RecursionError:  # PyYAML composes recursively: "[[[[..." deeper than the stack
        raise ConfigError(file, "", "invalid YAML: nested too deeply") from None
    if data is None:
        data = {}
    try:
        return root_schema().validate(data, "")
    except SchemaError as exc:
        raise ConfigError(file, exc.path or "<top level>", exc.reason) from None


def load_file(path: str | Path) -> dict[str, Any]:
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
    return load_text(text, str(path))


def default_config() -> dict[str, Any]:
    return load_text("", "<defaults>")


__all__ = ["ConfigError", "load_file", "load_text", "default_config", "root_schema", "schema"]
