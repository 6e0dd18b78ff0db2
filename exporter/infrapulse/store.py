"""Latest samples of every source instance, plus each instance's health.

A source instance is a `(source, target)` pair: ("infiniband", "mlx5_0"), ("gnmi", "leaf01"),
("serving", "llama-70b"). Each publishes a `Snapshot` that atomically replaces its previous
one. Readers (the /metrics collector, the health scorer) only ever see whole snapshots.

Everything runs on the event loop thread: publish and read never interleave, so no locks.
Sources doing blocking work in threads hand their snapshot back to the loop to publish.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from . import catalog

LabelValues = tuple[str, ...]

log = logging.getLogger("infrapulse.store")


def stale_after(interval: float) -> float:
    """How long a published snapshot stays on /metrics without a refresh: three missed
    intervals, at least 30 s (so a short interval does not make series blink)."""
    return max(3 * interval, 30.0)


@dataclass(frozen=True)
class Histogram:
    """A cumulative histogram as the engine exposed it; `buckets` ends with (+Inf, count)."""

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float


Value = float | Histogram


class Snapshot:
    """Series of one source instance, keyed by family name then by label values.

    Label values follow the family's declared `labels` (then `optional_labels`, where an
    empty string means "label absent", as in Prometheus itself). Readers use only the Mapping
    side of each family's series (items, get, len): the gnmi source keeps its numeric families
    in columns (`columns.py`) that read like dicts.
    """

    __slots__ = ("series", "timestamp")

    def __init__(self, timestamp: float | None = None) -> None:
        self.series: dict[str, dict[LabelValues, Value]] = {}
        self.timestamp = time.time() if timestamp is None else timestamp

    def add(self, family: catalog.Family | str, labels: LabelValues, value: Value) -> None:
        name = family if isinstance(family, str) else family.name
        bucket = self.series.get(name)
        if bucket is None:
            bucket = self.series[name] = {}
        bucket[labels] = value

    def get(self, family: str, labels: LabelValues) -> Value | None:
        return self.series.get(family, {}).get(labels)

    def __len__(self) -> int:
        return sum(len(s) for s in self.series.values())


@dataclass
class MappingCoverage:
    """What one mapping of a source instance yields: a subscribed gNMI path, a serving family
    the engine's mapping promises, a dcgm-exporter field. Exported as infrapulse_source_mapping_*,
    so a mapping that yields nothing is visible instead of looking like a quiet target."""

    series: int = 0  # series it maps to now; 0 on a live target means "maps to nothing"
    unmapped: int = 0  # updates or samples that arrived for it and matched no rule, since start
    sample: str = ""  # one example of what went unmapped (a path, a metric name)
    # Its data arrives but a preferred mapping feeds the same series (a gNMI fallback leaf such as
    # in-crc-errors beside in-fcs-errors): empty on purpose, not silent loss.
    superseded: bool = False


@dataclass
class SourceStatus:
    """Health of one source instance, exported as infrapulse_source_* and in /api/v1/health."""

    source: str
    target: str
    up: bool = False
    reason: str = "starting"  # short machine-readable code: "ok", "timeout", "unauthenticated", ...
    message: str = ""  # human detail; must never contain secrets
    last_success: float = 0.0
    last_attempt: float = 0.0
    collect_duration: float = 0.0
    errors: int = 0  # failed collections since start
    partial_errors: list[str] = field(default_factory=list)  # files/fields skipped last time
    coverage: dict[str, MappingCoverage] = field(default_factory=dict)  # mapping -> what it yields
    series_dropped: int = 0  # new series refused by the source's series budget, since start


class Store:
    def __init__(self) -> None:
        self._snapshots: dict[tuple[str, str], Snapshot] = {}
        self._stale_after: dict[tuple[str, str], float] = {}
        self.status: dict[tuple[str, str], SourceStatus] = {}
        # Bumped on every publish; lets readers cache derived views cheaply.
        self.generation = 0

    # -- writers ---------------------------------------------------------------------------

    def publish(self, source: str, target: str, snapshot: Snapshot, stale_after: float) -> None:
        key = (source, target)
        self._snapshots[key] = snapshot
        self._stale_after[key] = stale_after
        self.generation += 1

    def remove(self, source: str, target: str) -> None:
        """Forget an instance entirely (a device that vanished, a switch no longer sharded here)."""
        key = (source, target)
        self._snapshots.pop(key, None)
        self._stale_after.pop(key, None)
        self.status.pop(key, None)
        self.generation += 1

    def remove_source(self, source: str) -> None:
        for key in [k for k in list(self.status) + list(self._snapshots) if k[0] == source]:
            self.remove(*key)

    def status_of(self, source: str, target: str) -> SourceStatus:
        key = (source, target)
        status = self.status.get(key)
        if status is None:
            status = self.status[key] = SourceStatus(source, target)
        return status

    def record_success(
        self, source: str, target: str, duration: float, partial_errors: list[str] | None = None
    ) -> None:
        status = self.status_of(source, target)
        now = time.time()
        status.up = True
        status.partial_errors = partial_errors or []
        status.reason = "partial" if status.partial_errors else "ok"
        status.message = "; ".join(status.partial_errors[:5])
        status.last_success = now
        status.last_attempt = now
        status.collect_duration = duration

    def set_coverage(self, source: str, target: str, series_by_mapping: dict[str, int],
                     superseded: Collection[str] = ()) -> None:
        """Replace the per-mapping series counts of an instance (mappings not named are
        forgotten); unmapped counts of the mappings that remain are kept. `superseded` names
        mappings whose data a preferred mapping already exports."""
        status = self.status_of(source, target)
        old = status.coverage
        status.coverage = {
            m: MappingCoverage(n, old[m].unmapped, old[m].sample, m in superseded) if m in old
            else MappingCoverage(n, superseded=m in superseded)
            for m, n in series_by_mapping.items()}

    def count_unmapped(self, source: str, target: str, mapping: str, sample: str, count: int = 1) -> None:
        """Updates or samples of `mapping` that matched no rule; the first one is logged."""
        status = self.status_of(source, target)
        cov = status.coverage.get(mapping)
        if cov is None:
            cov = status.coverage[mapping] = MappingCoverage()
        if cov.unmapped == 0:
            log.warning("%s %s: %s yields data no mapping rule matches (e.g. %s); it is counted in "
                        "infrapulse_source_unmapped_total and dropped", source, target, mapping, sample)
        cov.unmapped += count
        cov.sample = sample

    def count_dropped_series(self, source: str, target: str, count: int = 1) -> None:
        """New series the source refused because the instance reached its series budget."""
        self.status_of(source, target).series_dropped += count

    def record_failure(self, source: str, target: str, reason: str, message: str = "",
                       duration: float = 0.0) -> None:
        status = self.status_of(source, target)
        status.up = False
        status.reason = reason
        status.message = message
        status.last_attempt = time.time()
        status.collect_duration = duration
        status.errors += 1

    # -- readers ---------------------------------------------------------------------------

    def expire(self, now: float | None = None) -> None:
        """Drop snapshots older than their staleness window: nothing is served forever."""
        now = time.time() if now is None else now
        stale = [k for k, s in self._snapshots.items() if now - s.timestamp > self._stale_after[k]]
        for key in stale:
            del self._snapshots[key]
            del self._stale_after[key]
        if stale:
            self.generation += 1

    def snapshots(self) -> Iterator[tuple[tuple[str, str], Snapshot]]:
        return iter(list(self._snapshots.items()))

    def snapshot(self, source: str, target: str) -> Snapshot | None:
        return self._snapshots.get((source, target))

    def iter_family(self, name: str,
                    source: str | None = None) -> Iterator[tuple[str, str, LabelValues, Value]]:
        """Yield (source, target, label values, value) for every live series of a family."""
        for (src, tgt), snap in list(self._snapshots.items()):
            if source is not None and src != source:
                continue
            series = snap.series.get(name)
            if series:
                for labels, value in series.items():
                    yield src, tgt, labels, value

    def series_count(self) -> int:
        return sum(len(s) for s in self._snapshots.values())
