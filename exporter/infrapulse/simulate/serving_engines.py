"""Simulated LLM serving engines: real-format /metrics servers driven by a small load model.

Each `EngineServer` serves one engine's exposition on a loopback port (aiohttp): vLLM 0.33
(V1 names and buckets, data-parallel `engine` label), an older vLLM (V0 0.5/0.6: gpu_cache_usage_perc,
time_per_output_token_seconds, prefix-cache hit rates of -1, no `engine` label), the same under
Ray Serve (`ray_vllm:` names, Ray's labels), SGLang 0.5 (tp_rank labels, TTFT buckets from 0.1 s),
Triton with the TensorRT-LLM backend (nv_inference_* µs counters, nv_trt_llm_*_metrics gauges),
trtllm-serve 1.x (unprefixed names labelled engine_type/model_name) and TGI (tgi_*). Shapes follow
the real captures in shared/real/serving/ where one exists (vLLM V0 and Ray, SGLang's sum-first
histograms, trtllm-serve, TGI's bucket series 0.0001 * 1.5^n) and the engines' sources otherwise
(docs/serving.md says which is which).

The load model: Poisson arrivals, prompt/output lengths around a mean, a batch limit and a
KV-cache capacity in tokens. Requests queue until a batch slot and KV room are free; prefill
takes prompt/prefill_tps seconds; decode produces one token per ITL, which grows with the batch;
a full KV cache preempts the newest request. So queueing, KV usage and TTFT respond to load.

Scenarios (ctx.scenarios): ttft-surge (prefill 10x slower and every first token waits 2 s on a
congested KV-cache transfer: p95 ~4 s, every request past the 1 s SLI), queue-buildup (4x
arrivals), engine-restart (/metrics answers 503 while active, as while a model reloads; then the
engine comes back with counters and histograms from zero). Network faults on the engine's node
(pfc-storm, ecn-spike, link-flap, rdma-retrans) slow decode and prefill with arrivals unchanged,
and `xid` takes away the rank on the lost GPU (fault_coupling.py).
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .fault_coupling import Slowdown, gpu_lost, network_slowdown

if TYPE_CHECKING:  # demo imports every simulator module, so only for the annotations
    from .demo import DemoContext, DemoPart
    from .scenarios import ScenarioBoard

SCENARIOS = {
    "ttft-surge": "serving engines prefill 10x slower and every first token waits 2 s on a congested "
                  "KV-cache transfer: TTFT p95 ~4 s, well past the 1.5 s SLO and its 3 s bad level",
    "queue-buildup": "serving engines get 4x the request rate: queues, KV-cache usage and TTFT grow",
    "engine-restart": "serving engines restart: /metrics answers 503 while the scenario is active (a model "
                      "reloading), then they come back with counters from zero",
}
# ttft-surge: how much slower prefill gets, and how long every first token waits on the KV-cache
# transfer from prefill to decode (a congested path; the NIXL transfer histogram shows it).
SURGE_PREFILL_FACTOR = 10.0
SURGE_TRANSFER_STALL_SECONDS = 2.0

# -- bucket bounds (reference section 3.1, 4, 5) -------------------------------------------------
VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
            40.0, 80.0)
VLLM_LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                240.0, 480.0, 960.0, 1920.0, 7680.0)
VLLM_V0_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
VLLM_V0_TPOT = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
VLLM_V0_E2E = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
NIXL_XFER = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
NIXL_BYTES = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))
SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_ITL = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
              0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
SGLANG_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800,
              2400)
SGLANG_QUEUE = (0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60,
                70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000,
                2500, 3000)
SGLANG_XFER_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
SGLANG_XFER_MB = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000)
TRTLLM_TPOT = VLLM_ITL[:19]
TGI_DURATION = tuple(0.0001 * 1.5 ** (n + 1) for n in range(35))


class Hist:
    """Non-cumulative bucket counts; rendered cumulative."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0.0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0.0

    def observe(self, value: float, n: float = 1.0) -> None:
        lo, hi = 0, len(self.bounds)
        while lo < hi:  # first bound >= value
            mid = (lo + hi) // 2
            if self.bounds[mid] < value:
                lo = mid + 1
            else:
                hi = mid
        self.counts[lo] += n
        self.sum += value * n
        self.count += n

    def cumulative(self) -> list[tuple[float, float]]:
        out, running = [], 0.0
        for bound, c in zip(self.bounds + (math.inf,), self.counts):
            running += c
            out.append((bound, running))
        return out


