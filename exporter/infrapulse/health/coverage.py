"""Silent loss, shown beside the score: live source instances whose mappings map to nothing.

A subscribed gNMI path that yields no series, a serving family the engine's mapping promises
but this engine version lacks, a dcgm-exporter field that is absent: each looks like a quiet,
healthy target unless someone says so. The sources count it (`SourceStatus.coverage`, exported
as infrapulse_source_mapping_*); the health report turns it into one sentence per instance:

    leaf07: 12 of 40 paths map to nothing

These notes do not change the score: the target is not at fault, our view of it is incomplete
(the signal coverage ratio already says how much of the model had data). A source instance that
is down is left out: its outage is reported as such, and its mappings all yield nothing then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..store import SourceStatus, Store
from .readings import HEALTH_SOURCE

# What one mapping of a source is, in its users' words.
MAPPING_WORDS = {"gnmi": "paths", "dcgm": "fields", "serving": "families"}
EMPTY_LISTED = 20  # mapping names listed per note in the JSON (the count is always exact)


@dataclass(frozen=True)
class CoverageNote:
    source: str
    target: str
    mappings: int  # mappings the instance reports
    empty: tuple[str, ...]  # those that map to nothing now, sorted
    series_dropped: int  # new series refused by the instance's series budget, since start

    @property
    def sentence(self) -> str:
        parts = []
        if self.empty:
            word = MAPPING_WORDS.get(self.source, "mappings")
            parts.append(f"{len(self.empty)} of {self.mappings} {word} map to nothing")
        if self.series_dropped:
            parts.append(f"{self.series_dropped:,} new series dropped by the series budget")
        return f"{self.target}: {'; '.join(parts)}"

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "mappings": self.mappings,
                "empty": len(self.empty), "empty_mappings": list(self.empty[:EMPTY_LISTED]),
                "series_dropped": self.series_dropped, "sentence": self.sentence}


def note_for(status: SourceStatus) -> CoverageNote | None:
    """The note of one instance, or None when it is down or everything it maps yields series."""
    if not status.up or status.source == HEALTH_SOURCE:
        return None
    empty = tuple(sorted(m for m, cov in status.coverage.items()
                         if cov.series == 0 and not cov.superseded))
    if not empty and not status.series_dropped:
        return None
    return CoverageNote(status.source, status.target, len(status.coverage), empty, status.series_dropped)


def coverage_notes(store: Store) -> list[CoverageNote]:
    """One note per live source instance that loses data silently, by source then target."""
    notes = (note_for(st) for st in sorted(store.status.values(), key=lambda s: (s.source, s.target)))
    return [n for n in notes if n is not None]
