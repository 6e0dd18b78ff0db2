"""Result files from the inbox into the state: each settled file read once (inbox.py reads and
sniffs it), its series kept per scope and tool, its observations judged like a run's, the files
counted by result.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from . import inbox, verdicts
from .baseline import Observation, Settings, nccl_observations, perftest_observations
from .config import NcclSettings, ProbeSettings
from .probes import SeriesList, nccl_series, perftest_series
from .state import trim_ingested

log = logging.getLogger("infrapulse.source.probe")


def ingest(state: dict[str, Any], cfg: ProbeSettings, settings: Settings, now: float) -> bool:
    """Read the inbox's new settled files. Returns whether the state changed."""
    box = cfg.inbox
    if not box.dir:
        return False
    changed = False
    ingested = state["ingested"]
    for cand in inbox.candidates(Path(box.dir), ingested, box.settle, now):
        try:
            dropped = inbox.read(cand, box.max_file_bytes)
            result = ingest_dropped(state, dropped, cfg.nccl, settings, now)
            message = ""
        except inbox.InboxError as exc:
            result, message = exc.reason, str(exc)
            log.warning("inbox file not ingested", extra={"file": str(cand.path), "reason": exc.reason,
                                                          "detail": str(exc)})
        ingested[cand.key] = {"at": now, "result": result, "message": message}
        counts = state.setdefault("ingest_counts", {})
        counts[result] = counts.get(result, 0) + 1
        changed = True
    state["ingested"] = trim_ingested(ingested)
    return changed


def ingest_dropped(state: dict[str, Any], dropped: inbox.Dropped, nccl_cfg: NcclSettings,
                   settings: Settings, now: float) -> str:
    """One parsed file into the state; returns its result (ok, wrong_results, failed)."""
    series: SeriesList
    observations: list[Observation]
    if dropped.nccl is not None:
        result = dropped.nccl
        key = f"{dropped.scope}|{result.collective or 'nccl'}"
        series = nccl_series(result, dropped.scope, dropped.path_label)
        # Wrong results first: corrupted data is never filed as a generic failure, even when
        # the run also printed "Test failure" lines (it does, for #wrong > 0).
        if result.wrong_results:
            _keep_series(state, key, series)
            return "wrong_results"
        if result.errors or not result.rows:
            _keep_series(state, key, series)
            return "failed"
        observations = nccl_observations(result, dropped.scope, dropped.path_label,
                                         nccl_cfg.latency_max_bytes, nccl_cfg.bandwidth_min_bytes)
    else:
        reports = dropped.perftest or []
        clients = [r for r in reports if r.role == "client"] or reports
        series, observations = [], []
        for report in clients[:1]:
            key = f"{dropped.scope}|{report.test}"
            series += perftest_series(report, dropped.scope, dropped.path_label)
            observations += perftest_observations(report, dropped.scope, dropped.path_label)
    _keep_series(state, key, series)
    verdicts.judge_all(state, observations, settings, None, now)
    return "ok"


def _keep_series(state: dict[str, Any], key: str, series: SeriesList) -> None:
    state["inbox_series"][key] = [[f, list(lb), v] for f, lb, v in series]
