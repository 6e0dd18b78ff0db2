"""`infrapulse score [--url URL]`: the health of a running daemon as a readable table.

Exit codes gate scripts the way Nagios-style checks do: 0 healthy, 1 degraded, 2 critical,
3 unknown (no data yet, or the daemon could not be reached).

A daemon served behind its web config (docs/security.md: TLS, client certificates, basic auth)
or behind a proxy is read with --ca-file, --cert-file/--key-file, --insecure-skip-verify,
--username with --password-file, or --bearer-token-file. Credentials are never printed: not
from the files, not from a URL's user-info (which is accepted, curl-style, but shown redacted).
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from .blast import affected_text

EXIT_CODES = {"healthy": 0, "degraded": 1, "critical": 2, "unknown": 3}
DEFAULT_URL = "http://127.0.0.1:9477"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "score", help="print the health score of a running daemon (exit 0/1/2 healthy/degraded/critical)",
        description="Fetch /api/v1/health from a running infrapulse and print the score, its components, "
                    "every signal and the top detractors. Exit code: 0 healthy, 1 degraded, 2 critical, "
                    "3 unknown or unreachable.")
    parser.add_argument("--url", default=DEFAULT_URL,
                        help=f"daemon base URL (default {DEFAULT_URL}); without a scheme, https:// when "
                             "a TLS option is given, else http://")
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                        help="HTTP timeout (default 5)")
    parser.add_argument("--json", action="store_true", help="print the raw JSON instead of the table")
    parser.add_argument("--all", action="store_true", help="list signals without data too")
    add_connection_arguments(parser)
    parser.set_defaults(func=cmd_score)


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """--ca-file, --cert-file/--key-file, --insecure-skip-verify, --username/--password-file and
    --bearer-token-file: how every client command reaches a daemon behind its web config."""
    tls = parser.add_argument_group("TLS (a daemon run with --web.config.file tls_server_config)")
    tls.add_argument("--ca-file", metavar="FILE", help="PEM CA bundle that signed the daemon's certificate")
    tls.add_argument("--cert-file", metavar="FILE",
                     help="PEM client certificate (a web config with client_auth_type Require...)")
    tls.add_argument("--key-file", metavar="FILE", help="PEM private key of --cert-file")
    tls.add_argument("--insecure-skip-verify", action="store_true",
                     help="do not verify the daemon's certificate (labs only)")
    auth = parser.add_argument_group("authentication (never printed)")
    auth.add_argument("--username", metavar="USER",
                      help="basic-auth user (basic_auth_users in the web config)")
    auth.add_argument("--password-file", metavar="FILE", help="file holding the basic-auth password")
    auth.add_argument("--bearer-token-file", metavar="FILE",
                      help="file holding a bearer token (a proxy in front of the daemon)")


class UsageError(ValueError):
    """Options that do not go together, or a file that cannot be read (exit 3 with the reason)."""


@dataclass(frozen=True)
class Target:
    """Where and how to read the daemon: the URL without credentials, and what to send."""

    url: str  # scheme://host[:port][/path], no user-info: safe to print
    headers: dict[str, str]
    context: ssl.SSLContext | None


def normalise_url(url: str, tls: bool) -> tuple[str, str | None, str | None]:
    """(URL without user-info, user, password): a scheme is added when missing, https:// if `tls`."""
    if "://" not in url:
        url = ("https://" if tls else "http://") + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"--url must be http:// or https://, got {parts.scheme}://")
    try:
        port = parts.port
    except ValueError:
        raise UsageError("--url has an invalid port") from None
    if not parts.hostname:
        raise UsageError("--url has no host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = f"{host}:{port}" if port else host
    clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return clean, user, password


def _read_secret(path: str, what: str) -> str:
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if not value:
        raise UsageError(f"{what} {path} is empty")
    return value


def _ssl_context(args: argparse.Namespace) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=args.ca_file)
        if args.cert_file:
            ctx.load_cert_chain(args.cert_file, args.key_file)
    except FileNotFoundError as exc:
        raise UsageError(f"cannot read {exc.filename or 'a TLS file'}: {exc.strerror}") from None
    except (ssl.SSLError, OSError) as exc:
        raise UsageError(f"cannot load the TLS files: {exc}") from None
    if args.insecure_skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def target_from_args(args: argparse.Namespace) -> Target:
    tls_given = bool(args.ca_file or args.cert_file or args.insecure_skip_verify)
    url, url_user, url_password = normalise_url(args.url, tls_given)
    if bool(args.cert_file) != bool(args.key_file):
        raise UsageError("--cert-file and --key-file go together")
    if args.password_file and not (args.username or url_user):
        raise UsageError("--password-file needs --username")
    if args.username and not args.password_file and url_password is None:
        raise UsageError("--username needs --password-file (a password is never taken on the command line)")
    if args.bearer_token_file and (args.username or url_user):
        raise UsageError("use basic auth or a bearer token, not both")
    headers = {"Accept": "application/json"}
    user = args.username or url_user
    if user is not None:
        password = url_password or ""
        if args.password_file:
            password = _read_secret(args.password_file, "--password-file")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    elif args.bearer_token_file:
        headers["Authorization"] = f"Bearer {_read_secret(args.bearer_token_file, '--bearer-token-file')}"
    context = _ssl_context(args) if url.startswith("https://") else None
    if context is None and tls_given:
        raise UsageError("TLS options given for an http:// URL")
    return Target(url, headers, context)


