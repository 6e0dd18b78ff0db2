"""What a probe attempt leaves in the state, per probe: attempts counted by result (busy skips
included), the last run's time, result, duration, message and series, the last good run; and,
beside the state file, what the tool printed last time, for the operator.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .probes import ProbeRun

OUTPUT_KEPT = 200_000  # characters of a run's output kept in <probe>.last-output.txt

log = logging.getLogger("infrapulse.source.probe")


def entry(state: dict[str, Any], probe: str, now: float) -> dict[str, Any]:
    """The probe's record, created the first time it is configured (its age of no good run
    counts from then)."""
    found: dict[str, Any] = state["probes"].setdefault(probe, {"first_seen": now, "runs": {}})
    return found


def record(state: dict[str, Any], run: ProbeRun, now: float) -> None:
    """A finished run (counted by `count`, separately)."""
    e = entry(state, run.name, now)
    e.update(last_run=now, last_result=run.result, last_duration=run.duration, message=run.message)
    if run.series or run.result == "ok":
        e["series"] = [[f, list(labels), v] for f, labels, v in run.series]
    if run.result == "ok":
        e["last_good"] = now


def count(state: dict[str, Any], probe: str, result: str, now: float) -> None:
    e = entry(state, probe, now)
    e["runs"][result] = e["runs"].get(result, 0) + 1
    e["last_attempt_result"] = result


def keep_output(directory: Path, run: ProbeRun) -> None:
    """The tail of what the tool printed, never its JSON (nccl-tests' holds the whole env)."""
    try:
        (directory / f"{run.name}.last-output.txt").write_text(run.output[-OUTPUT_KEPT:], encoding="utf-8")
    except OSError as exc:
        log.warning("cannot keep the probe's output", extra={"probe": run.name, "error": str(exc)})
