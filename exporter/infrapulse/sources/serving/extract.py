"""Map vLLM, SGLang, TensorRT-LLM (Triton and trtllm-serve) and TGI metrics into infrapulse_llm_*.

Input: the families of one scrape (`infrapulse.textparse.parse`). Output: a `Snapshot` whose
series are labelled `{endpoint, engine, model}` plus the rank labels a user chose to keep.

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

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ... import catalog
from ...store import Histogram, Snapshot
from ...textparse import MetricFamily

# -- families -------------------------------------------------------------------------------

LABELS = ("endpoint", "engine", "model")
# Engine labels a user may keep instead of aggregating them away (canonical names).
KEEPABLE = ("dp_rank", "tp_rank", "pp_rank", "moe_ep_rank", "role", "is_streaming", "priority",
            "model_version")


def _declare(name: str, type_: str, help_: str, unit: str = "", extra: tuple[str, ...] = ()) -> catalog.Family:
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
                      "Time requests spent waiting before execution, where the engine measures it.", "seconds")
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
PROMPT_TOKENS = _declare("infrapulse_llm_prompt_tokens_total", catalog.COUNTER, "Prompt (prefill) tokens processed.")
GENERATION_TOKENS = _declare("infrapulse_llm_generation_tokens_total", catalog.COUNTER, "Tokens generated.")
REQUESTS = _declare("infrapulse_llm_requests_total", catalog.COUNTER,
                    "Finished requests by outcome: success (stop, length), abort, error.", extra=("outcome",))
PREEMPTIONS = _declare("infrapulse_llm_preemptions_total", catalog.COUNTER,
                       "Requests preempted (evicted from the batch for lack of KV cache).")
REQUEST_DURATION = _declare("infrapulse_llm_request_duration_seconds_total", catalog.COUNTER,
                            "Cumulative end-to-end request time (Triton's microsecond counter, or the sum "
                            "of the e2e histogram): rate() over requests gives the mean.", "seconds")
QUEUE_DURATION = _declare("infrapulse_llm_request_queue_duration_seconds_total", catalog.COUNTER,
                          "Cumulative queue time (Triton's microsecond counter, or the queue histogram's sum).",
                          "seconds")
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

# -- engines --------------------------------------------------------------------------------

# Prefix -> format. Order matters: Triton may host a vLLM backend, whose vllm: families win.
DETECT_ORDER = (("vllm:", "vllm"), ("sglang:", "sglang"), ("nv_trt_llm_", "triton"),
                ("nv_inference_", "triton"), ("trtllm_", "trtllm"), ("tgi_", "tgi"))
FORMATS = ("vllm", "sglang", "triton", "trtllm", "tgi")
MODEL_LABEL = {"vllm": "model_name", "sglang": "model_name", "triton": "model", "trtllm": "model_name",
               "tgi": ""}
# Ranks that replicate the same numbers (summing them would multiply): the lowest one is taken.
# Partition ranks (vLLM `engine`, SGLang `dp_rank`) and all other labels are summed/maxed.
REPLICA_LABELS = {"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank", "attn_cp_rank", "cp_rank"}
# Canonical kept label -> the engine's label, where they differ.
_ENGINE_LABEL_OF = {("vllm", "dp_rank"): "engine", ("*", "role"): "engine_type", ("*", "model_version"): "version"}


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
    return None


def canonical_names(families: dict[str, MetricFamily], fmt: str) -> dict[str, MetricFamily]:
    """Undo the ':' -> '_' escaping some OpenMetrics encoders apply to vllm:/sglang: names."""
    if fmt not in ("vllm", "sglang") or any(n.startswith(fmt + ":") for n in families):
        return families
    escaped = fmt + "_"
    return {(fmt + ":" + n[len(escaped):] if n.startswith(escaped) else n): f for n, f in families.items()}


def engine_label(fmt: str, families: dict[str, MetricFamily]) -> str:
    """The exported `engine` label: Triton with the TRT-LLM backend reports as trtllm."""
    if fmt == "triton":
        return "trtllm" if any(n.startswith("nv_trt_llm_") for n in families) else "triton"
    return fmt


# -- extraction -----------------------------------------------------------------------------

# Accumulators: key -> value, key = (model, kept label values...) [+ (outcome,)]
Key = tuple[str, ...]


@dataclass
class Context:
    fmt: str
    keep: tuple[str, ...]  # canonical labels kept, in KEEPABLE order
    default_model: str = ""

    def __post_init__(self) -> None:
        self.model_label = MODEL_LABEL[self.fmt]
        self.kept_sources = tuple(engine_label_for(self.fmt, k) for k in self.keep)
        self.replicas = tuple(sorted(REPLICA_LABELS - set(self.kept_sources)))

    def split(self, labels: dict[str, str]) -> tuple[Key, tuple]:
        """(target key, replica-rank key) of one sample's labels."""
        model = labels.get(self.model_label, "") if self.model_label else ""
        key = (model or self.default_model,) + tuple(labels.get(src, "") for src in self.kept_sources)
        if not self.replicas:
            return key, ()
        return key, tuple(_rank(labels.get(r)) for r in self.replicas)


