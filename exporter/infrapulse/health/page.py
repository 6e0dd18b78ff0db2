"""The status page at `/`: plain HTML and inline SVG from this daemon only (works offline).

The score as a gauge, the components as bars, the score over time with a clock axis and value
labels, the top detractors with what to do and a runbook link, the serving latencies coloured
against their SLOs (and why a cell is empty), the GPUs and NICs this instance sees, the status of
every source (long details folded), and — on the demo only — switches for its scenarios. The
page reloads itself every 10 seconds.

It runs under the daemon's Content-Security-Policy: no inline style or script. Styles come from
/static/health.css; the demo's toggles from /static/scenarios.js, the only script, which the
status page's own policy allows from this origin (`http.with_own_scripts`) when it has toggles.
"""

from __future__ import annotations

import datetime
import html
import math
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from typing import Any

from .. import __version__
from .blast import affected_text
from .config import StatusThresholdsSettings
from .runbooks import runbook_for, runbook_url
from .sparkline import sparkline_svg

COLORS = {"healthy": "#2e7d32", "degraded": "#ef6c00", "critical": "#c62828", "unknown": "#757575"}
DEFAULT_BANDS = StatusThresholdsSettings(degraded=80.0, critical=50.0)
STYLESHEET = "/static/health.css"
SCRIPT = "/static/scenarios.js"
STATIC = {STYLESHEET: ("health.css", "text/css"), SCRIPT: ("scenarios.js", "text/javascript")}
DETAIL_FOLD_CHARS = 100  # longer source details (or more than one) are folded into <details>
# Why a latency an engine does not export shows "–" (engine label, quantity) -> sentence.
NOT_EXPORTED = {
    ("tgi", "ttft"): "TGI exports no time-to-first-token metric",
    ("trtllm", "ttft"): "TensorRT-LLM under Triton reports TTFT only when started with "
                        "--metrics-config histogram_latencies=true (trtllm-serve always does)",
    ("trtllm", "itl"): "Triton exports no inter-token latency (trtllm-serve does)",
}


def static_file(path: str) -> tuple[str, str]:
    """(text, content type) of a static file the page uses."""
    name, content_type = STATIC[path]
    return (resources.files(__package__) / "static" / name).read_text(encoding="utf-8"), content_type


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(score: float | None) -> str:
    return "–" if score is None else f"{score:.0f}"


def status_of(score: float | None, bands: StatusThresholdsSettings) -> str:
    if score is None:
        return "unknown"
    return "critical" if score < bands.critical else "degraded" if score < bands.degraded else "healthy"


def gauge_svg(score: float | None, status: str) -> str:
    """A half-circle gauge: grey track, coloured arc up to the score, the number in the middle."""
    cx, cy, r = 110, 110, 90
    fraction = 0.0 if score is None else max(0.0, min(score, 100.0)) / 100.0
    angle = math.pi * (1 - fraction)
    x, y = cx + r * math.cos(angle), cy - r * math.sin(angle)
    color = COLORS.get(status, COLORS["unknown"])
    arc = ""
    if fraction > 0:
        arc = (f'<path d="M{cx - r},{cy} A{r},{r} 0 0 1 {x:.2f},{y:.2f}" fill="none" '
               f'stroke="{color}" stroke-width="18" stroke-linecap="butt"/>')
    return (f'<svg id="gauge" role="img" aria-label="health score {_fmt(score)}" width="220" height="130" '
            f'viewBox="0 0 220 130" xmlns="http://www.w3.org/2000/svg">'
            f'<path d="M{cx - r},{cy} A{r},{r} 0 0 1 {cx + r},{cy}" fill="none" stroke="#e0e0e0" '
            f'stroke-width="18"/>'
            f'{arc}<text x="{cx}" y="{cy - 8}" text-anchor="middle" font-size="44" font-weight="bold" '
            f'fill="#212121">{_fmt(score)}</text>'
            f'<text x="{cx}" y="{cy + 16}" text-anchor="middle" font-size="15" fill="{color}">'
            f'{_esc(status)}</text></svg>')


