#!/usr/bin/env python3
"""Render the link alert rules from the link health signals' thresholds (one table).

alerts/link.rules.yaml is written whole from infrapulse.health.linkrules with the signals'
default bad thresholds (link_flaps, link_half_dead, link_post_fec_ber, link_pre_fec_ber_rise)
and health.link defaults (window, baseline_window, pre_fec_ber_floor), exactly as the scorer
resolves them. The link rules that live in other files get only their thresholds and windows
rewritten, leaving the rest of those files (comments, layout) as it is: the flapping alerts
(InfrapulseNicLinkFlapping, InfrapulseSwitchInterfaceFlapping in network.rules.yaml,
InfrapulseRdmaPortFlapping in rdma.rules.yaml), the half-dead guard of
InfrapulseNicPhyErrorsWhileUp and the switch carrier-transitions record (recording.rules.yaml).

    python alerts/generate_link_rules.py            # rewrite those files
    python alerts/generate_link_rules.py --check    # exit 1 naming the files that are stale

For a config's health.thresholds / health.link overrides: `infrapulse rules --config FILE
--output DIR` writes the same files with them. After a rewrite, run
alerts/generate_prometheusrule.py too (the Kubernetes copy of the rules).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ALERTS_DIR = Path(__file__).resolve().parent
FIX = "python alerts/generate_link_rules.py"


def render(alerts_dir: Path = ALERTS_DIR) -> dict[Path, str]:
    """Path -> the text it should have, for every file the link thresholds reach."""
    sys.path.insert(0, str(ALERTS_DIR.parent / "exporter"))
    from infrapulse.config import default_config
    from infrapulse.health import linkrules

    files = linkrules.render_all(linkrules.thresholds(default_config().health), alerts_dir)
    return {alerts_dir / name: text for name, text in files.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file is out of date")
    parser.add_argument("--alerts", type=Path, default=ALERTS_DIR, metavar="DIR",
                        help="the rule files' directory (default: this alerts/)")
    args = parser.parse_args(argv)
    try:
        wanted = render(args.alerts)
    except ValueError as exc:  # a rule the patterns no longer find
        print(f"{exc}: update infrapulse/health/linkrules.py", file=sys.stderr)
        return 1
    stale = [path for path, text in wanted.items()
             if (path.read_text(encoding="utf-8") if path.exists() else "") != text]
    if args.check:
        for path in stale:
            print(f"{path}: the link thresholds differ from the health signals': run {FIX}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
