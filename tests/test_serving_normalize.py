"""Every engine format and version variant -> exact infrapulse_llm_* samples.

The fixtures in tests/fixtures/serving/ are real-format expositions (names, label sets and
bucket bounds of each engine) with hand-picked numbers; the expected values below are those
numbers combined by hand (sums over data-parallel ranks, rank 0 of replicated TP ranks, ...).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infrapulse.simulate.serving_engines import (
    NIXL_XFER,
    SGLANG_QUEUE,
    SGLANG_TTFT,
    SGLANG_XFER_MS,
    TGI_DURATION,
    VLLM_ITL,
    VLLM_LATENCY,
    VLLM_TTFT,
    VLLM_V0_TPOT,
)
from infrapulse.sources.serving import normalize as norm
from infrapulse.sources.serving.source import choose_format, passthrough_series
from infrapulse.store import Histogram, Snapshot, Store
from infrapulse.textparse import ParseError, parse

FIXTURES = Path(__file__).parent / "fixtures" / "serving"
INF = math.inf
NO_KEEP = ("",) * len(norm.KEEPABLE)


def load(name: str, endpoint: str = "ep", engine: str = "auto", keep=(), model: str = ""):
    text = (FIXTURES / name).read_text()
    families = parse(text, openmetrics=name.endswith(".txt"))
    fmt = choose_format(families, engine)
    families = norm.canonical_names(families, fmt)
    label = norm.engine_label(fmt, families)
    return norm.normalise(families, fmt, endpoint, label, keep, model), label


def series(snap: Snapshot, family) -> dict:
    name = family if isinstance(family, str) else family.name
    return snap.series.get(name, {})


def one(snap: Snapshot, family, model: str, engine: str, outcome: str | None = None, endpoint: str = "ep"):
    key = (endpoint, engine, model) + ((outcome,) if outcome else ()) + NO_KEEP
    return series(snap, family)[key]


def cum(bounds, counts, n=None):
    """(bound, cumulative) pairs: `counts` padded with its last value to every bound and +Inf."""
    padded = list(counts) + [counts[-1]] * (len(bounds) + 1 - len(counts))
    return tuple(zip(tuple(float(b) for b in bounds) + (INF,), (float(c) for c in padded)))


# -- vLLM -------------------------------------------------------------------------------------------

VLLM_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_vllm_033_sums_data_parallel_engines():
    snap, engine = load("vllm-0.33.prom")
    assert engine == "vllm"
    m = VLLM_MODEL
    ttft = one(snap, norm.TTFT, m, "vllm")
    assert ttft == Histogram(cum(VLLM_TTFT, [0, 0, 1, 3, 6, 10, 15, 23, 50, 75, 87, 94, 97, 99, 100]),
                             36.75, 100.0)
    assert one(snap, norm.ITL, m, "vllm") == Histogram(cum(VLLM_ITL, [150, 1500, 4400, 4890, 4980, 5000]),
                                                       160.5, 5000.0)
    assert one(snap, norm.E2E, m, "vllm") == Histogram(
        cum(VLLM_LATENCY, [0, 1, 5, 10, 21, 35, 52, 85, 97, 100]), 410.0, 100.0)
    assert one(snap, norm.QUEUE_TIME, m, "vllm") == Histogram(cum(VLLM_LATENCY, [95, 98, 100]), 11.5, 100.0)
    assert one(snap, norm.RUNNING, m, "vllm") == 12.0
    assert one(snap, norm.WAITING, m, "vllm") == 2.0
    assert one(snap, norm.KV_USAGE, m, "vllm") == 0.61  # max over DP engines, already a 0..1 ratio
    assert one(snap, norm.PREEMPTIONS, m, "vllm") == 4.0
    assert one(snap, norm.PROMPT_TOKENS, m, "vllm") == 200000.0
    assert one(snap, norm.GENERATION_TOKENS, m, "vllm") == 50000.0
    assert one(snap, norm.PREFIX_QUERIES, m, "vllm") == 200000.0
    assert one(snap, norm.PREFIX_HITS, m, "vllm") == 52000.0
    assert norm.PREFIX_HIT_RATIO.name not in snap.series  # token counters exist
    assert one(snap, norm.REQUESTS, m, "vllm", "success") == 97.0  # stop + length + repetition
    assert one(snap, norm.REQUESTS, m, "vllm", "abort") == 1.0
    assert one(snap, norm.REQUESTS, m, "vllm", "error") == 2.0
    assert one(snap, norm.REQUEST_DURATION, m, "vllm") == 410.0
    assert one(snap, norm.QUEUE_DURATION, m, "vllm") == 11.5
    assert one(snap, norm.KV_XFER_SECONDS, m, "vllm") == Histogram(cum(NIXL_XFER, [0, 7, 32, 47, 50]),
                                                                   0.76, 50.0)
    assert one(snap, norm.KV_XFER_BYTES, m, "vllm") == 5.0e8
    assert one(snap, norm.KV_XFER_TIME, m, "vllm") == 0.76
    assert one(snap, norm.KV_XFER_COUNT, m, "vllm") == 50.0
    assert one(snap, norm.KV_XFER_FAILURES, m, "vllm") == 3.0
    # One series per family: the DP `engine` label is aggregated away.
    assert all(len(s) == (3 if name == norm.REQUESTS.name else 1) for name, s in snap.series.items())


def test_vllm_keep_dp_rank_keeps_each_engine():
    snap, _ = load("vllm-0.33.prom", keep=["dp_rank"])
    ttft = series(snap, norm.TTFT)
    pos = 3 + norm.KEEPABLE.index("dp_rank")
    by_rank = {labels[pos]: h for labels, h in ttft.items()}
    assert set(by_rank) == {"0", "1"}
    assert by_rank["0"].count == 60.0 and by_rank["0"].sum == 21.5
    assert by_rank["1"].count == 40.0 and by_rank["1"].sum == 15.25
    assert {labels[pos]: v for labels, v in series(snap, norm.KV_USAGE).items()} == {"0": 0.42, "1": 0.61}


def test_vllm_06_v0_old_names():
    snap, _ = load("vllm-0.6-v0.prom")
    m = "mistral-7b"
    assert one(snap, norm.KV_USAGE, m, "vllm") == 0.875  # gpu_cache_usage_perc, not rescaled
    assert one(snap, norm.PREFIX_HIT_RATIO, m, "vllm") == 0.25  # V0 had only a hit-rate gauge
    assert norm.PREFIX_QUERIES.name not in snap.series
    itl = one(snap, norm.ITL, m, "vllm")  # from time_per_output_token_seconds
    assert itl == Histogram(cum(VLLM_V0_TPOT, [0, 2000, 11000, 12000, 12345]), 370.35, 12345.0)
    assert one(snap, norm.TTFT, m, "vllm").buckets[-2] == (10.0, 100.0)  # V0 TTFT stopped at 10 s
    assert one(snap, norm.RUNNING, m, "vllm") == 12.0
    assert one(snap, norm.WAITING, m, "vllm") == 4.0
    assert one(snap, norm.PREEMPTIONS, m, "vllm") == 17.0
    assert one(snap, norm.PROMPT_TOKENS, m, "vllm") == 54321.0
    assert one(snap, norm.REQUESTS, m, "vllm", "success") == 100.0
    assert norm.QUEUE_TIME.name not in snap.series


def test_vllm_010_deprecated_twins_are_not_double_counted():
    snap, _ = load("vllm-0.10-deprecated.prom")
    assert series(snap, norm.KV_USAGE) == {("ep", "vllm", "m") + NO_KEEP: 0.30}
    assert one(snap, norm.PREFIX_QUERIES, "m", "vllm") == 1000.0
    assert one(snap, norm.PREFIX_HITS, "m", "vllm") == 250.0
    assert one(snap, norm.ITL, "m", "vllm").count == 10.0


def test_vllm_openmetrics_escaped_names():
    snap, engine = load("vllm-openmetrics.txt")
    assert engine == "vllm"
    assert one(snap, norm.RUNNING, "m", "vllm") == 3.0
    assert one(snap, norm.PROMPT_TOKENS, "m", "vllm") == 1000.0
    assert one(snap, norm.TTFT, "m", "vllm").count == 3.0


# -- SGLang -----------------------------------------------------------------------------------------

SG_MODEL = "Qwen/Qwen2.5-32B-Instruct"


def test_sglang_05_dp_sums_tp_replicas_taken_once():
    snap, engine = load("sglang-0.5.prom")
    assert engine == "sglang"
    m = SG_MODEL
    assert one(snap, norm.RUNNING, m, "sglang") == 8.0  # dp0 5 + dp1 3; tp_rank 1 repeats, not added
    assert one(snap, norm.WAITING, m, "sglang") == 5.0
    assert one(snap, norm.KV_USAGE, m, "sglang") == 0.7
    assert one(snap, norm.PREFIX_HITS, m, "sglang") == 200000.0  # cache_source="total" only
    assert one(snap, norm.PREFIX_QUERIES, m, "sglang") == 500000.0
    assert norm.PREFIX_HIT_RATIO.name not in snap.series
    assert one(snap, norm.PROMPT_TOKENS, m, "sglang") == 500000.0
    assert one(snap, norm.GENERATION_TOKENS, m, "sglang") == 1000.0
    assert one(snap, norm.REQUESTS, m, "sglang", "success") == 988.0  # 700 + 300 - 12 aborted
    assert one(snap, norm.REQUESTS, m, "sglang", "abort") == 12.0
    assert one(snap, norm.TTFT, m, "sglang") == Histogram(cum(SGLANG_TTFT, [150, 600, 940, 990, 998, 1000]),
                                                          270.0, 1000.0)
    assert one(snap, norm.QUEUE_TIME, m, "sglang").buckets[0] == (0.0, 100.0)
    assert len(one(snap, norm.QUEUE_TIME, m, "sglang").buckets) == len(SGLANG_QUEUE) + 1
    xfer = one(snap, norm.KV_XFER_SECONDS, m, "sglang")  # ms -> s, the engine's bounds kept
    assert xfer == Histogram(tuple(zip([b / 1000 for b in SGLANG_XFER_MS] + [INF],
                                       [0.0, 15.0, 70.0, 138.0] + [150.0] * 9)), pytest.approx(1.22), 150.0)
    assert one(snap, norm.KV_XFER_BYTES, m, "sglang") == 1800.0 * 2**20
    assert one(snap, norm.KV_XFER_TIME, m, "sglang") == pytest.approx(1.22)
    assert one(snap, norm.KV_XFER_COUNT, m, "sglang") == 150.0
    assert one(snap, norm.KV_XFER_FAILURES, m, "sglang") == 10.0  # (3 transfer + 2 bootstrap) x 2 DP
    assert norm.KV_XFER_LAST.name not in snap.series


def test_sglang_keep_tp_rank_and_role():
    snap, _ = load("sglang-0.5.prom", keep=["tp_rank", "role"])
    tp, role = 3 + norm.KEEPABLE.index("tp_rank"), 3 + norm.KEEPABLE.index("role")
    running = {(k[tp], k[role]): v for k, v in series(snap, norm.RUNNING).items()}
    assert running == {("0", "prefill"): 8.0, ("1", "prefill"): 8.0}
    # Tokenizer histograms carry no tp_rank: kept label is empty ("absent").
    assert {(k[tp], k[role]) for k in series(snap, norm.TTFT)} == {("", "prefill")}


def test_sglang_04_gauges_instead_of_histograms():
    snap, _ = load("sglang-0.4-gauges.prom")
    m = "deepseek-v3"
    assert one(snap, norm.KV_XFER_LAST, m, "sglang") == pytest.approx(0.0125)  # a gauge, ms -> s
    assert norm.KV_XFER_SECONDS.name not in snap.series  # never invent a histogram
    assert one(snap, norm.PREFIX_HIT_RATIO, m, "sglang") == 0.61
    assert norm.PREFIX_QUERIES.name not in snap.series  # no cached-token counter to pair with
    assert one(snap, norm.ITL, m, "sglang").count == 10.0  # from time_per_output_token
    assert one(snap, norm.ITL, m, "sglang").sum == 0.16
    assert one(snap, norm.TTFT, m, "sglang").buckets[0] == (0.001, 0.0)  # older SGLang TTFT bounds
    assert one(snap, norm.RUNNING, m, "sglang") == 9.0
    assert one(snap, norm.KV_USAGE, m, "sglang") == 0.33


# -- TensorRT-LLM -----------------------------------------------------------------------------------


def test_triton_trtllm_units_and_models():
    snap, engine = load("triton-trtllm.prom")
    assert engine == "trtllm"
    assert one(snap, norm.RUNNING, "tensorrt_llm", "trtllm") == 14.0  # request_type=scheduled
    assert one(snap, norm.WAITING, "tensorrt_llm", "trtllm") == 5.0
    assert one(snap, norm.KV_USAGE, "tensorrt_llm", "trtllm") == 0.3
    ttft = one(snap, norm.TTFT, "ensemble", "trtllm")  # first-response histogram, ms -> s
    assert ttft == Histogram(((0.1, 20.0), (0.5, 150.0), (2.0, 198.0), (5.0, 200.0), (INF, 200.0)),
                             61.0, 200.0)
    durations = {k[2]: v for k, v in series(snap, norm.REQUEST_DURATION).items()}
    assert durations == pytest.approx({"ensemble": 250.0, "preprocessing": 1.2, "tensorrt_llm": 247.0,
                                       "postprocessing": 0.9})
    queue = {k[2]: v for k, v in series(snap, norm.QUEUE_DURATION).items()}
    assert queue == pytest.approx({"ensemble": 4.0, "preprocessing": 0.02, "tensorrt_llm": 3.5,
                                   "postprocessing": 0.015})
    assert one(snap, norm.REQUESTS, "ensemble", "trtllm", "success") == 200.0
    assert one(snap, norm.REQUESTS, "ensemble", "trtllm", "error") == 4.0
    assert one(snap, norm.REQUESTS, "preprocessing", "trtllm", "error") == 0.0
    assert one(snap, norm.KV_XFER_TIME, "tensorrt_llm", "trtllm") == 4.5
    assert one(snap, norm.KV_XFER_COUNT, "tensorrt_llm", "trtllm") == 150.0


def test_triton_trtllm_24_fallbacks():
    snap, _ = load("triton-trtllm-24.prom", engine="triton")
    assert one(snap, norm.RUNNING, "tensorrt_llm", "trtllm") == 6.0
    assert one(snap, norm.WAITING, "tensorrt_llm", "trtllm") == 3.0  # nv_inference_pending_request_count
    assert one(snap, norm.KV_USAGE, "tensorrt_llm", "trtllm") == 0.25  # used / max blocks


def test_trtllm_serve():
    snap, engine = load("trtllm-serve.prom")
    assert engine == "trtllm"
    m = "nvidia/Llama-3.1-8B-Instruct-FP8"
    assert one(snap, norm.REQUESTS, m, "trtllm", "success") == 450.0
    assert one(snap, norm.REQUESTS, m, "trtllm", "abort") == 6.0
    assert one(snap, norm.REQUESTS, m, "trtllm", "error") == 3.0
    assert one(snap, norm.RUNNING, m, "trtllm") == 20.0
    assert one(snap, norm.WAITING, m, "trtllm") == 7.0
    assert one(snap, norm.KV_USAGE, m, "trtllm") == 0.75  # used / max blocks (no utilization gauge)
    assert one(snap, norm.PREFIX_QUERIES, m, "trtllm") == 900000.0
    assert one(snap, norm.PREFIX_HITS, m, "trtllm") == 450000.0
    assert norm.PREFIX_HIT_RATIO.name not in snap.series
    assert one(snap, norm.TTFT, m, "trtllm") == Histogram(
        cum(VLLM_TTFT, [0, 0, 0, 0, 10, 100, 300, 400, 450, 456]), 36.0, 456.0)
    assert one(snap, norm.ITL, m, "trtllm").count == 456.0
    assert one(snap, norm.E2E, m, "trtllm").sum == 700.0
    assert one(snap, norm.GENERATION_TOKENS, m, "trtllm") == 120000.0


# -- TGI --------------------------------------------------------------------------------------------


def test_tgi_with_configured_model():
    snap, engine = load("tgi.prom", model="mistral-7b")
    assert engine == "tgi"
    m = "mistral-7b"
    assert one(snap, norm.RUNNING, m, "tgi") == 24.0
    assert one(snap, norm.WAITING, m, "tgi") == 3.0
    assert one(snap, norm.REQUESTS, m, "tgi", "success") == 1000.0
    assert one(snap, norm.REQUESTS, m, "tgi", "error") == 20.0
    itl = one(snap, norm.ITL, m, "tgi")
    assert (itl.count, itl.sum, len(itl.buckets)) == (1000.0, 22.0, len(TGI_DURATION) + 1)
    assert itl.buckets[0][0] == 0.00015
    assert one(snap, norm.E2E, m, "tgi").sum == 2100.0
    assert one(snap, norm.QUEUE_TIME, m, "tgi").sum == 1.5
    assert one(snap, norm.PROMPT_TOKENS, m, "tgi") == 1300000.0  # input_length histogram sum
    assert one(snap, norm.GENERATION_TOKENS, m, "tgi") == 210000.0
    assert norm.TTFT.name not in snap.series  # TGI has no TTFT histogram
    assert norm.KV_USAGE.name not in snap.series


# -- detection, parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture, fmt", [
    ("vllm-0.33.prom", "vllm"), ("vllm-0.6-v0.prom", "vllm"), ("vllm-openmetrics.txt", "vllm"),
    ("sglang-0.5.prom", "sglang"), ("sglang-0.4-gauges.prom", "sglang"), ("triton-trtllm.prom", "triton"),
    ("triton-trtllm-24.prom", "triton"), ("trtllm-serve.prom", "trtllm"), ("tgi.prom", "tgi"),
])
def test_detection(fixture, fmt):
    families = parse((FIXTURES / fixture).read_text(), fixture.endswith(".txt"))
    assert norm.detect(families) == fmt


def test_configured_engine_must_match():
    from infrapulse.scrape import ScrapeError

    families = parse((FIXTURES / "tgi.prom").read_text())
    with pytest.raises(ScrapeError) as err:
        choose_format(families, "vllm")
    assert err.value.reason == "engine_mismatch"
    assert choose_format(parse((FIXTURES / "triton-trtllm.prom").read_text()), "trtllm") == "triton"
    with pytest.raises(ScrapeError) as err:
        choose_format(parse("node_load1 0.5\n"), "auto")
    assert err.value.reason == "unknown_engine"


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.prom")))
def test_parser_agrees_with_prometheus_client(fixture):
    text = (FIXTURES / fixture).read_text()
    mine = {}
    for fam in parse(text).values():
        samples = []
        for s in fam.samples:
            name = s.name
            if fam.type == "counter" and not name.endswith(("_total", "_created")):
                name += "_total"  # prometheus_client renames bare counter samples; we keep them
            samples.append((name, s.labels, s.value))
        mine[fam.name] = (fam.type, fam.help, samples)
    theirs = {f.name: (f.type, f.documentation, [(s.name, s.labels, s.value) for s in f.samples])
              for f in text_string_to_metric_families(text)}
    assert mine == theirs


def test_parser_rejects_what_is_not_the_format():
    for body in ("<html><body>hi</body></html>", '{"status": "ok"}', "metric{a=\"1\" 2\n",
                 "metric 1.0.0\n", "good 1\nthis is garbage\n", 'm{a="x"} NaNx\n'):
        with pytest.raises(ParseError):
            parse(body)
    with pytest.raises(ParseError) as err:
        parse('# TYPE a gauge\na 1\n', openmetrics=True)
    assert err.value.reason == "truncated"
    families = parse('a{b="x\\"y\\\\z\\n",c="}{,"} +Inf 1700000000000\n# comment\n\nb -3e-2\n')
    sample = families["a"].samples[0]
    assert sample.labels == {"b": 'x"y\\z\n', "c": "}{,"} and sample.value == INF
    assert sample.timestamp == 1.7e9
    assert families["b"].samples[0].value == -0.03


# -- passthrough --------------------------------------------------------------------------------------


def test_passthrough_reexposes_raw_families():
    from helpers import render_store

    families = parse((FIXTURES / "triton-trtllm.prom").read_text())
    snap, _ = load("triton-trtllm.prom", endpoint="triton-a")
    skipped = passthrough_series(families, "triton-a", snap)
    assert skipped == []
    store = Store()
    store.publish("serving", "triton-a", snap, 60)
    values = render_store(store)
    key = ("nv_trt_llm_request_metrics",
           frozenset({"endpoint": "triton-a", "model": "tensorrt_llm", "request_type": "waiting",
                      "version": "1"}.items()))
    assert values[key] == 5.0
    # A counter without _total keeps its exact name (passed through untyped).
    key = ("nv_inference_request_success",
           frozenset({"endpoint": "triton-a", "model": "ensemble", "version": "1"}.items()))
    assert values[key] == 200.0
    # Histograms keep their raw unit and bounds.
    key = ("nv_inference_first_response_histogram_ms_bucket",
           frozenset({"endpoint": "triton-a", "model": "ensemble", "version": "1", "le": "500.0"}.items()))
    assert values[key] == 150.0
    # The normalised families are there too.
    key = ("infrapulse_llm_requests_waiting", frozenset({"endpoint": "triton-a", "engine": "trtllm",
                                                         "model": "tensorrt_llm"}.items()))
    assert values[key] == 5.0


def test_passthrough_renames_an_engine_endpoint_label():
    families = parse('# TYPE vllm:x gauge\nvllm:x{endpoint="/v1/chat"} 2\n')
    snap = Snapshot()
    passthrough_series(families, "ep1", snap)
    assert snap.series["vllm:x"] == {(("endpoint", "ep1"), ("exported_endpoint", "/v1/chat")): 2.0}


def test_label_cache_gives_the_same_result_and_is_bounded(monkeypatch):
    import infrapulse.textparse as textparse

    text = (FIXTURES / "sglang-0.5.prom").read_text()
    cache: dict = {}
    first = parse(text, label_cache=cache)
    second = parse(text, label_cache=cache)
    plain = parse(text)
    for name, fam in plain.items():
        assert [(s.name, s.labels, s.value) for s in fam.samples] == \
               [(s.name, s.labels, s.value) for s in second[name].samples]
    assert first["sglang:token_usage"].samples[0].labels is second["sglang:token_usage"].samples[0].labels
    monkeypatch.setattr(textparse, "LABEL_CACHE_LIMIT", 10)
    small: dict = {}
    parse(text, label_cache=small)
    assert len(small) <= 10