@dataclass
class Request:
    arrival: float
    prompt: int
    output: int
    start: float = 0.0
    first_token: float = 0.0
    generated: float = 0.0
    transfer: float = 0.0  # seconds of KV-cache transfer before the first token


@dataclass
class LoadModel:
    """One engine (or one data-parallel rank) under load; advance(t) moves it to model time t."""

    arrival_rate: float = 2.0  # requests per second
    prompt_mean: int = 600
    output_mean: int = 180
    batch_limit: int = 32
    kv_capacity: int = 60000  # tokens
    prefill_tps: float = 12000.0  # prompt tokens per second
    itl_base: float = 0.012  # seconds per token with an empty batch
    seed: int = 1
    step: float = 0.05
    ttft_bounds: tuple[float, ...] = VLLM_TTFT
    itl_bounds: tuple[float, ...] = VLLM_ITL
    e2e_bounds: tuple[float, ...] = VLLM_LATENCY
    queue_bounds: tuple[float, ...] = VLLM_LATENCY
    load_factor: Callable[[], float] = lambda: 1.0
    prefill_factor: Callable[[], float] = lambda: 1.0
    transfer_stall: Callable[[], float] = lambda: 0.0  # seconds added to each KV-cache transfer
    # Decode slower by this factor: a network fault on the node stalls tensor-parallel collectives
    # (fault_coupling.py); arrivals do not change.
    itl_factor: Callable[[], float] = lambda: 1.0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.rng = random.Random(self.seed)
        self.lost = False  # the rank's GPU is gone: no progress, arrivals go to the other ranks
        self.now = 0.0
        self.queue: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.running: list[Request] = []
        self.kv_used = 0.0
        self.ttft = Hist(self.ttft_bounds)
        self.itl = Hist(self.itl_bounds)
        self.e2e = Hist(self.e2e_bounds)
        self.queue_time = Hist(self.queue_bounds)
        self.xfer_seconds = Hist(NIXL_XFER)
        self.xfer_bytes = Hist(NIXL_BYTES)
        self.prompt_tokens = 0.0
        self.generation_tokens = 0.0
        self.cached_tokens = 0.0
        self.finished = {"stop": 0.0, "length": 0.0, "abort": 0.0}
        self.preemptions = 0.0
        self.started_wall = time.time()

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.kv_used / self.kv_capacity)

    def lose_gpu(self) -> None:
        """The rank's GPU fell off the bus: its in-flight and queued requests are aborted and it
        makes no progress until `recover()`."""
        self.lost = True
        self.finished["abort"] += len(self.queue) + len(self.prefilling) + len(self.running)
        self.queue.clear()
        self.prefilling.clear()
        self.running.clear()
        self.kv_used = 0.0

    def recover(self) -> None:
        self.lost = False

    def advance(self, until: float) -> None:
        until = max(until, self.now)
        if self.lost:  # time passes, nothing happens
            self.now = until
            return
        until = min(until, self.now + 120.0)  # bounded catch-up after a long pause
        while self.now + self.step <= until:
            self._tick(self.step)

    def _poisson(self, lam: float) -> int:
        limit, k, p = math.exp(-lam), 0, 1.0
        while True:
            p *= self.rng.random()
            if p <= limit:
                return k
            k += 1

    def _tick(self, dt: float) -> None:
        self.now += dt
        rng = self.rng
        for _ in range(self._poisson(self.arrival_rate * self.load_factor() * dt)):
            prompt = max(16, int(rng.expovariate(1 / self.prompt_mean)))
            output = max(4, int(rng.expovariate(1 / self.output_mean)))
            self.queue.append(Request(self.now, prompt, output))
        # Admission: a batch slot and KV room for the prompt.
        while self.queue and len(self.running) + len(self.prefilling) < self.batch_limit:
            req = self.queue[0]
            if self.kv_used + req.prompt > self.kv_capacity:
                break
            self.queue.popleft()
            req.start = self.now
            self.kv_used += req.prompt
            self.queue_time.observe(self.now - req.arrival)
            prefill = req.prompt / (self.prefill_tps / self.prefill_factor())
            req.transfer = 0.004 + req.prompt * 2e-6 + self.transfer_stall()
            req.first_token = self.now + prefill + req.transfer
            self.prefilling.append(req)
            cached = int(req.prompt * 0.3)
            self.prompt_tokens += req.prompt
            self.cached_tokens += cached
        for req in [r for r in self.prefilling if r.first_token <= self.now]:
            self.prefilling.remove(req)
            self.ttft.observe(req.first_token - req.arrival)
            self.running.append(req)
            self.xfer_seconds.observe(req.transfer)
            self.xfer_bytes.observe(req.prompt * 131072.0)
        if not self.running:
            return
        itl = self.itl_base * (1 + 1.5 * len(self.running) / self.batch_limit) * self.itl_factor()
        tokens_each = dt / itl
        self.itl.observe(itl, tokens_each * len(self.running))
        for req in list(self.running):
            req.generated += tokens_each
            self.kv_used += tokens_each
            self.generation_tokens += tokens_each
            if req.generated >= req.output:
                self.running.remove(req)
                self.kv_used -= req.prompt + req.generated
                self.e2e.observe(self.now - req.arrival)
                self.finished["length" if rng.random() < 0.2 else "stop"] += 1
        while self.kv_used > self.kv_capacity and self.running:
            victim = self.running.pop()
            self.kv_used -= victim.prompt + victim.generated
            victim.generated = 0.0
            self.preemptions += 1
            self.queue.appendleft(victim)
        self.kv_used = max(0.0, self.kv_used)


