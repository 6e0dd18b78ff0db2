"""The status page at `/`: plain HTML and inline SVG, no scripts or external assets (works offline).

The score as a gauge, the components as bars, the top detractors with what to do, the status
of every source, and a sparkline of the score over the history the service keeps in memory.
The page reloads itself every 10 seconds.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

from .. import __version__

COLORS = {"healthy": "#2e7d32", "degraded": "#ef6c00", "critical": "#c62828", "unknown": "#757575"}


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(score: float | None) -> str:
    return "–" if score is None else f"{score:.0f}"


def gauge_svg(score: float | None, status: str) -> str:
    """A half-circle gauge: grey track, coloured arc up to the score, the number in the middle."""
    cx, cy, r = 110, 110, 90
    fraction = 0.0 if score is None else max(0.0, min(score, 100.0)) / 100.0
    angle = math.pi * (1 - fraction)
    x, y = cx + r * math.cos(angle), cy - r * math.sin(angle)
    arc = ""
    if fraction > 0:
        arc = (f'<path d="M{cx - r},{cy} A{r},{r} 0 0 1 {x:.2f},{y:.2f}" fill="none" '
               f'stroke="{COLORS.get(status, "#757575")}" stroke-width="18" stroke-linecap="butt"/>')
    return (f'<svg id="gauge" role="img" aria-label="health score {_fmt(score)}" width="220" height="130" '
            f'viewBox="0 0 220 130" xmlns="http://www.w3.org/2000/svg">'
            f'<path d="M{cx - r},{cy} A{r},{r} 0 0 1 {cx + r},{cy}" fill="none" stroke="#e0e0e0" stroke-width="18"/>'
            f'{arc}<text x="{cx}" y="{cy - 8}" text-anchor="middle" font-size="44" font-weight="bold" '
            f'fill="#212121">{_fmt(score)}</text>'
            f'<text x="{cx}" y="{cy + 16}" text-anchor="middle" font-size="15" fill="{COLORS.get(status, "#757575")}">'
            f'{_esc(status)}</text></svg>')


def sparkline_svg(points: Iterable[tuple[float, float | None]], now: float, span: float,
                  width: int = 480, height: int = 60) -> str:
    """Score over the last `span` seconds; gaps (unknown score) break the line."""
    segments: list[list[str]] = [[]]
    count = 0
    for ts, score in points:
        if ts < now - span:
            continue
        if score is None:
            segments.append([])
            continue
        x = (ts - (now - span)) / span * width
        y = height - 2 - max(0.0, min(score, 100.0)) / 100.0 * (height - 4)
        segments[-1].append(f"{x:.1f},{y:.1f}")
        count += 1
    lines = "".join(f'<polyline points="{" ".join(seg)}" fill="none" stroke="#1565c0" stroke-width="2"/>'
                    for seg in segments if seg)
    guide = height - 2 - 0.5 * (height - 4)
    return (f'<svg id="sparkline" data-points="{count}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'aria-label="score over the last {span / 60:.0f} minutes">'
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fafafa" stroke="#e0e0e0"/>'
            f'<line x1="0" y1="{guide:.1f}" x2="{width}" y2="{guide:.1f}" stroke="#eeeeee"/>{lines}</svg>')


def component_bars(components: list[dict[str, Any]]) -> str:
    rows = []
    for comp in components:
        if not comp["applicable"]:
            continue
        score = comp["score"]
        color = COLORS.get(comp.get("status") or "unknown", COLORS["unknown"])  # the API's bands
        width = 0 if score is None else max(0.0, min(score, 100.0))
        capped = f' <span class="capped">capped by {_esc(comp["capped_by"])}</span>' if comp["capped_by"] else ""
        rows.append(
            f'<div class="component" data-component="{_esc(comp["name"])}" data-score="{_fmt(score)}">'
            f'<span class="cname">{_esc(comp["name"])}</span>'
            f'<svg width="300" height="16" xmlns="http://www.w3.org/2000/svg"><rect width="300" height="16" fill="#eeeeee"/>'
            f'<rect width="{width * 3:.1f}" height="16" fill="{color}"/></svg>'
            f'<span class="cscore">{_fmt(score)}</span>'
            f'<span class="ccov">coverage {comp["coverage"] * 100:.0f}%</span>{capped}</div>')
    return "".join(rows) or '<p class="empty">No component has data yet.</p>'


def detractor_list(detractors: list[dict[str, Any]]) -> str:
    if not detractors:
        return '<p class="empty">Nothing is pulling the score down.</p>'
    items = "".join(
        f'<li class="detractor" data-signal="{_esc(d["signal"])}" data-target="{_esc(d["target"])}">'
        f'<span class="sentence">{_esc(d["sentence"])}</span><br><span class="hint">{_esc(d["hint"])}</span></li>'
        for d in detractors)
    return f'<ol id="detractor-list">{items}</ol>'


def coverage_list(notes: list[dict[str, Any]]) -> str:
    """Source instances whose mappings map to nothing (silent loss; not part of the score)."""
    if not notes:
        return ""
    items = "".join(f'<li class="coverage-note" data-source="{_esc(n["source"])}" data-target="{_esc(n["target"])}">'
                    f'{_esc(n["sentence"])}</li>' for n in notes)
    return ('<h2>Mappings that map to nothing</h2><p class="hint">Not counted in the score: data these '
            f'sources could not map is missing from it.</p><ul id="coverage-notes">{items}</ul>')


def source_table(sources: list[dict[str, Any]], now: float) -> str:
    rows = []
    for st in sources:
        age = f"{now - st['last_success']:.0f}s ago" if st["last_success"] else "never"
        state = "up" if st["up"] else "down"
        rows.append(f'<tr class="source {state}" data-source="{_esc(st["source"])}" data-target="{_esc(st["target"])}">'
                    f'<td>{_esc(st["source"])}</td><td>{_esc(st["target"])}</td><td class="state">{state}</td>'
                    f'<td>{_esc(st["reason"])}</td><td>{_esc(st["message"])}</td><td>{age}</td></tr>')
    body = "".join(rows) or '<tr><td colspan="6">no sources running</td></tr>'
    return ('<table id="sources"><tr><th>source</th><th>target</th><th>state</th><th>reason</th>'
            f'<th>last error / detail</th><th>last success</th></tr>{body}</table>')


# Served at STYLESHEET, not inlined: the Content-Security-Policy allows same-origin styles only.
STYLESHEET = "/static/health.css"
STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em 2em;color:#212121}
h1{font-size:1.4em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.4em 0 .5em}
.top{display:flex;gap:2.5em;align-items:center;flex-wrap:wrap}
.meta{color:#616161;font-size:.9em}
.component{display:flex;gap:.8em;align-items:center;margin:.3em 0}
.cname{width:6.5em}.cscore{width:2.5em;text-align:right;font-weight:bold}.ccov,.capped{color:#757575;font-size:.85em}
.capped{color:#c62828}
#capped{max-width:230px;font-size:.9em;color:#c62828;margin:.3em 0}
.detractor{margin:.4em 0}.hint{color:#616161;font-size:.9em}
table{border-collapse:collapse;font-size:.9em}td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #eeeeee}
tr.down td.state{color:#c62828;font-weight:bold}tr.up td.state{color:#2e7d32}
a{color:#1565c0}
"""


