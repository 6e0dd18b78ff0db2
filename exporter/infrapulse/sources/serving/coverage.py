"""What one scrape's mapping yields, for the store's coverage API (silent loss made visible).

Two kinds of mapping are reported per endpoint (`store.set_coverage("serving", endpoint, ...)`,
exported as infrapulse_source_mapping_series and shown in /api/v1/sources):

* the target families the engine's rule table promises (`Rule.promised`: every supported
  version exposes them): their series count now, 0 when the engine is detected but the family
  is missing, renamed or truncated away; other target families are listed while they yield;
* engine families nobody reads: a family with the engine's prefix that no rule reads and that
  is not known to be deliberately left out (`IGNORED`) is listed with 0 series and its samples
  are counted as unmapped (`store.count_unmapped`), so a family renamed by a new engine version
  shows up instead of vanishing quietly.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from ...store import Snapshot
from ...textparse import MetricFamily
from .normalize import MAPPINGS, TRITON_TRTLLM_PROMISED

# Engine families (after normalize.canonical_names) scanned for ones no rule reads.
ENGINE_PREFIXES = {"vllm": ("vllm:",), "sglang": ("sglang:",), "triton": ("nv_trt_llm_", "nv_inference_"),
                   "trtllm": ("trtllm_",), "tgi": ("tgi_",)}
# Families deliberately not mapped (configuration info, CPU swap space, request-parameter and
# throughput summaries the histograms already cover, per-phase timings without a target family).
IGNORED: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm:*_created", "vllm:cache_config_info", "vllm:cpu_cache_usage_perc",
             "vllm:cpu_prefix_cache_hit_rate", "vllm:num_requests_swapped",
             "vllm:num_requests_waiting_by_reason", "vllm:iteration_tokens_total",
             "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_params_*",
             "vllm:request_max_num_generation_tokens", "vllm:avg_*_throughput_toks_per_s",
             "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
             "vllm:request_decode_time_seconds", "vllm:lora_requests_info", "vllm:spec_decode_*",
             "vllm:engine_sleep_state", "vllm:model_forward_time_milliseconds",
             "vllm:model_execute_time_milliseconds"),
    "sglang": ("sglang:*_created", "sglang:func_latency_seconds", "sglang:gen_throughput",
               "sglang:num_used_tokens", "sglang:kv_transfer_speed_gb_s", "sglang:spec_accept_length"),
    "triton": ("nv_inference_count", "nv_inference_exec_count", "nv_inference_compute_*",
               "nv_inference_cache_*", "nv_inference_load_ratio", "nv_trt_llm_runtime_memory_*",
               "nv_trt_llm_general_*", "nv_trt_llm_inflight_batcher_*", "nv_trt_llm_v1_*"),
    "trtllm": ("trtllm_*_created", "trtllm_kv_cache_free_blocks", "trtllm_kv_cache_tokens_per_block",
               "trtllm_kv_cache_*_blocks", "trtllm_kv_cache_*_bytes", "trtllm_kv_cache_host_utilization",
               "trtllm_kv_cache_iter_*", "trtllm_request_prefill_time_seconds",
               "trtllm_request_decode_time_seconds", "trtllm_request_inference_time_seconds",
               "trtllm_prompt_cache_hit_tokens", "trtllm_prompt_cached_tokens_per_request",
               "trtllm_spec_decode_*", "trtllm_*_perplexity", "trtllm_scheduled_batch_size",
               "trtllm_num_requests_completed", "trtllm_max_*", "trtllm_iteration_latency_seconds",
               "trtllm_*_memory_usage_bytes", "trtllm_num_context_requests", "trtllm_num_generation_requests",
               "trtllm_num_paused_requests", "trtllm_num_scheduled_requests", "trtllm_total_context_tokens",
               "trtllm_avg_decoded_tokens_per_iter", "trtllm_prefill_batch_*", "trtllm_*_config_info"),
    "tgi": ("tgi_batch_*", "tgi_request_failure", "tgi_request_skipped_tokens", "tgi_request_max_new_tokens",
            "tgi_request_inference_duration", "tgi_request_validation_duration"),
}
# At most this many unread engine families are listed per endpoint (each is a mapping series).
MAX_UNREAD = 20
READS = {fmt: frozenset().union(*(e.reads for rule in rules for e in rule.alternatives))
         for fmt, rules in MAPPINGS.items()}


@dataclass(frozen=True)
class Unread:
    family: str  # the engine family no rule reads
    samples: int  # its samples in this scrape
    example: str  # one sample, name{labels}


def promised_families(fmt: str, engine: str) -> tuple[str, ...]:
    names = [rule.family.name for rule in MAPPINGS[fmt] if rule.promised]
    if fmt == "triton" and engine == "trtllm":
        names += [f.name for f in TRITON_TRTLLM_PROMISED]
    return tuple(dict.fromkeys(names))


def unread_families(families: dict[str, MetricFamily], fmt: str) -> list[Unread]:
    """Engine families in this scrape that no rule reads and that are not known to be left out."""
    out = []
    for name in sorted(families):
        if not name.startswith(ENGINE_PREFIXES[fmt]) or name in READS[fmt]:
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in IGNORED[fmt]):
            continue
        fam = families[name]
        example = fam.samples[0] if fam.samples else None
        text = name if example is None else example.name + "{" + ",".join(
            f'{k}="{v}"' for k, v in example.labels.items()) + "}"
        out.append(Unread(name, len(fam.samples), text))
    return out[:MAX_UNREAD]


def mapping_coverage(families: dict[str, MetricFamily], fmt: str, engine: str,
                     snapshot: Snapshot) -> tuple[dict[str, int], list[Unread]]:
    """({mapping: series now}, unread engine families) of one normalised scrape."""
    series = {name: len(snapshot.series.get(name, {})) for name in promised_families(fmt, engine)}
    for rule in MAPPINGS[fmt]:
        produced = len(snapshot.series.get(rule.family.name, {}))
        if produced:
            series[rule.family.name] = produced
    unread = unread_families(families, fmt)
    for item in unread:
        series[item.family] = 0
    return series, unread