# -- exposition writing ---------------------------------------------------------------------


def _fmt(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


class Writer:
    """`sort_labels`: write label names sorted, `le` among them (Ray's and Go's encoders do)."""

    def __init__(self, sort_labels: bool = False) -> None:
        self.lines: list[str] = []
        self.sort_labels = sort_labels

    def _lab(self, labels: dict[str, str]) -> str:
        return _labels(dict(sorted(labels.items())) if self.sort_labels else labels)

    def head(self, name: str, typ: str, help_: str) -> None:
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {typ}")

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        self.lines.append(f"{name}{self._lab(labels)} {_fmt(value)}")

    def histogram(self, name: str, labels: dict[str, str], hist: Hist, scale: float = 1.0,
                  order: str = "buckets-first") -> None:
        """`scale` converts units for engines that report ms (the bounds stay the engine's).
        `order="sum-first"`: `_sum`, buckets, `_count`, as prometheus_client's multiprocess
        collector writes them (SGLang, trtllm-serve captures)."""
        total = f"{name}_sum{self._lab(labels)} {_fmt(hist.sum * scale)}"
        if order == "sum-first":
            self.lines.append(total)
        for bound, cum in hist.cumulative():
            le = "+Inf" if math.isinf(bound) else _fmt(bound)
            self.lines.append(f"{name}_bucket{self._lab({**labels, 'le': le})} {_fmt(cum)}")
        self.lines.append(f"{name}_count{self._lab(labels)} {_fmt(hist.count)}")
        if order != "sum-first":
            self.lines.append(total)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


# (family name, help, what each rank reports for it)
_Stat = tuple[str, str, Callable[[LoadModel], float]]


def render_vllm(ranks: list[LoadModel], model: str) -> str:
    w = Writer()
    gauges: list[_Stat] = [
        ("vllm:num_requests_running", "Number of requests in model execution batches.",
         lambda m: len(m.running) + len(m.prefilling)),
        ("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
         lambda m: len(m.queue)),
        ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
         lambda m: m.kv_usage)]
    for name, help_, get in gauges:
        w.head(name, "gauge", help_)
        for i, m in enumerate(ranks):
            w.sample(name, {"model_name": model, "engine": str(i)}, get(m))
    counters: list[_Stat] = [
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", lambda m: m.prompt_tokens),
        ("vllm:generation_tokens", "Number of generation tokens processed.",
         lambda m: math.floor(m.generation_tokens)),
        ("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
         lambda m: m.preemptions),
        ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
         lambda m: m.prompt_tokens),
        ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
         lambda m: m.cached_tokens),
        ("vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.",
         lambda m: 0.0)]
    for name, help_, get in counters:
        w.head(name + "_total", "counter", help_)
        for i, m in enumerate(ranks):
            w.sample(name + "_total", {"model_name": model, "engine": str(i)}, get(m))
    w.head("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    for i, m in enumerate(ranks):
        for reason in ("stop", "length", "abort", "error", "repetition"):
            w.sample("vllm:request_success_total",
                     {"model_name": model, "engine": str(i), "finished_reason": reason},
                     m.finished.get(reason, 0.0))
    hists = [("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
             ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "itl"),
             ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
             ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              "queue_time"),
             ("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.",
              "xfer_seconds"),
             ("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.",
              "xfer_bytes")]
    for name, help_, attr in hists:
        w.head(name, "histogram", help_)
        for i, m in enumerate(ranks):
            w.histogram(name, {"model_name": model, "engine": str(i)}, getattr(m, attr))
    w.head("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
    w.sample("process_start_time_seconds", {}, ranks[0].started_wall)
    return w.text()


# Ray Serve 2.32's labels on every application metric (vllm-0.6-ray2.32-datadog-2024.prom).
RAY_LABELS = {"Component": "core_worker", "NodeAddress": "10.0.0.7",
              "SessionName": "session_2024-12-11_21-36-21_1", "Version": "2.32.0",
              "WorkerId": "6ad5887a3c1c6cefcfa31b4f9a55bdca247686ca9bcd217726128dc8"}


def render_vllm_v0(m: LoadModel, model: str, prefix: str = "vllm:",
                   extra: dict[str, str] | None = None) -> str:
    """vLLM 0.5/0.6 (V0 engine), as vllm-0.5-v0-datadog-2024.prom: no `engine` label,
    gpu_cache_usage_perc, time_per_output_token, no `_created` series, prefix-cache hit rates of -1
    ("no data": prefix caching off, V0's default). Under Ray Serve (`prefix="ray_vllm:"` with Ray's
    labels, sorted) as vllm-0.6-ray2.32-datadog-2024.prom."""
    w = Writer(sort_labels=bool(extra))
    lab = {**(extra or {}), "model_name": model}
    for name, help_, value in [
        ("num_requests_running", "Number of requests currently running on GPU.",
         len(m.running) + len(m.prefilling)),
        ("num_requests_swapped", "Number of requests swapped to CPU.", 0.0),
        ("num_requests_waiting", "Number of requests waiting to be processed.", len(m.queue)),
        ("gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", m.kv_usage),
        ("cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", 0.0),
        ("gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", -1.0),
        ("cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", -1.0),
    ]:
        w.head(prefix + name, "gauge", help_)
        w.sample(prefix + name, lab, value)
    for name, help_, value in [
        ("num_preemptions", "Cumulative number of preemption from the engine.", m.preemptions),
        ("prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens),
        ("generation_tokens", "Number of generation tokens processed.", math.floor(m.generation_tokens)),
    ]:
        w.head(prefix + name + "_total", "counter", help_)
        w.sample(prefix + name + "_total", lab, value)
    w.head(prefix + "request_success_total", "counter", "Count of successfully processed requests.")
    for reason in ("stop", "length", "abort"):
        w.sample(prefix + "request_success_total", {**lab, "finished_reason": reason}, m.finished[reason])
    for name, help_, hist in [
        ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft),
        ("time_per_output_token_seconds", "Histogram of time per output token in seconds.", m.itl),
        ("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", m.e2e),
    ]:
        w.head(prefix + name, "histogram", help_)
        w.histogram(prefix + name, lab, hist)
    return w.text()


def render_sglang(m: LoadModel, model: str, tp: int = 2) -> str:
    """SGLang 0.5: scheduler gauges from every TP rank (same values), tokenizer histograms once;
    prometheus_client's multiprocess writer: sorted labels, `_sum` before the buckets."""
    w = Writer(sort_labels=True)
    for name, help_, value in [
        ("sglang:num_running_reqs", "The number of running requests.", len(m.running) + len(m.prefilling)),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", len(m.queue)),
        ("sglang:token_usage", "The token usage.", m.kv_usage),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.",
         m.cached_tokens / m.prompt_tokens if m.prompt_tokens else 0.0),
        ("sglang:gen_throughput", "The generation throughput (token/s).", len(m.running) / m.itl_base),
    ]:
        w.head(name, "gauge", help_)
        for rank in range(tp):
            w.sample(name,
                     {"model_name": model, "engine_type": "unified", "tp_rank": str(rank), "pp_rank": "0",
                      "moe_ep_rank": "0"}, value)
    base = {"model_name": model, "engine_type": "unified"}
    for name, help_, value, extra in [
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", m.prompt_tokens, {}),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.",
         math.floor(m.generation_tokens), {}),
        ("sglang:cached_tokens_total", "Number of cached prompt tokens.", m.cached_tokens,
         {"cache_source": "total"}),
        ("sglang:num_requests_total", "Number of requests processed.",
         sum(m.finished.values()), {"is_streaming": "true"}),
        ("sglang:num_aborted_requests_total", "Number of requests aborted.", m.finished["abort"], {}),
    ]:
        w.head(name, "counter", help_)
        w.sample(name, {**base, **extra}, value)
    for name, help_, hist in [
        ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft),
        ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl),
        ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", m.e2e),
        ("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", m.queue_time),
    ]:
        w.head(name, "histogram", help_)
        extra = {"is_streaming": "true"} if name != "sglang:queue_time_seconds" else {}
        w.histogram(name, {**base, **extra}, hist, order="sum-first")
    return w.text()


