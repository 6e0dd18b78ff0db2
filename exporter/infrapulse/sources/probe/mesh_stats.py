"""What the mesh keeps per peer and per peer group between two publications."""

from __future__ import annotations

import bisect
import collections
import math
from dataclasses import dataclass, field

from ...store import Histogram
from . import mesh_families as fam

MAX_SAMPLES = 4096  # RTT samples kept per peer for the p99 window


@dataclass
class PeerStats:
    sent: int = 0
    lost: int = 0
    untimed: int = 0  # answered, but a send was held up (ours, or the peer's reply): no RTT
    samples: collections.deque[tuple[float, float]] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_SAMPLES))  # (monotonic time, rtt s)

    def p99(self, now: float, window: float, min_samples: int) -> float | None:
        while self.samples and self.samples[0][0] < now - window:
            self.samples.popleft()
        if len(self.samples) < min_samples:
            return None
        rtts = sorted(rtt for _, rtt in self.samples)
        return rtts[max(math.ceil(0.99 * len(rtts)) - 1, 0)]


@dataclass
class RttHistogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(fam.RTT_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, rtt: float) -> None:
        self.counts[bisect.bisect_left(fam.RTT_BUCKETS, rtt)] += 1  # the first bound >= rtt (le)
        self.total += rtt

    def value(self) -> Histogram:
        cumulative, buckets = 0, []
        for bound, count in zip((*fam.RTT_BUCKETS, math.inf), self.counts):
            cumulative += count
            buckets.append((bound, float(cumulative)))
        return Histogram(tuple(buckets), self.total, float(cumulative))