def _rank(text: str | None) -> float:
    if text is None or text == "":
        return -1.0
    try:
        return float(text)
    except ValueError:
        return math.inf


class _Merge:
    """Merge series into target keys: lowest replica rank wins, others combine (sum or max)."""

    __slots__ = ("combine", "best")

    def __init__(self, combine: str) -> None:
        self.combine = combine
        self.best: dict[Key, tuple[tuple, object]] = {}

    def add(self, key: Key, replica: tuple, value) -> None:
        current = self.best.get(key)
        if current is None or replica < current[0]:
            self.best[key] = (replica, value)
        elif replica == current[0]:
            self.best[key] = (replica, self._combine(current[1], value))

    def _combine(self, a, b):
        if isinstance(a, _HistAcc):
            a.merge(b)
            return a
        return a + b if self.combine == "sum" else max(a, b)

    def result(self) -> dict[Key, object]:
        return {k: v for k, (_, v) in self.best.items()}


class _HistAcc:
    """A histogram under construction: cumulative counts by bound, merged on common bounds."""

    __slots__ = ("buckets", "sum", "count", "series")

    def __init__(self) -> None:
        self.buckets: dict[float, float] = {}
        self.sum = 0.0
        self.count = 0.0
        self.series = 1

    def merge(self, other: _HistAcc) -> None:
        mine, theirs = self.buckets, other.buckets
        if mine.keys() == theirs.keys():  # the usual case: every rank has the same buckets
            for le, c in theirs.items():
                mine[le] += c
        else:
            self.buckets = {le: mine[le] + theirs[le] for le in mine.keys() & theirs.keys()}
        self.sum += other.sum
        self.count += other.count

    def histogram(self, scale: float) -> Histogram | None:
        if not self.buckets or math.inf not in self.buckets:
            return None
        bounds = sorted(self.buckets)
        return Histogram(tuple((le * scale if le != math.inf else le, self.buckets[le]) for le in bounds),
                         self.sum * scale, self.count)


Extractor = Callable[[dict[str, MetricFamily], Context], dict[Key, object] | None]


def hist(name: str, scale: float = 1.0) -> Extractor:
    """A histogram family, bounds and sum multiplied by `scale` (unit conversion)."""

    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("histogram", "untyped", "unknown"):
            return None
        accs: dict[tuple, _HistAcc] = {}
        bucket, total, count = name + "_bucket", name + "_sum", name + "_count"
        for s in fam.samples:
            labels = s.labels
            # Series identity without `le`. Label order is stable within one writer's output
            # (prometheus_client appends le, Go sorts all names), so no sorting is needed.
            if s.name == bucket:
                le = labels.get("le")
                if le is None:
                    continue
                ident = tuple([kv for kv in labels.items() if kv[0] != "le"])
            elif s.name == total or s.name == count:
                ident = tuple(labels.items())
            else:
                continue
            acc = accs.get(ident)
            if acc is None:
                acc = accs[ident] = _HistAcc()
            if s.name == bucket:
                try:
                    acc.buckets[float(le)] = s.value
                except ValueError:
                    continue
            elif s.name == total:
                acc.sum = s.value
            else:
                acc.count = s.value
        if not accs:
            return None
        merge = _Merge("sum")
        for ident, acc in accs.items():
            key, replica = ctx.split(dict(ident))
            merge.add(key, replica, acc)
        out = {}
        for key, acc in merge.result().items():
            h = acc.histogram(scale)
            if h is not None:
                out[key] = h
        return out

    return extract


def hist_sum(name: str, scale: float = 1.0, part: str = "_sum") -> Extractor:
    """The `_sum` (or `_count`) of a histogram as a counter (TGI tokens, NIXL bytes)."""

    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("histogram", "summary", "untyped", "unknown"):
            return None
        return _scalar(fam, name + part, ctx, "sum", scale)

    return extract


