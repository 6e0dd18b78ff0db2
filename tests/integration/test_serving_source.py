"""The serving source end to end: simulated engines and misbehaving endpoints on loopback."""

from __future__ import annotations

import asyncio
import random

import aiohttp
import pytest
import yaml

from conftest import running_daemon
from helpers import parse_exposition, render_store, samples_of, value
from infrapulse import config as config_mod
from infrapulse.health.latency import QuantileTracker
from infrapulse.schema import SchemaError
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.sources.base import SourceContext
from infrapulse.sources.serving.source import ServingSource
from infrapulse.store import Store
from test_serving_scrape import Misbehaving


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_source(endpoints: list[dict], store: Store | None = None) -> ServingSource:
    section = ServingSource.CONFIG.validate({"endpoints": endpoints}, "sources.serving")
    return ServingSource(section, SourceContext(store=store or Store(), interval=1.0))


async def poll_all(source: ServingSource) -> None:
    await asyncio.gather(*(source.poll_endpoint(ep) for ep in source.endpoints))


@pytest.fixture
async def engines():
    clock = FakeClock()
    servers = [EngineServer("vllm", dp_ranks=2, clock=clock, arrival_rate=3.0),
               EngineServer("sglang", clock=clock, seed=5),
               EngineServer("tgi", clock=clock, seed=9)]
    for s in servers:
        await s.start()
    clock.t += 60  # a minute of load before the first scrape
    yield clock, servers
    for s in servers:
        await s.stop()


@pytest.mark.parametrize("mode, reason", [("html", "not_prometheus"), ("500", "http_500"),
                                          ("garbage", "not_prometheus"), ("endless", "too_large"),
                                          ("slow", "timeout"), ("reset", "reset")])
async def test_bad_endpoint_is_down_with_reason_others_unaffected(engines, mode, reason):
    clock, (vllm, sglang, tgi) = engines
    bad = Misbehaving()
    await bad.start()
    bad.mode = mode
    endpoints = [{"name": "vllm-a", "url": vllm.url}, {"name": "sglang-a", "url": sglang.url},
                 {"name": "tgi-a", "url": tgi.url, "model": "mistral"},
                 {"name": "broken", "url": bad.url, "timeout": "500ms", "max_response_bytes": 65536,
                  "retries": 0}]
    source = make_source(endpoints)
    try:
        await poll_all(source)
        values = render_store(source.store)
        up = {dict(k)["endpoint"]: v for k, v in samples_of(values, "infrapulse_llm_endpoint_up").items()}
        assert up == {"vllm-a": 1.0, "sglang-a": 1.0, "tgi-a": 1.0, "broken": 0.0}
        status = source.store.status_of("serving", "broken")
        assert (status.up, status.reason) == (False, reason)
        assert value(values, "infrapulse_source_up", source="serving", target="broken") == 0.0
        assert value(values, "infrapulse_source_status_info", source="serving", target="broken",
                     reason=reason) == 1
        assert value(values, "infrapulse_llm_requests_running", endpoint="sglang-a", engine="sglang",
                     model="llama-3-8b") >= 0
        assert value(values, "infrapulse_llm_time_to_first_token_seconds_count", endpoint="vllm-a",
                     engine="vllm", model="llama-3-8b") > 0
        assert value(values, "infrapulse_llm_e2e_request_latency_seconds_count", endpoint="tgi-a",
                     engine="tgi", model="mistral") > 0
        # Only endpoint_up is left of the broken endpoint: nothing stale.
        assert not [k for k in values if dict(k[1]).get("endpoint") == "broken" and "endpoint_up" not in k[0]]
        # Recovery when it returns (it serves a vLLM-format body).
        bad.mode = "ok"
        await source.poll_endpoint(source.endpoints[3])
        values = render_store(source.store)
        assert value(values, "infrapulse_llm_endpoint_up", endpoint="broken", engine="vllm") == 1.0
        assert value(values, "infrapulse_llm_requests_running", endpoint="broken", engine="vllm",
                     model="m") == 3.0
        assert source.store.status_of("serving", "broken").reason == "ok"
    finally:
        await source.close()
        await bad.stop()


