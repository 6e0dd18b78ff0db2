#!/usr/bin/env python3
"""Write the generated reference docs of this checkout: docs/metrics.md and docs/configuration.md
(from the catalogue and the config schema) and the generated sections of docs/health.md (from the
health signals); the renderers are in infrapulse.docs.

    python scripts/generate_docs.py            # rewrite them (`make docs`, `infrapulse docs --write`)
    python scripts/generate_docs.py --check    # exit 1 naming each file that is out of date

It renders with this checkout's exporter/ (put first on sys.path), whatever infrapulse is installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exporter"))

from infrapulse.docs import GENERATED, GENERATED_SECTIONS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on drift")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the tree whose docs/ to write or check (default: this checkout)")
    args = parser.parse_args(argv)
    stale: list[str] = []
    missing: list[str] = []
    expected: dict[str, str] = {rel: render() for rel, render in GENERATED.items()}
    for rel, redo in GENERATED_SECTIONS.items():
        path = args.root / rel
        if path.exists():
            expected[rel] = redo(path.read_text(encoding="utf-8"))
        else:
            missing.append(rel)
    for rel, text in expected.items():
        path = args.root / rel
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    if missing:
        print(f"missing: {', '.join(missing)} (hand-written, with generated sections: restore it from git)",
              file=sys.stderr)
        return 1
    if stale:
        print(f"out of date: {', '.join(stale)} (run `make docs`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
