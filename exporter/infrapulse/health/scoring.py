"""Signals -> sub-scores -> component scores -> one 0-100 score, with caps and coverage.

* A signal's value maps to 0-100 through a piecewise-linear curve: 100 at or better than
  `good`, 0 at or worse than `bad`, linear in between (good > bad means higher is better).
  A signal scores as its worst target.
* A component is the weighted mean of its known signals, capped by its worst critical signal:
  an uncorrectable ECC error cannot hide behind seven healthy GPU signals.
* The overall score is the weighted mean of the known components, capped at `critical_cap`
  while any critical signal fires (sub-score 0).
* Unknown is never healthy: a signal without data is left out, the weights renormalise over
  what is known, and the coverage ratio says how much of the model had data.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .coverage import CoverageNote
from .latency import EndpointLatency
from .reasons import format_threshold, format_value, sentence
from .signals import SIGNALS, Measurement, Signal

HEALTHY, DEGRADED, CRITICAL, UNKNOWN = "healthy", "degraded", "critical", "unknown"


def curve(value: float, good: float, bad: float) -> float:
    """Piecewise-linear sub-score: 100 at `good`, 0 at `bad`, clamped outside."""
    if math.isnan(value):
        return 0.0
    if good < bad:
        if value <= good:
            return 100.0
        if value >= bad:
            return 0.0
        return 100.0 * (bad - value) / (bad - good)
    if value >= good:
        return 100.0
    if value <= bad:
        return 0.0
    return 100.0 * (value - bad) / (good - bad)


@dataclass(frozen=True)
class Settings:
    """One signal's effective configuration."""

    good: float
    bad: float
    weight: float
    critical: bool
    window_seconds: float


def resolve_settings(cfg: dict[str, Any]) -> dict[str, Settings]:
    """Signal defaults overlaid with the `health:` config (thresholds, SLOs, weights, critical)."""
    overrides = cfg["thresholds"]
    slo = cfg["slo"]
    windows = {"window": cfg["window"], "event_window": cfg["event_window"], "instant": cfg["window"]}
    critical = set(cfg["critical_signals"])  # the schema fills in the signals marked critical
    out = {}
    for name, signal in SIGNALS.items():
        good, bad = signal.good, signal.bad
        if name == "ttft_p95":
            good, bad = slo["ttft_p95_seconds"], 2 * slo["ttft_p95_seconds"]
        elif name == "itl_p95":
            good, bad = slo["itl_p95_seconds"], 2 * slo["itl_p95_seconds"]
        base = overrides.get(signal.thresholds_from) if signal.thresholds_from else None
        for source in (base, overrides.get(name)):
            if source:
                good = source["good"] if source["good"] is not None else good
                bad = source["bad"] if source["bad"] is not None else bad
        weight = cfg["signal_weights"].get(name, signal.weight)  # unnamed signals keep their own
        out[name] = Settings(good, bad, weight, name in critical, windows[signal.window])
    return out


@dataclass(frozen=True)
class TargetScore:
    measurement: Measurement
    score: float


@dataclass
class SignalResult:
    signal: Signal
    settings: Settings
    applicable: bool
    targets: list[TargetScore] = field(default_factory=list)  # worst first

    @property
    def enabled(self) -> bool:
        return self.settings.weight > 0

    @property
    def known(self) -> bool:
        return self.applicable and self.enabled and bool(self.targets)

    @property
    def score(self) -> float | None:
        return self.targets[0].score if self.known else None

    @property
    def worst(self) -> TargetScore | None:
        return self.targets[0] if self.known else None

    @property
    def firing(self) -> bool:
        return self.settings.critical and self.known and self.targets[0].score <= 0.0


@dataclass
class ComponentResult:
    name: str
    weight: float
    signals: list[SignalResult]
    score: float | None = None
    mean: float | None = None  # before the critical cap
    coverage: float = 0.0
    capped_by: str | None = None

    @property
    def applicable(self) -> bool:
        return any(s.applicable and s.enabled for s in self.signals)


@dataclass
class Detractor:
    rank: int
    component: str
    result: SignalResult
    target: TargetScore
    impact: float  # points of the overall score this target costs (before caps)
    sentence: str


