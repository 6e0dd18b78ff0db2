"""Silent loss in the health report: source instances whose mappings map to nothing get a note
(in the report's JSON, in `infrapulse score`'s text), and the score does not move. The note in a
daemon's /api/v1/health and on its status page is checked in
tests/integration/test_health_coverage_served.py."""

from __future__ import annotations

import pytest

from health_fixtures import Feed, service_for
from infrapulse.health import cli
from infrapulse.health.coverage import CoverageNote, coverage_notes
from infrapulse.store import Store

SWQ = ("leaf07", "Ethernet1", "3")


def _fabric(store: Store | None = None) -> Feed:
    feed = Feed(store)
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf07")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 150, "leaf07")
    feed.gauge("gnmi", "infrapulse_switch_up", ("leaf07",), 1, "leaf07")
    return feed


def _gnmi_coverage(store: Store) -> None:
    """leaf07 subscribes 40 paths; 12 of them yield no series (synthetic, as the gnmi source sets it)."""
    paths = {f"/interfaces/interface/state/counters/p{i:02d}": (0 if i < 12 else 5) for i in range(40)}
    store.set_coverage("gnmi", "leaf07", paths)
    store.count_unmapped("gnmi", "leaf07", "/interfaces/interface/state/counters/p00", "/foo/bar", 3)


def test_a_note_per_instance_whose_mappings_map_to_nothing():
    feed = _fabric()
    _gnmi_coverage(feed.store)
    # dcgm: every field yields, but the series budget refused new series
    feed.store.set_coverage("dcgm", "dcgm", {"DCGM_FI_DEV_GPU_UTIL": 8})
    feed.store.count_dropped_series("dcgm", "dcgm", 1200)
    feed.store.record_success("dcgm", "dcgm", 0.001)
    # serving endpoint whose mappings all yield: no note; a down one: its outage says it already
    feed.store.set_coverage("serving", "llama", {"infrapulse_llm_requests_running": 1})
    feed.store.record_success("serving", "llama", 0.001)
    feed.store.set_coverage("serving", "down", {"infrapulse_llm_requests_running": 0})
    feed.store.record_failure("serving", "down", "timeout", "no answer")
    service = service_for(feed.store)
    feed.publish(service)
    body = service.as_json()
    assert body["coverage_notes"] == [
        {"source": "dcgm", "target": "dcgm", "mappings": 1, "empty": 0, "empty_mappings": [],
         "series_dropped": 1200, "sentence": "dcgm: 1,200 new series dropped by the series budget"},
        {"source": "gnmi", "target": "leaf07", "mappings": 40, "empty": 12,
         "empty_mappings": [f"/interfaces/interface/state/counters/p{i:02d}" for i in range(12)],
         "series_dropped": 0, "sentence": "leaf07: 12 of 40 paths map to nothing"},
    ]
    text = cli.render(body, "http://x:9477")
    assert ("mappings that map to nothing (not in the score):\n"
            "  dcgm: 1,200 new series dropped by the series budget\n"
            "  leaf07: 12 of 40 paths map to nothing") in text


def test_the_notes_do_not_change_the_score():
    plain, noted = _fabric(), _fabric()
    _gnmi_coverage(noted.store)
    plain_service, noted_service = service_for(plain.store), service_for(noted.store)
    plain.publish(plain_service)
    noted.publish(noted_service)
    a, b = plain_service.report, noted_service.report
    assert (b.score, b.raw_score, b.coverage, b.status) == (a.score, a.raw_score, a.coverage, a.status)
    assert b.score == pytest.approx(100 * (3 * (0.05 - 0.015) / 0.049 + 1) / 4, abs=0.005)  # ECN 1.5%, up
    assert [d.sentence for d in b.detractors] == [d.sentence for d in a.detractors]
    assert a.coverage_notes == []
    assert [n.sentence for n in b.coverage_notes] == ["leaf07: 12 of 40 paths map to nothing"]


def test_note_wording_per_source_and_limits():
    store = Store()
    store.set_coverage("serving", "llama", {"infrapulse_llm_kv_cache_usage_ratio": 0, "x": 2})
    store.record_success("serving", "llama", 0.001)
    store.set_coverage("ethtool", "ens1f0np0", {f"m{i}": 0 for i in range(30)})
    store.record_success("ethtool", "ens1f0np0", 0.001)
    notes = coverage_notes(store)
    assert [n.sentence for n in notes] == ["ens1f0np0: 30 of 30 mappings map to nothing",
                                           "llama: 1 of 2 families map to nothing"]
    assert len(notes[0].as_json()["empty_mappings"]) == 20 and notes[0].as_json()["empty"] == 30
    sentence = CoverageNote("gnmi", "a", 3, ("p",), 5).sentence
    assert sentence == "a: 1 of 3 paths map to nothing; 5 new series dropped by the series budget"


def test_a_superseded_fallback_is_not_a_note():
    """in-crc-errors beside in-fcs-errors: the fallback's data arrives but the preferred leaf feeds
    the series, so its 0 series are by design and say nothing about lost data."""
    store = Store()
    store.set_coverage("gnmi", "leaf08", {"/eth/in-fcs-errors": 4, "/eth/in-crc-errors": 0, "/typo": 0},
                       superseded={"/eth/in-crc-errors"})
    store.record_success("gnmi", "leaf08", 0.0)
    notes = coverage_notes(store)
    assert [n.sentence for n in notes] == ["leaf08: 1 of 3 paths map to nothing"]
    assert notes[0].empty == ("/typo",)
    store.set_coverage("gnmi", "leaf08", {"/eth/in-fcs-errors": 4, "/eth/in-crc-errors": 0},
                       superseded={"/eth/in-crc-errors"})
    assert coverage_notes(store) == []
