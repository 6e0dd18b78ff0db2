"""The exposition encoder writes exactly what prometheus_client writes, for every catalogue family
(issue 20, item 1): prometheus_client over the same registry is the reference. The /metrics
endpoint serving it: tests/integration/test_exposition_served.py."""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator

import pytest
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from infrapulse import catalog
from infrapulse.columns import Slots
from infrapulse.docs import load_everything
from infrapulse.exposition import ExpositionRegistry, Style, render_body, style_of
from infrapulse.exposition.store_encoder import StoreEncoder
from infrapulse.httpguard import HttpStats
from infrapulse.metrics import DaemonState, StoreCollector, make_registry
from infrapulse.store import Histogram, Snapshot, Store

# Every Accept header that selects a style the encoder writes itself.
ACCEPTS = [
    "",  # text 0.0.4
    "text/plain;version=0.0.4",
    "application/openmetrics-text; version=1.0.0",
    "application/openmetrics-text",
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
    "text/plain;version=1.0.0;escaping=allow-utf-8",
    "text/plain;version=1.0.0;escaping=underscores",
]
AWKWARD_VALUES = ["x", 'quo"te', "back\\slash", "new\nline", "ünïcødé ✓", "", "a,b=c}", "\\n"]
NUMBERS = [0.0, -0.0, 1.0, 42, 1234567.0, 1e6, 999999.0, 12345678901234.5, 2.0 ** 63, 1e16, 1e300,
           -12345678.0, 1e-9, 0.1, math.nan, math.inf, -math.inf, 5e-324]


class Static:
    """A plain prometheus_client collector (as process_*): unlabelled metrics are written from a
    shape kept after prometheus_client wrote them once, the rest by prometheus_client."""

    def __init__(self) -> None:
        self.round = 0  # the test moves it between renders (both encoders of one round agree)

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily("other_gauge", "not from the store", labels=["a"])
        g.add_metric(['v"1'], 2.5)
        yield g
        value = NUMBERS[self.round % len(NUMBERS)]  # a new value each round, the shape kept
        yield GaugeMetricFamily("other_plain", "unlabelled \\ help", value=value)
        yield CounterMetricFamily("other_seconds", "a counter (its _total sample)", value=abs(value))
        yield CounterMetricFamily("other_created", "with _created: prometheus_client's",
                                  value=3, created=1700000000.5)
        yield GaugeMetricFamily("other_empty", "no samples")

    def describe(self) -> list[Metric]:
        return []


def _labels(family: catalog.Family, i: int, with_empty: bool) -> tuple[str, ...]:
    names = family.labels + family.optional_labels
    values = [AWKWARD_VALUES[(i + k) % len(AWKWARD_VALUES)] or "v" for k in range(len(names))]
    if with_empty and family.optional_labels:
        values[-1] = ""  # an optional label absent
    return tuple(values)


def catalogue_store() -> Store:
    """Every catalogue family, in two instances of its source, with awkward labels and values;
    gnmi families in columns as the gnmi source keeps them; passthrough families of each type."""
    load_everything()
    store = Store()
    families = catalog.all_families()
    assert len(families) > 100
    for target in ("t1", "t2"):
        snaps: dict[str, Snapshot] = {}
        slots = Slots()
        for n, family in enumerate(families):
            source = family.source or "other"
            snap = snaps.setdefault(source, Snapshot())
            series: dict = {}
            if source == "gnmi" and family.type != catalog.HISTOGRAM:
                series = slots.column()
            for i in range(3):
                key = _labels(family, i + n, with_empty=i == 1)
                if family.type == catalog.HISTOGRAM:
                    series[key] = Histogram(((0.005, 1.0), (2.5, 3.0), (1e7, 4.0), (math.inf, 5.0 + i)),
                                            NUMBERS[(n + i) % len(NUMBERS)], 5.0 + i)
                else:
                    if hasattr(series, "acquire"):
                        series.acquire(key)
                    series[key] = NUMBERS[(n + i) % len(NUMBERS)]
            snap.series[family.name] = series
        for source, snap in snaps.items():
            store.publish(source, target, snap, 1e9)
            store.record_success(source, target, 0.5)
    store.status_of("gnmi", "t1").coverage  # noqa: B018 - coverage rows, as a live source has
    store.set_coverage("gnmi", "t1", {"/interfaces": 3, "/qos": 0})
    store.count_unmapped("gnmi", "t1", "/qos", "/qos/x", 7)
    store.record_failure("serving", "down", "timeout", "no answer")
    # Passthrough: an engine's own names (colons, no _total), each type, a histogram.
    pt = Snapshot()
    for name, typ in (("vllm:requests_total", catalog.COUNTER), ("vllm:kv_usage", catalog.GAUGE),
                      ("triton_thing", catalog.UNTYPED), ("vllm:ttft_seconds", catalog.HISTOGRAM)):
        family = catalog.declare_passthrough(name, typ, f'help of {name} with "quotes" and \\')
        assert family is not None
        for i in range(2):
            key = tuple(sorted({"endpoint": "e1", "model": AWKWARD_VALUES[i + 1]}.items()))
            value = (Histogram(((0.1, 1.0), (math.inf, 2.0 + i)), 0.25, 2.0 + i)
                     if typ == catalog.HISTOGRAM else NUMBERS[i + 3])
            pt.add(family, key, value)
    store.publish("serving", "e1", pt, 1e9)
    return store