@dataclass
class Report:
    timestamp: float
    score: float | None
    raw_score: float | None
    status: str
    coverage: float
    components: dict[str, ComponentResult]
    detractors: list[Detractor]
    capped_by: list[str]  # critical signals that pulled the score down to the cap
    cap: float | None
    firing: list[str]  # every critical signal at sub-score 0
    window_seconds: float
    event_window_seconds: float
    latency: dict[str, EndpointLatency] = field(default_factory=dict)
    component_scores: dict[str, float | None] = field(default_factory=dict)  # published (smoothed)
    # Source instances whose mappings map to nothing: shown beside the score, not part of it.
    coverage_notes: list[CoverageNote] = field(default_factory=list)


def status_of(score: float | None, cfg: dict[str, Any]) -> str:
    if score is None:
        return UNKNOWN
    levels = cfg["status_thresholds"]
    if score < levels["critical"]:
        return CRITICAL
    if score < levels["degraded"]:
        return DEGRADED
    return HEALTHY


def _weighted(pairs: list[tuple[float, float]]) -> float | None:
    total = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / total if total > 0 else None


def evaluate(measured: dict[str, list[Measurement] | None], cfg: dict[str, Any],
             settings: dict[str, Settings] | None = None, timestamp: float | None = None,
             max_detractors: int | None = None) -> Report:
    """Score one pass. `measured[name]` is None when the signal does not apply here."""
    settings = settings or resolve_settings(cfg)
    weights = cfg["weights"]  # every component: the schema fills in the ones not named
    components: dict[str, ComponentResult] = {}
    for name, signal in SIGNALS.items():
        values = measured.get(name)
        st = settings[name]
        result = SignalResult(signal, st, values is not None)
        if values:
            scored = [TargetScore(m, curve(m.value, st.good, st.bad)) for m in values]
            scored.sort(key=lambda t: (t.score, t.measurement.target))
            result.targets = scored
        comp = components.get(signal.component)
        if comp is None:
            comp = components[signal.component] = ComponentResult(
                signal.component, weights[signal.component], [])
        comp.signals.append(result)

    for comp in components.values():
        known = [(s, s.targets[0].score) for s in comp.signals if s.known]  # a known signal has targets
        applicable = [s for s in comp.signals if s.applicable and s.enabled]
        total = sum(s.settings.weight for s in applicable)
        comp.coverage = sum(s.settings.weight for s, _ in known) / total if total > 0 else 0.0
        comp.mean = _weighted([(s.settings.weight, score) for s, score in known])
        comp.score = comp.mean
        critical = [(s, score) for s, score in known if s.settings.critical]
        if comp.mean is not None and critical:
            worst, worst_score = min(critical, key=lambda pair: pair[1])
            if worst_score < comp.mean:
                comp.score = worst_score
                comp.capped_by = worst.signal.name

    scored_components = [(c.weight, c.score) for c in components.values()
                         if c.score is not None and c.weight > 0]
    raw = _weighted(scored_components)
    applicable_components = [c for c in components.values() if c.applicable and c.weight > 0]
    total_weight = sum(c.weight for c in applicable_components)
    coverage = (sum(c.weight * c.coverage for c in applicable_components) / total_weight
                if total_weight > 0 else 0.0)
    firing = sorted(s.signal.name for c in components.values() for s in c.signals if s.firing)
    cap = float(cfg["critical_cap"])
    score = raw
    capped_by: list[str] = []
    if raw is not None and firing and raw > cap:
        score = cap
        capped_by = firing
    report = Report(
        timestamp=time.time() if timestamp is None else timestamp,
        score=score, raw_score=raw, status=status_of(score, cfg), coverage=coverage,
        components=components, detractors=[], capped_by=capped_by, cap=cap if firing else None,
        firing=firing,
        window_seconds=cfg["window"], event_window_seconds=cfg["event_window"],
    )
    report.detractors = top_detractors(report, max_detractors or cfg["detractors"])
    report.component_scores = {name: c.score for name, c in components.items()}
    return report


