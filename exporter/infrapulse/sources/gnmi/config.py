"""The gnmi source's configuration: the schema, targets and targets_file, per-switch settings.

`CONFIG` is the `sources.gnmi` section (`GnmiSettings`). Its check also loads the profiles and the
targets file, so `infrapulse check-config` catches an unknown profile, a bad encoding for a
profile, a duplicate switch name or a broken targets file before the daemon starts.
`merge_target` gives a switch's effective settings (a `SwitchSettings`: the `TargetSettings` it
sets over the `defaults`' `ConnectionSettings`), which is what a `SwitchSession` runs with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ...schema import (
    AutoBool,
    Bool,
    Duration,
    Field,
    Int,
    ListOf,
    SchemaError,
    Settings,
    Str,
    setting,
    settings,
)
from ..base import SourceSettings
from .profile import Profile, ProfileError, load_profile_file, load_profiles, profile_files


@settings("TLS settings (ignored with insecure: true).")
@dataclass(kw_only=True, slots=True)
class TlsSettings(Settings):
    ca_file: str | None = setting(Str("PEM CA bundle that signed the switch certificate (default: system "
                                      "roots)."))
    cert_file: str | None = setting(Str("PEM client certificate, for switches that require mutual TLS."))
    key_file: str | None = setting(Str("PEM private key of cert_file."))
    server_name: str | None = setting(Str("Name to verify the switch certificate against, when it differs "
                                          "from the address (an IP, a load balancer)."))


# Per-switch settings, declared once: `defaults` has them with their defaults, every `targets[]`
# entry without (`_inherited`: unset means "inherit from defaults").
_PORT = Int("gNMI port used when an address has none.", default=9339, min=1, max=65535)
_PROFILE = Str("Path profile: a built-in (openconfig, sonic, nvidia-cumulus, arista-eos) or a file name in "
               "profiles_dir.", default="openconfig")
_SAMPLE_INTERVAL = Duration("Interval of SAMPLE subscriptions that do not set their own (minimum 1s).",
                            default="10s", min=1.0)
_ENCODING = Str("Value encoding; auto picks the profile's first choice the switch supports (Capabilities).",
                default="auto", choices=("auto", "proto", "json_ietf", "json"))
_INSECURE = Bool("Plaintext gRPC. Without it every connection uses TLS.", default=False)
_USERNAME = Str("gNMI username (not a secret; prefer username_env / username_file for consistency).")
_USERNAME_ENV = Str("Environment variable holding the gNMI username.")
_USERNAME_FILE = Str("File holding the gNMI username.")
_PASSWORD_ENV = Str("Environment variable holding the gNMI password (never logged).")
_PASSWORD_FILE = Str("File holding the gNMI password (e.g. a mounted secret; never logged).")
_CONNECT_TIMEOUT = Duration("Timeout of the connect + Capabilities handshake.", default="10s", min=0.1)
_KEEPALIVE = Duration("HTTP/2 keepalive ping interval: detects a dead connection.", default="30s", min=1.0)
_STALL_TIMEOUT = Duration("Reconnect when a stream with SAMPLE subscriptions sends nothing for this long. "
                          "Default (unset): 3 times the longest sample or heartbeat interval of the "
                          "profile's subscriptions, at least 10s.")

FieldT = TypeVar("FieldT", bound=Field)


def _inherited(decl: FieldT) -> FieldT:
    """`decl` without its default: a target that leaves it unset takes the defaults' value."""
    return dataclasses.replace(decl, default=None)


@settings("Settings every switch inherits unless it overrides them.")
@dataclass(kw_only=True, slots=True)
class ConnectionSettings(Settings):
    """`defaults`: how to reach and read a switch (a target's `SwitchSettings` add its name and
    address)."""

    port: int = setting(_PORT)
    profile: str = setting(_PROFILE)
    sample_interval: float = setting(_SAMPLE_INTERVAL)
    encoding: str = setting(_ENCODING)
    insecure: bool = setting(_INSECURE)
    tls: TlsSettings = setting(TlsSettings.SCHEMA)
    username: str | None = setting(_USERNAME)
    username_env: str | None = setting(_USERNAME_ENV)
    username_file: str | None = setting(_USERNAME_FILE)
    password_env: str | None = setting(_PASSWORD_ENV)
    password_file: str | None = setting(_PASSWORD_FILE)
    connect_timeout: float = setting(_CONNECT_TIMEOUT)
    keepalive: float = setting(_KEEPALIVE)
    stall_timeout: float | None = setting(_STALL_TIMEOUT)


