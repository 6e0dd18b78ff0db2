"""Command line: `infrapulse run | check-config | demo | simulate ...`.

Exit codes: 0 ok, 1 runtime failure (e.g. the port is taken), 2 bad config or usage.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any

# gRPC's C core logs connection events (GOAWAY on a switch restart) straight to stderr, outside
# our logging; the gNMI source reports those itself. Must be set before grpc is imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from . import __version__, logs
from . import docs as docs_cli
from .config import Config, ConfigError, default_config, load_file
from .doctor import cli as doctor_cli
from .health import cli as health_cli
from .inspect import cli as inspect_cli
from .schema import SchemaError, format_duration, parse_host_port

log = logging.getLogger("infrapulse")

# Sub-commands that live with their subsystem: each module's add_parser(subparsers) sets
# `func` (returning an exit code) on its parser.
SUBCOMMAND_MODULES = (health_cli, inspect_cli, docs_cli)

# The simulators are not part of the exporter: `demo`, `simulate` and the NVML fake load them by
# name when asked for, so running the daemon never imports them (tests/test_imports.py).
SIMULATE = "infrapulse.simulate"


def _simulate(module: str) -> Any:
    return importlib.import_module(f"{SIMULATE}.{module}")


def _listen(value: str) -> str:
    try:
        return parse_host_port(value, "--listen")
    except SchemaError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def _add_daemon_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", type=_listen, metavar="HOST:PORT",
                        help="address for /metrics and the API, overriding the config (default 0.0.0.0:9477)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text", help="log line format")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    parser.add_argument("--web.config.file", dest="web_config_file", metavar="FILE",
                        help="exporter-toolkit web config: TLS and basic auth for every endpoint "
                             "(re-read when it changes; see docs/security.md)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infrapulse",
        description="Prometheus exporter and health score for AI clusters: RDMA NICs, switch PFC/ECN "
                    "over gNMI, GPUs and LLM serving engines.",
    )
    parser.add_argument("--version", action="version", version=f"infrapulse {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run the exporter daemon",
                         description="Run the exporter daemon. SIGHUP reloads the config; SIGTERM stops it.")
    run.add_argument("--config", "-c", metavar="FILE", help="YAML config file (default: built-in defaults)")
    _add_daemon_flags(run)
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check-config", help="validate a config file (and gNMI profiles) and exit",
                           description="Validate a config file. Exit 0 if valid, "
                                       "2 with file, key and reason if not.")
    check.add_argument("file", metavar="FILE")
    check.set_defaults(func=cmd_check_config)

    demo = sub.add_parser("demo", help="run the daemon on the built-in simulated fabric",
                          description="Start the simulators (sysfs tree, NIC stats, gNMI switches, GPUs, "
                                      "serving engines) and the daemon scraping them.")
    _add_daemon_flags(demo)
    demo.add_argument("--workdir", metavar="DIR", help="where simulated files go (default: a temp dir)")
    demo.add_argument("--scenario", action="append", default=[], metavar="NAME",
                      help="anomaly to inject, repeatable (see `infrapulse simulate scenarios`)")
    demo.add_argument("--duration", type=float, default=0, metavar="SECONDS",
                      help="stop after this many seconds (default: run until interrupted)")
    demo.add_argument("--interval", default="2s", help="poll interval of the demo daemon (default 2s)")
    demo.set_defaults(func=cmd_demo)

    # Listed here; parsed by the simulators' own CLI, loaded only when it runs (main()).
    sub.add_parser("simulate", add_help=False,
                   help="run one simulator on its own (sysfs tree, gNMI switches, engines)")
    for module in SUBCOMMAND_MODULES:
        module.add_parser(sub)
    _add_rules_parser(sub)
    doctor_cli.add_parser(sub, source_options)
    return parser


RULES_DESCRIPTION = """\
Write the link alert rules with a config's health.thresholds and health.link overrides applied,
so a threshold override moves the score, the link classes and the alerts together. The rules
follow link_flaps, link_half_dead, link_post_fec_ber and link_pre_fec_ber_rise (their bad
thresholds), health.link.window, baseline_window and pre_fec_ber_floor, and the runbook links
follow health.runbook_base_url. Without --config: the built-in defaults (the committed rules).

With --output DIR: DIR/link.rules.yaml, and DIR/network.rules.yaml, rdma.rules.yaml and
recording.rules.yaml: copies of the --alerts files with the thresholds and windows of the
flapping alerts, InfrapulseNicPhyErrorsWhileUp's half-dead guard and the switch transitions
record rewritten. Point Prometheus' rule_files at DIR in place of those four files. With
--output - (the default): link.rules.yaml alone, on stdout.

