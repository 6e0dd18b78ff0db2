"""Which anomalies are active right now, shared by every simulator of one demo.

Simulators ask `board.active("pfc-storm")` (and `board.elapsed(...)` for ramps) each time they
advance their counters. The demo turns scenarios on from `--scenario` and over HTTP
(`POST /api/v1/scenarios {"name": ..., "active": true, "duration": 60}`), so end-to-end tests
can start an anomaly and watch the alert resolve after it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# How long one PFC pause frame holds a priority, on average, in a real capture: a ConnectX-6 Dx
# counted 771,103,810 us of tx_global_pause_duration over 5,745,042 pause frames
# (shared/real/ethtool/mlx5-cx6dx-bpf2024-k5.15.txt): 134 us. The NIC and switch simulators
# derive a healthy port's pause time from its pause frames with it.
PAUSE_US_PER_FRAME = 134
# Pause frames per pause episode (XOFF until XON): 12,667 frames in 5,418 transitions on a real
# ConnectX-4 Lx with PFC (shared/real/ethtool/mlx5-cx4lx-pfc-blog-vm00.txt).
PAUSE_FRAMES_PER_EPISODE = 2.3


class ScenarioBoard:
    def __init__(self, initial: set[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started: dict[str, float] = {}
        self._until: dict[str, float | None] = {}
        # Where each scenario strikes, as (node, port or "gpuN"), recorded by the simulators that
        # inject it (place()): the serving engines follow it (fault_coupling.py).
        self._sites: dict[str, set[tuple[str, str]]] = {}
        for name in initial or ():
            self.activate(name)

    def activate(self, name: str, duration: float | None = None) -> None:
        now = self._clock()
        if not self.active(name):
            self._started[name] = now
        self._until[name] = now + duration if duration else None

    def deactivate(self, name: str) -> None:
        self._started.pop(name, None)
        self._until.pop(name, None)

    def active(self, name: str) -> bool:
        if name not in self._started:
            return False
        until = self._until.get(name)
        if until is not None and self._clock() >= until:
            self.deactivate(name)
            return False
        return True

    def elapsed(self, name: str) -> float:
        """Seconds since the scenario started (0 when inactive): lets simulators ramp up."""
        return self._clock() - self._started[name] if self.active(name) else 0.0

    def place(self, name: str, node: str, where: str) -> None:
        """Record that scenario `name` hits `where` (a netdev, or "gpuN") on `node`."""
        self._sites.setdefault(name, set()).add((node, where))

    def sites(self, name: str) -> frozenset[tuple[str, str]]:
        return frozenset(self._sites.get(name, ()))

    def names(self) -> list[str]:
        return sorted(n for n in list(self._started) if self.active(n))
