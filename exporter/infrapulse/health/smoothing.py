"""Anti-flap for published scores: drops show at once, recoveries ease in, wiggles are ignored.

A health score that jumps 85 -> 78 -> 86 every interval trains people to ignore it. Two knobs:

* `recovery` (seconds): a rising score approaches the raw score exponentially with this time
  constant. A falling score is published immediately — a problem is never hidden or delayed.
* `hysteresis` (points): a change smaller than this is not published, unless the status word
  (healthy / degraded / critical) would change.
"""

from __future__ import annotations

import math
from collections.abc import Hashable


class Smoother:
    def __init__(self, recovery_seconds: float = 0.0, hysteresis: float = 0.0) -> None:
        self.recovery = recovery_seconds
        self.hysteresis = hysteresis
        self._state: dict[Hashable, tuple[float, float]] = {}

    def apply(self, key: Hashable, raw: float | None, now: float, force: bool = False) -> float | None:
        """The score to publish for `key`; `force` publishes `raw` as-is (a status change)."""
        if raw is None:
            self._state.pop(key, None)
            return None
        previous = self._state.get(key)
        if previous is None or force:
            self._state[key] = (now, raw)
            return raw
        then, published = previous
        if raw <= published or self.recovery <= 0:
            target = raw
        else:
            step = 1.0 - math.exp(-max(now - then, 0.0) / self.recovery)
            target = published + (raw - published) * step
        if abs(target - published) < self.hysteresis:
            # Keep the published value but let time pass, so the recovery still progresses.
            self._state[key] = (now, published)
            return published
        self._state[key] = (now, target)
        return target
