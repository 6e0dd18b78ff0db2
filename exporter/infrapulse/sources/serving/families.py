"""The `infrapulse_llm_*` families the serving source exports (one schema for every engine).

Labels: `endpoint`, `engine`, `model`, plus the engine rank labels a user chose to keep
(`KEEPABLE`, optional: empty unless kept). `requests_total` adds `outcome`.
"""

from __future__ import annotations

from ... import catalog

LABELS = ("endpoint", "engine", "model")
# Engine labels a user may keep instead of aggregating them away (canonical names).
KEEPABLE = ("dp_rank", "tp_rank", "pp_rank", "moe_ep_rank", "role", "is_streaming", "priority",
            "model_version")


def _declare(name: str, type_: str, help_: str, unit: str = "",
             extra: tuple[str, ...] = ()) -> catalog.Family:
    return catalog.declare(name, type_, help_, LABELS + extra, unit=unit, source="serving",
                           optional_labels=KEEPABLE)


ENDPOINT_UP = catalog.declare(
    "infrapulse_llm_endpoint_up", catalog.GAUGE,
    "1 if the serving endpoint's /metrics was scraped and understood, else 0 (reason in "
    "infrapulse_source_status_info{source=\"serving\"}).", ("endpoint", "engine"), source="serving")
TTFT = _declare("infrapulse_llm_time_to_first_token_seconds", catalog.HISTOGRAM,
                "Time to first token, with the engine's own bucket bounds.", "seconds")
ITL = _declare("infrapulse_llm_inter_token_latency_seconds", catalog.HISTOGRAM,
               "Inter-token latency (vLLM inter_token_latency or older time_per_output_token, SGLang "
               "inter_token_latency, trtllm time_per_output_token, TGI mean_time_per_token).", "seconds")
E2E = _declare("infrapulse_llm_e2e_request_latency_seconds", catalog.HISTOGRAM,
               "End-to-end request latency, with the engine's own bucket bounds.", "seconds")
QUEUE_TIME = _declare("infrapulse_llm_request_queue_time_seconds", catalog.HISTOGRAM,
                      "Time requests spent waiting before execution, where the engine measures it.",
                      "seconds")
RUNNING = _declare("infrapulse_llm_requests_running", catalog.GAUGE,
                   "Requests in the running batch (summed over data-parallel ranks).")
WAITING = _declare("infrapulse_llm_requests_waiting", catalog.GAUGE,
                   "Requests queued, waiting for a batch slot or KV cache (summed over data-parallel ranks).")
KV_USAGE = _declare("infrapulse_llm_kv_cache_usage_ratio", catalog.GAUGE,
                    "KV-cache usage 0..1 (max over data-parallel ranks).", "ratio")
PREFIX_QUERIES = _declare("infrapulse_llm_prefix_cache_queries_total", catalog.COUNTER,
                          "Prompt tokens looked up in the prefix cache.")
PREFIX_HITS = _declare("infrapulse_llm_prefix_cache_hits_total", catalog.COUNTER,
                       "Prompt tokens found in the prefix cache.")
PREFIX_HIT_RATIO = _declare("infrapulse_llm_prefix_cache_hit_ratio", catalog.GAUGE,
                            "Prefix-cache hit ratio 0..1 as the engine reports it, only where no token "
                            "counters exist.", "ratio")
PROMPT_TOKENS = _declare("infrapulse_llm_prompt_tokens_total", catalog.COUNTER,
                         "Prompt (prefill) tokens processed.")
GENERATION_TOKENS = _declare("infrapulse_llm_generation_tokens_total", catalog.COUNTER, "Tokens generated.")
REQUESTS = _declare("infrapulse_llm_requests_total", catalog.COUNTER,
                    "Finished requests by outcome: success (stop, length), abort, error.", extra=("outcome",))
PREEMPTIONS = _declare("infrapulse_llm_preemptions_total", catalog.COUNTER,
                       "Requests preempted (evicted from the batch for lack of KV cache).")
REQUEST_DURATION = _declare("infrapulse_llm_request_duration_seconds_total", catalog.COUNTER,
                            "Cumulative end-to-end request time (Triton's microsecond counter, or the sum "
                            "of the e2e histogram): rate() over requests gives the mean.", "seconds")
QUEUE_DURATION = _declare("infrapulse_llm_request_queue_duration_seconds_total", catalog.COUNTER,
                          "Cumulative queue time (Triton's microsecond counter, or the queue histogram's "
                          "sum).", "seconds")
KV_XFER_BYTES = _declare("infrapulse_llm_kv_transfer_bytes_total", catalog.COUNTER,
                         "KV-cache bytes moved between prefill and decode instances (vLLM NIXL, SGLang "
                         "disaggregation).", "bytes")
KV_XFER_SECONDS = _declare("infrapulse_llm_kv_transfer_seconds", catalog.HISTOGRAM,
                           "Duration of one KV-cache transfer (vLLM NIXL, SGLang disaggregation).", "seconds")
KV_XFER_TIME = _declare("infrapulse_llm_kv_transfer_time_seconds_total", catalog.COUNTER,
                        "Cumulative KV-transfer time (TRT-LLM disaggregated serving counter, or the sum of "
                        "the transfer histogram).", "seconds")
KV_XFER_COUNT = _declare("infrapulse_llm_kv_transfers_total", catalog.COUNTER,
                         "KV-cache transfers (or disaggregated requests on TRT-LLM).")
KV_XFER_FAILURES = _declare("infrapulse_llm_kv_transfer_failures_total", catalog.COUNTER,
                            "Failed KV-cache transfers, handshakes/bootstraps included.")
KV_XFER_LAST = _declare("infrapulse_llm_kv_transfer_last_seconds", catalog.GAUGE,
                        "Latency of the last KV transfer, from older SGLang versions that exposed a gauge "
                        "instead of a histogram.", "seconds")
