"""From the three layers' ranked findings to one verdict: a layer, a cause and a target.

Queue -> compute -> network is the order the report reads in, not an order of blame:

* a GPU event (XID, lost GPU, uncorrectable ECC, throttling) that moved -> compute, that GPU;
* else the node's network moved (its NIC/RDMA ports, the switch ports facing it, its probes)
  -> network, the port that moved most (whatever the queue did: a queue growing with arrivals
  flat while the fabric pauses is the network's);
* else the queue grew: with arrivals up (x1.5 or more, and past count noise) -> the engine is
  saturated; with arrivals flat -> the engine itself slowed; either way that endpoint;
* else something else on the GPUs moved (clocks, utilisation) -> compute;
* else nothing moved past its noise floor: "none".
"""

from __future__ import annotations

from dataclasses import dataclass

from .compare import ARRIVALS_GREW, ARRIVALS_SIGMAS, Finding

# Queue findings that are pressure (a growing queue, slower tokens), not load or throughput.
QUEUE_PRESSURE = frozenset({"waiting", "queue_time", "queue_ratio", "ttft_p95", "itl_p95", "kv_cache_usage",
                            "preemption_rate", "request_error_ratio", "endpoint_down"})
CAUSES = ("compute", "network", "engine_saturated", "engine_slow", "none")


@dataclass(frozen=True)
class Verdict:
    layer: str  # queue, compute, network or none
    cause: str  # one of CAUSES
    target: str  # what it names: an endpoint, a GPU, a port ("" for none)
    text: str  # "queue: waiting x6 with arrivals x5; compute: normal; network: normal -> ..."

    def as_json(self) -> dict[str, str]:
        return {"layer": self.layer, "cause": self.cause, "target": self.target, "text": self.text}


def _x(f: Finding) -> str:
    factor = f.factor
    if factor is None:
        return f"{f.meta.metric} {_num(f.before)} -> {_num(f.since)}"
    return f"{f.meta.metric} x{factor:,.0f}" if factor >= 100 else f"{f.meta.metric} x{factor:.3g}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _moved(findings: list[Finding], metrics: frozenset[str] | None = None) -> list[Finding]:
    return [f for f in findings if f.moved and (metrics is None or f.meta.metric in metrics)]


def arrivals_of(queue: list[Finding], target: str) -> Finding | None:
    return next((f for f in queue if f.meta.metric == "arrivals" and f.meta.target == target), None)


def load_grew(arrivals: Finding | None) -> bool:
    """Arrivals x1.5 or more, and by more than ARRIVALS_SIGMAS of count noise: tens of requests
    over a few seconds read x1.5 by chance."""
    if arrivals is None or arrivals.change < ARRIVALS_GREW:
        return False
    return arrivals.sigmas is None or arrivals.sigmas >= ARRIVALS_SIGMAS


def layer_summary(name: str, findings: list[Finding], queue_target: str = "") -> str:
    moved = _moved(findings, QUEUE_PRESSURE if name == "queue" else None)
    if not moved:
        return f"{name}: normal"
    top = moved[0]
    text = f"{name}: {top.meta.target} {_x(top)}"
    if name == "queue":
        arrivals = arrivals_of(findings, top.meta.target)
        if arrivals is not None and arrivals.factor is not None:
            text += f" with arrivals x{arrivals.factor:.2g}"
            if arrivals.change >= ARRIVALS_GREW and not load_grew(arrivals):
                text += f" (within count noise, {arrivals.sigmas:.1f} sigma)"
    return text


def decide(queue: list[Finding], compute: list[Finding], network: list[Finding]) -> Verdict:
    summary = "; ".join(layer_summary(n, f) for n, f in
                        (("queue", queue), ("compute", compute), ("network", network)))
    events = [f for f in _moved(compute) if f.meta.evidence]
    if events:
        top = events[0]
        return Verdict("compute", "compute", top.meta.target, f"{summary} -> compute: {top.meta.target}")
    net = _moved(network)
    if net:
        top = net[0]
        return Verdict("network", "network", top.meta.target,
                       f"{summary} -> network: {top.meta.target}")
    pressure = _moved(queue, QUEUE_PRESSURE)
    if pressure:
        top = pressure[0]
        arrivals = arrivals_of(queue, top.meta.target)
        grew = load_grew(arrivals)
        cause = "engine_saturated" if grew else "engine_slow"
        why = "the engine is saturated" if grew else "the engine slowed with arrivals flat"
        return Verdict("queue", cause, top.meta.target, f"{summary} -> {why}: {top.meta.target}")
    other = _moved(compute)
    if other:
        top = other[0]
        return Verdict("compute", "compute", top.meta.target, f"{summary} -> compute: {top.meta.target}")
    return Verdict("none", "none", "", f"{summary} -> nothing moved past its noise floor")