@settings("One switch.")
@dataclass(kw_only=True, slots=True)
class TargetSettings(Settings):
    """One `targets[]` entry as written: every connection setting it leaves unset (None) is the
    defaults' (`merge_target`)."""

    name: str = setting(Str("Switch name: the `switch` label and the sharding key.", required=True,
                            pattern=r"[A-Za-z0-9_.:/-]+"))
    address: str | None = setting(Str("host:port (or host, then `port` applies). Default: the name."))
    port: int | None = setting(_inherited(_PORT))
    profile: str | None = setting(_inherited(_PROFILE))
    sample_interval: float | None = setting(_inherited(_SAMPLE_INTERVAL))
    encoding: str | None = setting(_inherited(_ENCODING))
    insecure: bool | None = setting(_inherited(_INSECURE))
    tls: TlsSettings = setting(TlsSettings.SCHEMA)
    username: str | None = setting(_USERNAME)
    username_env: str | None = setting(_USERNAME_ENV)
    username_file: str | None = setting(_USERNAME_FILE)
    password_env: str | None = setting(_PASSWORD_ENV)
    password_file: str | None = setting(_PASSWORD_FILE)
    connect_timeout: float | None = setting(_inherited(_CONNECT_TIMEOUT))
    keepalive: float | None = setting(_inherited(_KEEPALIVE))
    stall_timeout: float | None = setting(_STALL_TIMEOUT)


@dataclass(kw_only=True, slots=True)
class SwitchSettings(ConnectionSettings):
    """One switch's effective settings (`merge_target`: its own over the defaults), what a
    `SwitchSession` runs with: `address` always has a port."""

    name: str
    address: str


TARGET = TargetSettings.SCHEMA
_CONNECTION_KEYS = tuple(f.name for f in dataclasses.fields(ConnectionSettings))
_TLS_KEYS = tuple(f.name for f in dataclasses.fields(TlsSettings))


@settings("This instance's share of the switches: those with hashmod(name, count) == index. Default: "
          "INFRAPULSE_SHARD_INDEX/_COUNT, or the StatefulSet ordinal.")
@dataclass(kw_only=True, slots=True)
class ShardSettings(Settings):
    index: int | None = setting(Int("This instance's shard, 0..count-1.", min=0))
    count: int | None = setting(Int("Number of fabric instances sharing the switches.", min=1))


def _check(section: GnmiSettings, path: str) -> None:
    """Cross-field validation, so `infrapulse check-config` also validates profiles and targets."""
    defaults, targets_file = section.defaults, section.targets_file
    targets: list[tuple[int, TargetSettings]] = list(enumerate(section.targets))
    where = {i: f"{path}.targets[{i}]" for i, _ in targets}
    if targets_file:
        try:
            file_targets = read_targets_file(targets_file)
        except TargetsFileError as exc:
            raise SchemaError(f"{path}.targets_file", str(exc)) from None
        base = len(targets)
        for j, t in enumerate(file_targets):
            targets.append((base + j, t))
            where[base + j] = f"{targets_file}: targets[{j}]"
    switches = [(merge_target(defaults, target), i, target) for i, target in targets]
    profiles = _profiles_named(section.profiles_dir, {defaults.profile} | {s.profile for s, _, _ in switches},
                               f"{path}.profiles_dir")
    _check_connection(defaults, f"{path}.defaults", profiles)
    seen: dict[str, str] = {}
    for switch, i, target in switches:
        if target.name in seen:
            raise SchemaError(f"{where[i]}.name", f"duplicate switch name {target.name!r} "
                                                  f"(also at {seen[target.name]})")
        seen[target.name] = where[i]
        _check_connection(switch, where[i], profiles)
    shard = section.shard
    if (shard.index is None) != (shard.count is None):
        raise SchemaError(f"{path}.shard", "set both index and count (or neither)")
    if shard.index is not None and shard.count is not None and not 0 <= shard.index < shard.count:
        raise SchemaError(f"{path}.shard.index", f"must be in 0..{shard.count - 1}, got {shard.index}")