def registry_of(store: Store) -> ExpositionRegistry:
    registry = ExpositionRegistry(auto_describe=False)
    registry.register(StoreCollector(store, DaemonState("host", "node")))
    registry.register(Static())
    stats = HttpStats()  # catalogue families of its own, through the encoder
    stats.closed["idle_timeout"] += 3
    stats.rejected["rate_limited"] += 12345678
    registry.register(stats)
    return registry


@pytest.mark.parametrize("accept", ACCEPTS)
def test_every_catalogue_family_renders_byte_identical_to_prometheus_client(accept):
    store = catalogue_store()
    registry = registry_of(store)
    encoder, _ = choose_encoder(accept)
    assert style_of(encoder) is not None
    for round in range(len(NUMBERS)):  # cold (every prefix built), then warm (every prefix kept)
        for collector in registry._ordered:
            if isinstance(collector, Static):
                collector.round = round
        expected = encoder(registry)
        assert render_body(registry, encoder) == expected
    text = expected.decode()
    # the comparison covers what it claims: every family, the fallback collector, the escapes
    for family in catalog.all_families():
        assert any(f"\n{family.name}{end}" in text for end in ("{", " ", "_bucket{")), family.name
    assert 'other_gauge{a="v\\"1"} 2.5' in text
    assert "other_created_created 1.7000000005e+09" in text
    assert 'infrapulse_http_requests_rejected_total{reason="rate_limited"} 1.2345678e+07' in text
    assert 'new\\nline' in text and 'back\\\\slash' in text and "NaN" in text and "+Inf" in text
    assert text.endswith("# EOF\n") == (style_of(encoder).openmetrics)


def test_values_and_label_sets_that_change_between_renders_stay_identical():
    store = catalogue_store()
    registry = registry_of(store)
    text, _ = choose_encoder("")
    om, _ = choose_encoder("application/openmetrics-text")
    assert render_body(registry, text) == text(registry)
    snap = store.snapshot("gnmi", "t1")
    assert snap is not None
    column = next(s for s in snap.series.values() if hasattr(s, "acquire"))
    first, second = list(column)[:2]
    column[second] = 98765432.0  # a streamed update in place
    column.release(first)  # a series gone
    column.acquire(("new", "port", "x", "y", "z")[: len(first)])  # held, not shown until written
    polled = sorted({src for (src, _), _ in store.snapshots()} - {"gnmi", "serving"})[0]
    node = store.snapshot(polled, "t2")
    assert node is not None and len(node) > 10
    replaced = Snapshot()  # a snapshot family replaced by a poll: same labels, new tuples and values
    for name, series in node.series.items():
        for key, value in series.items():
            replaced.add(name, tuple(list(key)), 7.0 if not isinstance(value, Histogram) else value)
    store.publish(polled, "t2", replaced, 1e9)
    store.remove("serving", "e1")
    for encoder in (text, om, text):
        assert render_body(registry, encoder) == encoder(registry)