Exit codes: 0 written, 2 bad config (file, key and reason) or usage."""


def _add_rules_parser(sub: Any) -> None:
    rules = sub.add_parser("rules", help="write the link alert rules with a config's health thresholds",
                           description=RULES_DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    rules.add_argument("--config", "-c", metavar="FILE",
                       help="YAML config whose health.thresholds and health.link apply "
                            "(default: the built-in defaults)")
    rules.add_argument("--output", "-o", default="-", metavar="DIR|-",
                       help="directory to write the rule files into (created if missing), or - for "
                            "link.rules.yaml on stdout (default: -)")
    rules.add_argument("--alerts", metavar="DIR",
                       help="the alerts/ directory of your infrapulse release, to copy network.rules.yaml, "
                            "rdma.rules.yaml and recording.rules.yaml from (default: alerts/ of the source "
                            "checkout infrapulse runs from, if any)")
    rules.set_defaults(func=cmd_rules)


def cmd_rules(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .health import linkrules

    try:
        cfg = load_file(args.config) if args.config else default_config()
    except ConfigError as exc:
        for line in exc.lines():
            print(f"config error: {line}", file=sys.stderr)
        return 2
    t = linkrules.thresholds(cfg.health)
    try:
        linkrules.check(t)
    except ValueError as exc:
        print(f"config error: {args.config}: health.link: {exc}", file=sys.stderr)
        return 2
    source = f"by `infrapulse rules --config {args.config}`" if args.config else linkrules.DEFAULT_SOURCE
    base = cfg.health.runbook_base_url
    elsewhere = linkrules.patched_differ(t, linkrules.thresholds(default_config().health))
    others = ", ".join(linkrules.PATCHED_RULES)
    if args.output == "-":
        sys.stdout.write(linkrules.with_runbook_base(linkrules.render_link_rules(t, source), base))
        if elsewhere:
            print(f"note: {others} ({', '.join(linkrules.PATCHED)}) follow these thresholds too: "
                  "write them with --output DIR", file=sys.stderr)
        return 0
    alerts = Path(args.alerts) if args.alerts else linkrules.CHECKOUT_ALERTS
    found = all((alerts / name).is_file() for name in linkrules.PATCHED)
    if args.alerts and not found:
        print(f"--alerts {args.alerts}: not an infrapulse alerts/ directory (it needs "
              f"{', '.join(linkrules.PATCHED)})", file=sys.stderr)
        return 2
    try:
        files = linkrules.render_all(t, alerts if found else None, source)
    except ValueError as exc:  # a rule file of another release, whose link rules read differently
        print(f"--alerts {alerts}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(linkrules.with_runbook_base(text, base), encoding="utf-8")
            print(f"wrote {out / name}")
    except OSError as exc:
        print(f"cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not found and elsewhere:
        print(f"warning: no alerts/ directory to copy {', '.join(linkrules.PATCHED)} from, so {others} keep "
              "their default thresholds: pass --alerts DIR (the alerts/ of your infrapulse release)",
              file=sys.stderr)
    return 0


def cmd_check_config(args: argparse.Namespace) -> int:
    warnings: list[str] = []
    try:
        cfg = load_file(args.file, warnings)
    except ConfigError as exc:
        for line in exc.lines():
            print(f"config error: {line}", file=sys.stderr)
        return 2
    from .sources import registry

    runs, not_here = [], []
    for name, cls in registry().items():
        if not cls.wanted(cfg.sources[name]):
            continue
        why = cls.unavailable(cfg.sources[name])
        if why:
            not_here.append(f"{name} ({why})")
        else:
            runs.append(name)
    from .doctor.cli import referenced_file_checks
    from .doctor.report import FAIL

    # The same file rows `doctor` prints: a ca_file or password_file that does not exist is not ok.
    missing = [c for c in referenced_file_checks(cfg) if c.result == FAIL]
    for check in missing:
        print(f"config error: {args.file}: {check.target}: {check.detail}", file=sys.stderr)
    if missing:
        return 2
    from .doctor.vocabulary import NOT_ON_THIS_HOST

    # doctor's row for such a source reads "<NOT_ON_THIS_HOST>: <the same reason>"
    absent = f"; {NOT_ON_THIS_HOST}: {'; '.join(not_here)}" if not_here else ""
    print(f"{args.file}: ok (listen {cfg.listen}, interval {format_duration(cfg.interval)}, "
          f"sources that would run here: {', '.join(runs) or 'none'}{absent})")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .daemon import Daemon, run_async
    from .webconfig import web_security

    warnings: list[str] = []
    try:
        cfg = load_file(args.config, warnings) if args.config else default_config()
    except ConfigError as exc:
        for line in exc.lines():
            print(f"config error: {line}", file=sys.stderr)
        return 2
    logs.setup(args.log_format, args.log_level)
    for warning in warnings:
        log.warning("config: %s", warning)
    try:
        security = web_security(args.web_config_file)
    except ValueError as exc:
        print(f"web config error: {exc}", file=sys.stderr)
        return 2
    daemon = Daemon(cfg, config_path=args.config, listen_override=args.listen, web_security=security,
                    source_options=source_options(cfg))
    return run_async(daemon.run_forever)


def source_options(cfg: Config) -> dict[str, Any]:
    """What the daemon injects into sources (SourceContext.options) for this config: the NVML
    fake only when the documented testing key `sources.nvml.fake` asks for it."""
    from .sources.gpu.nvml import OPEN_FAKE_KEY, NvmlSettings

    nvml: NvmlSettings = cfg.sources["nvml"]
    if not nvml.fake:
        return {}
    return {OPEN_FAKE_KEY: _simulate("nvml_fake").open_fake}


def cmd_demo(args: argparse.Namespace) -> int:
    logs.setup(args.log_format, args.log_level)
    code: int = _simulate("demo").run_demo(args)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["simulate"]:
        code: int = _simulate("cli").main(argv[1:])
        return code
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    code = args.func(args)  # the sub-command's cmd_* function (set_defaults)
    return code


if __name__ == "__main__":
    sys.exit(main())
