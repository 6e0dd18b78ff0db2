#!/usr/bin/env python3
"""Write the generated reference docs of this checkout, docs/metrics.md and docs/configuration.md,
from the catalogue and the config schema (renderers in infrapulse.docs).

    python scripts/generate_docs.py            # rewrite the files (`make docs`, `infrapulse docs --write`)
    python scripts/generate_docs.py --check    # exit 1 naming each file that is out of date

It renders with this checkout's exporter/ (put first on sys.path), whatever infrapulse is installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exporter"))

from infrapulse.docs import GENERATED  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on drift")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the tree whose docs/ to write or check (default: this checkout)")
    args = parser.parse_args(argv)
    stale = []
    for rel, render in GENERATED.items():
        path = args.root / rel
        text = render()
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {rel}")
        elif not path.exists() or path.read_text() != text:
            stale.append(rel)
    if stale:
        print(f"out of date: {', '.join(stale)} (run `make docs`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
