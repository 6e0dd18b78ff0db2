#!/usr/bin/env python3
"""Set every alert's runbook_url from one base: `<base><AlertName>.md`.

Monitoring mixins make the runbook location a build-time variable (kubernetes-mixin's
`runbookURLPattern`, kube-prometheus-stack's `defaultRules.runbookUrl`); this is ours. The base
lives in one place, `infrapulse.health.config.DEFAULT_RUNBOOK_BASE`, which is also the daemon's
default `health.runbook_base_url` (the status page links detractors to the same runbooks).

    python alerts/generate_runbook_urls.py            # rewrite alerts/ with the default base
    python alerts/generate_runbook_urls.py --check    # exit 1 if a runbook_url is not <base><Alert>.md
    python alerts/generate_runbook_urls.py --runbook-base https://wiki.example.com/infrapulse/ \\
        --out build/alerts                            # your copy: rules, promtool tests, PrometheusRule

`--out` writes the rule files, their promtool tests (alerts/tests/, so `promtool test rules
build/alerts/tests/*.yaml` checks the copy) and deploy/kubernetes/prometheusrule.yaml's objects
(as DIR/prometheusrule.yaml) with the given base; the repository is not touched. Point
Prometheus' rule_files (or kubectl apply) at that directory, and set the daemons'
`health.runbook_base_url` to the same base.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ALERTS_DIR = Path(__file__).resolve().parent
# `runbook_url: <anything>/<AlertName>.md`, quoted or not, in rules and in promtool expectations.
RUNBOOK_LINE = re.compile(r'^(?P<lead>[ \t]*runbook_url:[ \t]*)(?P<q>"?)(?P<url>\S*?)'
                          r'(?P<alert>Infrapulse\w+)\.md(?P=q)[ \t]*$', re.MULTILINE)
# `inspection_url: <scheme>://<instance>/inspections/latest`: the daemon's latest inspection
# (docs/inspections.md); the scheme follows --inspection-scheme (https for daemons behind TLS).
INSPECTION_LINE = re.compile(r'^(?P<lead>[ \t]*inspection_url:[ \t]*)(?P<q>["\']?)(?P<scheme>https?)://'
                             r'(?P<host>[^\s"\']+|\{\{ \$labels\.instance \}\})/inspections/latest'
                             r'(?P=q)[ \t]*$', re.MULTILINE)
INSTANCE_TEMPLATE = "{{ $labels.instance }}"
FIX = "python alerts/generate_runbook_urls.py"
ALERT_LINE = re.compile(r"^\s*-\s*alert:\s*(\w+)\s*$")


def default_base() -> str:
    sys.path.insert(0, str(ALERTS_DIR.parent / "exporter"))
    from infrapulse.health.config import DEFAULT_RUNBOOK_BASE

    return DEFAULT_RUNBOOK_BASE


def sources(alerts_dir: Path = ALERTS_DIR) -> list[Path]:
    """Every file that carries runbook_url values: the rule files and their promtool tests."""
    return sorted(alerts_dir.glob("*.rules.yaml")) + sorted((alerts_dir / "tests").glob("*.yaml"))


def rewrite(text: str, base: str, inspection_scheme: str = "http") -> str:
    base = base if base.endswith("/") else base + "/"
    text = RUNBOOK_LINE.sub(lambda m: f'{m["lead"]}{m["q"]}{base}{m["alert"]}.md{m["q"]}', text)
    return INSPECTION_LINE.sub(
        lambda m: f'{m["lead"]}{m["q"]}{inspection_scheme}://{m["host"]}/inspections/latest{m["q"]}', text)


def inspection_links_off(text: str) -> list[str]:
    """inspection_url annotations of rules that do not point at the alert's own instance."""
    lines = [line for line in text.splitlines() if re.match(r"\s*inspection_url:", line)]
    found = {m["host"] for m in INSPECTION_LINE.finditer(text)}
    wrong = [f"inspection_url host {h!r}, expected {INSTANCE_TEMPLATE}" for h in sorted(found)
             if h != INSTANCE_TEMPLATE]
    if len(lines) != len(list(INSPECTION_LINE.finditer(text))):
        wrong.append("an inspection_url that is not <scheme>://{{ $labels.instance }}/inspections/latest")
    return wrong


def mismatched_alerts(text: str) -> list[str]:
    """Rules whose runbook_url names another alert than the rule itself (a copy-paste slip)."""
    wrong, current = [], None
    for line in text.splitlines():
        alert = ALERT_LINE.match(line)
        if alert:
            current = alert.group(1)
        link = RUNBOOK_LINE.match(line)
        if link and current and link["alert"] != current:
            wrong.append(f"{current} links {link['alert']}")
    return wrong


def write_copy(base: str, out: Path, inspection_scheme: str = "http") -> list[Path]:
    """The rule files, their tests and the PrometheusRule objects with `base`, under `out`."""
    written = []
    for path in sources():
        target = out / path.relative_to(ALERTS_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rewrite(path.read_text(), base, inspection_scheme))
        written.append(target)
    sys.path.insert(0, str(ALERTS_DIR))
    import generate_prometheusrule

    kubernetes = out / "prometheusrule.yaml"
    kubernetes.write_text(generate_prometheusrule.render(out))
    return written + [kubernetes]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed runbook_url is off")
    parser.add_argument("--runbook-base", metavar="URL",
                        help="base URL of the runbooks (default: the repository's docs/runbooks/)")
    parser.add_argument("--inspection-scheme", choices=("http", "https"), default="http",
                        help="scheme of the inspection_url annotations (https: daemons behind TLS)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write a copy there instead of rewriting alerts/")
    args = parser.parse_args(argv)
    base = args.runbook_base or default_base()
    if not re.fullmatch(r"https?://\S+", base):
        parser.error(f"--runbook-base must be an http(s) URL, got {base!r}")
    if args.out:
        for path in write_copy(base, args.out, args.inspection_scheme):
            print(f"wrote {path}")
        return 0
    problems = []
    for path in sources():
        text = path.read_text()
        if path.name.endswith(".rules.yaml"):
            problems += [f"{path}: {m}" for m in mismatched_alerts(text) + inspection_links_off(text)]
        wanted = rewrite(text, base, args.inspection_scheme)
        if wanted == text:
            continue
        if args.check:
            problems.append(f"{path}: runbook_url not under {base}: run {FIX}")
        else:
            path.write_text(wanted)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