def render_triton(m: LoadModel, model: str) -> str:
    """Triton + TensorRT-LLM backend: µs counters per model of the ensemble, nv_trt_llm_* gauges."""
    w = Writer()
    done = m.finished["stop"] + m.finished["length"]
    e2e_us = m.e2e.sum * 1e6
    queue_us = m.queue_time.sum * 1e6
    models = ("ensemble", "preprocessing", model, "postprocessing")
    for name, help_, value in [
        ("nv_inference_request_success", "Number of successful inference requests, all batch sizes", done),
        ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
         m.finished["abort"]),
        ("nv_inference_count", "Number of inferences performed (does not include cached requests)", done),
        ("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)",
         done),
        ("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds "
                                             "(includes cached requests)", e2e_us),
        ("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds "
                                           "(includes cached requests)", queue_us),
    ]:
        w.head(name, "counter", help_)
        for mod in models:
            share = 1.0 if mod in ("ensemble", model) else 0.01
            w.sample(name, {"model": mod, "version": "1"},
                     value if "duration" not in name else value * share)
    w.head("nv_inference_pending_request_count", "gauge", "Instantaneous number of pending requests awaiting "
                                                          "execution per-model.")
    for mod in models:
        w.sample("nv_inference_pending_request_count", {"model": mod, "version": "1"},
                 len(m.queue) if mod == "ensemble" else 0.0)
    lab = {"model": model, "version": "1"}
    w.head("nv_trt_llm_request_metrics", "gauge", "TRT LLM request metrics")
    for typ, value in (("context", len(m.prefilling)), ("scheduled", len(m.running) + len(m.prefilling)),
                       ("max", m.batch_limit), ("active", len(m.running) + len(m.prefilling)),
                       ("waiting", len(m.queue))):
        w.sample("nv_trt_llm_request_metrics", {**lab, "request_type": typ}, value)
    blocks_max = m.kv_capacity // 64
    used = math.ceil(m.kv_used / 64)
    w.head("nv_trt_llm_kv_cache_block_metrics", "gauge", "TRT LLM KV cache block metrics")
    for typ, value in (("tokens_per", 64), ("used", used), ("free", blocks_max - used), ("max", blocks_max)):
        w.sample("nv_trt_llm_kv_cache_block_metrics", {**lab, "kv_cache_block_type": typ}, value)
    # Disaggregated serving counters, 0 on an aggregated deployment (as in the README sample).
    w.head("nv_trt_llm_disaggregated_serving_metrics", "counter", "TRT LLM disaggregated serving metrics")
    for typ in ("kv_cache_transfer_ms", "request_count"):
        w.sample("nv_trt_llm_disaggregated_serving_metrics", {**lab, "disaggregated_serving_type": typ}, 0.0)
    w.head("nv_trt_llm_inflight_batcher_metrics", "gauge", "TRT LLM inflight_batcher-specific metrics")
    w.sample("nv_trt_llm_inflight_batcher_metrics",
             {**lab, "inflight_batcher_specific_metric": "generation_requests"}, len(m.running))
    w.head("nv_gpu_utilization", "gauge", "GPU utilization rate [0.0 - 1.0)")
    w.sample("nv_gpu_utilization", {"gpu_uuid": "GPU-7c3a0d2e-5b1f-4a8e-9d6c-2f0e1b3a4c5d"},
             min(0.99, 0.2 + 0.8 * len(m.running) / m.batch_limit))
    return w.text()


