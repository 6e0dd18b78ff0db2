"""Map vLLM, SGLang, TensorRT-LLM (Triton and trtllm-serve) and TGI metrics into infrapulse_llm_*.

Input: the families of one scrape (`infrapulse.textparse.parse`). Output: a `Snapshot` whose
series are labelled `{endpoint, engine, model}` plus the rank labels a user chose to keep.
This module holds engine detection and the per-engine rule tables; the target families are
declared in `.families` and the extractors the tables are written in live in `.extract`.

Rules (docs/serving.md has the full table):
* Histograms keep the engine's own bucket bounds; only units are converted (ms -> s, by
  scaling the bounds and the sum). Nothing is interpolated or re-bucketed.
* Each target family lists alternatives, newest engine version first; the first one present
  wins (vLLM `kv_cache_usage_perc` before the older `gpu_cache_usage_perc`, ...). A family is
  also checked for its type, so SGLang's KV-transfer histograms and their older gauge
  versions go to different target families.
* Rank labels are aggregated away unless kept (`keep_labels`):
    - partition ranks (vLLM `engine` = data-parallel index, SGLang `dp_rank`) split the work,
      so counters, histograms and request counts are summed over them, ratios take the max;
    - replica ranks (SGLang `tp_rank`, `pp_rank`, `moe_ep_rank`, ...) report the same numbers
      from every rank (when metrics are enabled for all schedulers), so the lowest rank is
      taken instead of a sum that would multiply them;
    - any other label (is_streaming, finished_reason where not mapped, priority, ...) is summed
      over (counters, histograms, counts) or maxed (ratios).
  Histograms are summed on the bucket bounds common to all merged series (exact, never invented).
* `vllm:*_perc` gauges are already 0..1 (the name is historical), so they are not rescaled.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from ...store import Snapshot
from ...textparse import MetricFamily
from .extract import (
    Context,
    Extractor,
    Rule,
    by_label,
    counter,
    difference,
    gauge,
    hist,
    hist_sum,
    ratio,
    total,
    when_present,
    with_outcome,
)
from .families import (
    E2E,
    ENDPOINT_UP,
    GENERATION_TOKENS,
    ITL,
    KEEPABLE,
    KV_USAGE,
    KV_XFER_BYTES,
    KV_XFER_COUNT,
    KV_XFER_FAILURES,
    KV_XFER_LAST,
    KV_XFER_SECONDS,
    KV_XFER_TIME,
    PREEMPTIONS,
    PREFIX_HIT_RATIO,
    PREFIX_HITS,
    PREFIX_QUERIES,
    PROMPT_TOKENS,
    QUEUE_DURATION,
    QUEUE_TIME,
    REQUEST_DURATION,
    REQUESTS,
    RUNNING,
    TTFT,
    WAITING,
)

# -- engines --------------------------------------------------------------------------------

# Prefix -> format. Order matters: Triton may host a vLLM backend, whose vllm: families win.
# `ray_vllm:` is vLLM under Ray Serve (Ray's metrics agent prefixes every application metric).
DETECT_ORDER = (("vllm:", "vllm"), ("ray_vllm:", "vllm"), ("sglang:", "sglang"), ("nv_trt_llm_", "triton"),
                ("nv_inference_", "triton"), ("trtllm_", "trtllm"), ("tgi_", "tgi"))
FORMATS = ("vllm", "sglang", "triton", "trtllm", "tgi")
MODEL_LABEL = {"vllm": "model_name", "sglang": "model_name", "triton": "model", "trtllm": "model_name",
               "tgi": ""}
# trtllm-serve 1.x (TensorRT-LLM's MetricsCollector before it gained the `trtllm_` prefix) exposes
# these families unprefixed, every sample labelled {model_name, engine_type}; they are read as the
# trtllm_-prefixed names. Unprefixed names are common words, so auto-detection accepts them only
# with both labels present and no other engine's prefix (see `detect`).
TRTLLM_UNPREFIXED = ("request_success", "e2e_request_latency_seconds", "time_to_first_token_seconds",
                     "time_per_output_token_seconds", "request_queue_time_seconds")
TRTLLM_SERVE_LABELS = frozenset({"model_name", "engine_type"})
# Ranks that replicate the same numbers (summing them would multiply): the lowest one is taken.
# Partition ranks (vLLM `engine`, SGLang `dp_rank`) and all other labels are summed/maxed.
REPLICA_LABELS = {"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank", "attn_cp_rank", "cp_rank"}
# Canonical kept label -> the engine's label, where they differ.
_ENGINE_LABEL_OF = {("vllm", "dp_rank"): "engine", ("*", "role"): "engine_type",
                    ("*", "model_version"): "version"}


def engine_label_for(fmt: str, canonical: str) -> str:
    """The engine's own name of a keepable label (vLLM calls its data-parallel rank `engine`)."""
    return _ENGINE_LABEL_OF.get((fmt, canonical)) or _ENGINE_LABEL_OF.get(("*", canonical)) or canonical