def counter(name: str, scale: float = 1.0, where: dict[str, str] | None = None) -> Extractor:
    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("counter", "untyped", "unknown"):
            return None
        wanted = (name + "_total", name)
        return _scalar(fam, wanted, ctx, "sum", scale, where)

    return extract


def gauge(name: str, scale: float = 1.0, where: dict[str, str] | None = None, combine: str = "sum",
          types: tuple[str, ...] = ("gauge", "untyped", "unknown")) -> Extractor:
    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in types:
            return None
        return _scalar(fam, name, ctx, combine, scale, where)

    return extract


def ratio(numerator: Extractor, denominator: Extractor) -> Extractor:
    """numerator / denominator per key (TRT-LLM used / max KV blocks)."""

    def extract(families, ctx):
        num, den = numerator(families, ctx), denominator(families, ctx)
        if not num or not den:
            return None
        out = {k: num[k] / den[k] for k in num if den.get(k)}
        return out or None

    return extract


def difference(minuend: Extractor, subtrahend: Extractor) -> Extractor:
    """minuend - subtrahend per key, floored at 0 (all requests minus failed/aborted)."""

    def extract(families, ctx):
        a = minuend(families, ctx)
        if a is None:
            return None
        b = subtrahend(families, ctx) or {}
        return {k: max(0.0, v - b.get(k, 0.0)) for k, v in a.items()}

    return extract


def total(*parts: Extractor) -> Extractor:
    """Sum of several extractors (failures of several kinds); None if none is present."""

    def extract(families, ctx):
        out: dict[Key, float] = {}
        found = False
        for part in parts:
            values = part(families, ctx)
            if values is None:
                continue
            found = True
            for k, v in values.items():
                out[k] = out.get(k, 0.0) + v
        return out if found else None

    return extract


def by_label(name: str, label: str, outcomes: dict[str, str], default: str = "success") -> Extractor:
    """A counter split by a reason label, mapped to outcomes (the outcome is appended to the key)."""

    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("counter", "untyped", "unknown"):
            return None
        merge = _Merge("sum")
        wanted = (name + "_total", name)
        for s in fam.samples:
            if s.name not in wanted:
                continue
            key, replica = ctx.split(s.labels)
            outcome = outcomes.get(s.labels.get(label, ""), default)
            merge.add(key + (outcome,), replica, s.value)
        return merge.result()

    return extract


def when_present(name: str, extractor: Extractor) -> Extractor:
    """Use `extractor` only if family `name` exists (SGLang: prompt tokens count as prefix-cache
    queries only where cached-token counters exist to pair them with)."""

    def extract(families, ctx):
        return extractor(families, ctx) if name in families else None

    return extract


def with_outcome(outcome: str, extractor: Extractor) -> Extractor:
    def extract(families, ctx):
        values = extractor(families, ctx)
        if values is None:
            return None
        return {k + (outcome,): v for k, v in values.items()}

    return extract


def _scalar(fam: MetricFamily, names, ctx: Context, combine: str, scale: float,
            where: dict[str, str] | None = None) -> dict[Key, float] | None:
    if isinstance(names, str):
        names = (names,)
    merge = _Merge(combine)
    found = False
    for s in fam.samples:
        if s.name not in names:
            continue
        labels = s.labels
        if where and any(labels.get(k) != v for k, v in where.items()):
            continue
        found = True
        key, replica = ctx.split(labels)
        merge.add(key, replica, s.value * scale)
    return merge.result() if found else None


# -- the mapping ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    family: catalog.Family
    alternatives: tuple[Extractor, ...]
    fallback_only: catalog.Family | None = None  # emit only when this family produced nothing


VLLM_OUTCOMES = {"stop": "success", "length": "success", "repetition": "success", "abort": "abort",
                 "error": "error"}
TRTLLM_OUTCOMES = {"stop": "success", "length": "success", "abort": "abort", "cancelled": "abort",
                   "error": "error", "timeout": "error"}
MB = float(1 << 20)  # SGLang's *_mb metrics are MiB (bytes / 1024 / 1024)

