"""Guard-rails for running at scale against served targets: the serving source's series budget
on a simulated vLLM engine over HTTP (passthrough dropped first, every scrape counted) and the
dcgm source's on a fake dcgm-exporter (the mapped GPUs capped, the pass reported partial). The
integration half of tests/test_scale_guards.py."""

from __future__ import annotations

import pytest

from helpers import render_store, samples_of, value
from infrapulse.simulate.dcgm_exporter import FakeDcgmExporter, GpuExposition
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, FakeNvml
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.sources.base import SourceContext
from infrapulse.sources.gpu.dcgm import DcgmSource
from infrapulse.sources.serving.source import ServingSource
from infrapulse.store import Store

DROPPED = "infrapulse_source_series_dropped_total"


# -- serving: passthrough under the budget -------------------------------------------------------

class Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


def serving_source(url: str, store: Store, **extra: object) -> ServingSource:
    section = ServingSource.CONFIG.validate(
        {"endpoints": [{"name": "vllm", "url": url, "passthrough": True}], **extra}, "sources.serving")
    return ServingSource(section, SourceContext(store=store, interval=1.0))


@pytest.fixture
async def vllm():
    clock = Clock()
    server = EngineServer("vllm", dp_ranks=2, clock=clock, arrival_rate=3.0)
    await server.start()
    clock.t += 60
    yield server
    await server.stop()


async def test_serving_budget_drops_passthrough_first_and_counts_every_scrape(vllm) -> None:
    free_store = Store()
    free = serving_source(vllm.url, free_store)
    await free.poll_endpoint(free.endpoints[0])
    everything = free_store.snapshot("serving", "vllm")
    assert everything is not None
    normalised = {f for f in everything.series if f.startswith("infrapulse_llm_")}
    n_normalised = sum(len(everything.series[f]) for f in normalised)
    total = len(everything)
    assert total > n_normalised + 20  # passthrough brought the engine's own families
    assert free_store.status_of("serving", "vllm").series_dropped == 0
    assert not samples_of(render_store(free_store), DROPPED)

    store = Store()
    limit = n_normalised + 8  # room for 8 passthrough series, endpoint_up comes on top
    source = serving_source(vllm.url, store, max_series=limit)
    await source.poll_endpoint(source.endpoints[0])
    kept = store.snapshot("serving", "vllm")
    assert kept is not None
    # Every normalised series is there; passthrough got what was left.
    assert all(kept.series.get(f) == everything.series[f] for f in normalised if f in everything.series)
    over = len(everything) - limit - 2  # endpoint_up and process_start are added after the budget
    status = store.status_of("serving", "vllm")
    assert status.series_dropped == over > 0
    assert status.up and status.reason == "partial"
    assert f"{over} series past max_series={limit} dropped" in status.message
    assert value(render_store(store), DROPPED, source="serving", target="vllm") == over
    first_keys = {(f, k) for f, s in kept.series.items() for k in s}
    await source.poll_endpoint(source.endpoints[0])  # the same series kept, counted again
    again = store.snapshot("serving", "vllm")
    assert again is not None and {(f, k) for f, s in again.series.items() for k in s} == first_keys
    assert store.status_of("serving", "vllm").series_dropped == 2 * over


# -- dcgm ------------------------------------------------------------------------------------

async def test_dcgm_budget_caps_the_mapped_gpus_and_reports_partial() -> None:
    fake = FakeNvml.from_file(DEFAULT_DATA)
    exporter = FakeDcgmExporter(GpuExposition(fake, hostname="testhost"))
    url = await exporter.start()
    try:
        def source(store: Store, **extra: object) -> DcgmSource:
            section = DcgmSource.CONFIG.validate({"enabled": True, "url": url, **extra}, "sources.dcgm")
            return DcgmSource(section, SourceContext(store=store, interval=2.0, hostname="testhost"))

        uncapped = source(Store())
        (full,) = await uncapped.collect()
        await uncapped.close()
        assert full.snapshot is not None and not full.partial_errors
        total = len(full.snapshot)
        store = Store()
        capped = source(store, max_series=100)
        (result,) = await capped.collect()
        await capped.close()
    finally:
        await exporter.close()
    assert total > 200  # 8 GPUs, one of them split in MIG instances
    assert result.snapshot is not None and len(result.snapshot) == 100
    assert result.partial_errors == [f"series budget: {total - 100} series past max_series=100 dropped"]
    assert store.status_of("dcgm", "dcgm").series_dropped == total - 100
    assert DcgmSource.CONFIG.validate({}, "sources.dcgm").max_series == 20_000
