"""`infrapulse doctor FILE`: everything `check-config` checks, then this host against the config.

Exit codes: 0 every check passed (warnings allowed), 1 a check failed, 2 the config (or the
web config) is invalid — the same 2 as check-config.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import Config, ConfigError, load_file
from ..schema import format_duration
from .report import FAIL, OK, WARN, Check, summary, table, with_fix

if TYPE_CHECKING:
    from ..sources.gnmi.config import TargetSettings

# The sources, the probes (grpc, pygnmi) and the web config (bcrypt, cryptography) are imported
# where a check needs them: building the CLI's parser (every `infrapulse` command) must not
# cost their ~0.8 s.

OptionsFor = Callable[[Config], dict[str, Any]]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
               options_for: OptionsFor) -> None:
    parser = subparsers.add_parser(
        "doctor", help="check a config and this host: files, NVML, RDMA devices, switches, engines",
        description="Validate a config file like check-config, then check this host against it: every "
                    "file and environment variable it names, NVML, RDMA devices and netdevs, ethtool "
                    "statistics, each gNMI target's Capabilities against its profile, each serving "
                    "endpoint and its engine. Exit 0 if all pass, 1 on a problem, 2 on an invalid config.")
    parser.add_argument("file", metavar="FILE", help="the YAML config the daemon will run with")
    parser.add_argument("--web.config.file", dest="web_config_file", metavar="FILE",
                        help="also check the web config (TLS and basic auth) the daemon will serve with")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.set_defaults(func=lambda args: cmd_doctor(args, options_for))


def config_checks(path: str) -> tuple[Config | None, list[Check]]:
    warnings: list[str] = []
    try:
        cfg = load_file(path, warnings)
    except ConfigError as exc:
        return None, [Check("config", f"{key or path}", FAIL, reason) for key, reason in exc.errors]
    interval = format_duration(cfg.interval)
    checks = [Check("config", path, OK, f"valid: listen {cfg.listen}, interval {interval}")]
    checks += [Check("config", w.split(": ", 2)[1], WARN, w.split(": ", 2)[2]) for w in warnings]
    return cfg, checks


def web_config_checks(path: str) -> list[Check]:
    """The web config loaded as the daemon loads it (certificates and key included)."""
    from .. import webconfig

    try:
        web = webconfig.load(path)
    except (webconfig.WebConfigError, ValueError) as exc:
        return [Check("web config", path, FAIL, str(exc))]
    tls = "TLS" if web.tls else "plain HTTP"
    return [Check("web config", path, OK, f"valid: {tls}, {len(web.users)} basic-auth user(s)")]


def _file_scopes(cfg: Config, wanted: set[str]) -> list[tuple[str, TargetSettings]]:
    """Targets of a gNMI targets_file carry their own TLS and credential files."""
    from ..sources.gnmi.config import GnmiSettings, TargetsFileError, read_targets_file

    gnmi: GnmiSettings = cfg.sources["gnmi"]
    if "gnmi" not in wanted or not gnmi.targets_file:
        return []
    try:
        targets = read_targets_file(gnmi.targets_file)
    except TargetsFileError:
        return []  # the gnmi probe reports it
    return [(f"{gnmi.targets_file}: targets[{i}]", t) for i, t in enumerate(targets)]


def referenced_file_checks(cfg: Config) -> list[Check]:
    """The files, directories and variables the enabled sources point at (`doctor`'s file rows;
    `check-config` fails on the same ones)."""
    from ..sources import registry
    from .files import check_files

    wanted = {name for name, cls in registry().items() if cls.wanted(cfg.sources[name])}
    return check_files(cfg, wanted, _file_scopes(cfg, wanted))


async def run_checks(path: str, options_for: OptionsFor, web_config: str | None = None,
                     hostname: str | None = None) -> tuple[int, list[Check]]:
    cfg, checks = config_checks(path)
    if web_config:
        checks += web_config_checks(web_config)
    if cfg is None or any(c.result == FAIL for c in checks):
        return 2, [with_fix(c) for c in checks]
    from .probes import probe_all

    checks += referenced_file_checks(cfg)
    checks += await probe_all(cfg, options_for(cfg), hostname or cfg.hostname or socket.gethostname())
    checks = [with_fix(c) for c in checks]
    return (1 if any(c.result == FAIL for c in checks) else 0), checks


def cmd_doctor(args: argparse.Namespace, options_for: OptionsFor) -> int:
    # The probes run the sources' own code, which logs what a daemon would; the table says it.
    logging.getLogger("infrapulse").addHandler(logging.NullHandler())
    code, checks = asyncio.run(run_checks(args.file, options_for, args.web_config_file))
    if args.json:
        print(json.dumps({"checks": [c.as_json() for c in checks], "exit_code": code}, indent=2))
    else:
        print(table(checks))
        print()
        print(summary(checks))
    return code
