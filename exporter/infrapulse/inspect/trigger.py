"""When an automatic inspection starts: a watched score crossing below its threshold.

Each watched score (the overall one, and every component named in `component_below`) is armed
while at or above its threshold plus `rearm_margin`; a pass below the threshold while armed is
a crossing, which disarms it. A crossing starts an inspection only when none is pending or
running and the last automatic one started at least `min_interval` ago; otherwise it is
counted as suppressed (busy, rate_limited), so a flapping score cannot start a storm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OVERALL = "score"


@dataclass(frozen=True)
class Crossing:
    watched: str  # "score" or a component name
    threshold: float
    value: float
    timestamp: float

    def as_json(self) -> dict[str, Any]:
        return {"watched": self.watched, "threshold": self.threshold, "value": self.value,
                "timestamp": self.timestamp}


@dataclass
class Trigger:
    score_below: float
    component_below: dict[str, float]
    rearm_margin: float
    min_interval: float
    armed: dict[str, bool] = field(default_factory=dict)
    last_start: float = float("-inf")
    suppressed: dict[str, int] = field(default_factory=dict)

    def thresholds(self) -> dict[str, float]:
        out = dict(self.component_below)
        if self.score_below > 0:
            out[OVERALL] = self.score_below
        return out

    def crossings(self, timestamp: float, score: float | None,
                  components: dict[str, float]) -> list[Crossing]:
        """Update the arming with one pass; the crossings it makes (most severe first)."""
        found = []
        for watched, threshold in self.thresholds().items():
            value = score if watched == OVERALL else components.get(watched)
            if value is None:  # unknown is neither a drop nor a recovery
                continue
            if value >= threshold + self.rearm_margin or (self.rearm_margin == 0 and value >= threshold):
                self.armed[watched] = True
            elif value < threshold:
                # First sight of a score already low: not a crossing (a restart is not a drop).
                if self.armed.get(watched, False):
                    found.append(Crossing(watched, threshold, value, timestamp))
                self.armed[watched] = False
        return sorted(found, key=lambda c: (c.value - c.threshold, c.watched))

    def admit(self, now: float, busy: bool) -> str:
        """"" to start an inspection now, else why not (counted)."""
        reason = "busy" if busy else "rate_limited" if now - self.last_start < self.min_interval else ""
        if reason:
            self.suppressed[reason] = self.suppressed.get(reason, 0) + 1
        else:
            self.last_start = now
        return reason


class Refused(Exception):
    """An on-demand inspection that cannot start now: `status` 409 (busy) or 429 (too soon)."""

    def __init__(self, status: int, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