def render_trtllm_serve(m: LoadModel, model: str) -> str:
    """trtllm-serve 1.x (/prometheus/metrics), as trtllm-serve-1.x-aibrix2004.prom: TensorRT-LLM's
    MetricsCollector before its `trtllm_` prefix, five families labelled {engine_type, model_name}
    (engine_type "undefined" as captured; bucket bounds as the collector's defaults)."""
    w = Writer()
    lab = {"engine_type": "undefined", "model_name": model}
    w.head("request_success_total", "counter", "Count of successfully processed requests.")
    for reason in ("stop", "length", "abort"):
        w.sample("request_success_total", {**lab, "finished_reason": reason}, m.finished[reason])
    for name, help_, hist in [
        ("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", m.e2e),
        ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft),
        ("time_per_output_token_seconds", "Histogram of time per output token in seconds.", m.itl),
        ("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", m.queue_time),
    ]:
        w.head(name, "histogram", help_)
        w.histogram(name, lab, hist, order="sum-first")
    return w.text()


def render_tgi(m: LoadModel, model: str) -> str:
    """TGI router (metrics-exporter-prometheus), as tgi-2.x-datadog.prom: no model label, counters
    without _total, a blank line after each family, HELP only where the router describes one."""
    w = Writer()
    done = m.finished["stop"] + m.finished["length"]

    def head(name: str, typ: str, help_: str = "") -> None:
        if help_:
            w.lines.append(f"# HELP {name} {help_}")
        w.lines.append(f"# TYPE {name} {typ}")

    for name, typ, help_, labels, value in (
        ("tgi_request_success", "counter", "Number of successful requests", {}, done),
        ("tgi_request_count", "counter", "Total number of requests", {}, sum(m.finished.values())),
        ("tgi_request_failure", "counter", "", {"err": "validation"}, m.finished["abort"]),
        ("tgi_queue_size", "gauge", "Current queue size", {}, len(m.queue)),
        ("tgi_batch_current_max_tokens", "gauge", "Maximum tokens for the current batch", {}, m.kv_used),
        ("tgi_batch_current_size", "gauge", "Current batch size", {}, len(m.running)),
    ):
        head(name, typ, help_)
        w.sample(name, labels, value)
        w.lines.append("")
    inp = Hist([m.prompt_mean * 8 / 100 * (i + 1) for i in range(100)])
    inp.sum, inp.count = m.prompt_tokens, m.e2e.count
    gen = Hist([m.output_mean * 8 / 100 * (i + 1) for i in range(100)])
    gen.sum, gen.count = math.floor(m.generation_tokens), m.e2e.count
    for name, help_, hist in (("tgi_request_input_length", "Input token length per request", inp),
                              ("tgi_request_duration", "Request duration", m.e2e),
                              ("tgi_request_queue_duration", "Request queue duration", m.queue_time),
                              ("tgi_request_mean_time_per_token_duration", "Mean time per token per request",
                               m.itl),
                              ("tgi_request_generated_tokens", "Generated tokens per request", gen)):
        head(name, "histogram", help_)
        w.histogram(name, {}, hist)
        w.lines.append("")
    return w.text()


