#!/usr/bin/env python3
"""Keep the critical-XID regex of alerts/gpu.rules.yaml equal to the XID table.

The table is exporter/infrapulse/xid.py (the one XID vocabulary, also read by the
health score). This rewrites only the `xid=~"..."` matchers of the InfrapulseGpuCriticalXid
rule, leaving the rest of the file (comments, layout) as it is.

    python alerts/generate_xid_rules.py            # rewrite alerts/gpu.rules.yaml
    python alerts/generate_xid_rules.py --check    # exit 1 when the regex has drifted

After a rewrite, run alerts/generate_prometheusrule.py too (the Kubernetes copy of the rules).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ALERTS_DIR = Path(__file__).resolve().parent
RULES = ALERTS_DIR / "gpu.rules.yaml"
ALERT = "InfrapulseGpuCriticalXid"
MATCHER = re.compile(r'xid=~"[^"]*"')


def critical_regex() -> str:
    sys.path.insert(0, str(ALERTS_DIR.parent / "exporter"))
    from infrapulse import xid

    return xid.critical_regex()


def render(text: str, regex: str) -> str:
    """`text` with every xid matcher of the critical-XID alert set to `regex`.

    The alert's rule ends where the next `- alert:` (or `- record:`) item of the file begins."""
    start = text.find(f"- alert: {ALERT}\n")
    if start < 0:
        raise ValueError(f"{RULES.name}: no alert {ALERT}")
    following = re.compile(r"^\s*- (alert|record): ", re.M)
    match = following.search(text, start + 1)
    end = match.start() if match else len(text)
    rule, count = MATCHER.subn(f'xid=~"{regex}"', text[start:end])
    if count == 0:
        raise ValueError(f'{RULES.name}: {ALERT} has no xid=~"..." matcher to rewrite')
    return text[:start] + rule + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed regex is out of date")
    parser.add_argument("--rules", type=Path, default=RULES)
    args = parser.parse_args(argv)
    text = args.rules.read_text()
    wanted = render(text, critical_regex())
    if args.check:
        if wanted != text:
            print(f"{args.rules}: the critical XID regex differs from xid.py: run python "
                  "alerts/generate_xid_rules.py", file=sys.stderr)
            return 1
        return 0
    args.rules.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