def detect(families: dict[str, MetricFamily]) -> str | None:
    """The exposition format from metric-name prefixes, or None if no engine is recognised."""
    names = list(families)
    for prefix, fmt in DETECT_ORDER:
        if any(n.startswith(prefix) for n in names):
            return fmt
    # OpenMetrics from prometheus_client escapes ':' to '_' (vllm_prompt_tokens_total).
    for prefix, fmt in (("vllm_", "vllm"), ("sglang_", "sglang")):
        if any(n.startswith(prefix) for n in names):
            return fmt
    if is_trtllm_unprefixed(families):
        return "trtllm"
    return None


def is_trtllm_unprefixed(families: dict[str, MetricFamily]) -> bool:
    """trtllm-serve 1.x: a TensorRT-LLM family under its unprefixed name, labelled like its collector."""
    for name in TRTLLM_UNPREFIXED:
        fam = families.get(name)
        if fam is not None and fam.samples and all(TRTLLM_SERVE_LABELS <= s.labels.keys()
                                                   for s in fam.samples):
            return True
    return False


def _renamed(fam: MetricFamily, old: str, new: str) -> MetricFamily:
    """`fam` with the name prefix `old` (family and samples) replaced by `new`."""
    cut = len(old)
    return MetricFamily(new + fam.name[cut:], fam.type, fam.help, fam.unit,
                        [s._replace(name=new + s.name[cut:]) if s.name.startswith(old) else s
                         for s in fam.samples])


def _rename_where(families: dict[str, MetricFamily], match: Callable[[str], bool], old: str,
                  new: str) -> dict[str, MetricFamily]:
    out: dict[str, MetricFamily] = {}
    for name, fam in families.items():
        if match(name):
            fam = _renamed(fam, old, new)
            name = fam.name
        out[name] = fam
    return out


def canonical_names(families: dict[str, MetricFamily], fmt: str) -> dict[str, MetricFamily]:
    """The engine's families under the names the rule tables use: undo the ':' -> '_' escaping some
    OpenMetrics encoders apply to vllm:/sglang: names, strip Ray Serve's `ray_` from `ray_vllm:`,
    and give trtllm-serve 1.x's unprefixed families their later `trtllm_` names."""
    if fmt == "trtllm":
        if any(n.startswith("trtllm_") for n in families):
            return families
        return _rename_where(families, lambda n: n in TRTLLM_UNPREFIXED, "", "trtllm_")
    if fmt not in ("vllm", "sglang") or any(n.startswith(fmt + ":") for n in families):
        return families
    if fmt == "vllm" and any(n.startswith("ray_vllm:") for n in families):
        return _rename_where(families, lambda n: n.startswith("ray_vllm:"), "ray_vllm:", "vllm:")
    escaped = fmt + "_"
    return {(fmt + ":" + n[len(escaped):] if n.startswith(escaped) else n): f for n, f in families.items()}


