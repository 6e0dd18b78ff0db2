"""`infrapulse score [--url URL]`: the health of a running daemon as a readable table.

Exit codes gate scripts the way Nagios-style checks do: 0 healthy, 1 degraded, 2 critical,
3 unknown (no data yet, or the daemon could not be reached).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

EXIT_CODES = {"healthy": 0, "degraded": 1, "critical": 2, "unknown": 3}
DEFAULT_URL = "http://127.0.0.1:9477"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "score", help="print the health score of a running daemon (exit 0/1/2 healthy/degraded/critical)",
        description="Fetch /api/v1/health from a running infrapulse and print the score, its components, "
                    "every signal and the top detractors. Exit code: 0 healthy, 1 degraded, 2 critical, "
                    "3 unknown or unreachable.")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"daemon base URL (default {DEFAULT_URL})")
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                        help="HTTP timeout (default 5)")
    parser.add_argument("--json", action="store_true", help="print the raw JSON instead of the table")
    parser.add_argument("--all", action="store_true", help="list signals without data too")
    parser.set_defaults(func=cmd_score)


def fetch(url: str, timeout: float) -> dict[str, Any]:
    endpoint = url.rstrip("/") + "/api/v1/health"
    request = urllib.request.Request(endpoint, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - user-given URL
        body = json.loads(response.read().decode("utf-8"))
    if not isinstance(body, dict):
        raise ValueError(f"{endpoint} did not answer a JSON object")
    return body


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    def line(r: list[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()

    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def render(body: dict[str, Any], url: str, show_all: bool = False) -> str:
    out = []
    status = body.get("status", "unknown")
    head = f"{body.get('host', '?')} ({url}): score {_score(body.get('score'))} {status.upper()}"
    head += f", coverage {body.get('coverage', 0) * 100:.0f}%"
    if body.get("capped_by"):
        head += f", capped at {body['cap']:g} by {', '.join(body['capped_by'])}"
    out.append(head)
    out.append("")
    comps = [[c["name"], _score(c["score"]), f"{c['weight']:g}", f"{c['coverage'] * 100:.0f}%",
              c["capped_by"] or ""] for c in body.get("components", []) if c.get("applicable")]
    if comps:
        out += _table(comps, ["component", "score", "weight", "coverage", "capped by"])
        out.append("")
    rows = []
    for comp in body.get("components", []):
        for s in comp["signals"]:
            if not s["applicable"] or not (s["known"] or show_all):
                continue
            rows.append([s["name"], comp["name"], _score(s["score"]) if s["known"] else "unknown",
                         s["value_text"] or "-", s["target"] or "-", s["good_text"], s["bad_text"],
                         "critical" if s["critical"] else ""])
    if rows:
        out += _table(rows, ["signal", "component", "score", "value", "worst target", "good", "bad", ""])
        out.append("")
    if body.get("detractors"):
        out.append("top detractors:")
        for d in body["detractors"]:
            out.append(f"  {d['rank']}. {d['sentence']}")
            out.append(f"     -> {d['hint']}")
    else:
        out.append("top detractors: none")
    notes = body.get("coverage_notes") or []
    if notes:
        out.append("")
        out.append("mappings that map to nothing (not in the score):")
        out += [f"  {n['sentence']}" for n in notes]
    down = [s for s in body.get("sources", []) if not s["up"]]
    if down:
        out.append("")
        out.append("sources down:")
        for s in down:
            detail = f": {s['message']}" if s["message"] else ""
            out.append(f"  {s['source']}/{s['target']}: {s['reason']}{detail}")
    return "\n".join(out)


def cmd_score(args: argparse.Namespace) -> int:
    try:
        body = fetch(args.url, args.timeout)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"cannot read {args.url.rstrip('/')}/api/v1/health: {reason}", file=sys.stderr)
        return EXIT_CODES["unknown"]
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        print(render(body, args.url, args.all))
    return EXIT_CODES.get(body.get("status", "unknown"), EXIT_CODES["unknown"])