# -- servers --------------------------------------------------------------------------------

ENGINE_VARIANTS = ("vllm", "vllm-v0", "vllm-ray", "sglang", "triton-trtllm", "trtllm-serve", "tgi")
_BOUNDS = {
    "vllm": (VLLM_TTFT, VLLM_ITL, VLLM_LATENCY, VLLM_LATENCY),
    "vllm-v0": (VLLM_V0_TTFT, VLLM_V0_TPOT, VLLM_V0_E2E, VLLM_V0_E2E),
    "vllm-ray": (VLLM_V0_TTFT, VLLM_V0_TPOT, VLLM_V0_E2E, VLLM_V0_E2E),
    "sglang": (SGLANG_TTFT, SGLANG_ITL, SGLANG_E2E, SGLANG_QUEUE),
    "triton-trtllm": (VLLM_TTFT, VLLM_ITL, VLLM_LATENCY, VLLM_LATENCY),
    "trtllm-serve": (VLLM_TTFT, TRTLLM_TPOT, VLLM_LATENCY, VLLM_LATENCY),
    "tgi": (TGI_DURATION, TGI_DURATION, TGI_DURATION, TGI_DURATION),
}


class EngineServer:
    """One simulated engine on 127.0.0.1:<port>/metrics."""

    def __init__(self, variant: str, model: str = "llama-3-8b", arrival_rate: float = 2.0, seed: int = 1,
                 scenarios: ScenarioBoard | None = None, dp_ranks: int = 1,
                 clock: Callable[[], float] = time.monotonic,
                 node: str = "", gpus: tuple[int, ...] = (), **load: Any) -> None:
        """`node`: the host the engine runs on, so network faults placed there slow it; `gpus`:
        the GPU of each data-parallel rank, so a lost GPU takes its rank away."""
        if variant not in ENGINE_VARIANTS:
            raise ValueError(f"unknown engine variant {variant!r}")
        self.variant = variant
        self.model = model
        self.scenarios = scenarios
        self.clock = clock
        self.node = node
        self.gpus = gpus
        self._t0 = clock()
        ttft, itl, e2e, queue = _BOUNDS[variant]
        ranks = dp_ranks if variant == "vllm" else 1
        self.ranks = [LoadModel(arrival_rate=arrival_rate / ranks, seed=seed + i, ttft_bounds=ttft,
                                itl_bounds=itl, e2e_bounds=e2e, queue_bounds=queue,
                                load_factor=self._load_factor, prefill_factor=self._prefill_factor,
                                transfer_stall=self._transfer_stall, itl_factor=self._itl_factor, **load)
                      for i in range(ranks)]
        self._down = False  # engine-restart: down while the scenario is active
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def _active(self, name: str) -> bool:
        return bool(self.scenarios is not None and self.scenarios.active(name))

    def _slowdown(self) -> Slowdown:
        return network_slowdown(self.scenarios, self.node) if self.node else Slowdown()

    def _load_factor(self) -> float:
        """Per rank: the clients' rate (4x in queue-buildup), spread over the ranks still alive."""
        alive = sum(not m.lost for m in self.ranks)
        spread = len(self.ranks) / alive if alive else 1.0
        return (4.0 if self._active("queue-buildup") else 1.0) * spread

    def _prefill_factor(self) -> float:
        surge = SURGE_PREFILL_FACTOR if self._active("ttft-surge") else 1.0
        return surge * self._slowdown().prefill

    def _itl_factor(self) -> float:
        return self._slowdown().itl

    def _follow_gpus(self) -> None:
        """A rank whose GPU is lost stops (the data-parallel balancer sends its share of the
        requests to the others); it serves again once the GPU is back."""
        for rank, gpu in zip(self.ranks, self.gpus):
            lost = gpu_lost(self.scenarios, self.node, gpu)
            if lost and not rank.lost:
                rank.lose_gpu()
            elif rank.lost and not lost:
                rank.recover()

    def _transfer_stall(self) -> float:
        return SURGE_TRANSFER_STALL_SECONDS if self._active("ttft-surge") else 0.0

    def restart(self) -> None:
        """Simulate an engine restart: all state and counters start again from zero."""
        self._t0 = self.clock()
        for m in self.ranks:
            m.reset()

    def advance(self) -> None:
        """Move the load model to now; engine-restart holds it down while active and restarts it
        from zero when it ends."""
        down = self._active("engine-restart")
        if self._down and not down:
            self.restart()
        self._down = down
        if down:
            return
        self._follow_gpus()
        t = self.clock() - self._t0
        for m in self.ranks:
            m.advance(t)

    def restarting(self) -> bool:
        return self._down

    def render(self) -> str:
        m = self.ranks[0]
        if self.variant == "vllm":
            return render_vllm(self.ranks, self.model)
        if self.variant == "vllm-v0":
            return render_vllm_v0(m, self.model)
        if self.variant == "vllm-ray":
            return render_vllm_v0(m, self.model, prefix="ray_vllm:", extra=RAY_LABELS)
        if self.variant == "sglang":
            return render_sglang(m, self.model)
        if self.variant == "triton-trtllm":
            return render_triton(m, "tensorrt_llm")
        if self.variant == "trtllm-serve":
            return render_trtllm_serve(m, self.model)
        return render_tgi(m, self.model)

    async def _metrics(self, request: web.Request) -> web.Response:
        self.advance()
        if self.restarting():
            return web.Response(status=503, text="engine restarting\n")
        return web.Response(text=self.render(), content_type="text/plain", charset="utf-8",
                            headers={"X-Engine": self.variant})

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the port actually bound (port 0 = any free one)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


