"""How a network or GPU fault reaches the simulated serving engines on the node it hits.

Tensor-parallel collectives and KV-cache transfers ride the node's RoCE ports, so a fault on
those ports slows decoding (ITL) and prefill (TTFT) of every engine on that node, while the
clients keep sending requests at the same rate: arrivals stay flat and the queue grows only as
service slows. That is what lets a verdict tell "the fabric slowed serving" from "the load grew"
(queue-buildup, ttft-surge: arrivals up).

Where a fault is: each simulator that injects one records its site on the scenario board
(`board.place(name, node, where)`): the node simulator its victim port on the demo host, the
switch simulator the node cabled to the faulty switch port, the GPU simulator the GPU of the
`xid` scenario. An engine on another node is not slowed.

Factors grow with the fault's intensity, which ramps as the node simulator's counters do
(node.py): 1 + (peak - 1) * intensity. The peaks keep the demo engines (batch limits,
arrival rates in serving_engines.DEMO_ENGINES) below saturation: a slower decode keeps more
requests in the batch, so ITL rises by more than the factor (x2.4 at the peak of a PFC storm
gives a vLLM rank ~3.9x its mean ITL), TTFT p95 ~2.5x, and the waiting queue stays short — a
network fault pages the NOC, not the serving team's queue alert.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .scenarios import ScenarioBoard


@dataclass(frozen=True)
class Slowdown:
    """Multipliers for one engine: decode time per token, and prefill time (TTFT)."""

    itl: float = 1.0
    prefill: float = 1.0


@dataclass(frozen=True)
class NetworkEffect:
    peak: Slowdown  # at full intensity
    intensity: Callable[[float], float]  # seconds since the fault started -> 0..1


def _ramp(start: float, seconds: float) -> Callable[[float], float]:
    return lambda elapsed: min(1.0, start + elapsed / seconds)


def _flapping(elapsed: float) -> float:
    """link-flap: the port is down 2 s of every 10 s (node.py); collectives stall while it is
    down and run on the remaining rails, slower, while it retrains."""
    return 1.0 if elapsed % 10 < 2 else 0.3


# The node simulator's ramps (node.py): pfc-storm 0.3 -> 1 over 14 s, ecn-spike 0.2 -> 1 over
# 24 s, rdma-retrans 0.3 -> 1 over 14 s. ECN and retransmissions cost throughput but far less
# than a port paused most of the time, so their peaks stay below the ITL SLO (0.05 s) on the
# demo engines: the congestion signal, not the serving one, leads the verdict.
NETWORK_EFFECTS: dict[str, NetworkEffect] = {
    "pfc-storm": NetworkEffect(Slowdown(itl=2.4, prefill=3.0), _ramp(0.3, 20)),
    "link-flap": NetworkEffect(Slowdown(itl=2.4, prefill=3.0), _flapping),
    "ecn-spike": NetworkEffect(Slowdown(itl=1.5, prefill=2.0), _ramp(0.2, 30)),
    "rdma-retrans": NetworkEffect(Slowdown(itl=1.4, prefill=1.5), _ramp(0.3, 20)),
}
GPU_FAULTS = ("xid",)  # the GPU is lost while active (simulate/data/gpus.yaml `scenarios.xid`)


def network_slowdown(board: ScenarioBoard | None, node: str) -> Slowdown:
    """The slowdown of engines on `node` now: the worst active network fault placed on it (two
    faults on the same ports do not compound: the slowest collective sets the pace)."""
    itl, prefill = 1.0, 1.0
    if board is None:
        return Slowdown()
    for name, effect in NETWORK_EFFECTS.items():
        if not board.active(name) or not any(site_node == node for site_node, _ in board.sites(name)):
            continue
        level = effect.intensity(board.elapsed(name))
        itl = max(itl, 1.0 + (effect.peak.itl - 1.0) * level)
        prefill = max(prefill, 1.0 + (effect.peak.prefill - 1.0) * level)
    return Slowdown(itl, prefill)


def gpu_lost(board: ScenarioBoard | None, node: str, gpu: int) -> bool:
    """Whether a GPU fault scenario has taken GPU `gpu` of `node` away."""
    if board is None:
        return False
    return any(board.active(name) and (node, f"gpu{gpu}") in board.sites(name) for name in GPU_FAULTS)