def component_bars(components: list[dict[str, Any]], bands: StatusThresholdsSettings) -> str:
    rows = []
    for comp in components:
        if not comp["applicable"]:
            continue
        score = comp["score"]
        color = COLORS.get(comp.get("status") or "unknown", COLORS["unknown"])  # the API's bands
        width = 0 if score is None else max(0.0, min(score, 100.0))
        capped = ""
        if comp["capped_by"]:
            capped = f' <span class="capped">capped by {_esc(comp["capped_by"])}</span>'
        rows.append(
            f'<div class="component" data-component="{_esc(comp["name"])}" data-score="{_fmt(score)}">'
            f'<span class="cname">{_esc(comp["name"])}</span>'
            f'<svg width="300" height="16" xmlns="http://www.w3.org/2000/svg"><rect width="300" height="16" '
            f'fill="#eeeeee"/><rect width="{width * 3:.1f}" height="16" fill="{color}"/>'
            f'</svg><span class="cscore">{_fmt(score)}</span>'
            f'<span class="ccov">coverage {comp["coverage"] * 100:.0f}%</span>{capped}</div>')
    return "".join(rows) or '<p class="empty">No component has data yet.</p>'


def _signals_of(detractor: dict[str, Any]) -> list[str]:
    """A detractor names one signal, or several for one target (`signals`)."""
    many = detractor.get("signals")
    if isinstance(many, list) and many:
        return [str(s) for s in many]
    return [str(detractor["signal"])]


def affected_line(affected: dict[str, Any] | None) -> str:
    if not affected:
        return ""
    workloads = ",".join(w["name"] for w in affected["workloads"])
    return (f'<br><span class="affected" data-state="{_esc(affected["state"])}" '
            f'data-workloads="{_esc(workloads)}">{_esc(affected_text(affected))}</span>')


def detractor_list(detractors: list[dict[str, Any]], runbook_base: str, switches: Iterable[str]) -> str:
    if not detractors:
        return '<p class="empty">Nothing is pulling the score down.</p>'
    switches = set(switches)
    items = []
    for d in detractors:
        signals = _signals_of(d)
        alerts = dict.fromkeys(runbook_for(s, str(d["target"]), switches) for s in signals)
        links = " ".join(f'<a class="runbook" data-alert="{_esc(a)}" '
                         f'href="{_esc(runbook_url(runbook_base, a))}">runbook: {_esc(a)}</a>'
                         for a in alerts) if runbook_base else ""
        items.append(f'<li class="detractor" data-signal="{_esc(",".join(signals))}" '
                     f'data-target="{_esc(d["target"])}"><span class="sentence">{_esc(d["sentence"])}</span>'
                     f'{affected_line(d.get("affected"))}'
                     f'<br><span class="hint">{_esc(d["hint"])}</span> {links}</li>')
    return f'<ol id="detractor-list">{"".join(items)}</ol>'


def status_reasons(reasons: list[dict[str, Any]]) -> str:
    """Why the status is what it is: the same reasons as /api/v1/health's `status_reasons`."""
    if not reasons:
        return ""
    items = "".join(f'<li class="status-reason" data-status="{_esc(r["status"])}" '
                    f'data-rule="{_esc(r["rule"])}" data-signal="{_esc(r["signal"])}">'
                    f'<b>{_esc(r["status"])}</b>: {_esc(r["text"])}'
                    f'{_more(r)}</li>' for r in reasons)
    return f'<ul id="status-reasons">{items}</ul>'


def _more(reason: dict[str, Any]) -> str:
    extra = int(reason.get("targets") or 0) - 1
    return f" (and {extra} more)" if extra > 0 else ""


def coverage_list(notes: list[dict[str, Any]]) -> str:
    """Source instances whose mappings map to nothing (silent loss; not part of the score)."""
    if not notes:
        return ""
    items = "".join(f'<li class="coverage-note" data-source="{_esc(n["source"])}" '
                    f'data-target="{_esc(n["target"])}">{_esc(n["sentence"])}</li>' for n in notes)
    return ('<h2>Mappings that map to nothing</h2><p class="hint">Not counted in the score: data these '
            f'sources could not map is missing from it.</p><ul id="coverage-notes">{items}</ul>')


# -- serving ---------------------------------------------------------------------------------------

