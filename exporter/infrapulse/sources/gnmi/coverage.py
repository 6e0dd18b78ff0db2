"""What each subscribed path of one switch yields: silent loss made visible.

Per subscribed path (the "mapping" of the store's coverage API): how many series it maps to now,
and how many leaves arrived under it that no profile rule maps (one example path kept). A profile
path with a typo, a field a release renamed, a platform that answers a path with something else:
each shows up as `infrapulse_source_mapping_series{mapping=...} 0` and a growing
`infrapulse_source_unmapped_total`, instead of a quiet, empty switch.

Series counts change only when a series is bound or dropped; unmapped leaves are counted by
notification plan (bulk path) or per update (JSON values), so the hot path pays nothing per leaf.
"""

from __future__ import annotations

from ...store import Store


class SwitchCoverage:
    __slots__ = ("store", "source", "target", "series", "unmapped", "samples", "superseded")

    def __init__(self, mappings: list[str], store: Store | None, source: str, target: str) -> None:
        self.store = store
        self.source = source
        self.target = target
        self.series: dict[str, int] = dict.fromkeys(mappings, 0)
        self.unmapped: dict[str, int] = {}  # also kept here: tests and tools without a store
        self.samples: dict[str, str] = {}
        self.superseded: set[str] = set()  # mappings whose leaves a better-ranked leaf outranks

    def bound(self, mapping: str, delta: int) -> None:
        if mapping in self.series:
            self.series[mapping] += delta

    def outranked(self, mapping: str) -> None:
        """A leaf under `mapping` was not bound: a better-ranked leaf feeds its series (`rank`)."""
        self.superseded.add(mapping)

    def count_unmapped(self, mapping: str, sample: str, count: int) -> None:
        self.unmapped[mapping] = self.unmapped.get(mapping, 0) + count
        self.samples[mapping] = sample
        if self.store is not None:
            self.store.count_unmapped(self.source, self.target, mapping, sample, count)

    def count_dropped(self, count: int) -> None:
        if self.store is not None and count:
            self.store.count_dropped_series(self.source, self.target, count)

    def publish(self) -> None:
        if self.store is not None:
            self.store.set_coverage(self.source, self.target, dict(self.series), self.superseded)