def test_a_column_whose_series_change_at_an_unchanged_count_gets_its_new_label_blocks():
    """A column's kept blocks are reused by its `keys_version`, with no copy of its keys: a
    series gone and another written in the same interval (the count unchanged), a series held
    and written, and a compaction (slots renumbered, keys unchanged) all render right."""
    store = Store()
    family = catalog.declare("infrapulse_test_exposition_column_bytes_total", catalog.COUNTER, "h",
                             ("target", "port"), source="test")
    slots = Slots()
    column = slots.column()
    for i in range(40):
        column.acquire(("sw", f"p{i}"))
        column[("sw", f"p{i}")] = float(i)
    snap = Snapshot()
    snap.series[family.name] = column
    store.publish("test", "sw", snap, 1e9)
    registry = registry_of(store)
    text, _ = choose_encoder("")

    def lines() -> list[str]:
        body = render_body(registry, text)
        assert body == text(registry)
        return [line for line in body.decode().splitlines() if line.startswith(family.name)]

    assert len(lines()) == 40
    version = column.keys_version
    column[("sw", "p3")] = 1e9  # a value only: the keys, and their version, stay
    assert column.keys_version == version and '{port="p3",target="sw"} 1e+09' in "\n".join(lines())
    column.release(("sw", "p0"))
    column.acquire(("sw", "new"))
    column[("sw", "new")] = 5.0
    assert len(column) == 40 and column.keys_version == version + 2
    shown = lines()
    assert len(shown) == 40 and not any('port="p0"' in line for line in shown)
    assert shown[-1] == f'{family.name}{{port="new",target="sw"}} 5.0'
    column.acquire(("sw", "held"))  # held, not written: not shown, the keys unchanged
    assert column.keys_version == version + 2 and len(lines()) == 40
    column.reveal(("sw", "held"))
    assert column.keys_version == version + 3 and len(lines()) == 41
    for i in range(1, 30):
        column.release(("sw", f"p{i}"))
    slots.compact([column])
    assert [line.split("{")[1].split(",")[0] for line in lines()] == [
        'port="p30"', *[f'port="p{i}"' for i in range(31, 40)], 'port="new"', 'port="held"']
    encoder = StoreEncoder(StoreCollector(store, DaemonState("h", "node")))
    list(encoder.render(Style()))
    kept = [last for cache in encoder.caches._caches.values()  # noqa: SLF001
            for name, last in cache.last.items() if name == family.name]
    assert len(kept) == 1 and kept[0][0] is column and kept[0][1] == column.keys_version


def test_kept_prefixes_follow_the_live_series():
    store = Store()
    family = catalog.declare("infrapulse_test_exposition_bytes_total", catalog.COUNTER, "h",
                             ("target", "port"), source="test")
    snap = Snapshot()
    for i in range(5000):
        snap.add(family, ("a", f"p{i}"), float(i))
    store.publish("test", "a", snap, 1e9)
    encoder = StoreEncoder(StoreCollector(store, DaemonState("h", "node")))
    list(encoder.render(Style()))
    kept = encoder.kept_prefixes()
    assert 5000 <= kept <= 5000 + 20  # one per series (+ the daemon's own families)
    small = Snapshot()
    for i in range(100):
        small.add(family, ("a", f"p{i}"), 1.0)
    store.publish("test", "a", small, 1e9)
    list(encoder.render(Style()))  # sees the dead prefixes, drops them
    list(encoder.render(Style()))  # rebuilds the live ones (a family this small: in a run)
    assert 100 <= encoder.kept_prefixes() <= 100 + 20
    store.remove("test", "a")
    list(encoder.render(Style()))
    assert encoder.kept_prefixes() < 20  # the instance's prefixes went with it


def test_families_of_one_port_share_one_label_block():
    """Plain families keep label blocks per (instance, label names): 50 families over the same
    200 ports keep 200 blocks, not 10,000 prefixes."""
    store = Store()
    snap = Snapshot()
    for f in range(50):
        family = catalog.declare(f"infrapulse_test_exposition_share{f}", catalog.GAUGE, "h",
                                 ("target", "interface"), source="test")
        for p in range(200):
            snap.add(family, ("sw", f"Ethernet{p}"), float(p))
    store.publish("test", "sw", snap, 1e9)
    encoder = StoreEncoder(StoreCollector(store, DaemonState("h", "node")))
    list(encoder.render(Style()))
    assert 200 <= len(encoder.caches) <= 200 + 20
    registry = registry_of(store)  # and large series dicts (the bulk path) stay byte-identical
    for accept in ("", "application/openmetrics-text"):
        text, _ = choose_encoder(accept)
        assert render_body(registry, text) == text(registry)


def test_make_registry_renders_through_the_encoder_and_keeps_process_families():
    store = catalogue_store()
    registry = make_registry(store, DaemonState("h", "fabric"))
    assert isinstance(registry, ExpositionRegistry)
    encoder, _ = choose_encoder("application/openmetrics-text")
    ours, reference = render_body(registry, encoder), encoder(registry)

    def without_process_values(body: bytes) -> list[bytes]:  # CPU seconds move between the two
        return [line.rsplit(b" ", 1)[0] if line.startswith(b"process_") else line
                for line in body.split(b"\n")]

    assert without_process_values(ours) == without_process_values(reference)
    assert b"# TYPE process_cpu_seconds counter" in ours


