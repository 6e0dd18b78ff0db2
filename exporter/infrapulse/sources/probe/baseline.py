"""Tracked metrics, baselines and verdicts.

A run yields observations: per (scope, test, metric, size) one value in base units. Each key
keeps a history of its runs, each stored with the versions it ran under. The baseline is the
median of the last K runs that entered it; a run enters it unless its verdict is regression or
below_floor, so a regression never becomes the new normal by itself (docs/probes.md: accepting
a new baseline). The verdict compares the run with the baseline from before it:

  ok           within the threshold (latency: slower by at most latency_threshold; bandwidth:
               lower by at most bandwidth_threshold)
  regression   worse than that
  below_floor  worse than an absolute floor configured for the GPU/NIC model (a new node has no
               history, a floor still judges it)
  no_baseline  fewer than min_runs runs in the baseline yet
"""

from __future__ import annotations

import fnmatch
import statistics
from dataclasses import dataclass
from typing import Any

from .config import BaselineSettings, FloorSettings
from .results import NcclResult, PerftestResult

LOWER, HIGHER = "lower", "higher"  # which direction is better
LATENCY_METRICS = {"latency": "t_typical", "latency_p99": "p99", "latency_p99_9": "p99_9"}


@dataclass(frozen=True)
class Observation:
    scope: str
    path: str
    test: str  # "all_reduce", "ib_write_lat", ...
    metric: str  # latency, latency_p99, latency_p99_9, busbw, bandwidth
    size: int
    value: float  # seconds or bytes per second
    better: str  # LOWER or HIGHER
    model: str = ""  # GPU or NIC model, for floors

    @property
    def key(self) -> str:
        return f"{self.scope}|{self.test}|{self.metric}|{self.size}"

    def labels(self) -> tuple[str, str, str, str, str]:
        return self.scope, self.path, self.test, self.metric, str(self.size)


@dataclass(frozen=True)
class Settings:
    runs: int = 5  # K: the baseline is the median of the last K runs in it
    min_runs: int = 3
    latency_threshold: float = 0.25
    bandwidth_threshold: float = 0.15
    floors: tuple[FloorSettings, ...] = ()

    @classmethod
    def from_config(cls, cfg: BaselineSettings) -> Settings:
        return cls(cfg.runs, cfg.min_runs, cfg.latency_threshold, cfg.bandwidth_threshold, tuple(cfg.floors))


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def nccl_observations(result: NcclResult, scope: str, path: str, latency_max: int,
                      bandwidth_min: int) -> list[Observation]:
    """Out-of-place time per size up to `latency_max` bytes, busbw per size from `bandwidth_min`
    (the median when a size repeats, as with -N run cycles)."""
    test = result.collective or "nccl"
    model = result.gpu_models[0] if result.gpu_models else ""
    times: dict[int, list[float]] = {}
    busbw: dict[int, list[float]] = {}
    for row in result.rows:
        m = row.out_of_place or row.in_place
        if m is None or row.size == 0:
            continue
        if row.size <= latency_max and m.time_us == m.time_us:
            times.setdefault(row.size, []).append(m.time_us * 1e-6)
        if row.size >= bandwidth_min and m.busbw_gbps > 0:
            busbw.setdefault(row.size, []).append(m.busbw_gbps * 1e9)
    out = [Observation(scope, path, test, "latency", size, _median(v), LOWER, model) for size,
           v in times.items()]
    out += [Observation(scope, path, test, "busbw", size, _median(v), HIGHER, model) for size,
            v in busbw.items()]
    return out


def perftest_observations(result: PerftestResult, scope: str, path: str,
                          model: str = "") -> list[Observation]:
    """One observation per metric and size: a file is one run, so the rows --run_infinitely (or
    a repeated size) prints per interval are reduced to their median, as nccl_observations does."""
    values: dict[tuple[str, int], list[float]] = {}
    for row in result.rows:
        if result.kind == "lat":
            for metric, column in LATENCY_METRICS.items():
                if column in row.latency_us:
                    values.setdefault((metric, row.size), []).append(row.latency_us[column] * 1e-6)
        elif "average" in row.bandwidth:
            values.setdefault(("bandwidth", row.size), []).append(row.bandwidth["average"])
    return [Observation(scope, path, result.test, metric, size, _median(v),
                        LOWER if result.kind == "lat" else HIGHER, model)
            for (metric, size), v in values.items()]


def floor_for(obs: Observation, floors: tuple[FloorSettings, ...]) -> FloorSettings | None:
    """The first configured floor matching the observation (test, metric, size, model glob)."""
    for floor in floors:
        if floor.test and floor.test != obs.test:
            continue
        if floor.metric != obs.metric or (floor.size and floor.size != obs.size):
            continue
        if floor.model and not fnmatch.fnmatchcase(obs.model, floor.model):
            continue
        return floor
    return None


@dataclass(frozen=True)
class Verdict:
    verdict: str
    baseline: float | None  # the baseline the run was judged against (None: not enough runs)
    ratio: float | None  # value / baseline

    @property
    def enters_baseline(self) -> bool:
        return self.verdict in ("ok", "no_baseline")


def baseline_of(history: list[dict[str, Any]], settings: Settings, epoch: float) -> float | None:
    """Median of the last K runs that entered the baseline since the last accepted reset."""
    values = [h["value"] for h in history if h.get("in_baseline") and h["at"] >= epoch]
    values = values[-settings.runs:]
    if len(values) < settings.min_runs:
        return None
    return _median(values)


def judge(obs: Observation, history: list[dict[str, Any]], settings: Settings, epoch: float) -> Verdict:
    base = baseline_of(history, settings, epoch)
    ratio = obs.value / base if base else None
    verdict = "no_baseline"
    if ratio is not None:
        worse = ratio - 1.0 if obs.better == LOWER else 1.0 - ratio
        threshold = settings.latency_threshold if obs.better == LOWER else settings.bandwidth_threshold
        verdict = "regression" if worse > threshold else "ok"
    floor = floor_for(obs, settings.floors)
    if verdict != "regression" and floor is not None:
        too_slow = floor.max is not None and obs.value > floor.max
        too_low = floor.min is not None and obs.value < floor.min
        if too_slow or too_low:
            verdict = "below_floor"
    return Verdict(verdict, base, ratio)


def worse_fraction(ratio: float, better: str) -> float:
    """How much worse than the baseline, as a positive fraction (0 when better)."""
    return max(ratio - 1.0, 0.0) if better == LOWER else max(1.0 - ratio, 0.0)
