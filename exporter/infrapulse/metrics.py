"""Render the store through a prometheus_client custom collector.

The collector builds `Metric` objects straight from the store's snapshots on every scrape —
no per-series client objects, no locks — and prometheus_client's own encoders turn them into
the text or OpenMetrics format the scraper asked for.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry
from prometheus_client.samples import Sample

from . import __version__, catalog
from .store import Histogram, Store

SOURCE_UP = catalog.declare(
    "infrapulse_source_up", catalog.GAUGE,
    "1 if the last collection of this source instance succeeded (possibly with skipped files), else 0.",
    ("source", "target"), source="daemon")
SOURCE_LAST_SUCCESS = catalog.declare(
    "infrapulse_source_last_success_timestamp_seconds", catalog.GAUGE,
    "Unix time of the last successful collection of this source instance.",
    ("source", "target"), unit="seconds", source="daemon")
SOURCE_DURATION = catalog.declare(
    "infrapulse_source_collect_duration_seconds", catalog.GAUGE,
    "Wall time the last collection of this source instance took.",
    ("source", "target"), unit="seconds", source="daemon")
SOURCE_ERRORS = catalog.declare(
    "infrapulse_source_errors_total", catalog.COUNTER,
    "Failed collections of this source instance since the daemon started.",
    ("source", "target"), source="daemon")
SOURCE_STATUS = catalog.declare(
    "infrapulse_source_status_info", catalog.INFO,
    "The reason behind infrapulse_source_up: ok, partial (some files or fields skipped), or why it failed.",
    ("source", "target", "reason"), source="daemon")
SOURCE_MAPPING_SERIES = catalog.declare(
    "infrapulse_source_mapping_series", catalog.GAUGE,
    "Series one mapping of a source instance yields now (a subscribed gNMI path, a serving family the "
    "engine's mapping promises, a dcgm-exporter field). 0 on a live target: the mapping maps to nothing.",
    ("source", "target", "mapping"), source="daemon")
SOURCE_UNMAPPED = catalog.declare(
    "infrapulse_source_unmapped_total", catalog.COUNTER,
    "Updates or samples that arrived for a mapping of a source instance and matched no mapping rule "
    "(counted and dropped; /api/v1/sources shows one example).",
    ("source", "target", "mapping"), source="daemon")
SOURCE_SERIES_DROPPED = catalog.declare(
    "infrapulse_source_series_dropped_total", catalog.COUNTER,
    "New series a source instance refused because it reached its series budget.",
    ("source", "target"), source="daemon")
BUILD_INFO = catalog.declare(
    "infrapulse_build_info", catalog.INFO, "infrapulse version running.", ("version",), source="daemon")
NODE_INFO = catalog.declare(
    "infrapulse_node_info", catalog.INFO,
    "The host this instance runs on and its role (node, fabric, both); joins node series to LLDP neighbours.",
    ("hostname", "role"), source="daemon")
RELOAD_OK = catalog.declare(
    "infrapulse_config_last_reload_successful", catalog.GAUGE,
    "1 if the last configuration (re)load succeeded, 0 if the daemon kept the previous config.",
    (), source="daemon")
RELOAD_TIME = catalog.declare(
    "infrapulse_config_last_reload_success_timestamp_seconds", catalog.GAUGE,
    "Unix time of the last successful configuration load.", (), unit="seconds", source="daemon")
TASKS = catalog.declare(
    "infrapulse_exporter_asyncio_tasks", catalog.GAUGE,
    "asyncio tasks alive in the daemon (self-monitoring: must stay flat while sources reconnect).",
    (), source="daemon")
SERIES = catalog.declare(
    "infrapulse_exporter_series", catalog.GAUGE,
    "Series currently held in the store, per source (self-monitoring of cardinality).",
    ("source",), source="daemon")


class DaemonState:
    """Facts about the daemon itself that the collector exports."""

    def __init__(self, hostname: str = "", role: str = "node") -> None:
        self.hostname = hostname
        self.role = role
        self.reload_successful = True
        self.last_reload_success = time.time()


# One family's series dict as readers see it: label values (sorted (label, value) pairs for a
# passthrough family) to a float (a Histogram for a histogram family). Which of them is a
# property of the family, not of the dict's type, hence Any.
SeriesDict = Mapping[Any, Any]
# The daemon's own families: label values to a float.
OwnSeries = dict[tuple[str, ...], float]


def _format_le(bound: float) -> str:
    if math.isinf(bound):
        return "+Inf"
    return repr(float(bound))


def family_metric(family: catalog.Family, series_by_instance: Iterable[SeriesDict]) -> Metric | None:
    """Build one prometheus_client Metric from an iterable of series dicts of this family."""
    if family.passthrough:
        return _passthrough_metric(family, series_by_instance)
    name = family.name
    labelnames = family.labels + family.optional_labels
    optional = bool(family.optional_labels)
    if family.type == catalog.COUNTER:
        metric = Metric(name[: -len("_total")], family.help, "counter")
    elif family.type == catalog.INFO:
        metric = Metric(name[: -len("_info")], family.help, "info")
    else:
        metric = Metric(name, family.help, family.type)
    samples = metric.samples
    append = samples.append
    if family.type == catalog.HISTOGRAM:
        bucket_name, sum_name, count_name = name + "_bucket", name + "_sum", name + "_count"
        for series in series_by_instance:
            for values, hist in series.items():
                labels = _labels(labelnames, values, optional)
                for bound, count in hist.buckets:
                    append(Sample(bucket_name, {**labels, "le": _format_le(bound)}, count, None, None))
                append(Sample(count_name, labels, hist.count, None, None))
                append(Sample(sum_name, labels, hist.sum, None, None))
    else:
        for series in series_by_instance:
            if optional:
                for values, value in series.items():
                    append(Sample(name, _labels(labelnames, values, True), value, None, None))
            else:
                for values, value in series.items():
                    append(Sample(name, dict(zip(labelnames, values)), value, None, None))
    return metric if samples else None


def _passthrough_metric(family: catalog.Family,
                        series_by_instance: Iterable[SeriesDict]) -> Metric | None:
    """A re-exposed engine family: series keys are sorted (label, value) pairs."""
    name = family.name
    typ = family.type
    if typ == catalog.COUNTER:
        metric = Metric(name[: -len("_total")], family.help, "counter")
    else:
        metric = Metric(name, family.help, typ)
    append = metric.samples.append
    for series in series_by_instance:
        for pairs, value in series.items():
            labels = dict(pairs)
            if isinstance(value, Histogram):
                for bound, count in value.buckets:
                    append(Sample(name + "_bucket", {**labels, "le": _format_le(bound)}, count, None, None))
                append(Sample(name + "_count", labels, value.count, None, None))
                append(Sample(name + "_sum", labels, value.sum, None, None))
            else:
                append(Sample(name, labels, value, None, None))
    return metric if metric.samples else None


def _labels(names: tuple[str, ...], values: tuple[str, ...], drop_empty: bool) -> dict[str, str]:
    if drop_empty:
        return {n: v for n, v in zip(names, values) if v != ""}
    return dict(zip(names, values))


Owner = tuple[str, str]  # (source, target) of a snapshot


class StoreCollector:
    """prometheus_client collector over the store plus the daemon's own metrics."""

    def __init__(self, store: Store, state: DaemonState) -> None:
        self.store = store
        self.state = state

    def describe(self) -> list[Metric]:
        # Returning nothing keeps registry.register() from calling collect() at start-up.
        return []

    def collect(self) -> Iterator[Metric]:
        by_family, series_per_source = self.families()
        for family, series in self.own_families(series_per_source):
            metric = family_metric(family, [series])
            if metric is not None:
                yield metric
        for name in sorted(by_family):
            family = catalog.get(name)
            metric = family_metric(family, [series for _, series in by_family[name]])
            if metric is not None:
                yield metric

    # What the exposition encoder renders from (exposition.store_encoder.StoreSeries):

    def families(self) -> tuple[dict[str, list[tuple[Owner, SeriesDict]]], dict[str, int]]:
        """Expire stale snapshots, then every live series dict by family (see families_by_name)."""
        self.store.expire()
        return families_by_name(self.store)

    def own_families(self, series_per_source: dict[str, int]) -> list[tuple[catalog.Family, OwnSeries]]:
        return self_series(self.store, self.state, series_per_source)




