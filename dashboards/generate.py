#!/usr/bin/env python3
"""Generate the Grafana dashboards (dashboards/*.json) from the Python definitions beside this file.

    python dashboards/generate.py           # rewrite the JSON files
    python dashboards/generate.py --check   # exit 1 if a committed file differs (CI drift check)

The JSON files are committed so Grafana provisioning (and anyone without Python) can use them;
tests/test_dashboards.py fails when they drift from this generator.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import baselines  # noqa: E402
import correlation  # noqa: E402
import fabric  # noqa: E402
import gpu  # noqa: E402
import overview  # noqa: E402
import serving  # noqa: E402

BOARDS = (overview, fabric, serving, gpu, correlation, baselines)


def render() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    out = {}
    for module in BOARDS:
        model = module.build().to_json()
        out[f"{model['uid']}.json"] = json.dumps(model, indent=2, ensure_ascii=False) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on drift")
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default: dashboards/)")
    args = parser.parse_args(argv)
    drifted = []
    for name, text in render().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                drifted.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if drifted:
        print(f"out of date (run python dashboards/generate.py): {', '.join(drifted)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
