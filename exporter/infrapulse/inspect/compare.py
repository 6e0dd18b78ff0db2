"""Window statistics and ranking: each series' value in the window before the drop against the
window since, and how far it moved.

A gauge is compared by its mean in each window; a counter by its rate (increases summed point
to point, so a counter reset counts from zero instead of going negative). Movement is
`log2((since + floor) / (before + floor))` in the series' worse direction: 1 is a doubling past
the noise floor, and a series moved when that is at least MOVED (and, for a health signal, its
value since the drop is past the signal's good threshold).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .recorder import Key, Recorder
from .sample import COUNTER, Meta

MOVED = 1.0
ARRIVALS_GREW = math.log2(1.5)  # arrivals x1.5 or more: the load grew ...
# ... and by more than count noise: a few requests a second over seconds-long windows are tens of
# requests, and a flat Poisson load read x1.5 in ~12% of inspections at 3 requests/s (0.15% past 3σ)
ARRIVALS_SIGMAS = 3.0


@dataclass(frozen=True)
class Windows:
    before: tuple[float, float]
    since: tuple[float, float]
    crossing: float  # when the score crossed (or the request came, for an on-demand one)
    onset: float  # when the score started to fall: the before window ends here


@dataclass(frozen=True)
class Finding:
    meta: Meta
    before: float | None
    since: float | None
    change: float  # log2 movement in the worse direction (negative: it improved)
    # Counted events (arrivals): how far `since` is above `before` in standard deviations of
    # Poisson count noise over the two windows (`excess_sigmas`); None for other series.
    sigmas: float | None = None

    @property
    def moved(self) -> bool:
        if self.since is None or self.change < MOVED:
            return False
        good = self.meta.good
        if good is None:
            return True
        return self.since > good if self.meta.worse > 0 else self.since < good

    @property
    def factor(self) -> float | None:
        """since / before, for the sentence ("waiting x6"); None when before is 0."""
        if self.before is None or self.since is None or self.before == 0:
            return None
        return self.since / self.before

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "target": self.meta.target, "metric": self.meta.metric, "unit": self.meta.unit,
            "before": _round(self.before), "since": _round(self.since),
            "change": round(self.change, 3), "moved": self.moved, "note": self.meta.note}
        if self.sigmas is not None:
            out["sigmas"] = round(self.sigmas, 2)
        return out


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")


def onset(recorder: Recorder, crossing: float, before: float, component: str | None = None) -> float:
    """When the watched score (the overall one, or `component`'s) started to fall: the latest
    pass at or before `crossing`, within `before`, whose value was within a point of the highest
    in that span. Without history, the crossing itself."""
    points = [(p.timestamp, p.score if component is None else p.components.get(component))
              for p in recorder.scores if crossing - before <= p.timestamp <= crossing]
    values = [v for _, v in points if v is not None]
    if not values:
        return crossing
    high = max(values)
    latest = crossing
    for ts, score in points:
        if score is not None and score >= high - 1.0:
            latest = ts
    return latest


def windows(recorder: Recorder, crossing: float, before: float, since: float,
            component: str | None = None) -> Windows:
    start = onset(recorder, crossing, before, component)
    return Windows((start - before, start), (crossing, crossing + since), crossing, start)


def _points(ring: Sequence[tuple[float, float]], start: float, end: float,
            baseline: bool) -> list[tuple[float, float]]:
    inside = [p for p in ring if start <= p[0] <= end]
    if baseline:  # a counter's rate needs the point just before the window
        earlier = [p for p in ring if p[0] < start]
        if earlier:
            inside.insert(0, earlier[-1])
    return inside


def gauge_mean(points: list[tuple[float, float]]) -> float | None:
    return sum(v for _, v in points) / len(points) if points else None


def counter_rate(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    increase = 0.0
    for (_, a), (_, b) in zip(points, points[1:]):
        increase += b - a if b >= a else b  # a reset: the counter started again from zero
    return increase / (points[-1][0] - points[0][0])


def span(recorder: Recorder, key: Key, window: tuple[float, float]) -> float:
    """The seconds a counter's rate over `window` is measured across (`value`'s points): 0 when
    it has no rate."""
    ring = recorder.points.get(key)
    points = _points(ring, window[0], window[1], True) if ring is not None else []
    return points[-1][0] - points[0][0] if len(points) >= 2 else 0.0


def excess_sigmas(before: float, before_seconds: float, since: float, since_seconds: float) -> float:
    """How far the rate `since` is above `before`, in standard deviations of the difference of
    two Poisson count rates at their pooled rate (counted over `before_seconds` and
    `since_seconds`): 0 when either window has no length or nothing was counted."""
    if before_seconds <= 0 or since_seconds <= 0:
        return 0.0
    pooled = (before * before_seconds + since * since_seconds) / (before_seconds + since_seconds)
    if pooled <= 0:
        return 0.0
    return (since - before) / math.sqrt(pooled * (1 / before_seconds + 1 / since_seconds))


def value(recorder: Recorder, key: Key, window: tuple[float, float]) -> float | None:
    ring = recorder.points.get(key)
    meta = recorder.meta.get(key)
    if ring is None or meta is None:
        return None
    counter = meta.kind == COUNTER
    points = _points(ring, window[0], window[1], counter)
    return counter_rate(points) if counter else gauge_mean(points)


def growth(recorder: Recorder, key: Key, window: tuple[float, float]) -> float | None:
    """How fast a gauge grew over `window` (a queue filling), per second: from the point just
    before the window to the last inside it, over the time between them, as `counter_rate`
    measures a counter over the same recorder passes (so the two add up)."""
    ring = recorder.points.get(key)
    if ring is None:
        return None
    points = _points(ring, window[0], window[1], True)
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])


def movement(meta: Meta, before: float | None, since: float | None) -> float:
    if since is None:
        return 0.0
    b = before if before is not None else 0.0
    change = math.log2((max(since, 0.0) + meta.floor) / (max(b, 0.0) + meta.floor))
    return change * meta.worse


def finding(meta: Meta, before: float | None, since: float | None) -> Finding:
    return Finding(meta, before, since, movement(meta, before, since))


def rank(findings: list[Finding]) -> list[Finding]:
    """Most moved first; ties by metric then target, so a report is stable."""
    return sorted(findings, key=lambda f: (-f.change, f.meta.metric, f.meta.target))


def compare(recorder: Recorder, win: Windows, layer: str) -> list[Finding]:
    out = []
    for key, meta in recorder.meta.items():
        if meta.layer != layer or meta.metric.startswith("queue_time_"):
            continue
        out.append(finding(meta, value(recorder, key, win.before), value(recorder, key, win.since)))
    return rank(out)
