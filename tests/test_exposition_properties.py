"""Property tests of the exposition encoder against prometheus_client (issue 20, item 1):
arbitrary label values and names, NaN/±Inf, huge counters, float formatting, every style."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from infrapulse import catalog
from infrapulse.columns import Slots
from infrapulse.exposition import ExpositionRegistry, render_body
from infrapulse.exposition.floats import go_float, go_floats
from infrapulse.exposition.runs import format_values
from infrapulse.metrics import DaemonState, StoreCollector
from infrapulse.store import Histogram, Snapshot, Store

STYLES = [choose_encoder(accept)[0] for accept in (
    "", "application/openmetrics-text; version=1.0.0",
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
    "text/plain;version=1.0.0;escaping=allow-utf-8")]

# Any text that UTF-8 can carry (no lone surrogates: neither encoder could write those).
label_values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=0, max_value=2 ** 80).map(float),  # huge counters
    st.integers(min_value=-10 ** 9, max_value=10 ** 17),  # ints as a source may hand them
    st.sampled_from([1e6, 999999.0, 1234567.0, 1e16, 9999999999999998.0, 0.0, -0.0]))
label_names = st.one_of(st.from_regex(r"\A[a-zA-Z_][a-zA-Z0-9_]{0,8}\Z"),
                        st.sampled_from(["9lives", "a.b", "ü", "with space", "le2"]))
engine_names = st.one_of(st.from_regex(r"\A[a-zA-Z_:][a-zA-Z0-9_:]{0,12}\Z"),
                         st.sampled_from(["a.b.c", "9x", "naïve"]))

FAMILIES = {typ: catalog.declare(f"infrapulse_test_prop_{typ}" + ("_total" if typ == catalog.COUNTER
                                 else "_info" if typ == catalog.INFO else ""),
                                 typ, 'help with \\ and "quotes"\nand a newline', ("target", "port"),
                                 source="test", optional_labels=("pod",))
            for typ in (catalog.COUNTER, catalog.GAUGE, catalog.INFO, catalog.HISTOGRAM)}
_passthrough_ids = itertools.count()


def _check(store: Store) -> None:
    registry = ExpositionRegistry(auto_describe=False)
    registry.register(StoreCollector(store, DaemonState("h", "node")))
    for encoder in STYLES:
        expected = encoder(registry)
        assert render_body(registry, encoder) == expected
        assert render_body(registry, encoder) == expected  # from kept prefixes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(label_values, label_values, label_values, numbers), min_size=1, max_size=8),
       st.booleans())
def test_catalogue_families_with_arbitrary_labels_and_values(rows, columnar):
    store = Store()
    snap = Snapshot()
    slots = Slots()
    for typ, family in FAMILIES.items():
        series: dict = {} if typ == catalog.HISTOGRAM or not columnar else slots.column()
        for target, port, pod, value in rows:
            key = (target, port, pod)
            if typ == catalog.HISTOGRAM:
                series[key] = Histogram(((float(value) if value == value else 0.5, 1.0),
                                         (float("inf"), 2.0)), value, 2.0)
            else:
                if hasattr(series, "acquire") and key not in series:
                    series.acquire(key)
                series[key] = float(value) if columnar else value
        snap.series[family.name] = series
    store.publish("test", "x", snap, 1e9)
    _check(store)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine_names, st.sampled_from([catalog.COUNTER, catalog.GAUGE, catalog.UNTYPED, catalog.HISTOGRAM]),
       st.lists(st.tuples(st.dictionaries(label_names, label_values, max_size=3), numbers),
                min_size=1, max_size=5))
# A dotted engine name with a label whose value is empty, drawn by CI once (issue 33).
@example(name="a.b.c", typ=catalog.COUNTER, rows=[({"__": ""}, 0.0)])
def test_passthrough_families_with_any_engine_names(name, typ, rows):
    name = f"{name}_{next(_passthrough_ids)}"  # each example declares a fresh family
    if typ == catalog.COUNTER:
        name += "_total"
    family = catalog.declare_passthrough(name, typ, "engine's help")
    assert family is not None
    snap = Snapshot()
    for labels, value in rows:
        key = tuple(sorted({**labels, "endpoint": "e"}.items()))
        snap.add(family, key, Histogram(((1.0, 1.0), (float("inf"), 3.0)), value, 3.0)
                 if typ == catalog.HISTOGRAM else value)
    store = Store()
    store.publish("serving", "e", snap, 1e9)
    _check(store)


@settings(max_examples=500, deadline=None)
@given(st.lists(numbers, max_size=20))
def test_values_are_written_as_float_to_go_string_writes_them(values):
    assert go_floats(values) == [floatToGoString(v) for v in values]
    assert [go_float(v) for v in values] == [floatToGoString(v) for v in values]
    assert format_values(values) == [floatToGoString(v) for v in values]  # a run's values


def test_large_integer_counters_at_the_edges_of_the_exact_range():
    """Ints of 7 to 16 digits are written from their own digits (below 2**53 a float holds them
    exactly); past 2**53 and for negative ones, through the float, as floatToGoString."""
    edges = [10**6 - 1, 10**6, 10**6 + 1, 10**7, 1_234_567_000, 10**15, 10**16 - 1, 2**53 - 1, 2**53,
             2**53 + 1, 2**63 - 1, -(10**6), -(10**12) - 7, 99_990_000_000]
    edges += [10**k - 1 for k in range(7, 17)] + [10**k + 10**(k - 3) for k in range(7, 17)]
    assert [go_float(v) for v in edges] == [floatToGoString(v) for v in edges]
    assert format_values([*edges, True, False]) == [floatToGoString(v) for v in [*edges, True, False]]
