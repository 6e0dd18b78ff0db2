"""The serving source against real engine expositions (shared/real/serving, PROVENANCE.md there).

Each capture is served verbatim by an aiohttp server on loopback and scraped by the real
ServingSource; the assertions are the capture's own numbers. Partial captures (Ray, Triton
23.10, trtllm-serve) also check that what the truncation removed is reported through the
coverage API instead of passing quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
import yaml
from aiohttp import web

from conftest import running_daemon
from helpers import parse_exposition, real, render_store, value
from infrapulse.http import sources_status
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.sources.base import SourceContext
from infrapulse.sources.serving import normalize as norm
from infrapulse.sources.serving.source import ServingSource, choose_format
from infrapulse.store import Histogram, Store
from infrapulse.textparse import parse, typed_from_names

NO_KEEP = ("",) * len(norm.KEEPABLE)


@contextlib.asynccontextmanager
async def serve(text: str) -> AsyncIterator[str]:
    """`text` as /metrics of a real HTTP server on 127.0.0.1 (Prometheus text content type)."""

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/metrics"  # noqa: SLF001
    finally:
        await runner.cleanup()


async def scrape_capture(name: str, **endpoint: str):
    """Serve one capture, poll it once with the serving source; (snapshot, store)."""
    async with serve(real("serving", name).read_text()) as url:
        return await scrape_url(url, **endpoint)


async def scrape_url(url: str, **endpoint: str):
    """Poll one served exposition once with the serving source; (snapshot, store)."""
    store = Store()
    section = ServingSource.CONFIG.validate({"endpoints": [{"name": "ep", "url": url, **endpoint}]},
                                            "sources.serving")
    source = ServingSource(section, SourceContext(store=store, interval=1.0))
    try:
        await source.poll_endpoint(source.endpoints[0])
    finally:
        await source.close()
    status = store.status_of("serving", "ep")
    assert status.up, status.message
    return store.snapshot("serving", "ep"), store


def one(snap, family, model: str, engine: str, outcome: str | None = None):
    key = ("ep", engine, model) + ((outcome,) if outcome else ()) + NO_KEEP
    return snap.series[family.name][key]


def coverage(store: Store) -> dict[str, int]:
    return {m: c.series for m, c in store.status_of("serving", "ep").coverage.items()}


def empty(store: Store) -> list[str]:
    return sorted(m for m, n in coverage(store).items() if n == 0)


# -- vLLM ---------------------------------------------------------------------------------------


async def test_vllm_05_v0_values():
    snap, store = await scrape_capture("vllm-0.5-v0-datadog-2024.prom")
    m = "facebook/opt-125m"
    ttft = one(snap, norm.TTFT, m, "vllm")
    assert (ttft.count, ttft.sum) == (1.0, 0.31326723098754883)
    assert [b for b, _ in ttft.buckets] == [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                            1.0, 2.5, 5.0, 7.5, 10.0, float("inf")]
    itl = one(snap, norm.ITL, m, "vllm")  # V0's time_per_output_token
    assert (itl.count, itl.sum) == (6.0, 0.19016313552856445)
    e2e = one(snap, norm.E2E, m, "vllm")
    assert (e2e.count, e2e.sum) == (1.0, 0.5034303665161133)
    assert one(snap, norm.RUNNING, m, "vllm") == 0.0
    assert one(snap, norm.WAITING, m, "vllm") == 0.0
    assert one(snap, norm.KV_USAGE, m, "vllm") == 0.0  # gpu_cache_usage_perc
    assert one(snap, norm.PROMPT_TOKENS, m, "vllm") == 5.0
    assert one(snap, norm.GENERATION_TOKENS, m, "vllm") == 7.0
    assert one(snap, norm.PREEMPTIONS, m, "vllm") == 0.0
    assert one(snap, norm.REQUESTS, m, "vllm", "success") == 1.0  # finished_reason=length
    assert one(snap, norm.REQUEST_DURATION, m, "vllm") == 0.5034303665161133
    assert empty(store) == []  # every promised family found; the rest are known V0 extras
    assert coverage(store)[norm.TTFT.name] == 1


async def test_vllm_under_ray_serve_reads_ray_prefix_and_drops_the_minus_one_hit_rate():
    snap, store = await scrape_capture("vllm-0.6-ray2.32-datadog-2024.prom")
    m = "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"
    assert one(snap, norm.PROMPT_TOKENS, m, "vllm") == 58.0
    assert one(snap, norm.GENERATION_TOKENS, m, "vllm") == 300.0
    assert one(snap, norm.KV_USAGE, m, "vllm") == 5.882698982295764e-05
    assert one(snap, norm.RUNNING, m, "vllm") == 0.0
    assert one(snap, norm.WAITING, m, "vllm") == 0.0
    itl = one(snap, norm.ITL, m, "vllm")
    assert (itl.count, itl.sum) == (299.0, 16.178537607192993)
    # gpu_prefix_cache_hit_rate is -1 ("no data"): no ratio outside 0..1 is exported
    assert norm.PREFIX_HIT_RATIO.name not in snap.series
    # the excerpt ends before TTFT, e2e and request_success: reported, not silent
    assert empty(store) == sorted([norm.E2E.name, norm.REQUESTS.name, norm.TTFT.name])


# -- SGLang, TGI --------------------------------------------------------------------------------


async def test_sglang_04_values():
    snap, store = await scrape_capture("sglang-0.4-docs-2024.prom")
    m = "meta-llama/Llama-3.1-8B-Instruct"
    ttft = one(snap, norm.TTFT, m, "sglang")
    assert (ttft.count, ttft.sum) == (11008.0, 2.3518979474117756e06)
    assert dict(ttft.buckets)[1.0] == 27.0
    e2e = one(snap, norm.E2E, m, "sglang")
    assert (e2e.count, e2e.sum) == (11228.0, 3.116093850019932e06)
    itl = one(snap, norm.ITL, m, "sglang")  # 0.4's time_per_output_token
    assert (itl.count, itl.sum) == (7.400757e06, 866964.5791549598)
    assert one(snap, norm.RUNNING, m, "sglang") == 162.0
    assert one(snap, norm.WAITING, m, "sglang") == 2826.0
    assert one(snap, norm.KV_USAGE, m, "sglang") == 0.28
    assert one(snap, norm.PROMPT_TOKENS, m, "sglang") == 8.128902e06
    assert one(snap, norm.GENERATION_TOKENS, m, "sglang") == 7.557572e06
    assert one(snap, norm.PREFIX_HIT_RATIO, m, "sglang") == 0.007507552643049313  # no cached-token counter
    assert empty(store) == []


async def test_tgi_2x_values():
    snap, store = await scrape_capture("tgi-2.x-datadog.prom", model="zephyr")
    assert one(snap, norm.REQUESTS, "zephyr", "tgi", "success") == 109.0
    assert one(snap, norm.REQUESTS, "zephyr", "tgi", "error") == 2.0  # request_count 111 - success 109
    e2e = one(snap, norm.E2E, "zephyr", "tgi")
    assert (e2e.count, e2e.sum, len(e2e.buckets)) == (109.0, 541.2140316159999, 36)
    assert one(snap, norm.QUEUE_TIME, "zephyr", "tgi").sum == 295.275961956
    assert one(snap, norm.ITL, "zephyr", "tgi").sum == 8.643160945
    assert one(snap, norm.PROMPT_TOKENS, "zephyr", "tgi") == 662.0
    assert one(snap, norm.GENERATION_TOKENS, "zephyr", "tgi") == 3423.0
    assert one(snap, norm.RUNNING, "zephyr", "tgi") == 0.0
    assert one(snap, norm.WAITING, "zephyr", "tgi") == 0.0
    assert empty(store) == []


# -- Triton + TensorRT-LLM ----------------------------------------------------------------------


async def test_triton_2310_partial_reports_the_families_it_cut():
    snap, store = await scrape_capture("triton-23.10-issue49.prom")
    success = {k[2]: v for k, v in snap.series[norm.REQUESTS.name].items() if k[3] == "success"}
    assert success == {"ensemble": 59.0, "preprocessing": 59.0, "postprocessing": 59.0, "tensorrt_llm": 0.0}
    assert one(snap, norm.REQUESTS, "ensemble", "triton", "error") == 0.0
    assert empty(store) == sorted([norm.QUEUE_DURATION.name, norm.REQUEST_DURATION.name])


async def test_triton_2311_statistics_names():
    snap, store = await scrape_capture("triton-trtllm-23.11-readme.prom")
    m = "tensorrt_llm"
    assert one(snap, norm.RUNNING, m, "trtllm") == 1.0  # request_type=scheduled
    assert one(snap, norm.KV_USAGE, m, "trtllm") == 1 / 6239  # used / max blocks
    assert one(snap, norm.WAITING, m, "trtllm") == 0.0  # nv_inference_pending_request_count
    assert one(snap, norm.REQUESTS, m, "trtllm", "success") == 0.0
    assert one(snap, norm.REQUEST_DURATION, m, "trtllm") == 0.0
    assert empty(store) == []  # RUNNING and KV_USAGE promised for the TRT-LLM backend, and found


async def test_triton_2025_names_prefer_the_engines_own_fraction():
    snap, store = await scrape_capture("triton-trtllm-readme-2025.prom")
    m = "tensorrt_llm"
    assert one(snap, norm.RUNNING, m, "trtllm") == 1.0
    assert one(snap, norm.WAITING, m, "trtllm") == 1.0  # request_type=waiting
    # issue 34: the backend's own kv_cache_block_type="fraction", not used/max blocks (1/6239)
    assert one(snap, norm.KV_USAGE, m, "trtllm") == 0.4875
    assert one(snap, norm.KV_XFER_TIME, m, "trtllm") == 0.0
    assert one(snap, norm.KV_XFER_COUNT, m, "trtllm") == 0.0
    assert empty(store) == []


# -- trtllm-serve -------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["trtllm", "auto"])
async def test_trtllm_serve_1x_unprefixed(engine):
    snap, store = await scrape_capture("trtllm-serve-1.x-aibrix2004.prom", engine=engine)
    assert one(snap, norm.REQUEST_DURATION, "undefined", "trtllm") == 3.4878239994868636  # e2e _sum
    assert snap.series[norm.ENDPOINT_UP.name] == {("ep", "trtllm"): 1.0}
    # the paste stops after le="0.8": no +Inf bucket, so no e2e histogram, and it says so
    assert norm.E2E.name not in snap.series
    assert empty(store) == sorted([norm.E2E.name, norm.ITL.name, norm.QUEUE_TIME.name, norm.REQUESTS.name,
                                   norm.TTFT.name])


@pytest.mark.parametrize("engine", ["trtllm", "auto"])
async def test_trtllm_serve_without_type_lines_reads_as_with_them(engine):
    """Issue 34: as pasted in TensorRT-LLM's own PR, without # TYPE/# HELP lines: the samples
    landed in untyped `..._bucket`/`_count` families and the engine check said engine_mismatch.
    Typed from their names, the same series come out as from the typed capture."""
    text = real("serving", "trtllm-serve-1.x-aibrix2004.prom").read_text()
    bare = "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"
    typed_snap, _ = await scrape_capture("trtllm-serve-1.x-aibrix2004.prom", engine=engine)
    async with serve(bare) as url:
        bare_snap, store = await scrape_url(url, engine=engine)
    assert bare_snap.series == typed_snap.series
    assert one(bare_snap, norm.REQUEST_DURATION, "undefined", "trtllm") == 3.4878239994868636
    assert store.status_of("serving", "ep").reason == "ok"


def test_untyped_bucket_sum_count_are_one_histogram_and_total_a_counter():
    families = typed_from_names(parse('x_bucket{le="1"} 1\nx_bucket{le="+Inf"} 2\nx_sum 3\nx_count 2\n'
                                      "y_total 7\nz_bucket 1\n"))
    types = {n: f.type for n, f in families.items()}
    assert types == {"x": "histogram", "y": "counter", "z_bucket": "untyped"}
    assert [s.name for s in families["x"].samples] == ["x_bucket", "x_bucket", "x_sum", "x_count"]


def test_unprefixed_names_alone_are_not_auto_detected():
    bare = parse("# TYPE e2e_request_latency_seconds histogram\n"
                 'e2e_request_latency_seconds_bucket{le="+Inf"} 1\ne2e_request_latency_seconds_sum 2\n'
                 "e2e_request_latency_seconds_count 1\n")
    assert norm.detect(bare) is None  # any app may call a histogram that
    assert choose_format(bare, "trtllm") == "trtllm"  # configured explicitly, it is read
    captured = parse(real("serving", "trtllm-serve-1.x-aibrix2004.prom").read_text())
    assert norm.detect(captured) == "trtllm"  # with TensorRT-LLM's {model_name, engine_type} labels


# -- the coverage API, end to end ---------------------------------------------------------------


async def test_truncated_capture_shows_in_api_and_mapping_series():
    async with serve(real("serving", "trtllm-serve-1.x-aibrix2004.prom").read_text()) as url:
        cfg = yaml.safe_dump({"interval": "200ms", "sources": {"serving": {"endpoints": [
            {"name": "trt", "url": url, "engine": "trtllm"}]}}})
        async with running_daemon(cfg) as daemon:
            base = f"http://127.0.0.1:{daemon.bound_port}"
            async with aiohttp.ClientSession() as session:
                for _ in range(50):
                    if daemon.store.status_of("serving", "trt").up:
                        break
                    await asyncio.sleep(0.05)
                async with session.get(base + "/api/v1/sources") as resp:
                    api = await resp.json()
                async with session.get(base + "/metrics") as resp:
                    values = parse_exposition(await resp.text())
    entry = next(s for s in api["sources"] if s["source"] == "serving" and s["target"] == "trt")
    assert entry["coverage"]["empty"] == sorted([norm.E2E.name, norm.ITL.name, norm.QUEUE_TIME.name,
                                                 norm.REQUESTS.name, norm.TTFT.name])
    assert value(values, "infrapulse_source_mapping_series", source="serving", target="trt",
                 mapping=norm.TTFT.name) == 0
    assert value(values, "infrapulse_source_mapping_series", source="serving", target="trt",
                 mapping=norm.REQUEST_DURATION.name) == 1


async def test_an_engine_family_nobody_reads_is_counted_as_unmapped():
    text = real("serving", "vllm-0.5-v0-datadog-2024.prom").read_text()
    text += ("# HELP vllm:kv_cache_usage_ratio_v9 a renamed family\n"
             "# TYPE vllm:kv_cache_usage_ratio_v9 gauge\n")
    text += 'vllm:kv_cache_usage_ratio_v9{model_name="facebook/opt-125m"} 0.5\n'
    store = Store()
    async with serve(text) as url:
        section = ServingSource.CONFIG.validate({"endpoints": [{"name": "ep", "url": url}]},
                                                "sources.serving")
        source = ServingSource(section, SourceContext(store=store, interval=1.0))
        await source.poll_endpoint(source.endpoints[0])
        await source.poll_endpoint(source.endpoints[0])
        await source.close()
    cov = store.status_of("serving", "ep").coverage["vllm:kv_cache_usage_ratio_v9"]
    assert (cov.series, cov.unmapped) == (0, 2)  # one sample per scrape, two scrapes
    assert cov.sample == 'vllm:kv_cache_usage_ratio_v9{model_name="facebook/opt-125m"}'
    summary = next(s for s in sources_status(store) if s["target"] == "ep")["coverage"]
    assert summary["unmapped_example"]["mapping"] == "vllm:kv_cache_usage_ratio_v9"
    exported = render_store(store)
    assert value(exported, "infrapulse_source_unmapped_total", source="serving", target="ep",
                 mapping="vllm:kv_cache_usage_ratio_v9") == 2


# -- the simulators send the captures' shapes ----------------------------------------------------

SIMULATED = [("vllm-v0", "vllm-0.5-v0-datadog-2024.prom"), ("vllm-ray", "vllm-0.6-ray2.32-datadog-2024.prom"),
             ("trtllm-serve", "trtllm-serve-1.x-aibrix2004.prom"), ("tgi", "tgi-2.x-datadog.prom"),
             ("triton-trtllm", "triton-trtllm-readme-2025.prom")]


def _shapes(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """{family: (type, label names without le)} of every family a serving rule reads."""
    families = parse(text)
    fmt = norm.detect(families) or "trtllm"
    families = norm.canonical_names(families, fmt)
    reads = {name for rule in norm.MAPPINGS[fmt] for e in rule.alternatives for name in e.reads}
    return {name: (fam.type, frozenset(k for s in fam.samples for k in s.labels if k != "le"))
            for name, fam in families.items() if name in reads}


@pytest.mark.parametrize("variant, capture", SIMULATED)
def test_simulator_sends_the_capture_shape(variant, capture):
    server = EngineServer(variant, model="facebook/opt-125m", arrival_rate=2.0, seed=3)
    server.ranks[0].advance(60.0)
    simulated = _shapes(server.render())
    captured = _shapes(real("serving", capture).read_text())
    assert captured, capture
    for name, shape in captured.items():  # every family the capture feeds the mapping, same shape
        assert simulated.get(name) == shape, name


async def test_simulated_v0_prefix_hit_rate_of_minus_one_is_not_exported():
    server = EngineServer("vllm-v0", arrival_rate=2.0, seed=3)
    server.ranks[0].advance(60.0)
    assert 'vllm:gpu_prefix_cache_hit_rate{model_name="llama-3-8b"} -1.0' in server.render()
    families = parse(server.render())
    snap = norm.normalise(families, "vllm", "ep", "vllm")
    assert norm.PREFIX_HIT_RATIO.name not in snap.series
    assert isinstance(snap.series[norm.TTFT.name][("ep", "vllm", "llama-3-8b") + NO_KEEP], Histogram)
