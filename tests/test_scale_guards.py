"""Guard-rails for running at scale: the series budget itself and the serving source's budget key,
and the fabric collectors' shard as they export it for the shard sanity alerts. The serving and
dcgm sources held to their budget against served targets are in
tests/integration/test_scale_guards_served.py."""

from __future__ import annotations

import pytest

from gnmi_support import running_source, wait_for
from helpers import render_store, samples_of, value
from infrapulse.sources.budget import SeriesBudget
from infrapulse.sources.gnmi.shard import shard_of
from infrapulse.sources.gnmi.source import SHARD_TARGET
from infrapulse.sources.serving.source import ServingSource
from infrapulse.store import Snapshot


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

async def test_serving_budget_config_key_has_a_default_and_refuses_zero() -> None:
    section = ServingSource.CONFIG.validate({}, "sources.serving")
    assert section.max_series == 10_000
    with pytest.raises(Exception, match="max_series"):
        ServingSource.CONFIG.validate({"max_series": 0}, "sources.serving")


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
