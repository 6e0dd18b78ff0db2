"""When the next run is due, and the version changes that bring it forward.

Two triggers: `next_run` (every `interval` plus jitter after the last run) and `pending_change`
(a version change seen, due `change_delay` later; the changes wait there until a run has judged
its results against them, so each metric's before -> after names them). Both live in the state
file, so a reboot for a firmware upgrade keeps the run that judges the upgrade.
"""

from __future__ import annotations

import random
from typing import Any

from . import versions


def first_due(state: dict[str, Any], change_delay: float, now: float) -> None:
    """A node seen for the first time probes `change_delay` from now."""
    if state["next_run"] <= 0:
        state["next_run"] = now + change_delay


def take_versions(state: dict[str, Any], current: dict[str, str], change_delay: float,
                  now: float) -> dict[str, tuple[str, str]]:
    """Compare `current` with the versions seen last; a change is recorded and schedules a run
    (`change_delay` after the latest change). Returns the changes ({} when none)."""
    before = state["versions"]
    if "nccl" not in current and "nccl" in before:
        current["nccl"] = before["nccl"]  # without nccl_library it is learnt from the runs' output
    changes = versions.changed(before, current)
    if not changes:
        return changes
    note_changes(state, changes, now)
    pending = state["pending_change"] or {"changes": {}, "due": 0.0}
    for component, (old, new) in changes.items():
        first = pending["changes"].get(component, [old, new])[0]
        pending["changes"][component] = [first, new]
    pending["due"] = now + change_delay
    state["pending_change"] = pending
    state["versions"] = current
    return changes


def nccl_seen(state: dict[str, Any], version: str, pending: dict[str, Any] | None,
              now: float) -> dict[str, Any] | None:
    """A run printed its NCCL version: a new one (a new container image) is a change the run's
    own results are judged against. Returns the pending change to judge them with."""
    old = state["versions"].get("nccl", "")
    if not version or version == old:
        return pending
    state["versions"]["nccl"] = version
    if not old:
        return pending
    note_changes(state, {"nccl": (old, version)}, now)
    merged = dict(pending["changes"]) if pending else {}
    merged["nccl"] = [old, version]
    return {"changes": merged, "due": now}


def note_changes(state: dict[str, Any], changes: dict[str, tuple[str, str]], now: float) -> None:
    for component, (old, new) in changes.items():
        state["version_changes"][component] = {"before": old, "after": new, "at": now}


def due(state: dict[str, Any], now: float) -> float | None:
    """The scheduled time of the run that is due now, or None."""
    pending = state["pending_change"]
    if pending and now >= pending["due"]:
        return float(pending["due"])
    if now >= state["next_run"]:
        return float(state["next_run"])
    return None


def ran(state: dict[str, Any], judged: dict[str, Any] | None, interval: float, jitter: float,
        rng: random.Random, now: float) -> None:
    """A run finished: the next one is `interval` plus jitter away, and the pending change it
    started with is done (one first seen during the run, with none pending before, stays due)."""
    state["next_run"] = now + interval + rng.uniform(0, jitter)
    if state["pending_change"] is judged:
        state["pending_change"] = None