def families_by_name(store: Store) -> tuple[dict[str, list[tuple[Owner, SeriesDict]]], dict[str, int]]:
    """Every non-empty series dict of the store by family name with its instance (in snapshot
    order), and the series count per source. Shared by this collector and the exposition encoder."""
    by_family: defaultdict[str, list[tuple[Owner, SeriesDict]]] = defaultdict(list)
    series_per_source: dict[str, int] = {}
    for owner, snap in store.snapshots():
        count = 0
        for name, series in snap.series.items():
            if series:
                by_family[name].append((owner, series))
                count += len(series)
        if count:
            series_per_source[owner[0]] = series_per_source.get(owner[0], 0) + count
    by_family.default_factory = None  # a plain mapping from here: a missing name is a KeyError
    return by_family, series_per_source


def self_series(store: Store, state: DaemonState,
                series_per_source: dict[str, int]) -> list[tuple[catalog.Family, OwnSeries]]:
    """The daemon's own families (source status, coverage, build, reload, cardinality) with their
    series, in the order /metrics shows them."""
    statuses = sorted(store.status.values(), key=lambda s: (s.source, s.target))
    up: OwnSeries = {}
    last: OwnSeries = {}
    duration: OwnSeries = {}
    errors: OwnSeries = {}
    status: OwnSeries = {}
    mapping_series: OwnSeries = {}
    unmapped: OwnSeries = {}
    dropped: OwnSeries = {}
    for st in statuses:
        for mapping, cov in st.coverage.items():
            mapping_series[(st.source, st.target, mapping)] = float(cov.series)
            unmapped[(st.source, st.target, mapping)] = float(cov.unmapped)
        if st.series_dropped:
            dropped[(st.source, st.target)] = float(st.series_dropped)
        key = (st.source, st.target)
        up[key] = 1.0 if st.up else 0.0
        if st.last_success:
            last[key] = st.last_success
        duration[key] = st.collect_duration
        errors[key] = float(st.errors)
        status[(st.source, st.target, st.reason)] = 1.0
    return [
        (SOURCE_UP, up), (SOURCE_LAST_SUCCESS, last), (SOURCE_DURATION, duration),
        (SOURCE_ERRORS, errors), (SOURCE_STATUS, status),
        (SOURCE_MAPPING_SERIES, mapping_series), (SOURCE_UNMAPPED, unmapped),
        (SOURCE_SERIES_DROPPED, dropped),
        (BUILD_INFO, {(__version__,): 1.0}),
        (NODE_INFO, {(state.hostname, state.role): 1.0}),
        (RELOAD_OK, {(): 1.0 if state.reload_successful else 0.0}),
        (RELOAD_TIME, {(): state.last_reload_success}),
        (SERIES, {(src,): float(n) for src, n in sorted(series_per_source.items())}),
        (TASKS, {(): float(_task_count())}),
    ]


def _task_count() -> int:
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:  # collected outside the event loop (tests, benchmarks)
        return 0


def make_registry(store: Store, state: DaemonState) -> CollectorRegistry:
    """The daemon's registry. It renders /metrics through the exposition encoder (see
    exposition.render_body); prometheus_client's encoders over it give the same bytes."""
    from .exposition.process import FastProcessCollector
    from .exposition.registry import ExpositionRegistry

    registry = ExpositionRegistry(auto_describe=False)
    registry.register(StoreCollector(store, state))
    # The standard process_* families (RSS, CPU, open fds) that every Prometheus exporter has.
    registry.register(FastProcessCollector())
    return registry


__all__ = ["DaemonState", "StoreCollector", "make_registry", "family_metric", "Histogram"]
