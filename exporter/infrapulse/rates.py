"""Short-window counter rates for the health score: reset-, saturation- and wrap-aware.

Prometheus computes rates for dashboards; the daemon needs its own for the score. Counter
readings are kept per series in a small ring covering the window. Three things make a naive
`(last - first) / dt` wrong on NIC and switch counters:

* reset: the counter restarted (driver reload, engine restart) -> the new value is the increase
  since the reset, exactly as Prometheus' rate() treats it;
* wrap: a 32-bit hardware counter (mlx5 Q-counters) passed 2^32 -> add the modulus back;
* saturation: legacy IB PMA error counters stop at their maximum -> the increase is unknown
  beyond that point, so the rate is reported as a lower bound and flagged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Hashable
from typing import NamedTuple


class Rate(NamedTuple):
    """A counter's windowed increase. A tuple, not a dataclass: a fabric's health pass makes one
    per switch queue and port (tens of thousands), and a tuple is built several times faster."""

    per_second: float
    increase: float
    seconds: float
    saturated: bool = False  # the counter sits at its maximum: the true rate may be higher
    resets: int = 0


def counter_increase(previous: float, current: float, width_bits: int | None = None,
                     saturates: bool = False) -> tuple[float, bool]:
    """Increase between two readings of one counter, and whether it may be understated.

    `width_bits` is the hardware width where known (32 for mlx5 Q-counters); `saturates`
    means the counter sticks at 2^width-1 instead of wrapping (legacy PMA counters).
    """
    if current >= previous:
        delta = current - previous
        at_max = saturates and width_bits is not None and current >= 2**width_bits - 1
        return delta, at_max
    if width_bits is not None and not saturates:
        modulus = 2**width_bits
        # A wrap leaves the counter small again; a huge drop from near the top is a wrap,
        # anything else is a reset.
        if previous >= modulus / 2 and previous < modulus:
            return current + modulus - previous, False
    return current, False  # reset: count from zero, as Prometheus does


class CounterHistory:
    """Readings of many counter series over a sliding window."""

    def __init__(self, window: float, max_points: int = 64) -> None:
        self.window = window
        self.max_points = max_points
        self._points: dict[Hashable, deque[tuple[float, float]]] = {}

    def observe(self, key: Hashable, timestamp: float, value: float) -> None:
        ring = self._points.get(key)
        if ring is None:
            ring = self._points[key] = deque(maxlen=self.max_points)
        if ring and timestamp <= ring[-1][0]:
            if timestamp == ring[-1][0]:
                ring[-1] = (timestamp, value)
            return
        ring.append((timestamp, value))
        horizon = timestamp - self.window
        # Keep one point at or before the horizon so the window is fully covered.
        while len(ring) > 2 and ring[1][0] <= horizon:
            ring.popleft()

    def rate(self, key: Hashable, width_bits: int | None = None, saturates: bool = False) -> Rate | None:
        ring = self._points.get(key)
        if ring is None or len(ring) < 2:
            return None
        seconds = ring[-1][0] - ring[0][0]
        if seconds <= 0:
            return None
        values = [value for _, value in ring]
        increase, prev = 0.0, values[0]
        for cur in values[1:]:  # the usual window: the counter only went up, no call per pair
            if not cur >= prev:  # a reset, a wrap or a NaN: the loop below, with its rules
                break
            increase += cur - prev
            prev = cur
        else:
            saturated = saturates and width_bits is not None and prev >= 2**width_bits - 1
            return Rate(increase / seconds, increase, seconds, saturated, 0)
        increase = 0.0
        saturated = False
        resets = 0
        for prev, cur in zip(values, values[1:]):
            delta, at_max = counter_increase(prev, cur, width_bits, saturates)
            if cur < prev and delta == cur:
                resets += 1
            increase += delta
            saturated = saturated or at_max
        return Rate(increase / seconds, increase, seconds, saturated, resets)

    def forget_missing(self, live_keys: Collection[Hashable]) -> None:
        """Drop the history of series that no longer exist, so memory follows the live set."""
        for key in [k for k in self._points if k not in live_keys]:
            del self._points[key]

    def __len__(self) -> int:
        return len(self._points)