# (endpoint name, engine variant, model, requests/s, data-parallel ranks, batch limit). SGLang
# takes the most requests per rank, so it runs a larger batch (its max_running_requests follows
# the KV pool, hundreds on a real GPU): at 32 a network fault's slower decode would saturate it
# and page the serving team for what is a fabric fault. Every engine still saturates under
# queue-buildup's 4x arrivals.
DEMO_ENGINES: tuple[tuple[str, str, str, float, int, int], ...] = (
    ("vllm-llama-70b", "vllm", "meta-llama/Llama-3.1-70B-Instruct", 4.0, 2, 32),
    ("sglang-qwen", "sglang", "Qwen/Qwen2.5-32B-Instruct", 3.0, 1, 64),
    ("trtllm-triton", "triton-trtllm", "tensorrt_llm", 2.0, 1, 32),
    ("tgi-mistral", "tgi", "mistralai/Mistral-7B-Instruct-v0.3", 1.0, 1, 32),
)


def demo_engine_gpus(endpoint: str, ranks: int) -> tuple[int, ...]:
    """The GPU of each rank, as the demo's dcgm-exporter attributes pods "<endpoint>-<rank>"
    (gpus.DEMO_PODS); () when the GPUs are not modelled."""
    from .gpus import DEMO_PODS

    by_pod = {pod: gpu for gpu, (_, _, pod) in DEMO_PODS.items() if isinstance(gpu, int)}
    found = tuple(by_pod.get(f"{endpoint}-{rank}", -1) for rank in range(ranks))
    return found if all(g >= 0 for g in found) else ()


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart

    servers: list[EngineServer] = []
    endpoints: list[dict[str, str]] = []
    try:
        for i, (name, variant, model, arrival_rate, dp_ranks, batch_limit) in enumerate(DEMO_ENGINES):
            server = EngineServer(variant, model=model, seed=ctx.rng.randrange(1 << 30) + i,
                                  scenarios=ctx.scenarios, arrival_rate=arrival_rate, dp_ranks=dp_ranks,
                                  node=ctx.hostname, gpus=demo_engine_gpus(name, dp_ranks),
                                  batch_limit=batch_limit)
            await server.start()
            servers.append(server)
            ep = {"name": name, "url": server.url}
            if variant == "tgi":
                ep["model"] = model
            endpoints.append(ep)
    except BaseException:
        for server in servers:
            await server.stop()
        raise

    async def close() -> None:
        for server in servers:
            await server.stop()

    return DemoPart(name="serving", sources={"serving": {"endpoints": endpoints}}, close=close,
                    description=", ".join(f"{engine[0]} ({engine[1]}) :{server.port}"
                                          for engine, server in zip(DEMO_ENGINES, servers)))