def engine_label(fmt: str, families: dict[str, MetricFamily]) -> str:
    """The exported `engine` label: Triton with the TRT-LLM backend reports as trtllm."""
    if fmt == "triton":
        return "trtllm" if any(n.startswith("nv_trt_llm_") for n in families) else "triton"
    return fmt


@functools.lru_cache(maxsize=256)
def context_for(fmt: str, keep: tuple[str, ...], default_model: str = "") -> Context:
    """The label plan of one engine format: its model label, the kept labels' engine names, and
    the replica ranks (not kept) whose lowest rank is taken. One object per plan (cached), so
    its memo of split labels lasts across scrapes."""
    kept_sources = tuple(engine_label_for(fmt, k) for k in keep)
    return Context(MODEL_LABEL[fmt], kept_sources, tuple(sorted(REPLICA_LABELS - set(kept_sources))),
                   default_model)


# -- the mapping ----------------------------------------------------------------------------

VLLM_OUTCOMES = {"stop": "success", "length": "success", "repetition": "success", "abort": "abort",
                 "error": "error"}
TRTLLM_OUTCOMES = {"stop": "success", "length": "success", "abort": "abort", "cancelled": "abort",
                   "error": "error", "timeout": "error"}
MB = float(1 << 20)  # SGLang's *_mb metrics are MiB (bytes / 1024 / 1024)

def _trt(kind: str, label: str, value: str) -> tuple[Extractor, ...]:
    """A Triton TRT-LLM backend gauge under its names since 24.x (`nv_trt_llm_<kind>_metrics`) and
    in 23.10/23.11 (`nv_trt_llm_<kind>_statistics`), newest first."""
    return tuple(gauge(f"nv_trt_llm_{kind}_{suffix}", where={label: value})
                 for suffix in ("metrics", "statistics"))


