"""The status page's score-over-time chart: inline SVG with a clock-time axis and value labels.

The y axis is the score (0, 50, 100, and the daemon's own degraded/critical bands as dashed
lines), the x axis wall-clock time at round steps, and the newest and the lowest point carry
their value, so a screenshot answers "how bad, since when" on its own. Gaps (no score) break
the line instead of being drawn as 0 or 100.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

WIDTH, HEIGHT = 600, 150
LEFT, RIGHT, TOP, BOTTOM = 34, 46, 10, 24  # margins around the plot area
NICE_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
BAND_COLORS = {"degraded": "#ef6c00", "critical": "#c62828"}


def tick_step(span: float, ticks: int = 5) -> int:
    """The smallest round step (1 min .. 1 day) that puts at most `ticks` ticks on `span`."""
    return next((step for step in NICE_STEPS if span / step <= ticks), NICE_STEPS[-1])


def clock(ts: float) -> str:
    return time.strftime("%H:%M", time.localtime(ts))


def sparkline_svg(points: Iterable[tuple[float, float | None]], now: float, span: float,
                  bands: dict[str, float] | None = None) -> str:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(ts: float) -> float:
        return LEFT + (ts - (now - span)) / span * plot_w

    def y(score: float) -> float:
        return TOP + plot_h - max(0.0, min(score, 100.0)) / 100.0 * plot_h

    segments: list[list[tuple[float, float]]] = [[]]
    for ts, score in points:
        if ts < now - span or ts > now:
            continue
        if score is None:
            segments.append([])
        else:
            segments[-1].append((ts, score))
    known = [p for seg in segments for p in seg]
    parts = [f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" '
             'stroke="#e0e0e0"/>']
    for value in (0, 50, 100):
        parts.append(f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{LEFT + plot_w}" y2="{y(value):.1f}" '
                     f'stroke="#eeeeee"/><text class="ytick" x="{LEFT - 4}" y="{y(value) + 4:.1f}" '
                     f'text-anchor="end">{value}</text>')
    for name, level in (bands or {}).items():
        parts.append(f'<line class="band" data-band="{name}" x1="{LEFT}" y1="{y(level):.1f}" '
                     f'x2="{LEFT + plot_w}" y2="{y(level):.1f}" stroke="{BAND_COLORS.get(name, "#9e9e9e")}" '
                     f'stroke-dasharray="4 3"/>')
    step = tick_step(span)
    first = (int(now - span) // step + 1) * step
    for ts in range(first, int(now) + 1, step):
        if x(ts) > LEFT + plot_w - 30:
            continue  # leave room for "now"
        parts.append(f'<line x1="{x(ts):.1f}" y1="{TOP + plot_h}" x2="{x(ts):.1f}" y2="{TOP + plot_h + 4}" '
                     f'stroke="#9e9e9e"/><text class="xtick" x="{x(ts):.1f}" y="{HEIGHT - 6}" '
                     f'text-anchor="middle">{clock(ts)}</text>')
    parts.append(f'<text class="xtick" x="{LEFT + plot_w:.1f}" y="{HEIGHT - 6}" text-anchor="end">now</text>')
    for seg in segments:
        if seg:
            coords = " ".join(f"{x(ts):.1f},{y(s):.1f}" for ts, s in seg)
            parts.append(f'<polyline points="{coords}" fill="none" stroke="#1565c0" stroke-width="2"/>')
    latest = low = None
    if known:
        latest = known[-1]
        low = min(known, key=lambda p: (p[1], -p[0]))
        parts.append(f'<circle cx="{x(latest[0]):.1f}" cy="{y(latest[1]):.1f}" r="3" fill="#1565c0"/>'
                     f'<text class="value" id="spark-latest" x="{x(latest[0]) + 6:.1f}" '
                     f'y="{y(latest[1]) + 4:.1f}">{latest[1]:.0f}</text>')
        if low[1] < latest[1]:
            anchor = "start" if x(low[0]) < LEFT + plot_w / 2 else "end"
            parts.append(f'<circle cx="{x(low[0]):.1f}" cy="{y(low[1]):.1f}" r="3" fill="#c62828"/>'
                         f'<text class="value" id="spark-min" x="{x(low[0]):.1f}" '
                         f'y="{min(y(low[1]) + 14, TOP + plot_h - 2):.1f}" text-anchor="{anchor}">'
                         f'min {low[1]:.0f} at {clock(low[0])}</text>')
    else:
        parts.append(f'<text class="empty" x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" '
                     f'text-anchor="middle">no score yet</text>')
    attrs = (f'data-points="{len(known)}" data-span="{span:g}" data-step="{step}"'
             + (f' data-latest="{latest[1]:.0f}"' if latest else "")
             + (f' data-min="{low[1]:.0f}"' if low else ""))
    return (f'<svg id="sparkline" {attrs} width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="score over the last {span / 60:.0f} '
            f'minutes">{"".join(parts)}</svg>')
