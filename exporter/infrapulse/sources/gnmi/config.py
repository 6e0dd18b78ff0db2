"""The gnmi source's configuration: the schema, targets and targets_file, per-switch settings.

`CONFIG` is the `sources.gnmi` section. Its check also loads the profiles and the targets file, so
`infrapulse check-config` catches an unknown profile, a bad encoding for a profile, a duplicate
switch name or a broken targets file before the daemon starts. `merge_target` gives a switch's
effective settings (its own over `defaults`), which is what a `SwitchSession` runs with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ...schema import AutoBool, Bool, Duration, Int, ListOf, SchemaError, Section, Str
from .profile import Profile, ProfileError, load_profiles


def _connection_fields(inherit: bool) -> dict[str, Any]:
    """Per-switch settings; under `targets[]` every one defaults to "inherit from defaults"."""

    def d(value: Any) -> Any:
        return None if inherit else value

    return {
        "port": Int("gNMI port used when an address has none.", default=d(9339), min=1, max=65535),
        "profile": Str("Path profile: a built-in (openconfig, sonic, nvidia-cumulus, arista-eos) or a "
                       "file name in profiles_dir.", default=d("openconfig")),
        "sample_interval": Duration("Interval of SAMPLE subscriptions that do not set their own (minimum "
                                    "1s).", default=d("10s"), min=1.0),
        "encoding": Str("Value encoding; auto picks the profile's first choice the switch supports "
                        "(Capabilities).", default=d("auto"), choices=("auto", "proto", "json_ietf", "json")),
        "insecure": Bool("Plaintext gRPC. Without it every connection uses TLS.", default=d(False)),
        "tls": Section(doc="TLS settings (ignored with insecure: true).", fields={
            "ca_file": Str("PEM CA bundle that signed the switch certificate (default: system roots)."),
            "cert_file": Str("PEM client certificate, for switches that require mutual TLS."),
            "key_file": Str("PEM private key of cert_file."),
            "server_name": Str("Name to verify the switch certificate against, when it differs from the "
                               "address (an IP, a load balancer)."),
        }),
        "username": Str("gNMI username (not a secret; prefer username_env / username_file for consistency)."),
        "username_env": Str("Environment variable holding the gNMI username."),
        "username_file": Str("File holding the gNMI username."),
        "password_env": Str("Environment variable holding the gNMI password (never logged)."),
        "password_file": Str("File holding the gNMI password (e.g. a mounted secret; never logged)."),
        "connect_timeout": Duration("Timeout of the connect + Capabilities handshake.", default=d("10s"),
                                    min=0.1),
        "keepalive": Duration("HTTP/2 keepalive ping interval: detects a dead connection.",
                              default=d("30s"), min=1.0),
        "stall_timeout": Duration("Reconnect when a stream with SAMPLE subscriptions sends nothing for this "
                                  "long. Default (unset): 3 times the longest sample or heartbeat "
                                  "interval of the profile's subscriptions, at least 10s."),
    }


def _target_section() -> Section:
    return Section(doc="One switch.", fields={
        "name": Str("Switch name: the `switch` label and the sharding key.", required=True,
                    pattern=r"[A-Za-z0-9_.:/-]+"),
        "address": Str("host:port (or host, then `port` applies). Default: the name."),
        **_connection_fields(inherit=True),
    })


TARGET = _target_section()


def _check(section: dict[str, Any], path: str) -> None:
    """Cross-field validation, so `infrapulse check-config` also validates profiles and targets."""
    try:
        profiles = load_profiles(section["profiles_dir"])
    except ProfileError as exc:
        raise SchemaError(f"{path}.profiles_dir", str(exc)) from None
    targets = list(enumerate(section["targets"]))
    where = {i: f"{path}.targets[{i}]" for i, _ in targets}
    if section["targets_file"]:
        try:
            file_targets = read_targets_file(section["targets_file"])
        except TargetsFileError as exc:
            raise SchemaError(f"{path}.targets_file", str(exc)) from None
        base = len(targets)
        for j, t in enumerate(file_targets):
            targets.append((base + j, t))
            where[base + j] = f"{section['targets_file']}: targets[{j}]"
    _check_connection(section["defaults"], f"{path}.defaults", profiles)
    seen: dict[str, str] = {}
    for i, target in targets:
        if target["name"] in seen:
            raise SchemaError(f"{where[i]}.name", f"duplicate switch name {target['name']!r} "
                                                  f"(also at {seen[target['name']]})")
        seen[target["name"]] = where[i]
        _check_connection(merge_target(section["defaults"], target), where[i], profiles)
    shard = section["shard"]
    if (shard["index"] is None) != (shard["count"] is None):
        raise SchemaError(f"{path}.shard", "set both index and count (or neither)")
    if shard["count"] is not None and not 0 <= shard["index"] < shard["count"]:
        raise SchemaError(f"{path}.shard.index", f"must be in 0..{shard['count'] - 1}, got {shard['index']}")


def _check_connection(conn: dict[str, Any], where: str, profiles: dict[str, Profile]) -> None:
    if conn["profile"] not in profiles:
        raise SchemaError(f"{where}.profile", f"unknown profile {conn['profile']!r} "
                                              f"(known: {', '.join(sorted(profiles))})")
    profile = profiles[conn["profile"]]
    if conn["encoding"] != "auto" and conn["encoding"] not in profile.encodings:
        raise SchemaError(f"{where}.encoding",
                          f"profile {profile.name} speaks {', '.join(profile.encodings)}")
    tls = conn["tls"]
    if bool(tls["cert_file"]) != bool(tls["key_file"]):
        raise SchemaError(f"{where}.tls", "cert_file and key_file go together")
    if sum(bool(conn[k]) for k in ("username", "username_env", "username_file")) > 1:
        raise SchemaError(where, "set at most one of username, username_env, username_file")
    if conn["password_env"] and conn["password_file"]:
        raise SchemaError(where, "set at most one of password_env, password_file")


CONFIG = Section(
    doc="Switch telemetry over gNMI (the fabric role). See docs/gnmi.md.",
    check=_check,
    fields={
        "enabled": AutoBool("auto: on when targets or targets_file are configured."),
        "defaults": Section(doc="Settings every switch inherits unless it overrides them.",
                            fields=_connection_fields(inherit=False)),
        "targets": ListOf("Switches to subscribe to.", item=TARGET, default=[]),
        "targets_file": Str("YAML file with more targets (a list, or {targets: [...]}); re-read when it "
                            "changes (checked every second, so also after SIGHUP)."),
        "profiles_dir": Str("Directory of extra profile files (*.yaml); a file named like a built-in "
                            "profile replaces it."),
        "shard": Section(doc="This instance's share of the switches: those with hashmod(name, count) == "
                             "index. Default: INFRAPULSE_SHARD_INDEX/_COUNT, or the StatefulSet ordinal.",
                         fields={"index": Int("This instance's shard, 0..count-1.", min=0),
                                 "count": Int("Number of fabric instances sharing the switches.", min=1)}),
        "max_series": Int("Most live series one switch may hold; new series past it are dropped and "
                          "counted in infrapulse_switch_series_dropped_total.", default=50_000, min=1),
        "retry_max": Duration("Longest pause between reconnect attempts (capped exponential backoff).",
                              default="60s", min=1.0),
    },
)


class TargetsFileError(Exception):
    pass


def read_targets_file(path: str) -> list[dict[str, Any]]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise TargetsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise TargetsFileError(f"{path}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if isinstance(data, dict) and set(data) <= {"targets"}:
        data = data.get("targets")
    if data is None:
        return []
    if not isinstance(data, list):
        raise TargetsFileError(f"{path}: expected a list of targets (or {{targets: [...]}})")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(data):
        try:
            out.append(TARGET.validate(item, f"targets[{i}]"))
        except SchemaError as exc:
            raise TargetsFileError(f"{path}: {exc}") from None
    return out


def merge_target(defaults: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """A target's effective settings: its own values over the defaults (tls key by key)."""
    merged = dict(defaults)
    for key, value in target.items():
        if key == "tls":
            merged["tls"] = {k: (v if v is not None else defaults["tls"][k]) for k, v in value.items()}
        elif value is not None:
            merged[key] = value
    merged["name"] = target["name"]
    address = target["address"] or target["name"]  # the schema's documented default: the name
    if not _has_port(address):
        address = f"{address}:{merged['port']}"
    merged["address"] = address
    return merged


def _has_port(address: str) -> bool:
    if address.startswith("["):
        return "]:" in address
    return address.count(":") == 1 and address.rsplit(":", 1)[1].isdigit()



__all__ = ["CONFIG", "TARGET", "TargetsFileError", "merge_target", "read_targets_file"]
