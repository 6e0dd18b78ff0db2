"""The queue layer: per serving endpoint, waiting vs running requests, arrivals, queue time,
KV-cache usage, preemptions and TTFT/ITL (the serving signals), and which endpoints share the node."""

from __future__ import annotations

from collections.abc import Iterator

from ..store import Histogram
from . import compare
from .compare import Finding, Windows, edge, finding
from .recorder import Recorder
from .sample import COUNTER, GAUGE, Meta, Sampled, View, from_signals

LAYER = "queue"
WAITING_FLOOR = 4.0  # requests: a queue of a few is noise
RUNNING_FLOOR = 4.0
ARRIVALS_FLOOR = 0.2  # requests per second
QUEUE_TIME_FLOOR = 0.05  # seconds


def _sum_by_endpoint(view: View, family: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for _source, _target, values, value in view.store.iter_family(family):
        if not values or isinstance(value, Histogram):
            continue
        out[values[0]] = out.get(values[0], 0.0) + float(value)
    return out


def _histogram_by_endpoint(view: View, family: str) -> dict[str, tuple[float, float]]:
    """endpoint -> (sum, count) of a histogram family over its other labels."""
    out: dict[str, tuple[float, float]] = {}
    for _source, _target, values, value in view.store.iter_family(family):
        if not values or not isinstance(value, Histogram):
            continue
        s, c = out.get(values[0], (0.0, 0.0))
        out[values[0]] = (s + value.sum, c + value.buckets[-1][1])
    return out


def endpoints(view: View) -> list[str]:
    """The serving endpoints this daemon scrapes: they share the node."""
    return sorted(_sum_by_endpoint(view, "infrapulse_llm_endpoint_up"))


def collect(view: View) -> Iterator[Sampled]:
    yield from from_signals(view, LAYER)
    for endpoint, value in _sum_by_endpoint(view, "infrapulse_llm_requests_waiting").items():
        yield Meta(LAYER, "waiting", f"endpoint {endpoint}", "count", WAITING_FLOOR), value
    for endpoint, value in _sum_by_endpoint(view, "infrapulse_llm_requests_running").items():
        yield Meta(LAYER, "running", f"endpoint {endpoint}", "count", RUNNING_FLOOR), value
    # Finished requests: arrivals are these plus the growth of waiting + running (compare.py).
    for endpoint, value in _sum_by_endpoint(view, "infrapulse_llm_requests_total").items():
        yield Meta(LAYER, "finished", f"endpoint {endpoint}", "per_second", ARRIVALS_FLOOR,
                   kind=COUNTER), value
    for endpoint, (total, count) in _histogram_by_endpoint(
            view, "infrapulse_llm_request_queue_time_seconds").items():
        yield Meta(LAYER, "queue_time_sum", f"endpoint {endpoint}", "seconds", QUEUE_TIME_FLOOR,
                   kind=COUNTER), total
        yield Meta(LAYER, "queue_time_count", f"endpoint {endpoint}", "count", 1.0, kind=COUNTER), count


__all__ = ["GAUGE", "LAYER", "collect", "derive", "endpoints"]


def derive(recorder: Recorder, win: Windows) -> list[Finding]:
    """Per endpoint: arrivals (finished requests per second plus the growth of waiting + running
    over the window) and the mean queue time (queue-time histogram sum over count)."""
    out = []
    for target in sorted({m.target for m in recorder.meta.values() if m.layer == LAYER
                          and m.metric in ("finished", "waiting", "running", "queue_time_sum")}):
        values = {}
        for window_name, window in (("before", win.before), ("since", win.since)):
            finished = compare.value(recorder, (LAYER, "finished", target), window)
            growth = 0.0
            for gauge in ("waiting", "running"):
                ends = edge(recorder, (LAYER, gauge, target), window)
                if ends is not None and window[1] > window[0]:
                    growth += (ends[1] - ends[0]) / (window[1] - window[0])
            arrivals = None if finished is None else max(finished + growth, 0.0)
            total = compare.value(recorder, (LAYER, "queue_time_sum", target), window)
            count = compare.value(recorder, (LAYER, "queue_time_count", target), window)
            queue_time = total / count if total is not None and count else None
            values[window_name] = (arrivals, queue_time)
        arrivals_meta = Meta(LAYER, "arrivals", target, "per_second", ARRIVALS_FLOOR)
        out.append(finding(arrivals_meta, values["before"][0], values["since"][0]))
        if values["since"][1] is not None:
            qt_meta = Meta(LAYER, "queue_time", target, "seconds", QUEUE_TIME_FLOOR)
            out.append(finding(qt_meta, values["before"][1], values["since"][1]))
    return out
