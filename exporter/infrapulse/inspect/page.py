"""The inspection report as a page: verdict first, then queue -> compute -> network, each a
table of what moved most (before, since, change). Plain HTML under the daemon's
Content-Security-Policy: no script, no inline style; the stylesheet is /static/inspection.css."""

from __future__ import annotations

import datetime
import html
from typing import Any

from .. import __version__
from ..health.page import affected_line

STYLESHEET = "/static/inspection.css"
CSS = """body{font-family:sans-serif;margin:1.5em;max-width:70em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.4em}
.verdict{font-size:1.1em;padding:.6em .8em;border-left:.4em solid #c62828;background:#fafafa}
.verdict.none{border-color:#2e7d32}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.moved td{font-weight:bold}.normal{color:#2e7d32}.moved-layer{color:#c62828}
.muted{color:#757575}
"""
ROWS_SHOWN = 12


def stylesheet() -> str:
    return CSS


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _head(title: str) -> str:
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{_esc(title)}</title>'
            f'<link rel="stylesheet" href="{STYLESHEET}"></head><body>')


def _layer(layer: dict[str, Any]) -> str:
    state = ('<span class="moved-layer">moved</span>' if layer["moved"]
             else '<span class="normal">normal</span>')
    rows = []
    for f in layer["findings"][:ROWS_SHOWN]:
        cls = ' class="moved"' if f["moved"] else ""
        note = f" <span class=\"muted\">({_esc(f['note'])})</span>" if f.get("note") else ""
        rows.append(f"<tr{cls}><td>{_esc(f['target'])}</td><td>{_esc(f['metric'])}{note}</td>"
                    f"<td class=\"num\">{_num(f['before'])}</td><td class=\"num\">{_num(f['since'])}</td>"
                    f"<td class=\"num\">{f['change']:+.2f}</td><td>{_esc(f['unit'])}</td></tr>")
    table = ("<table><tr><th>target</th><th>value</th><th>before</th><th>since</th><th>change (log2)</th>"
             "<th>unit</th></tr>" + "".join(rows) + "</table>") if rows else '<p class="muted">no data</p>'
    more = layer["series"] - min(len(layer["findings"]), ROWS_SHOWN)
    tail = f'<p class="muted">{more} more series moved less.</p>' if more > 0 else ""
    return f'<h2 id="{_esc(layer["name"])}">{_esc(layer["name"])}: {state}</h2>{table}{tail}'


def _kernel_log(event: dict[str, Any] | None) -> str:
    """The verdict device's last kernel-log event (inspect/kernel_log.py), as a line."""
    if not event:
        return ""
    when = f" at {_when(event['timestamp'])}" if event.get("timestamp") is not None else ""
    return (f'<br>kernel log, PCI {_esc(event["pci_address"])}: {_esc(event["summary"])} '
            f'({_esc(event["kind"])}){when}')


def render(report: dict[str, Any]) -> str:
    verdict = report["verdict"]
    trigger = report["trigger"]
    if trigger["crossings"]:
        first = trigger["crossings"][0]
        why = (f"{_esc(first['watched'])} fell to {first['value']:.0f} (below {first['threshold']:g}) "
               f"at {_when(first['timestamp'])}")
    else:
        why = f"requested at {_when(report['timestamp'])}"
    w = report["windows"]
    windows = (f"before: {_when(w['before']['from'])} – {_when(w['before']['to'])}; "
               f"since: {_when(w['since']['from'])} – {_when(w['since']['to'])}")
    layers = "".join(_layer(layer) for layer in report["layers"])
    endpoints = ", ".join(report.get("endpoints_on_node") or []) or "none"
    notes = "".join(f"<li>{_esc(n)}</li>" for n in report.get("notes") or [])
    cls = "verdict none" if verdict["layer"] == "none" else "verdict"
    return (_head(f"inspection {report['id']} – {report['host']}")
            + f"<h1>Inspection {_esc(report['id'])} on {_esc(report['host'])}</h1>"
            f'<p class="{cls}" id="verdict">verdict: <b>{_esc(verdict["layer"])}</b>'
            f'{" – " + _esc(verdict["target"]) if verdict["target"] else ""}<br>{_esc(verdict["text"])}'
            f'{affected_line(verdict.get("affected"))}{_kernel_log(verdict.get("kernel_log"))}</p>'
            f"<p>{why} ({_esc(trigger['kind'])}). {windows}.</p>"
            f"<p>Serving endpoints on this node: {_esc(endpoints)}.</p>"
            + layers + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
            + f'<p class="muted"><a href="/inspections">all inspections</a> · '
              f'<a href="/api/v1/inspections/{_esc(report["id"])}">JSON</a> · <a href="/">status</a> · '
              f"infrapulse {_esc(__version__)}</p></body></html>")


def render_list(host: str, reports: list[dict[str, Any]]) -> str:
    rows = "".join(
        f'<tr><td><a href="/inspections/{_esc(r["id"])}">{_esc(r["id"])}</a></td>'
        f'<td>{_when(r["timestamp"])}</td>'
        f'<td>{_esc(r["trigger"]["kind"])}</td><td>{_esc(r["verdict"]["layer"])}</td>'
        f'<td>{_esc(r["verdict"]["target"])}</td></tr>' for r in reports)
    body = ("<table><tr><th>id</th><th>time</th><th>trigger</th><th>verdict</th><th>target</th></tr>"
            + rows + "</table>") if rows else "<p>No inspection yet.</p>"
    return (_head(f"inspections – {host}") + f"<h1>Inspections on {_esc(host)}</h1>" + body
            + '<p class="muted"><a href="/">status</a></p></body></html>')


def render_missing(host: str) -> str:
    return (_head(f"inspection – {host}") + f"<h1>No such inspection on {_esc(host)}</h1>"
            '<p><a href="/inspections">all inspections</a></p></body></html>')