def fetch(target: Target | str, timeout: float) -> dict[str, Any]:
    if isinstance(target, str):
        target = Target(normalise_url(target, False)[0], {"Accept": "application/json"}, None)
    endpoint = target.url + "/api/v1/health"
    request = urllib.request.Request(endpoint, headers=target.headers)
    with urllib.request.urlopen(request, timeout=timeout, context=target.context) as response:  # noqa: S310
        body = json.loads(response.read().decode("utf-8"))
    if not isinstance(body, dict):
        raise ValueError(f"{endpoint} did not answer a JSON object")
    return body


CLIENT_CERT_HINT = " (does the daemon require a client certificate? --cert-file and --key-file)"


def explain(exc: BaseException, target: Target, client_cert: bool = False) -> str:
    """Why the daemon could not be read, with the option that fixes it; never a credential."""
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code == 401:
            sent = "Authorization" in target.headers
            return ("401 Unauthorized: the daemon refused " + ("these credentials" if sent else
                    "a request without credentials (give --username and --password-file)"))
        if exc.code == 403:
            return "403 Forbidden"
        return f"HTTP {exc.code} {exc.reason}"
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS: {reason.verify_message} (give the daemon's CA with --ca-file)"
    if isinstance(reason, ssl.SSLError):
        text = f"TLS: {reason.reason or reason}"
        if "CERTIFICATE_REQUIRED" in str(reason) or "certificate required" in str(reason):
            text += CLIENT_CERT_HINT
        return text
    text = str(reason)
    if isinstance(reason, ConnectionResetError):  # http.client.RemoteDisconnected included
        if target.url.startswith("http://"):
            text += " (is the daemon serving TLS? use https:// or --ca-file)"
        elif not client_cert:
            # TLS 1.3 reports a refused client certificate only after the handshake, as a close.
            text += CLIENT_CERT_HINT
    return text


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
    for r in body.get("status_reasons") or []:
        more = f" (and {r['targets'] - 1} more)" if r.get("targets", 0) > 1 else ""
        out.append(f"  {r['status']}: {r['text']}{more}")
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
                         "yes" if s["critical"] else "-"])
    if rows:
        header = ["signal", "component", "score", "value", "worst target", "good", "bad", "critical"]
        out += _table(rows, header)
        out.append("")
    if body.get("detractors"):
        out.append("top detractors:")
        for d in body["detractors"]:
            out.append(f"  {d['rank']}. {d['sentence']}")
            if d.get("affected"):
                out.append(f"     {affected_text(d['affected'])}")
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
        target = target_from_args(args)
    except UsageError as exc:
        print(f"infrapulse score: {exc}", file=sys.stderr)
        return EXIT_CODES["unknown"]
    try:
        body = fetch(target, args.timeout)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        why = explain(exc, target, bool(args.cert_file))
        print(f"cannot read {target.url}/api/v1/health: {why}", file=sys.stderr)
        return EXIT_CODES["unknown"]
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        print(render(body, target.url, args.all))
    return EXIT_CODES.get(body.get("status", "unknown"), EXIT_CODES["unknown"])