def test_dots_escaping_is_left_to_prometheus_client():
    encoder, content_type = choose_encoder("application/openmetrics-text;version=1.0.0;escaping=dots")
    assert style_of(encoder) is None and "escaping=dots" in content_type
    store = catalogue_store()
    registry = registry_of(store)
    assert render_body(registry, encoder) == encoder(registry)


def test_gzip_of_a_render_is_made_once_and_shared_within_the_cache_window():
    from infrapulse.http import RenderCache

    renders = []

    def render(encoder) -> list[bytes]:
        renders.append(encoder)
        return [b"x" * 600, b"y" * 400]

    cache = RenderCache(ttl=60.0)
    zipped, content_type = cache.get(None, True, 1, render)  # compressed as rendered
    again, _ = cache.get(None, True, 1, render)
    plain, _ = cache.get(None, False, 1, render)  # in the window: the same render, decompressed
    assert len(renders) == 1 and again is zipped and plain == b"x" * 600 + b"y" * 400
    assert gzip.decompress(zipped) == plain
    assert content_type.startswith("text/plain; version=0.0.4")
    cache.get(None, True, 2, render)  # a publish: rendered again
    assert len(renders) == 2
    off = RenderCache(ttl=0.0)
    off.get(None, True, 1, render)
    off.get(None, True, 1, render)
    assert len(renders) == 4  # cache off: every scrape renders


def test_a_run_reuses_its_prefixes_while_the_layout_holds_and_rebuilds_on_any_change():
    """A node's small families are written as one run (exposition/runs.py): new values under the
    same layout reuse the kept prefixes; every kind of layout change rebuilds them, and every
    render is byte-identical to prometheus_client's."""
    from infrapulse.exposition.runs import RUN_MAX_SERIES

    a = catalog.declare("infrapulse_test_run_a_total", catalog.COUNTER, "h", ("device", "port"),
                        source="test")
    b = catalog.declare("infrapulse_test_run_b", catalog.GAUGE, "h", ("device", "port"), source="test")
    store = Store()
    registry = registry_of(store)
    store_encoder = registry._encoders[id(registry._ordered[0])]  # noqa: SLF001

    def publish(target: str, series: dict) -> None:
        snap = Snapshot()
        for family, key, value in series:
            snap.add(family, key, value)
        store.publish("test", target, snap, 1e9)

    def runs() -> list:
        return store_encoder._runs[style_of(choose_encoder("")[0])]  # noqa: SLF001

    def check() -> list:
        for accept in ("", "application/openmetrics-text"):
            text, _ = choose_encoder(accept)
            assert render_body(registry, text) == text(registry), accept
        return [run.prefixes for run in runs()]

    publish("d0", [(a, ("d0", "1"), 1), (b, ("d0", "1"), 0.5)])
    publish("d1", [(a, ("d1", "1"), 2), (b, ("d1", "1"), 1.5)])
    first = check()
    assert len(first) == 1  # the daemon's own families and both test families: one run
    publish("d0", [(a, ("d0", "1"), 123456789), (b, ("d0", "1"), math.nan)])  # values only
    again = check()
    assert again[0] is first[0]
    changes = [
        lambda: publish("d0", [(a, ("d0", "2"), 1), (b, ("d0", "1"), 0.5)]),  # a key
        lambda: publish("d0", [(a, ("d0", "2"), 1), (a, ("d0", "3"), 1), (b, ("d0", "1"), 0.5)]),  # a series
        lambda: publish("d1", [(a, ("d0", "3"), 2), (b, ("d1", "1"), 1.5)]),  # a key under another owner
        lambda: store.remove("test", "d1"),  # an instance
        lambda: publish("d1", [(b, ("d1", "1"), 1.5)]),  # a family instance
        lambda: publish("d2", [(a, ("d2", str(p)), p) for p in range(RUN_MAX_SERIES)]),  # out of the run
    ]
    for change in changes:
        before, bare = check()[0], set(map(id, runs()[0].bare))
        change()
        after = check()
        assert after[0] is not before
        if change is changes[0]:  # one key of d0 changed: every other prefix is kept, as it was
            assert len(set(map(id, runs()[0].bare)) - bare) == 1
    # the large family splits the run in two: the families before it and those after
    assert len(after) == 2
