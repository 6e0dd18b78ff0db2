"""Capped exponential backoff with full jitter, shared by every source that retries."""

from __future__ import annotations

import random


class Backoff:
    """delay() grows initial * factor**n up to `cap`, jittered; reset() after a success.

    Full jitter (a uniform draw between half the step and the step) keeps many daemons that lost the
    same switch at the same moment from reconnecting in lockstep.
    """

    def __init__(self, initial: float = 1.0, cap: float = 60.0, factor: float = 2.0,
                 rng: random.Random | None = None) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.failures = 0
        self._rng = rng or random.Random()

    def delay(self) -> float:
        step = min(self.cap, self.initial * self.factor ** self.failures)
        self.failures += 1
        return self._rng.uniform(step / 2, step)

    def reset(self) -> None:
        self.failures = 0