# promised=True: every version infrapulse supports exposes it (docs/serving.md, "confirmed on"), so
# a live endpoint without it is reported through the coverage API instead of passing as "older version".
MAPPINGS: dict[str, tuple[Rule, ...]] = {
    "vllm": (
        Rule(TTFT, (hist("vllm:time_to_first_token_seconds"),), promised=True),
        Rule(ITL, (hist("vllm:inter_token_latency_seconds"), hist("vllm:time_per_output_token_seconds")),
             promised=True),
        Rule(E2E, (hist("vllm:e2e_request_latency_seconds"),), promised=True),
        Rule(QUEUE_TIME, (hist("vllm:request_queue_time_seconds"),)),
        Rule(RUNNING, (gauge("vllm:num_requests_running"),), promised=True),
        Rule(WAITING, (gauge("vllm:num_requests_waiting"),), promised=True),
        Rule(KV_USAGE, (gauge("vllm:kv_cache_usage_perc", combine="max"),
                        gauge("vllm:gpu_cache_usage_perc", combine="max")), promised=True),
        Rule(PREFIX_QUERIES,
             (counter("vllm:prefix_cache_queries"), counter("vllm:gpu_prefix_cache_queries"))),
        Rule(PREFIX_HITS, (counter("vllm:prefix_cache_hits"), counter("vllm:gpu_prefix_cache_hits"))),
        # V0's rate is -1 while it has no data (prefix caching off): dropped as out of 0..1 in normalise.
        Rule(PREFIX_HIT_RATIO, (gauge("vllm:gpu_prefix_cache_hit_rate", combine="max"),),
             fallback_only=PREFIX_QUERIES),
        Rule(PROMPT_TOKENS, (counter("vllm:prompt_tokens"),), promised=True),
        Rule(GENERATION_TOKENS, (counter("vllm:generation_tokens"),), promised=True),
        Rule(REQUESTS, (by_label("vllm:request_success", "finished_reason", VLLM_OUTCOMES),), promised=True),
        Rule(PREEMPTIONS, (counter("vllm:num_preemptions"),)),
        Rule(REQUEST_DURATION, (hist_sum("vllm:e2e_request_latency_seconds"),)),
        Rule(QUEUE_DURATION, (hist_sum("vllm:request_queue_time_seconds"),)),
        Rule(KV_XFER_BYTES, (hist_sum("vllm:nixl_bytes_transferred"),)),
        Rule(KV_XFER_SECONDS, (hist("vllm:nixl_xfer_time_seconds"),)),
        Rule(KV_XFER_TIME, (hist_sum("vllm:nixl_xfer_time_seconds"),)),
        Rule(KV_XFER_COUNT, (hist_sum("vllm:nixl_xfer_time_seconds", part="_count"),)),
        Rule(KV_XFER_FAILURES, (counter("vllm:nixl_num_failed_transfers"),)),
    ),
    "sglang": (
        Rule(TTFT, (hist("sglang:time_to_first_token_seconds"),), promised=True),
        Rule(ITL, (hist("sglang:inter_token_latency_seconds"), hist("sglang:time_per_output_token_seconds")),
             promised=True),
        Rule(E2E, (hist("sglang:e2e_request_latency_seconds"),), promised=True),
        Rule(QUEUE_TIME, (hist("sglang:queue_time_seconds"),)),
        Rule(RUNNING, (gauge("sglang:num_running_reqs"),), promised=True),
        Rule(WAITING, (gauge("sglang:num_queue_reqs"),), promised=True),
        Rule(KV_USAGE, (gauge("sglang:token_usage", combine="max"),), promised=True),
        Rule(PREFIX_QUERIES, (when_present("sglang:cached_tokens", counter("sglang:prompt_tokens")),)),
        Rule(PREFIX_HITS, (counter("sglang:cached_tokens", where={"cache_source": "total"}),
                           counter("sglang:cached_tokens"))),
        Rule(PREFIX_HIT_RATIO, (gauge("sglang:cache_hit_rate", combine="max"),), fallback_only=PREFIX_HITS),
        Rule(PROMPT_TOKENS, (counter("sglang:prompt_tokens"),), promised=True),
        Rule(GENERATION_TOKENS, (counter("sglang:generation_tokens"),), promised=True),
        Rule(REQUESTS, (with_outcome("success", difference(counter("sglang:num_requests"),
                                                           counter("sglang:num_aborted_requests"))),)),
        Rule(REQUESTS, (with_outcome("abort", counter("sglang:num_aborted_requests")),)),
        Rule(REQUEST_DURATION, (hist_sum("sglang:e2e_request_latency_seconds"),)),
        Rule(QUEUE_DURATION, (hist_sum("sglang:queue_time_seconds"),)),
        Rule(KV_XFER_BYTES, (hist_sum("sglang:kv_transfer_total_mb", MB),)),
        Rule(KV_XFER_SECONDS, (hist("sglang:kv_transfer_latency_ms", 0.001),)),
        Rule(KV_XFER_TIME, (hist_sum("sglang:kv_transfer_latency_ms", 0.001),)),
        Rule(KV_XFER_COUNT, (hist_sum("sglang:kv_transfer_latency_ms", part="_count"),)),
        Rule(KV_XFER_FAILURES, (total(counter("sglang:num_transfer_failed_reqs"),
                                      counter("sglang:num_bootstrap_failed_reqs")),)),
        Rule(KV_XFER_LAST, (gauge("sglang:kv_transfer_latency_ms", 0.001, combine="max", types=("gauge",)),)),
    ),
    "triton": (
        Rule(TTFT, (hist("nv_inference_first_response_histogram_ms", 0.001),)),
        Rule(RUNNING,
             _trt("request", "request_type", "scheduled") + _trt("request", "request_type", "active")),
        Rule(WAITING,
             _trt("request", "request_type", "waiting") + (gauge("nv_inference_pending_request_count"),)),
        # The backend's own usage fraction first (kv_cache_block_type="fraction", 25.x: what the
        # engine reports as its KV cache usage); used/max blocks where a version has no fraction.
        Rule(KV_USAGE,
             (gauge("nv_trt_llm_kv_cache_block_metrics", where={"kv_cache_block_type": "fraction"},
                    combine="max"),)
             + tuple(ratio(gauge(f"nv_trt_llm_kv_cache_block_{sfx}", where={"kv_cache_block_type": "used"}),
                           gauge(f"nv_trt_llm_kv_cache_block_{sfx}", where={"kv_cache_block_type": "max"}))
                     for sfx in ("metrics", "statistics"))),
        Rule(REQUESTS, (with_outcome("success", counter("nv_inference_request_success")),), promised=True),
        Rule(REQUESTS, (with_outcome("error", counter("nv_inference_request_failure")),)),
        Rule(REQUEST_DURATION, (counter("nv_inference_request_duration_us", 1e-6),), promised=True),
        Rule(QUEUE_DURATION, (counter("nv_inference_queue_duration_us", 1e-6),), promised=True),
        Rule(KV_XFER_TIME, (counter("nv_trt_llm_disaggregated_serving_metrics", 0.001,
                                    where={"disaggregated_serving_type": "kv_cache_transfer_ms"}),
                            gauge("nv_trt_llm_disaggregated_serving_metrics", 0.001,
                                  where={"disaggregated_serving_type": "kv_cache_transfer_ms"}))),
        Rule(KV_XFER_COUNT, (counter("nv_trt_llm_disaggregated_serving_metrics",
                                     where={"disaggregated_serving_type": "request_count"}),
                             gauge("nv_trt_llm_disaggregated_serving_metrics",
                                   where={"disaggregated_serving_type": "request_count"}))),
    ),
    # trtllm-serve: `trtllm_*` names, or 1.x's unprefixed ones renamed to them by canonical_names.
    "trtllm": (
        Rule(TTFT, (hist("trtllm_time_to_first_token_seconds"),), promised=True),
        Rule(ITL, (hist("trtllm_time_per_output_token_seconds"),), promised=True),
        Rule(E2E, (hist("trtllm_e2e_request_latency_seconds"),), promised=True),
        Rule(QUEUE_TIME, (hist("trtllm_request_queue_time_seconds"),), promised=True),
        Rule(RUNNING, (gauge("trtllm_num_requests_running"),)),
        Rule(WAITING, (gauge("trtllm_num_requests_waiting"),)),
        Rule(KV_USAGE, (gauge("trtllm_kv_cache_utilization", combine="max"),
                        ratio(gauge("trtllm_kv_cache_used_blocks"), gauge("trtllm_kv_cache_max_blocks")))),
        Rule(PREFIX_QUERIES, (counter("trtllm_prompt_tokens"),)),
        Rule(PREFIX_HITS, (counter("trtllm_prompt_cached_tokens"),)),
        Rule(PREFIX_HIT_RATIO, (gauge("trtllm_kv_cache_hit_rate", combine="max"),),
             fallback_only=PREFIX_HITS),
        Rule(PROMPT_TOKENS, (counter("trtllm_prompt_tokens"),)),
        Rule(GENERATION_TOKENS, (counter("trtllm_generation_tokens"),)),
        Rule(REQUESTS, (by_label("trtllm_request_success", "finished_reason", TRTLLM_OUTCOMES),),
             promised=True),
        Rule(REQUESTS, (with_outcome("error", counter("trtllm_request_error")),)),
        Rule(REQUEST_DURATION, (hist_sum("trtllm_e2e_request_latency_seconds"),)),
        Rule(QUEUE_DURATION, (hist_sum("trtllm_request_queue_time_seconds"),)),
    ),
    "tgi": (
        Rule(ITL, (hist("tgi_request_mean_time_per_token_duration"),), promised=True),
        Rule(E2E, (hist("tgi_request_duration"),), promised=True),
        Rule(QUEUE_TIME, (hist("tgi_request_queue_duration"),), promised=True),
        Rule(RUNNING, (gauge("tgi_batch_current_size"),), promised=True),
        Rule(WAITING, (gauge("tgi_queue_size"),), promised=True),
        Rule(PROMPT_TOKENS, (hist_sum("tgi_request_input_length"),), promised=True),
        Rule(GENERATION_TOKENS, (hist_sum("tgi_request_generated_tokens"),), promised=True),
        Rule(REQUESTS, (with_outcome("success", counter("tgi_request_success")),), promised=True),
        Rule(REQUESTS, (with_outcome("error", difference(counter("tgi_request_count"),
                                                         counter("tgi_request_success"))),)),
        Rule(REQUEST_DURATION, (hist_sum("tgi_request_duration"),)),
        Rule(QUEUE_DURATION, (hist_sum("tgi_request_queue_duration"),)),
    ),
}
# Triton families promised only where the TensorRT-LLM backend is loaded (engine label trtllm).
TRITON_TRTLLM_PROMISED = (RUNNING, KV_USAGE)