async def test_unknown_engine_and_mismatch(engines):
    _, (vllm, _, _) = engines
    app_text = "node_load1 0.3\n"
    from aiohttp import web

    async def other(request):
        return web.Response(text=app_text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", other)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/metrics"
    source = make_source([{"name": "node", "url": url},
                          {"name": "wrong", "url": vllm.url, "engine": "sglang"}])
    try:
        await poll_all(source)
        assert source.store.status_of("serving", "node").reason == "unknown_engine"
        assert source.store.status_of("serving", "wrong").reason == "engine_mismatch"
        values = render_store(source.store)
        assert value(values, "infrapulse_llm_endpoint_up", endpoint="node", engine="unknown") == 0.0
        assert value(values, "infrapulse_llm_endpoint_up", endpoint="wrong", engine="sglang") == 0.0
    finally:
        await source.close()
        await runner.cleanup()


async def test_engine_restart_scenario_is_not_a_spike():
    clock = FakeClock()
    board = ScenarioBoard(clock=clock)
    server = EngineServer("vllm", clock=clock, scenarios=board, arrival_rate=2.0)
    await server.start()
    source = make_source([{"name": "v", "url": server.url}])
    ep = source.endpoints[0]
    tracker = QuantileTracker(600)  # as the health service keeps it, fed from the store

    async def poll() -> None:
        await source.poll_endpoint(ep)
        tracker.observe_store(source.store)

    try:
        for _ in range(6):  # a minute of steady load, scraped every 10 s
            clock.t += 10
            await poll()
        before = tracker.quantiles()["v"]
        board.activate("engine-restart")
        for _ in range(3):  # down for as long as the restart lasts (a model reloading)
            clock.t += 10
            await poll()
            assert source.store.status_of("serving", "v").reason == "http_503"
        board.deactivate("engine-restart")
        for _ in range(3):
            clock.t += 10
            await poll()
        after = tracker.quantiles()["v"]
        assert source.store.status_of("serving", "v").up
        assert after["resets"] == 1
        assert after["ttft"]["p99"] <= 2 * before["ttft"]["p99"]
        assert after["ttft"]["count"] > 0 and after["request_rate"] > 0
    finally:
        await source.close()
        await server.stop()


def _run_load(variant: str, scenario: str | None, seconds: float = 120.0) -> EngineServer:
    clock = FakeClock()
    board = ScenarioBoard(clock=clock)
    if scenario:
        board.activate(scenario)
    server = EngineServer(variant, clock=clock, scenarios=board, arrival_rate=2.0, seed=3)
    clock.t += seconds
    server.advance()
    return server


def test_scenarios_move_the_load_model():
    base = _run_load("sglang", None).ranks[0]
    queued = _run_load("sglang", "queue-buildup").ranks[0]
    surge = _run_load("sglang", "ttft-surge").ranks[0]
    assert len(queued.queue) > len(base.queue) + 10
    assert queued.kv_usage > base.kv_usage
    assert queued.ttft.sum / queued.ttft.count > 3 * base.ttft.sum / base.ttft.count
    assert surge.ttft.sum / surge.ttft.count > 3 * base.ttft.sum / base.ttft.count


def _share_over(hist, seconds: float) -> float:
    within = next(cum for bound, cum in hist.cumulative() if bound >= seconds)
    return 1 - within / hist.count


@pytest.mark.parametrize("variant", ["vllm", "sglang", "triton-trtllm"])
def test_a_ttft_surge_goes_well_past_the_slo_and_trips_the_burn_rate_alert(variant):
    """p95 past the health score's bad level (2 x 1.5 s), and more requests past the alert's
    1.0 s SLI bound than the 14.4x burn rate of a 5% budget (72%)."""
    from infrapulse.health.latency import histogram_quantile  # the daemon's own p95 estimate

    base = _run_load(variant, None).ranks[0]
    surge = _run_load(variant, "ttft-surge").ranks[0]
    assert histogram_quantile(0.95, base.ttft.cumulative()) < 0.5
    assert histogram_quantile(0.95, surge.ttft.cumulative()) >= 3.0
    assert _share_over(base.ttft, 1.0) < 0.01
    assert _share_over(surge.ttft, 1.0) > 14.4 * 0.05


async def test_daemon_serves_normalised_and_passthrough_series(engines):
    _, (vllm, sglang, _) = engines
    cfg = yaml.safe_dump({"interval": "200ms", "sources": {"serving": {"endpoints": [
        {"name": "vllm-a", "url": vllm.url, "passthrough": True},
        {"name": "sglang-a", "url": sglang.url, "keep_labels": ["tp_rank"]},
    ]}}})
    async with running_daemon(cfg) as daemon:
        url = f"http://127.0.0.1:{daemon.bound_port}/metrics"
        async with aiohttp.ClientSession() as session:
            for _ in range(50):
                async with session.get(url) as resp:
                    values = parse_exposition(await resp.text())
                if len(samples_of(values, "infrapulse_llm_endpoint_up")) == 2:
                    break
                await asyncio.sleep(0.1)
    assert value(values, "infrapulse_llm_endpoint_up", endpoint="vllm-a", engine="vllm") == 1.0
    assert value(values, "infrapulse_llm_endpoint_up", endpoint="sglang-a", engine="sglang") == 1.0
    running = samples_of(values, "vllm:num_requests_running")  # passthrough, with the endpoint label
    assert {dict(k)["engine"] for k in running} == {"0", "1"}
    assert all(dict(k)["endpoint"] == "vllm-a" for k in running)
    kept = samples_of(values, "infrapulse_llm_requests_running")
    assert {dict(k).get("tp_rank") for k in kept if dict(k)["endpoint"] == "sglang-a"} == {"0", "1"}
    assert not [k for k in values if k[0].startswith("sglang:")]  # passthrough is off there


async def test_demo_part_runs_several_engines(tmp_path):
    from infrapulse.simulate.demo import DemoContext
    from infrapulse.simulate.serving_engines import demo_part

    ctx = DemoContext(workdir=tmp_path, scenarios=ScenarioBoard(), rng=random.Random(1))
    part = await demo_part(ctx)
    try:
        cfg = config_mod.load_text(yaml.safe_dump({"sources": part.sources}))
        endpoints = cfg.sources["serving"].endpoints
        assert len(endpoints) >= 3
        source = make_source(part.sources["serving"]["endpoints"])
        await poll_all(source)
        assert all(source.store.status_of("serving", ep.name).up for ep in source.endpoints)
        engines = {k[1] for k in source.store.snapshot("serving", endpoints[0].name).series[
            "infrapulse_llm_endpoint_up"]}
        assert engines == {"vllm"}
        await source.close()
    finally:
        await part.close()


@pytest.mark.parametrize("endpoints, path", [
    ([{"name": "a", "url": "http://x/metrics"}, {"name": "a", "url": "http://y/metrics"}],
     "sources.serving.endpoints[1].name"),
    ([{"name": "a", "url": "ftp://x/metrics"}], "sources.serving.endpoints[0].url"),
    ([{"name": "a", "url": "http://x/metrics", "keep_labels": ["gpu"]}],
     "sources.serving.endpoints[0].keep_labels[0]"),
    ([{"name": "a", "url": "http://x/metrics", "interval": "1s", "timeout": "2s"}],
     "sources.serving.endpoints[0].timeout"),
    ([{"name": "a", "url": "http://x/metrics", "engine": "llamacpp"}], "sources.serving.endpoints[0].engine"),
])
def test_config_errors_name_the_key(endpoints, path):
    with pytest.raises(SchemaError) as err:
        ServingSource.CONFIG.validate({"endpoints": endpoints}, "sources.serving")
    assert err.value.path == path