MAPPINGS: dict[str, tuple[Rule, ...]] = {
    "vllm": (
        Rule(TTFT, (hist("vllm:time_to_first_token_seconds"),)),
        Rule(ITL, (hist("vllm:inter_token_latency_seconds"), hist("vllm:time_per_output_token_seconds"))),
        Rule(E2E, (hist("vllm:e2e_request_latency_seconds"),)),
        Rule(QUEUE_TIME, (hist("vllm:request_queue_time_seconds"),)),
        Rule(RUNNING, (gauge("vllm:num_requests_running"),)),
        Rule(WAITING, (gauge("vllm:num_requests_waiting"),)),
        Rule(KV_USAGE, (gauge("vllm:kv_cache_usage_perc", combine="max"),
                        gauge("vllm:gpu_cache_usage_perc", combine="max"))),
        Rule(PREFIX_QUERIES, (counter("vllm:prefix_cache_queries"), counter("vllm:gpu_prefix_cache_queries"))),
        Rule(PREFIX_HITS, (counter("vllm:prefix_cache_hits"), counter("vllm:gpu_prefix_cache_hits"))),
        Rule(PREFIX_HIT_RATIO, (gauge("vllm:gpu_prefix_cache_hit_rate", combine="max"),),
             fallback_only=PREFIX_QUERIES),
        Rule(PROMPT_TOKENS, (counter("vllm:prompt_tokens"),)),
        Rule(GENERATION_TOKENS, (counter("vllm:generation_tokens"),)),
        Rule(REQUESTS, (by_label("vllm:request_success", "finished_reason", VLLM_OUTCOMES),)),
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
        Rule(TTFT, (hist("sglang:time_to_first_token_seconds"),)),
        Rule(ITL, (hist("sglang:inter_token_latency_seconds"), hist("sglang:time_per_output_token_seconds"))),
        Rule(E2E, (hist("sglang:e2e_request_latency_seconds"),)),
        Rule(QUEUE_TIME, (hist("sglang:queue_time_seconds"),)),
        Rule(RUNNING, (gauge("sglang:num_running_reqs"),)),
        Rule(WAITING, (gauge("sglang:num_queue_reqs"),)),
        Rule(KV_USAGE, (gauge("sglang:token_usage", combine="max"),)),
        Rule(PREFIX_QUERIES, (when_present("sglang:cached_tokens", counter("sglang:prompt_tokens")),)),
        Rule(PREFIX_HITS, (counter("sglang:cached_tokens", where={"cache_source": "total"}),
                           counter("sglang:cached_tokens"))),
        Rule(PREFIX_HIT_RATIO, (gauge("sglang:cache_hit_rate", combine="max"),), fallback_only=PREFIX_HITS),
        Rule(PROMPT_TOKENS, (counter("sglang:prompt_tokens"),)),
        Rule(GENERATION_TOKENS, (counter("sglang:generation_tokens"),)),
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
        Rule(RUNNING, (gauge("nv_trt_llm_request_metrics", where={"request_type": "scheduled"}),
                       gauge("nv_trt_llm_request_metrics", where={"request_type": "active"}))),
        Rule(WAITING, (gauge("nv_trt_llm_request_metrics", where={"request_type": "waiting"}),
                       gauge("nv_inference_pending_request_count"))),
        Rule(KV_USAGE, (gauge("nv_trt_llm_kv_cache_block_metrics", where={"kv_cache_block_type": "fraction"},
                              combine="max"),
                        ratio(gauge("nv_trt_llm_kv_cache_block_metrics", where={"kv_cache_block_type": "used"}),
                              gauge("nv_trt_llm_kv_cache_block_metrics", where={"kv_cache_block_type": "max"})))),
        Rule(REQUESTS, (with_outcome("success", counter("nv_inference_request_success")),)),
        Rule(REQUESTS, (with_outcome("error", counter("nv_inference_request_failure")),)),
        Rule(REQUEST_DURATION, (counter("nv_inference_request_duration_us", 1e-6),)),
        Rule(QUEUE_DURATION, (counter("nv_inference_queue_duration_us", 1e-6),)),
        Rule(KV_XFER_TIME, (counter("nv_trt_llm_disaggregated_serving_metrics", 0.001,
                                    where={"disaggregated_serving_type": "kv_cache_transfer_ms"}),
                            gauge("nv_trt_llm_disaggregated_serving_metrics", 0.001,
                                  where={"disaggregated_serving_type": "kv_cache_transfer_ms"}))),
        Rule(KV_XFER_COUNT, (counter("nv_trt_llm_disaggregated_serving_metrics",
                                     where={"disaggregated_serving_type": "request_count"}),
                             gauge("nv_trt_llm_disaggregated_serving_metrics",
                                   where={"disaggregated_serving_type": "request_count"}))),
    ),
    "trtllm": (
        Rule(TTFT, (hist("trtllm_time_to_first_token_seconds"),)),
        Rule(ITL, (hist("trtllm_time_per_output_token_seconds"),)),
        Rule(E2E, (hist("trtllm_e2e_request_latency_seconds"),)),
        Rule(QUEUE_TIME, (hist("trtllm_request_queue_time_seconds"),)),
        Rule(RUNNING, (gauge("trtllm_num_requests_running"),)),
        Rule(WAITING, (gauge("trtllm_num_requests_waiting"),)),
        Rule(KV_USAGE, (gauge("trtllm_kv_cache_utilization", combine="max"),
                        ratio(gauge("trtllm_kv_cache_used_blocks"), gauge("trtllm_kv_cache_max_blocks")))),
        Rule(PREFIX_QUERIES, (counter("trtllm_prompt_tokens"),)),
        Rule(PREFIX_HITS, (counter("trtllm_prompt_cached_tokens"),)),
        Rule(PREFIX_HIT_RATIO, (gauge("trtllm_kv_cache_hit_rate", combine="max"),), fallback_only=PREFIX_HITS),
        Rule(PROMPT_TOKENS, (counter("trtllm_prompt_tokens"),)),
        Rule(GENERATION_TOKENS, (counter("trtllm_generation_tokens"),)),
        Rule(REQUESTS, (by_label("trtllm_request_success", "finished_reason", TRTLLM_OUTCOMES),)),
        Rule(REQUESTS, (with_outcome("error", counter("trtllm_request_error")),)),
        Rule(REQUEST_DURATION, (hist_sum("trtllm_e2e_request_latency_seconds"),)),
        Rule(QUEUE_DURATION, (hist_sum("trtllm_request_queue_time_seconds"),)),
    ),
    "tgi": (
        Rule(ITL, (hist("tgi_request_mean_time_per_token_duration"),)),
        Rule(E2E, (hist("tgi_request_duration"),)),
        Rule(QUEUE_TIME, (hist("tgi_request_queue_duration"),)),
        Rule(RUNNING, (gauge("tgi_batch_current_size"),)),
        Rule(WAITING, (gauge("tgi_queue_size"),)),
        Rule(PROMPT_TOKENS, (hist_sum("tgi_request_input_length"),)),
        Rule(GENERATION_TOKENS, (hist_sum("tgi_request_generated_tokens"),)),
        Rule(REQUESTS, (with_outcome("success", counter("tgi_request_success")),)),
        Rule(REQUESTS, (with_outcome("error", difference(counter("tgi_request_count"),
                                                         counter("tgi_request_success"))),)),
        Rule(REQUEST_DURATION, (hist_sum("tgi_request_duration"),)),
        Rule(QUEUE_DURATION, (hist_sum("tgi_request_queue_duration"),)),
    ),
}


