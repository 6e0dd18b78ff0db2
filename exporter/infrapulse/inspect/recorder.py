"""The bounded memory of an inspection: per series, its recent (timestamp, value) points, and
the score and component scores of every pass.

Memory follows the series count, not the pass rate: at most MAX_POINTS points per series over
`retention` seconds, and at most `max_series` series (the rest of a pass is counted, not kept).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .sample import Meta, Sampled

MAX_POINTS = 60  # ~100 bytes a point: 2000 series x 60 points ~ 12 MB at most
MAX_SCORES = 4000  # passes of score history (a 0.05 s interval over the longest retention)

Key = tuple[str, str, str]


@dataclass(frozen=True)
class ScorePoint:
    timestamp: float
    score: float | None
    components: dict[str, float]


class Recorder:
    def __init__(self, retention: float, max_series: int) -> None:
        self.retention = retention
        self.max_series = max_series
        self.points: dict[Key, deque[tuple[float, float]]] = {}
        self.meta: dict[Key, Meta] = {}
        self.scores: deque[ScorePoint] = deque(maxlen=MAX_SCORES)
        self.dropped_last_pass = 0
        self._last = float("-inf")

    @property
    def spacing(self) -> float:
        return self.retention / MAX_POINTS

    def observe(self, timestamp: float, samples: list[Sampled], score: float | None,
                components: dict[str, float]) -> int:
        """Keep one pass; returns how many series the max_series bound refused."""
        self.scores.append(ScorePoint(timestamp, score, dict(components)))
        self._trim_scores(timestamp)
        if timestamp - self._last < self.spacing:
            return 0
        self._last = timestamp
        dropped = 0
        for meta, value in samples:
            key = meta.key
            ring = self.points.get(key)
            if ring is None:
                if len(self.points) >= self.max_series:
                    dropped += 1
                    continue
                ring = self.points[key] = deque(maxlen=MAX_POINTS + 2)
            self.meta[key] = meta
            ring.append((timestamp, value))
        self._forget_old(timestamp)
        self.dropped_last_pass = dropped
        return dropped

    def _trim_scores(self, now: float) -> None:
        while self.scores and self.scores[0].timestamp < now - self.retention:
            self.scores.popleft()

    def _forget_old(self, now: float) -> None:
        """Series whose newest point left the retention are gone (a GPU removed, a port down)."""
        horizon = now - self.retention
        for key in [k for k, ring in self.points.items() if ring[-1][0] < horizon]:
            del self.points[key]
            del self.meta[key]
        for ring in self.points.values():
            while ring and ring[0][0] < horizon:
                ring.popleft()

    def series_count(self) -> int:
        return len(self.points)
