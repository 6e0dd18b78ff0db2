"""Serving signals per endpoint: windowed TTFT/ITL p95 against the SLOs, queueing, KV cache,
request errors, preemptions, endpoint down."""

from __future__ import annotations

from collections.abc import Callable

from .base import (
    EP,
    FACTOR,
    FLAG,
    PER_SECOND,
    RATIO,
    SECONDS,
    Context,
    Measurement,
    Signal,
    endpoint_name,
    format_seconds,
    gauges_by,
    rates_by,
    ratio,
)

ERROR_OUTCOMES = frozenset({"error", "errors", "failed", "failure", "timeout"})


def _latency(which: str) -> Callable[[Context], list[Measurement]]:
    def measure(ctx: Context) -> list[Measurement]:
        out = []
        slo = ctx.slo.get(which)
        note = f"SLO {format_seconds(slo)}" if slo else ""
        for endpoint, lat in ctx.latency.items():
            p95 = (lat.ttft if which == "ttft" else lat.itl).get(0.95)
            if p95 is not None:
                out.append(Measurement(endpoint_name((endpoint,)), p95, note, labels={"endpoint": endpoint}))
        return out
    return measure


def measure_queue_ratio(ctx: Context) -> list[Measurement]:
    add = lambda a, b: a + b  # noqa: E731
    waiting = gauges_by(ctx, "infrapulse_llm_requests_waiting", EP, add)
    running = gauges_by(ctx, "infrapulse_llm_requests_running", EP, add)
    out = []
    for k, w in waiting.items():
        r = running.get(k, 0.0)
        out.append(Measurement(endpoint_name(k), w / max(r, 1.0), f"{w:g} waiting, {r:g} running",
                               labels={"endpoint": k[0]}))
    return out


def measure_kv_cache(ctx: Context) -> list[Measurement]:
    return [Measurement(endpoint_name(k), v, labels={"endpoint": k[0]})
            for k, v in gauges_by(ctx, "infrapulse_llm_kv_cache_usage_ratio", EP).items()]


def measure_request_errors(ctx: Context) -> list[Measurement]:
    family = "infrapulse_llm_requests_total"
    total = rates_by(ctx, family, EP)
    failed = rates_by(ctx, family, EP, where=lambda lb: lb.get("outcome", "").lower() in ERROR_OUTCOMES)
    out = []
    for k, t in total.items():
        f = failed.get(k)
        out.append(Measurement(endpoint_name(k), ratio(f.increase if f else 0.0, t.increase),
                               labels={"endpoint": k[0]}))
    return out


def measure_preemptions(ctx: Context) -> list[Measurement]:
    return [Measurement(endpoint_name(k), r.per_second, labels={"endpoint": k[0]})
            for k, r in rates_by(ctx, "infrapulse_llm_preemptions_total", EP).items()]


def measure_endpoint_down(ctx: Context) -> list[Measurement]:
    return [Measurement(endpoint_name(k), 0.0 if v >= 1 else 1.0, labels={"endpoint": k[0]})
            for k, v in gauges_by(ctx, "infrapulse_llm_endpoint_up", EP, min).items()]



SIGNALS: list[Signal] = [
    Signal(
        name="ttft_p95",
        component="serving",
        title="TTFT p95 against its SLO",
        formula=("p95 of increase(llm_time_to_first_token_seconds buckets) over the window, per endpoint "
                 "(good = health.slo.ttft_p95_seconds, bad = twice that)"),
        unit=SECONDS,
        window="window",
        good=1.5,
        bad=3.0,
        weight=5.0,
        phrase="TTFT p95 {value}",
        hint=("prefill is slow or queued: check queueing (waiting requests, KV cache), the GPUs and, for "
              "disaggregated serving, the KV-transfer path"),
        measure=_latency("ttft"),
        families=("infrapulse_llm_time_to_first_token_seconds",),
        sources=("serving",),
        slo=True,
    ),
    Signal(
        name="itl_p95",
        component="serving",
        title="ITL p95 against its SLO",
        formula=("p95 of increase(llm_inter_token_latency_seconds buckets) over the window, per endpoint "
                 "(good = health.slo.itl_p95_seconds, bad = twice that)"),
        unit=SECONDS,
        window="window",
        good=0.05,
        bad=0.1,
        weight=4.0,
        phrase="ITL p95 {value}",
        hint=("decoding is slow: batches may be too large, the GPUs throttled, or tensor-parallel traffic "
              "congested (check NVLink and the network component)"),
        measure=_latency("itl"),
        families=("infrapulse_llm_inter_token_latency_seconds",),
        sources=("serving",),
        slo=True,
    ),
    Signal(
        name="queue_ratio",
        component="serving",
        title="Waiting vs running requests",
        formula="llm_requests_waiting / max(llm_requests_running, 1) per endpoint",
        unit=FACTOR,
        window="instant",
        good=0.5,
        bad=5.0,
        weight=2.0,
        phrase="{value} waiting requests per running request",
        hint=("the endpoint is saturated: add replicas or lower the load; check KV cache usage and "
              "preemptions"),
        measure=measure_queue_ratio,
        families=("infrapulse_llm_requests_waiting", "infrapulse_llm_requests_running"),
        sources=("serving",),
    ),
    Signal(
        name="kv_cache_usage",
        component="serving",
        title="KV cache usage",
        formula="llm_kv_cache_usage_ratio per endpoint (highest over models)",
        unit=RATIO,
        window="instant",
        good=0.85,
        bad=0.98,
        weight=1.0,
        phrase="KV cache {value} full",
        hint=("the KV cache is nearly full, so requests will queue or be preempted: add memory/replicas "
              "or shorten contexts"),
        measure=measure_kv_cache,
        families=("infrapulse_llm_kv_cache_usage_ratio",),
        sources=("serving",),
    ),
    Signal(
        name="request_error_ratio",
        component="serving",
        title="Request error ratio",
        formula="increase(llm_requests{outcome=error|failed|timeout}) / increase(llm_requests) per endpoint",
        unit=RATIO,
        window="window",
        good=0.001,
        bad=0.05,
        weight=3.0,
        phrase="{value} of requests failed",
        hint="read the engine's logs for the failing requests",
        measure=measure_request_errors,
        families=("infrapulse_llm_requests_total",),
        sources=("serving",),
        counters=("infrapulse_llm_requests_total",),
    ),
    Signal(
        name="preemption_rate",
        component="serving",
        title="Preemption rate",
        formula="rate(llm_preemptions) per endpoint",
        unit=PER_SECOND,
        window="window",
        good=0.0,
        bad=1.0,
        weight=1.0,
        phrase="{value} preemptions",
        hint="the KV cache is oversubscribed: lower max concurrency or add capacity",
        measure=measure_preemptions,
        families=("infrapulse_llm_preemptions_total",),
        sources=("serving",),
        counters=("infrapulse_llm_preemptions_total",),
    ),
    Signal(
        name="endpoint_down",
        component="serving",
        title="Endpoint down",
        formula="1 - llm_endpoint_up per endpoint",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=4.0,
        phrase="serving endpoint is down",
        hint="the engine does not answer its /metrics: check the process, its health endpoint and logs",
        measure=measure_endpoint_down,
        families=("infrapulse_llm_endpoint_up",),
        sources=("serving",),
        critical=True,
    ),
]