def top_detractors(report: Report, count: int) -> list[Detractor]:
    """The targets costing the most points: firing critical signals first, then by impact."""
    known = [c for c in report.components.values() if c.score is not None and c.weight > 0]
    total = sum(c.weight for c in known)
    if total <= 0:
        return []

    def candidates() -> Iterator[tuple[tuple[int, float, float, str, str], ComponentResult, SignalResult,
                                       TargetScore, float]]:
        for comp in known:
            signals = [s for s in comp.signals if s.known]
            weight_sum = sum(s.settings.weight for s in signals)
            for result in signals:
                share = (comp.weight / total) * (result.settings.weight / weight_sum)
                for target in result.targets:
                    if target.score >= 100.0:
                        break  # targets are sorted worst first
                    firing = result.settings.critical and target.score <= 0.0
                    impact = share * (100.0 - target.score)
                    yield (0 if firing else 1, -impact, target.score, result.signal.name,
                           target.measurement.target), comp, result, target, impact

    best = heapq.nsmallest(count, candidates(), key=lambda c: c[0])
    out = []
    for rank, (_, comp, result, target, impact) in enumerate(best, start=1):
        text = sentence(result.signal, target.measurement, result.settings.bad,
                        result.settings.window_seconds)
        out.append(Detractor(rank, comp.name, result, target, impact, text))
    return out


# -- JSON ------------------------------------------------------------------------------------------

def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _target_json(result: SignalResult, t: TargetScore) -> dict[str, Any]:
    unit = result.signal.unit
    return {"target": t.measurement.target, "value": t.measurement.value,
            "value_text": format_value(unit, t.measurement.value), "score": _round(t.score),
            "note": t.measurement.note, "labels": t.measurement.labels}


def signal_json(result: SignalResult, worst: int = 3) -> dict[str, Any]:
    s, st = result.signal, result.settings
    worst_target = result.worst
    return {
        "name": s.name, "component": s.component, "title": s.title, "unit": s.unit,
        "formula": s.formula, "window_seconds": st.window_seconds if s.window != "instant" else 0,
        "good": st.good, "bad": st.bad,
        "good_text": format_threshold(s.unit, st.good), "bad_text": format_threshold(s.unit, st.bad),
        "weight": st.weight, "critical": st.critical, "applicable": result.applicable,
        "known": result.known, "firing": result.firing, "score": _round(result.score),
        "value": worst_target.measurement.value if worst_target else None,
        "value_text": format_value(s.unit, worst_target.measurement.value) if worst_target else None,
        "target": worst_target.measurement.target if worst_target else None,
        "targets": len(result.targets) if result.known else 0,
        "worst": ([_target_json(result, t) for t in result.targets[:worst] if t.score < 100]
                  if result.known else []),
    }


def report_json(report: Report) -> dict[str, Any]:
    components = []
    for name, comp in report.components.items():
        components.append({
            "name": name, "weight": comp.weight,
            "score": _round(report.component_scores.get(name, comp.score)), "raw_score": _round(comp.score),
            "mean": _round(comp.mean), "coverage": round(comp.coverage, 4), "capped_by": comp.capped_by,
            "applicable": comp.applicable,
            "signals": [signal_json(s) for s in comp.signals],
        })
    return {
        "timestamp": report.timestamp,
        "score": _round(report.score), "raw_score": _round(report.raw_score), "status": report.status,
        "coverage": round(report.coverage, 4), "cap": report.cap, "capped_by": report.capped_by,
        "firing": report.firing,
        "window_seconds": report.window_seconds, "event_window_seconds": report.event_window_seconds,
        "components": components,
        "detractors": [{
            "rank": d.rank, "component": d.component, "signal": d.result.signal.name,
            "target": d.target.measurement.target, "value": d.target.measurement.value,
            "value_text": format_value(d.result.signal.unit, d.target.measurement.value),
            "score": _round(d.target.score), "impact": _round(d.impact),
            "good": d.result.settings.good, "bad": d.result.settings.bad,
            "critical": d.result.settings.critical, "sentence": d.sentence, "hint": d.result.signal.hint,
        } for d in report.detractors],
        "serving": {ep: lat.as_json() for ep, lat in sorted(report.latency.items())},
        "coverage_notes": [note.as_json() for note in report.coverage_notes],
    }
