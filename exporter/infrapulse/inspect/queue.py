"""The queue layer: per serving endpoint, waiting vs running requests, arrivals, queue time,
KV-cache usage, preemptions and TTFT/ITL (the serving signals), and which endpoints share the node."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ..store import Histogram
from . import compare
from .compare import Finding, Windows, excess_sigmas, finding, growth
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


def arrivals(recorder: Recorder, target: str, window: tuple[float, float]) -> float | None:
    """Requests arriving per second at `target` over `window`: finished requests per second plus
    the growth of waiting + running (requests in the engine)."""
    finished = compare.value(recorder, (LAYER, "finished", target), window)
    if finished is None:
        return None
    inflow = finished
    for gauge in ("waiting", "running"):
        inflow += growth(recorder, (LAYER, gauge, target), window) or 0.0
    return max(inflow, 0.0)


def baseline_arrivals(recorder: Recorder, target: str,
                      window: tuple[float, float]) -> tuple[float, float] | None:
    """Arrivals before the drop and the seconds they were counted over: the lower of the whole
    before window's and its first third's. A load that grew leads the score drop by the time the
    queue takes to build (tens of seconds), so up to two thirds of the before window can already
    hold it (the e2e demo's 30 s window held ~16 s of queue-buildup's x4 load: x1.5 measured
    against the whole window)."""
    start, end = window
    measured = []
    for part in (window, (start, start + (end - start) / 3)):
        rate = arrivals(recorder, target, part)
        if rate is not None:
            measured.append((rate, compare.span(recorder, (LAYER, "finished", target), part)))
    # the lower rate; at a tie the longer span, the one with less count noise
    return min(measured, key=lambda m: (m[0], -m[1])) if measured else None


def arrivals_finding(recorder: Recorder, target: str, win: Windows) -> Finding:
    """Arrivals before the drop (`baseline_arrivals`) against since, with how far above count
    noise they grew (`compare.excess_sigmas`: the verdict's "the load grew" needs both)."""
    meta = Meta(LAYER, "arrivals", target, "per_second", ARRIVALS_FLOOR)
    before = baseline_arrivals(recorder, target, win.before)
    since = arrivals(recorder, target, win.since)
    found = finding(meta, before[0] if before is not None else None, since)
    if before is None or since is None:
        return found
    sigmas = excess_sigmas(before[0], before[1], since,
                           compare.span(recorder, (LAYER, "finished", target), win.since))
    return replace(found, sigmas=sigmas)


def derive(recorder: Recorder, win: Windows) -> list[Finding]:
    """Per endpoint: arrivals (`arrivals_finding`) and the mean queue time (queue-time
    histogram sum over count)."""
    out = []
    for target in sorted({m.target for m in recorder.meta.values() if m.layer == LAYER
                          and m.metric in ("finished", "waiting", "running", "queue_time_sum")}):
        queue_time: dict[str, float | None] = {}
        for window_name, window in (("before", win.before), ("since", win.since)):
            total = compare.value(recorder, (LAYER, "queue_time_sum", target), window)
            count = compare.value(recorder, (LAYER, "queue_time_count", target), window)
            queue_time[window_name] = total / count if total is not None and count else None
        out.append(arrivals_finding(recorder, target, win))
        if queue_time["since"] is not None:
            qt_meta = Meta(LAYER, "queue_time", target, "seconds", QUEUE_TIME_FLOOR)
            out.append(finding(qt_meta, queue_time["before"], queue_time["since"]))
    return out