def render(report: dict[str, Any], sources: list[dict[str, Any]], history: list[tuple[float, float | None]], span: float,
           hostname: str, role: str, links: Sequence[tuple[str, str]] = ()) -> str:
    now = time.time()
    score, status = report["score"], report["status"]
    capped = ""
    if report["capped_by"]:
        capped = (f'<p id="capped">Capped at {report["cap"]:g} while critical signals fire: '
                  f'{_esc(", ".join(report["capped_by"]))}</p>')
    extra_links = "".join(f' · <a href="{_esc(href)}">{_esc(text)}</a>' for href, text in links)
    serving = ""
    if report["serving"]:
        rows = "".join(
            f'<tr><td>{_esc(ep)}</td>'
            + "".join(f'<td>{_q(lat["ttft_seconds"].get(p))}</td>' for p in ("p50", "p95", "p99"))
            + "".join(f'<td>{_q(lat["itl_seconds"].get(p))}</td>' for p in ("p50", "p95", "p99"))
            + f'<td>{_rps(lat["requests_per_second"])}</td></tr>'
            for ep, lat in report["serving"].items())
        serving = ('<h2>Serving latency</h2><table id="serving"><tr><th>endpoint</th><th>TTFT p50</th>'
                   '<th>p95</th><th>p99</th><th>ITL p50</th><th>p95</th><th>p99</th><th>req/s</th></tr>'
                   f'{rows}</table>')
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>infrapulse {_fmt(score)} {_esc(status)} – {_esc(hostname)}</title>
<link rel="stylesheet" href="{STYLESHEET}"></head>
<body>
<h1>infrapulse health – {_esc(hostname)}</h1>
<p class="meta">role {_esc(role)} · version {_esc(__version__)} · coverage <span id="coverage">{report["coverage"] * 100:.0f}%</span>
· window {report["window_seconds"]:g}s · <a href="/api/v1/health">/api/v1/health</a> · <a href="/metrics">/metrics</a>
· <a href="/api/v1/sources">/api/v1/sources</a>{extra_links}</p>
<div class="top">
<div><div id="score" data-score="{_fmt(score)}" data-status="{_esc(status)}">{gauge_svg(score, status)}</div>{capped}</div>
<div><h2>Components</h2><div id="components">{component_bars(report["components"])}</div></div>
</div>
<h2>Score, last {span / 60:.0f} minutes</h2>{sparkline_svg(history, now, span)}
<h2>Top detractors</h2><div id="detractors">{detractor_list(report["detractors"])}</div>
{serving}
{coverage_list(report.get("coverage_notes", []))}
<h2>Sources</h2>{source_table(sources, now)}
</body></html>"""


def _q(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _rps(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"