def _q(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _rps(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def slo_class(value: float | None, good: float | None, bad: float | None) -> str:
    """ok within the objective, warn past it, bad at or past the bad threshold."""
    if value is None or good is None or bad is None:
        return ""
    return "slo-ok" if value <= good else "slo-bad" if value >= bad else "slo-warn"


def missing_reason(engine: str, quantity: str, latency: dict[str, Any]) -> str:
    if (engine, quantity) in NOT_EXPORTED:
        return NOT_EXPORTED[(engine, quantity)]
    if not latency.get("requests_per_second"):
        return "no request finished in the window"
    return "no observation of it in the window"


def _thresholds(report: dict[str, Any]) -> dict[str, tuple[float | None, float | None]]:
    out: dict[str, tuple[float | None, float | None]] = {}
    for comp in report.get("components", []):
        for sig in comp.get("signals", []):
            if sig.get("name") in ("ttft_p95", "itl_p95"):
                out[sig["name"][:4].rstrip("_")] = (sig.get("good"), sig.get("bad"))
    return out


def serving_table(report: dict[str, Any]) -> str:
    if not report.get("serving"):
        return ""
    limits = _thresholds(report)
    notes: list[str] = []
    rows = []
    for endpoint, lat in report["serving"].items():
        engine = str(lat.get("engine", ""))
        cells = []
        for quantity, key in (("ttft", "ttft_seconds"), ("itl", "itl_seconds")):
            good, bad = limits.get(quantity, (None, None))
            values = lat.get(key) or {}
            note = ""
            if any(values.get(p) is None for p in ("p50", "p95", "p99")):
                why = missing_reason(engine, quantity, lat)
                notes.append(f'<li data-endpoint="{_esc(endpoint)}" data-quantity="{quantity}">'
                             f'{_esc(endpoint)} {quantity.upper()}: {_esc(why)}</li>')
                note = f"<sup>{len(notes)}</sup>"
            for p in ("p50", "p95", "p99"):
                value = values.get(p)
                if value is None:
                    cells.append(f'<td class="na" data-q="{quantity}-{p}">–{note}</td>')
                    continue
                klass = slo_class(value, good, bad) if p == "p95" else ""
                title = f' title="SLO {_q(good)}, bad at {_q(bad)}"' if klass else ""
                cells.append(f'<td class="{klass}" data-q="{quantity}-{p}"{title}>{_q(value)}</td>')
        rows.append(f'<tr class="endpoint" data-endpoint="{_esc(endpoint)}"><td>{_esc(endpoint)}</td>'
                    f'<td>{_esc(engine)}</td>{"".join(cells)}<td>{_rps(lat.get("requests_per_second"))}</td></tr>')
    ttft, itl = limits.get("ttft", (None, None)), limits.get("itl", (None, None))
    slo = (f'<p class="hint">p95 coloured against the SLOs: TTFT {_q(ttft[0])} (bad at {_q(ttft[1])}), '
           f'ITL {_q(itl[0])} (bad at {_q(itl[1])}).</p>') if ttft[0] is not None else ""
    footnotes = f'<ol class="footnotes" id="serving-notes">{"".join(notes)}</ol>' * bool(notes)
    return ('<h2>Serving latency</h2><table id="serving"><tr><th>endpoint</th><th>engine</th>'
            '<th>TTFT p50</th><th>p95</th><th>p99</th><th>ITL p50</th><th>p95</th><th>p99</th>'
            '<th>req/s</th></tr>'
            f'{"".join(rows)}</table>{slo}{footnotes}')


# -- inventory -------------------------------------------------------------------------------------

def _gpu_row(g: dict[str, Any]) -> str:
    healthy = g["healthy"]
    state = "healthy" if healthy else "LOST" if healthy is False else "–"
    return (f'<tr class="gpu" data-gpu="{_esc(g["gpu"])}"><td>{_esc(g["gpu"])}</td><td>{_esc(g["name"])}</td>'
            f'<td>{_esc(g["uuid"])}</td><td>{_esc(g["pci_bus_id"])}</td>'
            f'<td class="{"down" if healthy is False else "up"}">{state}</td>'
            f'<td>{_esc(g.get("mig_instances", ""))}</td></tr>')


def _port_row(p: dict[str, Any]) -> str:
    link = "RoCE" if p["link_layer"] == "Ethernet" else p["link_layer"]
    rate = "–" if p["rate_gbps"] is None else f'{p["rate_gbps"]:g} Gb/s'
    state_class = "up" if p["state"] == "ACTIVE" else "down"
    return (f'<tr class="rdma-port" data-device="{_esc(p["device"])}" data-port="{_esc(p["port"])}">'
            f'<td>{_esc(p["device"])}</td><td>{_esc(p["port"])}</td><td>{_esc(link)}</td>'
            f'<td>{_esc(p["netdev"] or "–")}</td><td class="{state_class}">{_esc(p["state"] or "–")}</td>'
            f'<td>{rate}</td><td>{_esc(p["hca_type"])}</td><td>{_esc(p["firmware_version"])}</td></tr>')


def inventory_tables(inv: dict[str, list[dict[str, Any]]] | None) -> str:
    """The GPUs, RDMA ports and interfaces this instance reads (`infrapulse.inventory`)."""
    if inv is None:
        return ""
    gpus, ports, nics = inv.get("gpus", []), inv.get("rdma_ports", []), inv.get("interfaces", [])
    if not (gpus or ports or nics):
        return '<h2>Hardware</h2><p class="empty" id="inventory-empty">No GPU or NIC seen yet.</p>'
    out = ["<h2>Hardware</h2>"]
    if gpus:
        out.append(f'<h3>GPUs ({len(gpus)})</h3><table id="gpus"><tr><th>GPU</th><th>model</th><th>UUID</th>'
                   '<th>PCI bus</th><th>state</th><th>MIG instances</th></tr>'
                   f'{"".join(map(_gpu_row, gpus))}</table>')
    if ports:
        out.append(f'<h3>RDMA ports ({len(ports)})</h3><table id="rdma-ports"><tr><th>device</th>'
                   '<th>port</th><th>link</th><th>netdev</th><th>state</th><th>rate</th><th>HCA</th><th>firmware</th></tr>'
                   f'{"".join(map(_port_row, ports))}</table>')
    if nics:
        behind = {p["netdev"]: f'{p["device"]} port {p["port"]}' for p in ports if p["netdev"]}
        rows = "".join(
            f'<tr class="nic" data-interface="{_esc(n["interface"])}"><td>{_esc(n["interface"])}</td>'
            f'<td>{n["driver_stats"]}</td><td>{_esc(behind.get(n["interface"], "–"))}</td></tr>'
            for n in nics)
        out.append(f'<h3>Network interfaces read by ethtool ({len(nics)})</h3><table id="interfaces"><tr>'
                   f'<th>interface</th><th>driver statistics</th><th>RDMA port</th></tr>{rows}</table>')
    return "".join(out)


# -- sources ---------------------------------------------------------------------------------------

def _detail(st: dict[str, Any]) -> str:
    """The message and skipped items of a source; folded when long so the table stays readable."""
    skipped = [str(s) for s in st.get("skipped") or []]
    # A partial source's message is its first skipped items joined: list them one by one instead.
    items = skipped if st["up"] and skipped else [str(st["message"])] if st["message"] else []
    if not items:
        return ""
    if len(items) == 1 and len(items[0]) <= DETAIL_FOLD_CHARS:
        return _esc(items[0])
    first = items[0] if len(items[0]) <= DETAIL_FOLD_CHARS else items[0][:DETAIL_FOLD_CHARS].rstrip() + "…"
    more = f" (+{len(items) - 1} more)" if len(items) > 1 else ""
    body = "".join(f"<li>{_esc(i)}</li>" for i in items)
    return f'<details class="fold"><summary>{_esc(first)}{more}</summary><ul>{body}</ul></details>'


def source_table(sources: list[dict[str, Any]], now: float) -> str:
    rows = []
    for st in sources:
        age = f"{now - st['last_success']:.0f}s ago" if st["last_success"] else "never"
        state = "up" if st["up"] else "down"
        rows.append(f'<tr class="source {state}" data-source="{_esc(st["source"])}" '
                    f'data-target="{_esc(st["target"])}"><td>{_esc(st["source"])}</td>'
                    f'<td>{_esc(st["target"])}</td><td class="state">{state}</td>'
                    f'<td>{_esc(st["reason"])}</td><td class="detail">{_detail(st)}</td><td>{age}</td></tr>')
    body = "".join(rows) or '<tr><td colspan="6">no sources running</td></tr>'
    return ('<table id="sources"><tr><th>source</th><th>target</th><th>state</th><th>reason</th>'
            f'<th>last error / detail</th><th>last success</th></tr>{body}</table>')


# -- demo scenarios --------------------------------------------------------------------------------

def scenario_toggles(board: dict[str, Any] | None) -> str:
    """Buttons that switch the demo's scenarios (only the demo daemon passes a board)."""
    if board is None:
        return ""
    active = set(board.get("active", []))
    items = "".join(
        f'<li><button type="button" class="scenario{" on" if name in active else ""}" '
        f'data-scenario="{_esc(name)}" '
        f'data-active="{"true" if name in active else "false"}">{"stop" if name in active else "start"} '
        f'{_esc(name)}</button> <span class="hint">{_esc(desc)}</span></li>'
        for name, desc in sorted(board.get("known", {}).items()))
    return ('<h2>Demo scenarios</h2><p class="hint">This daemon runs on simulated hardware (infrapulse '
            f'demo): start an anomaly and watch the score, the detractors and the alerts follow.</p>'
            f'<ul id="scenarios">{items}</ul><script src="{SCRIPT}" defer></script>')


def updated_at(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp).astimezone()
    return (f'<time id="updated" datetime="{moment.isoformat(timespec="seconds")}">'
            f'{moment.strftime("%Y-%m-%d %H:%M:%S %Z")}</time>')


def render(report: dict[str, Any], sources: list[dict[str, Any]], history: list[tuple[float, float | None]],
           span: float, hostname: str, role: str, links: Sequence[tuple[str, str]] = (), *,
           bands: StatusThresholdsSettings | None = None,
           inventory: dict[str, list[dict[str, Any]]] | None = None,
           scenarios: Callable[[], dict[str, Any]] | dict[str, Any] | None = None, runbook_base: str = "",
           now: float | None = None) -> str:
    now = time.time() if now is None else now
    bands = bands or DEFAULT_BANDS
    levels = {"degraded": bands.degraded, "critical": bands.critical}  # the sparkline's dashed lines
    score, status = report["score"], report["status"]
    capped = ""
    if report["capped_by"]:
        capped = (f'<p id="capped">Capped at {report["cap"]:g} while critical signals fire: '
                  f'{_esc(", ".join(report["capped_by"]))}</p>')
    extra_links = "".join(f' · <a href="{_esc(href)}">{_esc(text)}</a>' for href, text in links)
    switches = {s["target"] for s in sources if s["source"] == "gnmi"}
    board = scenarios() if callable(scenarios) else scenarios
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>infrapulse {_fmt(score)} {_esc(status)} – {_esc(hostname)}</title>
<link rel="stylesheet" href="{STYLESHEET}"></head>
<body>
<h1>infrapulse health – {_esc(hostname)}</h1>
<p class="meta">updated {updated_at(report.get("timestamp") or now)} · role {_esc(role)}
· version {_esc(__version__)}
· coverage <span id="coverage">{report["coverage"] * 100:.0f}%</span> · window {report["window_seconds"]:g}s
· <a href="/api/v1/health">/api/v1/health</a> · <a href="/metrics">/metrics</a>
· <a href="/api/v1/sources">/api/v1/sources</a>{extra_links}</p>
<div class="top">
<div><div id="score" data-score="{_fmt(score)}" data-status="{_esc(status)}">{gauge_svg(score, status)}</div>
{capped}{status_reasons(report.get("status_reasons", []))}</div>
<div><h2>Components</h2><div id="components">{component_bars(report["components"], bands)}</div></div>
</div>
<h2>Score, last {span / 60:.0f} minutes</h2>{sparkline_svg(history, now, span, levels)}
<h2>Top detractors</h2>
<div id="detractors">{detractor_list(report["detractors"], runbook_base, switches)}</div>
{serving_table(report)}
{coverage_list(report.get("coverage_notes", []))}
{scenario_toggles(board)}
{inventory_tables(inventory)}
<h2>Sources</h2>{source_table(sources, now)}
</body></html>"""
