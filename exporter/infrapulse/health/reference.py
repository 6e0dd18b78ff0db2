"""The generated parts of docs/health.md: the signal table, the XID classes and the PromQL rules.

docs/health.md holds these between marker comments; tests/test_health_docs.py fails when the
committed text drifts from the code, and `python -m infrapulse.health.reference` rewrites them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from .. import xid
from . import promql
from .config import DEFAULT_COMPONENT_WEIGHTS
from .reasons import format_threshold
from .signals import SIGNALS

WINDOW_TEXT = {"window": "window (1m)", "event_window": "event_window (5m)", "instant": "latest value",
               "link_window": "link.window (10m)"}


def signal_table() -> str:
    rows = ["| component | signal | formula | window | good | bad | weight | critical |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in SIGNALS.values():
        good, bad = format_threshold(s.unit, s.good), format_threshold(s.unit, s.bad)
        if s.name in ("ttft_p95", "itl_p95"):
            good, bad = f"SLO ({good})", f"2 × SLO ({bad})"
        formula = s.formula.replace("|", "\\|")
        rows.append(f"| {s.component} | `{s.name}` | {formula} | {WINDOW_TEXT[s.window]} | {good} | {bad} | "
                    f"{s.weight:g} | {'yes' if s.critical else ''} |")
    weights = ", ".join(f"{k} {v:g}" for k, v in DEFAULT_COMPONENT_WEIGHTS.items())
    rows.append("")
    rows.append(f"Component weights: {weights}. "
                f"Critical XIDs: {', '.join(map(str, sorted(xid.CRITICAL_XIDS)))}; "
                f"application XIDs (not scored): {', '.join(map(str, sorted(xid.APPLICATION_XIDS)))}.")
    return "\n".join(rows)


XID_SCORED_AS = {xid.CRITICAL: "`xid_critical` (critical signal)", xid.APPLICATION: "not scored",
                 xid.OTHER: "`xid_other`, as every XID not listed"}


def xid_table() -> str:
    """Every XID of xid.py: the class decides the signal and the alert."""
    rows = ["| XID | driver name | meaning | NVIDIA's immediate action | class | scored as |",
            "| --- | --- | --- | --- | --- | --- |"]
    order = {xid.CRITICAL: 0, xid.APPLICATION: 1, xid.OTHER: 2}
    for x in sorted(xid.XIDS, key=lambda x: (order[x.xid_class], x.code)):
        rows.append(f"| {x.code} | `{x.mnemonic}` | {x.meaning} | `{x.action}` | {x.xid_class} | "
                    f"{XID_SCORED_AS[x.xid_class]} |")
    return "\n".join(rows)


def promql_rules() -> str:
    """The rules as a Prometheus rule file (block scalars, so the expressions stay readable)."""
    lines = ["```yaml", "groups:", "  - name: infrapulse-health.cross-instance", "    rules:"]
    for rule in promql.recording_rules("1m"):
        lines.append(f"      - record: {rule['record']}")
        lines.append("        expr: |")
        lines += [f"          {line}".rstrip() for line in rule["expr"].splitlines()]
    lines.append("```")
    text = "\n".join(lines)
    yaml.safe_load(text.strip("`").removeprefix("yaml"))  # it must stay a valid rule file
    return text


SECTIONS = {"signals": signal_table, "xids": xid_table, "promql": promql_rules}


def render(doc: str) -> str:
    for name, make in SECTIONS.items():
        start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
        head, _, rest = doc.partition(start)
        _, _, tail = rest.partition(end)
        doc = f"{head}{start}\n{make()}\n{end}{tail}"
    return doc


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "docs/health.md")
    path.write_text(render(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
