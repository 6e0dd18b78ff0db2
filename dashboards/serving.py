"""Serving / ML: latency quantiles, queues, KV cache, tokens, errors and KV transfer per endpoint."""

from __future__ import annotations

from grafana import Dashboard, alert_annotation, query_variable, row, stat, target, timeseries
from promql import SCOPE, by, quantile, rate, ratio, sel

UID = "infrapulse-serving"

ENDPOINT = {**SCOPE, "endpoint": "$endpoint", "model": "$model"}


def ep(metric: str, **extra: str) -> str:
    return sel(metric, ENDPOINT, **extra)


def quantiles(histogram: str, labels: str = "endpoint, model") -> list[dict]:
    return [target(quantile(q, histogram, labels, ENDPOINT),
                   f"p{int(q * 100)} {{{{endpoint}}}} {{{{model}}}}")
            for q in (0.5, 0.95, 0.99)]


def recorded_quantiles(metric: str) -> list[dict]:
    """The per-endpoint quantiles the recording rules keep (5-minute windows, label `quantile`)."""
    rule = f"instance_endpoint_model:{metric}:histogram_quantile_rate5m"
    return [target(by("endpoint, model, quantile", ep(rule), "max"), "q{{quantile}} {{endpoint}} {{model}}")]


def build() -> Dashboard:
    up = sel("infrapulse_llm_endpoint_up", {**SCOPE, "endpoint": "$endpoint"})
    panels = [
        row("Endpoints"),
        stat("Endpoints up",
             "Serving endpoints whose last /metrics scrape succeeded.",
             [target(f"sum({up})")], "none"),
        stat("Endpoints down",
             "Configured serving endpoints whose last scrape failed (down, timeout, not an engine).",
             [target(f"count({up} == 0) or vector(0)")], "none",
             steps=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        stat("TTFT p95 (all selected)",
             "95th percentile time to first token over all selected endpoints and models.",
             [target(quantile(0.95, "infrapulse_llm_time_to_first_token_seconds", "job", ENDPOINT))], "s",
             steps=[{"color": "green", "value": None}, {"color": "orange", "value": 1},
                    {"color": "red", "value": 1.5}]),
        stat("Request rate",
             "Finished requests per second over all selected endpoints.",
             [target(f"sum({rate(ep('infrapulse_llm_requests_total'))})")], "reqps"),
        row("Latency"),
        timeseries("Time to first token",
                   "TTFT p50/p95/p99 per endpoint and model, from the engine's own histogram buckets "
                   "(quantiles are interpolated inside a bucket), over 5 minutes (recording rules). "
                   "Default SLO: p95 <= 1.5 s.",
                   recorded_quantiles("infrapulse_llm_time_to_first_token_seconds"), "s", min=0),
        timeseries("Inter-token latency",
                   "Time between output tokens (ITL / TPOT) p50/p95/p99 per endpoint and model. Default "
                   "SLO: p95 <= 50 ms. 5-minute windows (recording rules).",
                   recorded_quantiles("infrapulse_llm_inter_token_latency_seconds"), "s", min=0),
        timeseries("End-to-end request latency",
                   "Request latency from arrival to the last token, p50/p95/p99.",
                   quantiles("infrapulse_llm_e2e_request_latency_seconds"), "s", min=0),
        timeseries("Latency SLO error ratio",
                   "Share of requests missing the latency SLI bound (TTFT > 1 s, ITL > 0.1 s; bucket "
                   "bounds every engine has) over 5 minutes and 1 hour: the inputs of the burn-rate "
                   "alerts. An error budget of 5% burns 14.4x too fast above 0.72.",
                   [target(by("endpoint, model",
                              ep("instance_endpoint_model:infrapulse_llm_time_to_first_token_slo_errors:"
                                                   "ratio_rate5m"), "max"), "TTFT 5m {{endpoint}} {{model}}"),
                    target(by("endpoint, model",
                              ep("instance_endpoint_model:infrapulse_llm_time_to_first_token_slo_errors:"
                                                   "ratio_rate1h"), "max"), "TTFT 1h {{endpoint}} {{model}}"),
                    target(by("endpoint, model",
                              ep("instance_endpoint_model:infrapulse_llm_inter_token_latency_slo_errors:"
                                                   "ratio_rate5m"), "max"), "ITL 5m {{endpoint}} {{model}}")],
                   "percentunit", min=0, max=1),
        timeseries("Queue time",
                   "Time requests wait before being scheduled, p50/p95/p99, for engines that report it. "
                   "Rising queue time with flat ITL means the endpoint is overloaded, not the network.",
                   quantiles("infrapulse_llm_request_queue_time_seconds"), "s", min=0),
        row("Load and capacity"),
        timeseries("Requests running and waiting",
                   "Requests in the running batch and waiting in the queue per endpoint. Waiting growing "
                   "while running is flat: the batch or KV cache is full.",
                   [target(by("endpoint, model",
                              ep("infrapulse_llm_requests_running")), "running {{endpoint}} {{model}}"),
                    target(by("endpoint, model",
                              ep("infrapulse_llm_requests_waiting")), "waiting {{endpoint}} {{model}}")],
                   "none", min=0),
        timeseries("KV cache usage",
                   "Fraction of the KV cache in use per endpoint. Near 1 the engine preempts or queues "
                   "requests.",
                   [target(by("endpoint, model", ep("infrapulse_llm_kv_cache_usage_ratio"), "max"),
                           "{{endpoint}} {{model}}")], "percentunit", min=0, max=1),
        timeseries("Tokens per second",
                   "Prompt (prefill) and generated (decode) tokens per second per endpoint.",
                   [target(by("endpoint, model", rate(ep("infrapulse_llm_prompt_tokens_total"))),
                           "prompt {{endpoint}} {{model}}"),
                    target(by("endpoint, model", rate(ep("infrapulse_llm_generation_tokens_total"))),
                           "generated {{endpoint}} {{model}}")], "cps", min=0),
        timeseries("Prefix cache hit ratio",
                   "Share of prompt tokens served from the prefix cache (hits / queries).",
                   [target(ratio(ep("infrapulse_llm_prefix_cache_hits_total"),
                                 ep("infrapulse_llm_prefix_cache_queries_total"), "endpoint, model"),
                           "{{endpoint}} {{model}}")], "percentunit", min=0, max=1),
        row("Errors"),
        timeseries("Requests by outcome",
                   "Finished requests per second per endpoint and outcome (e.g. stop, length, abort, error).",
                   [target(by("endpoint, outcome", rate(ep("infrapulse_llm_requests_total"))),
                           "{{endpoint}} {{outcome}}")], "reqps", min=0),
        timeseries("Preemptions",
                   "Requests preempted per second (evicted from the batch when the KV cache runs out).",
                   [target(by("endpoint, model",
                              rate(ep("infrapulse_llm_preemptions_total"))), "{{endpoint}} {{model}}")],
                   "cps", min=0),
        timeseries("Endpoint up",
                   "1 while the endpoint's metrics are scraped successfully, 0 when it is down.",
                   [target(up, "{{instance}} {{endpoint}} {{engine}}")], "none", min=0, max=1),
        row("KV transfer (prefill/decode disaggregation)"),
        timeseries("KV transfer throughput",
                   "KV cache bytes per second moved between prefill and decode instances (NIXL, "
                   "disaggregated serving). This traffic rides the RDMA fabric.",
                   [target(by("endpoint, model", rate(ep("infrapulse_llm_kv_transfer_bytes_total"))),
                           "{{endpoint}} {{model}}")], "Bps", min=0),
        timeseries("KV transfer latency",
                   "KV transfer time p50/p95/p99 per endpoint: a network problem shows here before it "
                   "shows in TTFT.",
                   quantiles("infrapulse_llm_kv_transfer_seconds"), "s", min=0),
        timeseries("KV transfer failures",
                   "Failed KV transfers per second per endpoint.",
                   [target(by("endpoint, model", rate(ep("infrapulse_llm_kv_transfer_failures_total"))),
                           "{{endpoint}} {{model}}")], "cps", min=0),
    ]
    return Dashboard(
        uid=UID, title="infrapulse / Serving (ML)",
        description="LLM serving health for the ML team, normalised across vLLM, SGLang, TensorRT-LLM and "
                    "TGI: TTFT and ITL quantiles, queues, KV cache, throughput, errors and KV transfer.",
        tags=["serving", "ml"],
        variables=[
            query_variable("job", "label_values(infrapulse_build_info, job)"),
            query_variable("instance", 'label_values(infrapulse_build_info{job=~"$job"}, instance)'),
            query_variable("endpoint", 'label_values(infrapulse_llm_endpoint_up{job=~"$job", '
                                       'instance=~"$instance"}, endpoint)'),
            query_variable("model", 'label_values(infrapulse_llm_requests_running{job=~"$job", '
                                    'instance=~"$instance", endpoint=~"$endpoint"}, model)'),
        ],
        panels=panels,
        annotations=[alert_annotation("Serving alerts", 'ALERTS{alertstate="firing", team="ml"}', "orange")],
    )