def _profiles_named(profiles_dir: str | None, names: set[str], where: str) -> dict[str, Profile | None]:
    """Every known profile name, parsed where the config names it (None: not parsed). The user's
    profiles_dir is parsed whole, so a broken file there is an error now; the built-in profiles,
    which the tests hold, are parsed only when named: a config load costs milliseconds, not the
    ~40 ms of parsing them all (check-config, every start and SIGHUP, every test)."""
    try:
        if profiles_dir:
            return dict(load_profiles(profiles_dir))
        files = profile_files(None)
        return {name: load_profile_file(path, files) if name in names else None
                for name, path in files.items()}
    except ProfileError as exc:
        raise SchemaError(where, str(exc)) from None


def _check_connection(conn: ConnectionSettings, where: str, profiles: dict[str, Profile | None]) -> None:
    if conn.profile not in profiles:
        raise SchemaError(f"{where}.profile", f"unknown profile {conn.profile!r} "
                                              f"(known: {', '.join(sorted(profiles))})")
    profile = profiles[conn.profile]
    assert profile is not None  # named, so parsed
    if conn.encoding != "auto" and conn.encoding not in profile.encodings:
        raise SchemaError(f"{where}.encoding",
                          f"profile {profile.name} speaks {', '.join(profile.encodings)}")
    tls = conn.tls
    if bool(tls.cert_file) != bool(tls.key_file):
        raise SchemaError(f"{where}.tls", "cert_file and key_file go together")
    if sum(bool(v) for v in (conn.username, conn.username_env, conn.username_file)) > 1:
        raise SchemaError(where, "set at most one of username, username_env, username_file")
    if conn.password_env and conn.password_file:
        raise SchemaError(where, "set at most one of password_env, password_file")


@settings("Switch telemetry over gNMI (the fabric role). See docs/gnmi.md.", check=_check)
@dataclass(kw_only=True, slots=True)
class GnmiSettings(SourceSettings):
    enabled: bool | str = setting(AutoBool("auto: on when targets or targets_file are configured."))
    defaults: ConnectionSettings = setting(ConnectionSettings.SCHEMA)
    targets: list[TargetSettings] = setting(ListOf("Switches to subscribe to.", item=TARGET, default=[]))
    targets_file: str | None = setting(Str(
        "YAML file with more targets (a list, or {targets: [...]}); re-read when it changes (checked "
        "every second, so also after SIGHUP)."))
    profiles_dir: str | None = setting(Str(
        "Directory of extra profile files (*.yaml); a file named like a built-in profile replaces it."))
    shard: ShardSettings = setting(ShardSettings.SCHEMA)
    max_series: int = setting(Int("Most live series one switch may hold; new series past it are dropped "
                                  "and counted in infrapulse_switch_series_dropped_total.",
                                  default=50_000, min=1))
    retry_max: float = setting(Duration("Longest pause between reconnect attempts (capped exponential "
                                        "backoff).", default="60s", min=1.0))


CONFIG = GnmiSettings.SCHEMA


class TargetsFileError(Exception):
    pass


def read_targets_file(path: str) -> list[TargetSettings]:
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
    out: list[TargetSettings] = []
    for i, item in enumerate(data):
        try:
            out.append(TARGET.validate(item, f"targets[{i}]"))
        except SchemaError as exc:
            raise TargetsFileError(f"{path}: {exc}") from None
    return out


def merge_target(defaults: ConnectionSettings, target: TargetSettings) -> SwitchSettings:
    """A target's effective settings: its own values over the defaults (tls key by key)."""
    inherited = {key: getattr(defaults, key) for key in _CONNECTION_KEYS}
    # the address's documented default: the name
    switch = SwitchSettings(name=target.name, address=target.address or target.name,
                            **(inherited | _set(target, _CONNECTION_KEYS)))
    switch.tls = dataclasses.replace(defaults.tls, **_set(target.tls, _TLS_KEYS))
    if not _has_port(switch.address):
        switch.address = f"{switch.address}:{switch.port}"
    return switch


def _set(given: Settings, keys: tuple[str, ...]) -> dict[str, Any]:
    """The fields among `keys` that `given` sets (None: not set, inherited)."""
    return {key: value for key in keys if (value := getattr(given, key)) is not None}


def _has_port(address: str) -> bool:
    if address.startswith("["):
        return "]:" in address
    return address.count(":") == 1 and address.rsplit(":", 1)[1].isdigit()


__all__ = ["CONFIG", "TARGET", "ConnectionSettings", "GnmiSettings", "ShardSettings", "SwitchSettings",
           "TargetSettings", "TargetsFileError", "TlsSettings", "merge_target", "read_targets_file"]
