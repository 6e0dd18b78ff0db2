"""The tracked metrics in the state: each observation judged against its baseline (the rules
are baseline.py's) and kept with its recent history, its verdict and, when a version change was
pending, its before -> after. An operator's `accept-baseline` flag file starts them over.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from .baseline import Observation, Settings, judge
from .state import trim

ACCEPT_FILE = "accept-baseline"

log = logging.getLogger("infrapulse.source.probe")


def judge_all(state: dict[str, Any], observations: list[Observation], settings: Settings,
              pending: dict[str, Any] | None, now: float) -> None:
    versions_now = dict(state["versions"])
    for obs in observations:
        metric = state["metrics"].setdefault(obs.key, {"labels": list(obs.labels()), "better": obs.better,
                                                       "history": [], "change": None})
        metric["labels"] = list(obs.labels())
        verdict = judge(obs, metric["history"], settings, state["epoch"])
        metric["history"] = trim(metric["history"] + [{"at": now, "value": obs.value,
                                                       "versions": versions_now,
                                                       "in_baseline": verdict.enters_baseline}])
        metric.update(verdict=verdict.verdict, baseline=verdict.baseline, ratio=verdict.ratio,
                      value=obs.value, at=now)
        if pending and verdict.baseline:
            metric["change"] = {"at": now, "changes": pending["changes"], "before": verdict.baseline,
                                "after": obs.value, "ratio": verdict.ratio}


def accept_baseline(state: dict[str, Any], directory: Path) -> bool:
    """The operator accepted the current performance (the flag file exists): the baselines
    start over from the next runs. Returns whether they did."""
    flag = directory / ACCEPT_FILE
    if not flag.exists():
        return False
    state["epoch"] = time.time()  # runs are stamped with the wall clock, not the check's `now`
    for metric in state["metrics"].values():
        metric["verdict"] = "no_baseline"
        metric["baseline"] = metric["ratio"] = None
    flag.unlink(missing_ok=True)
    log.warning("probe baselines reset on request", extra={"file": str(flag)})
    return True
