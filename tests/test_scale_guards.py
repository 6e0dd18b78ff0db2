"""Guard-rails for running at scale: the series budget of the serving and dcgm sources, and the
fabric collectors' shard as they export it for the shard sanity alerts."""

from __future__ import annotations

import pytest

from gnmi_support import running_source, wait_for
from helpers import render_store, samples_of, value
from infrapulse.simulate.dcgm_exporter import FakeDcgmExporter, GpuExposition
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, FakeNvml
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.sources.base import SourceContext
from infrapulse.sources.budget import SeriesBudget
from infrapulse.sources.gnmi.shard import shard_of
from infrapulse.sources.gnmi.source import SHARD_TARGET
from infrapulse.sources.gpu.dcgm import DcgmSource
from infrapulse.sources.serving.source import ServingSource
from infrapulse.store import Snapshot, Store

DROPPED = "infrapulse_source_series_dropped_total"


def snapshot(series: dict[str, list[str]]) -> Snapshot:
    snap = Snapshot()
    for family, keys in series.items():
        for key in keys:
            snap.add(family, (key,), 1.0)
    return snap


def keys(snap: Snapshot) -> dict[str, list[str]]:
    return {family: [k[0] for k in series] for family, series in snap.series.items()}


# -- the budget itself ------------------------------------------------------------------------

def test_budget_keeps_what_it_kept_then_newcomers_in_order() -> None:
    budget = SeriesBudget(5)
    first = snapshot({"a": ["1", "2"], "b": ["1", "2"]})
    assert budget.apply(first) == 0 and keys(first) == {"a": ["1", "2"], "b": ["1", "2"]}
    # Three new series: one fits, in snapshot order; the two after it are dropped.
    second = snapshot({"a": ["0", "1", "2"], "b": ["1", "2"], "c": ["1", "2"]})
    assert budget.apply(second) == 2
    assert keys(second) == {"a": ["0", "1", "2"], "b": ["1", "2"]}
    # a/0 was kept last time, so it stays ahead of c/1 although c/1 came back too; a family left
    # without a series is gone, not empty.
    third = snapshot({"c": ["1"], "a": ["0", "1", "2"], "b": ["1", "2"], "d": ["1"]})
    assert budget.apply(third) == 2
    assert keys(third) == {"a": ["0", "1", "2"], "b": ["1", "2"]}
    # Series that went away free their room for the next newcomers.
    fourth = snapshot({"a": ["2"], "c": ["1", "2"], "d": ["1", "2", "3"]})
    assert budget.apply(fourth) == 1
    assert keys(fourth) == {"a": ["2"], "c": ["1", "2"], "d": ["1", "2"]}


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


async def test_serving_budget_config_key_has_a_default_and_refuses_zero() -> None:
    section = ServingSource.CONFIG.validate({}, "sources.serving")
    assert section.max_series == 10_000
    with pytest.raises(Exception, match="max_series"):
        ServingSource.CONFIG.validate({"max_series": 0}, "sources.serving")


# -- dcgm ------------------------------------------------------------------------------------

async def test_dcgm_budget_caps_the_mapped_gpus_and_reports_partial() -> None:
    fake = FakeNvml.from_file(DEFAULT_DATA)
    exporter = FakeDcgmExporter(GpuExposition(fake, hostname="testhost"))
    url = await exporter.start()
    try:
        def source(store: Store, **extra: object) -> DcgmSource:
            section = DcgmSource.CONFIG.validate({"enabled": True, "url": url, **extra}, "sources.dcgm")
            return DcgmSource(section, SourceContext(store=store, interval=2.0, hostname="testhost"))

        (full,) = await source(Store()).collect()
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


# -- the fabric collectors' shard ------------------------------------------------------------------

NAMES = [f"leaf{i:02d}" for i in range(20)]


async def test_each_collector_exports_its_shard_and_the_switches_it_owns() -> None:
    targets = [{"name": n, "address": "127.0.0.1:9"} for n in NAMES]
    for index in (0, 1):
        section = {"defaults": {"insecure": True, "connect_timeout": "1s"}, "targets": targets,
                   "shard": {"index": index, "count": 2}}
        async with running_source(section) as (source, store):
            await wait_for(lambda s=source: bool(s.sessions))
            values = render_store(store)
            shard_count = samples_of(values, "infrapulse_fabric_shards")
            assert shard_count == {frozenset({("index", str(index))}): 2.0}
            owned = {dict(labels)["switch"] for labels in samples_of(values, "infrapulse_switch_up")}
            assert owned == {n for n in NAMES if shard_of(n, 2) == index}
        assert store.snapshot("gnmi", SHARD_TARGET) is None  # gone with the source


async def test_an_unsharded_collector_is_shard_0_of_1_and_a_bad_shard_exports_none() -> None:
    async with running_source({"targets": [{"name": "leaf01", "address": "127.0.0.1:9"}],
                               "defaults": {"insecure": True}}, hostname="plainhost") as (source, store):
        await wait_for(lambda: bool(source.sessions))
        assert value(render_store(store), "infrapulse_fabric_shards", index="0") == 1.0
    section = {"targets": [{"name": "leaf01", "address": "127.0.0.1:9"}], "defaults": {"insecure": True}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFRAPULSE_SHARD_COUNT", "3")  # count without an index, host without an ordinal
        async with running_source(section, hostname="plainhost") as (source, store):
            await wait_for(lambda: ("gnmi", "shard") in store.status)
            values = render_store(store)
    assert not samples_of(values, "infrapulse_fabric_shards")
    assert value(values, "infrapulse_source_up", source="gnmi", target="shard") == 0.0
