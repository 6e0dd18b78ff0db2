"""Every file, directory and environment variable a validated config points at, checked.

Found by key name, so a new `*_file` key is checked without an edit here: `ca_file` /
`cert_file` / `client_ca_file` must hold a PEM certificate, `key_file` a PEM private key,
`password_file` / `username_file` / `bearer_token_file` a non-empty secret (never printed),
other `*_file` keys a readable file, `*_dir` and `sysfs_root` a directory, `*_env` a set
environment variable. Sections of disabled sources are skipped: their files do not matter.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .report import FAIL, OK, Check

if TYPE_CHECKING:
    from ..config import Config

CERT_KEYS = ("ca_file", "cert_file", "client_ca_file")
SECRET_KEYS = ("password_file", "username_file", "bearer_token_file")
DIR_KEYS = ("sysfs_root",)
# Simulation and testing keys (the NVML fake, ethtool statistics and RoCE DCB/driver info from
# files): the probes use them.
SKIP_KEYS = ("fake", "stats_dir", "sim_dir")


def references(value: Any, path: str = "") -> Iterator[tuple[str, str, str]]:
    """(key path, key, value) for every non-empty file, directory or env-var key under `value`
    (a mapping, a list, or a settings instance: its fields are its keys)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if isinstance(item, str) and item and _kind(str(key)):
                yield sub, str(key), item
            elif not isinstance(item, str):  # a mapping, list or settings instance: its keys
                yield from references(item, sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from references(item, f"{path}[{i}]")


def _kind(key: str) -> str:
    if key in SKIP_KEYS:
        return ""
    if key in CERT_KEYS:
        return "certificate"
    if key == "key_file":
        return "private key"
    if key in SECRET_KEYS:
        return "secret"
    if key.endswith("_file"):
        return "file"
    if key.endswith("_dir") or key in DIR_KEYS:
        return "directory"
    if key.endswith("_env"):
        return "env"
    return ""


def check_reference(path: str, key: str, value: str, env: Mapping[str, str] = os.environ) -> Check:
    kind = _kind(key)
    if kind == "env":
        if value not in env:
            return Check("env", path, FAIL, f"environment variable {value} is not set")
        return Check("env", path, OK, f"{value} is set" + (" (empty)" if not env[value].strip() else ""))
    target = Path(value)
    if kind == "directory":
        if not target.is_dir():
            problem = "not a directory" if target.exists() else "does not exist"
            return Check("file", path, FAIL, f"{value}: {problem}")
        if not os.access(target, os.R_OK | os.X_OK):
            return Check("file", path, FAIL, f"{value}: directory not readable by this user")
        return Check("file", path, OK, f"{value}: directory")
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return Check("file", path, FAIL, f"{value}: does not exist")
    except IsADirectoryError:
        return Check("file", path, FAIL, f"{value}: is a directory, not a file")
    except OSError as exc:
        return Check("file", path, FAIL, f"{value}: cannot read: {exc.strerror or exc}")
    if kind == "certificate" and b"-----BEGIN CERTIFICATE-----" not in data:
        return Check("file", path, FAIL, f"{value}: no PEM certificate in it")
    if kind == "private key" and b"PRIVATE KEY-----" not in data:
        return Check("file", path, FAIL, f"{value}: no PEM private key in it")
    if kind == "secret" and not data.strip():
        return Check("file", path, FAIL, f"{value}: empty")
    described = {"certificate": f"{data.count(b'-----BEGIN CERTIFICATE-----')} PEM certificate(s)",
                 "private key": "PEM private key",
                 "secret": f"readable, {len(data.strip())} bytes (not shown)",
                 "file": f"readable, {len(data)} bytes"}
    return Check("file", path, OK, f"{value}: {described[kind]}")


def check_files(cfg: Config, wanted: set[str], extra: Sequence[tuple[str, Any]] = (),
                env: Mapping[str, str] = os.environ) -> list[Check]:
    """Checks of the references of the enabled sources (plus `extra`: (path prefix, mapping or
    settings) pairs such as gNMI targets from a targets_file or the web config)."""
    scoped: list[tuple[str, Any]] = [(f"sources.{name}", cfg.sources[name]) for name in sorted(wanted)]
    scoped += list(extra)
    out = []
    for prefix, value in scoped:
        for path, key, item in references(value, prefix):
            out.append(check_reference(path, key, item, env))
    return out