def keep_order(keep: Iterable[str]) -> tuple[str, ...]:
    wanted = set(keep)
    return tuple(k for k in KEEPABLE if k in wanted)


def normalise(families: dict[str, MetricFamily], fmt: str, endpoint: str, engine: str,
              keep: Iterable[str] = (), default_model: str = "",
              snapshot: Snapshot | None = None) -> Snapshot:
    """Add the infrapulse_llm_* series of one scrape to `snapshot` (a new one if None)."""
    snap = snapshot if snapshot is not None else Snapshot()
    kept_labels = keep_order(keep)
    ctx = context_for(fmt, kept_labels, default_model)
    ctx.trim(sum(len(fam.samples) for fam in families.values()))
    pad = ("",) * (len(KEEPABLE))
    positions = [KEEPABLE.index(k) for k in kept_labels]
    produced: set[str] = set()
    for rule in MAPPINGS[fmt]:
        if rule.fallback_only is not None and rule.fallback_only.name in produced:
            continue
        values = None
        for extractor in rule.alternatives:
            values = extractor(families, ctx)
            if values:
                break
        if values and rule.family.unit == "ratio":
            values = {k: v for k, v in values.items() if isinstance(v, float) and 0.0 <= v <= 1.0}
        if not values:
            continue
        produced.add(rule.family.name)
        outcome = rule.family is REQUESTS
        series = snap.series.setdefault(rule.family.name, {})
        for key, value in values.items():
            model = key[0]
            kept = key[1:1 + len(positions)]
            optional = list(pad)
            for pos, val in zip(positions, kept):
                optional[pos] = val
            labels: tuple[str, ...] = (endpoint, engine, model)
            if outcome:
                labels += (key[-1],)
            labels += tuple(optional)
            old = series.get(labels)
            if outcome and isinstance(old, float) and isinstance(value, float):
                series[labels] = old + value  # success and error may come from separate rules
            else:
                series[labels] = value
    return snap


# The family declarations live in .families; they stay importable from here for the health layer.
__all__ = ["E2E", "ENDPOINT_UP", "FORMATS", "GENERATION_TOKENS", "ITL", "KEEPABLE", "KV_USAGE",
           "KV_XFER_BYTES", "KV_XFER_COUNT", "KV_XFER_FAILURES", "KV_XFER_LAST", "KV_XFER_SECONDS",
           "KV_XFER_TIME", "MAPPINGS", "PREEMPTIONS", "PREFIX_HITS", "PREFIX_HIT_RATIO", "PREFIX_QUERIES",
           "PROMPT_TOKENS", "QUEUE_DURATION", "QUEUE_TIME", "REQUESTS", "REQUEST_DURATION", "RUNNING", "TTFT",
           "WAITING", "canonical_names", "context_for", "detect", "engine_label", "normalise"]
