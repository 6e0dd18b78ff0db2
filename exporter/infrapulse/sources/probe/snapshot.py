"""The probe source's exported series, built from the state alone: versions and their last
changes, per configured probe its last run, last good run, result and series, the inbox's
series and counts, and per tracked metric its baseline, measured value, verdict and the ratio
across the last version change.
"""

from __future__ import annotations

import math
from typing import Any

from ...store import Snapshot
from . import families as fam


def build(state: dict[str, Any], configured: set[str], max_age: float, now: float) -> Snapshot:
    snap = Snapshot(now)
    snap.add(fam.MAX_AGE, (), float(max_age))
    for component, version in sorted(state["versions"].items()):
        snap.add(fam.VERSIONS, (component, version), 1.0)
    for component, change in sorted(state["version_changes"].items()):
        snap.add(fam.CHANGE_TIME, (component, change["before"], change["after"]), float(change["at"]))
    _add_probes(snap, state["probes"], configured, now)
    for series in state["inbox_series"].values():
        for family, labels, value in series:
            snap.add(family, tuple(labels), float(value))
    for result, n in sorted(state.get("ingest_counts", {}).items()):
        snap.add(fam.INGESTED, (result,), float(n))
    _add_metrics(snap, state["metrics"])
    return snap


def _add_probes(snap: Snapshot, probes: dict[str, Any], configured: set[str], now: float) -> None:
    for probe, entry in sorted(probes.items()):
        if probe not in configured:  # kept in the state (its history), no longer exported
            continue
        if "last_run" in entry:
            snap.add(fam.LAST_RUN, (probe,), float(entry["last_run"]))
            snap.add(fam.DURATION, (probe,), float(entry.get("last_duration", 0.0)))
        if "last_good" in entry:
            snap.add(fam.LAST_GOOD, (probe,), float(entry["last_good"]))
        snap.add(fam.GOOD_AGE, (probe,), max(now - float(entry.get("last_good", entry["first_seen"])), 0.0))
        last = entry.get("last_attempt_result")
        if last is not None:
            for result in fam.RESULTS:
                snap.add(fam.LAST_RESULT, (probe, result), 1.0 if result == last else 0.0)
        for result, n in sorted(entry["runs"].items()):
            snap.add(fam.RUNS, (probe, result), float(n))
        for family, labels, value in entry.get("series", []):
            snap.add(family, tuple(labels), float(value))


def _add_metrics(snap: Snapshot, metrics: dict[str, Any]) -> None:
    for metric in metrics.values():
        labels = tuple(metric["labels"])
        if metric.get("ratio") is not None and math.isfinite(metric["ratio"]):
            snap.add(fam.BASELINE_RATIO, labels, float(metric["ratio"]))
        if metric.get("baseline") is not None:
            snap.add(fam.BASELINE_VALUE, labels, float(metric["baseline"]))
        if metric.get("value") is not None:
            snap.add(fam.MEASURED_VALUE, labels, float(metric["value"]))
        for verdict in fam.VERDICTS:
            snap.add(fam.VERDICT, labels + (verdict,), 1.0 if verdict == metric.get("verdict") else 0.0)
        change = metric.get("change")
        if change and change.get("ratio") is not None:
            for component, (before, after) in sorted(change["changes"].items()):
                snap.add(fam.CHANGE_RATIO, labels + (component, before, after), float(change["ratio"]))