def keep_order(keep: Iterable[str]) -> tuple[str, ...]:
    wanted = set(keep)
    return tuple(k for k in KEEPABLE if k in wanted)


def normalise(families: dict[str, MetricFamily], fmt: str, endpoint: str, engine: str,
              keep: Iterable[str] = (), default_model: str = "",
              snapshot: Snapshot | None = None) -> Snapshot:
    """Add the infrapulse_llm_* series of one scrape to `snapshot` (a new one if None)."""
    snap = snapshot if snapshot is not None else Snapshot()
    ctx = Context(fmt, keep_order(keep), default_model)
    pad = ("",) * (len(KEEPABLE))
    positions = [KEEPABLE.index(k) for k in ctx.keep]
    produced: set[str] = set()
    for rule in MAPPINGS[fmt]:
        if rule.fallback_only is not None and rule.fallback_only.name in produced:
            continue
        values = None
        for extractor in rule.alternatives:
            values = extractor(families, ctx)
            if values:
                break
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
            labels = (endpoint, engine, model)
            if outcome:
                labels += (key[-1],)
            labels += tuple(optional)
            if outcome and labels in series:  # success and error may come from separate rules
                series[labels] += value
            else:
                series[labels] = value
    return snap


__all__ = ["ENDPOINT_UP", "FORMATS", "KEEPABLE", "MAPPINGS", "canonical_names", "detect", "engine_label",
           "normalise"]
