"""`infrapulse inspect [--url URL]`: run an inspection on a running daemon (or show one) and print it.

By default it POSTs /api/v1/inspections (the daemon must admit the caller through its web
config's basic auth, or allow unauthenticated inspections) and prints the new report; --latest
or --id show a stored one, --list lists them. TLS and authentication options are those of
`infrapulse score`; credentials are never printed.

Exit codes: 0 a report whose verdict names no layer, 1 a report naming one, 3 the daemon could
not be reached or refused (the reason is printed).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from ..health.cli import DEFAULT_URL, Target, UsageError, add_connection_arguments, explain, target_from_args

EXIT_NONE, EXIT_VERDICT, EXIT_UNKNOWN = 0, 1, 3


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "inspect", help="run an inspection on a running daemon and print its verdict",
        description="POST /api/v1/inspections on a running infrapulse and print the report: queue, compute "
                    "and network before and since, and the verdict. Exit 0: nothing moved; 1: a verdict "
                    "names a layer; 3: unreachable or refused.")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"daemon base URL (default {DEFAULT_URL})")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="HTTP timeout (default 30)")
    show = parser.add_mutually_exclusive_group()
    show.add_argument("--latest", action="store_true", help="show the latest stored report, run none")
    show.add_argument("--id", metavar="ID", help="show this stored report, run none")
    show.add_argument("--list", action="store_true", help="list the stored reports")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")
    add_connection_arguments(parser)
    parser.set_defaults(func=cmd_inspect)


def request(target: Target, path: str, timeout: float, post: bool = False) -> dict[str, Any]:
    headers = dict(target.headers)
    data = None
    if post:
        headers["Content-Type"] = "application/json"
        data = b"{}"
    req = urllib.request.Request(target.url + path, data=data, headers=headers,
                                 method="POST" if post else "GET")
    with urllib.request.urlopen(req, timeout=timeout, context=target.context) as response:  # noqa: S310
        body = json.loads(response.read().decode("utf-8"))
    if not isinstance(body, dict):
        raise ValueError(f"{path} did not answer a JSON object")
    return body


def render(report: dict[str, Any]) -> str:
    verdict = report["verdict"]
    out = [f"inspection {report['id']} on {report['host']} ({report['trigger']['kind']})",
           f"verdict: {verdict['layer']}" + (f" - {verdict['target']}" if verdict["target"] else ""),
           f"  {verdict['text']}", ""]
    for layer in report["layers"]:
        out.append(f"{layer['name']}: {'moved' if layer['moved'] else 'normal'}")
        for f in layer["findings"][:5]:
            mark = "*" if f["moved"] else " "
            before = "-" if f["before"] is None else f"{f['before']:.4g}"
            since = "-" if f["since"] is None else f"{f['since']:.4g}"
            out.append(f" {mark} {f['target']}  {f['metric']}  {before} -> {since}  ({f['change']:+.2f})")
    return "\n".join(out)


def _error_text(exc: BaseException, target: Target, cert: bool) -> str:
    if isinstance(exc, urllib.error.HTTPError) and exc.code in (403, 404, 409, 429):
        try:
            detail = json.loads(exc.read().decode("utf-8")).get("error", "")
        except (ValueError, OSError, AttributeError):
            detail = ""
        return f"HTTP {exc.code}: {detail}" if detail else f"HTTP {exc.code}"
    return explain(exc, target, cert)


def cmd_inspect(args: argparse.Namespace) -> int:
    try:
        target = target_from_args(args)
    except UsageError as exc:
        print(f"infrapulse inspect: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    path = "/api/v1/inspections"
    if args.latest:
        path += "/latest"
    elif args.id:
        path += f"/{args.id}"
    try:
        body = request(target, path, args.timeout, post=not (args.latest or args.id or args.list))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"cannot {'read' if args.latest or args.id or args.list else 'start'} {target.url}{path}: "
              f"{_error_text(exc, target, bool(args.cert_file))}", file=sys.stderr)
        return EXIT_UNKNOWN
    if args.json:
        print(json.dumps(body, indent=2))
    elif args.list:
        for item in body.get("inspections", []):
            v = item["verdict"]
            print(f"{item['id']}  {item['trigger']:<9}  {v['layer']:<8} {v['target']}")
        return EXIT_NONE
    else:
        print(render(body))
    if args.list:
        return EXIT_NONE
    return EXIT_NONE if body.get("verdict", {}).get("layer") == "none" else EXIT_VERDICT
