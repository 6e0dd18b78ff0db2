"""Signals -> sub-scores -> component scores -> one 0-100 score, with caps and coverage.

* A signal's value maps to 0-100 through a piecewise-linear curve: 100 at or better than
  `good`, 0 at or worse than `bad`, linear in between (good > bad means higher is better).
  A signal scores as its worst target.
* A component is the weighted mean of its known signals, capped by its worst critical signal:
  an uncorrectable ECC error cannot hide behind seven healthy GPU signals.
* The overall score is the weighted mean of the known components, capped at `critical_cap`
  while any critical signal fires (sub-score 0).
* A latency SLO signal (TTFT/ITL p95) past its objective holds the status at `degraded` at best,
  whatever the score; at or past its bad level it caps its component like a critical signal,
  but not the overall score: the cap is kept for hardware and fabric faults.
* Scores are rounded once, to SCORE_DIGITS, where they are made: the status, the metric and the
  API all read the same number (never 99.99999999999999 beside 100).
* Unknown is never healthy: a signal without data is left out, the weights renormalise over
  what is known, and the coverage ratio says how much of the model had data.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import count, repeat, starmap
from operator import attrgetter, itemgetter, mul, ne
from typing import Any, NamedTuple, overload

from .blast import Affected, WorkloadIndex
from .config import HealthSettings
from .coverage import CoverageNote
from .latency import EndpointLatency
from .reasons import format_threshold, format_value, sentence
from .signals import FLAG, SIGNALS, Measurement, Signal

HEALTHY, DEGRADED, CRITICAL, UNKNOWN = "healthy", "degraded", "critical", "unknown"
STATUSES = (HEALTHY, DEGRADED, CRITICAL, UNKNOWN)
SCORE_DIGITS = 2


def round_score(value: float | None) -> float | None:
    """The one rounding every published score goes through."""
    return None if value is None else round(value, SCORE_DIGITS)


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


def resolve_settings(cfg: HealthSettings) -> dict[str, Settings]:
    """Signal defaults overlaid with the `health:` config (thresholds, SLOs, weights, critical)."""
    overrides = cfg.thresholds
    slo = cfg.slo
    windows = {"window": cfg.window, "event_window": cfg.event_window, "instant": cfg.window,
               "link_window": cfg.link.window}
    critical = set(cfg.critical_signals)  # the schema fills in the signals marked critical
    out = {}
    for name, signal in SIGNALS.items():
        good, bad = signal.good, signal.bad
        if name == "ttft_p95":
            good, bad = slo.ttft_p95_seconds, 2 * slo.ttft_p95_seconds
        elif name == "itl_p95":
            good, bad = slo.itl_p95_seconds, 2 * slo.itl_p95_seconds
        base = overrides.get(signal.thresholds_from) if signal.thresholds_from else None
        for source in (base, overrides.get(name)):
            if source:
                good = source.good if source.good is not None else good
                bad = source.bad if source.bad is not None else bad
        weight = cfg.signal_weights.get(name, signal.weight)  # unnamed signals keep their own
        out[name] = Settings(good, bad, weight, name in critical, windows[signal.window])
    return out


class TargetScore(NamedTuple):
    """One target's sub-score (a tuple: a fabric pass makes one per switch queue and port)."""

    measurement: Measurement
    score: float


_new_target = partial(tuple.__new__, TargetScore)  # TargetScore(*fields), no Python-level call


class RankedTargets(Sequence[TargetScore]):
    """A signal's targets, worst first: its measurements and sub-scores with their rank order,
    each `TargetScore` made when read. A fabric signal ranks tens of thousands of targets; a pass
    reads the unhealthy ones and the worst few."""

    __slots__ = ("_measurements", "_scores", "_order")

    def __init__(self, measurements: list[Measurement], scores: list[float], order: list[int]) -> None:
        self._measurements, self._scores, self._order = measurements, scores, order

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> TargetScore: ...

    @overload
    def __getitem__(self, index: slice) -> list[TargetScore]: ...

    def __getitem__(self, index: int | slice) -> TargetScore | list[TargetScore]:
        if isinstance(index, slice):
            return list(self._made(self._order[index]))
        i = self._order[index]
        return _new_target((self._measurements[i], self._scores[i]))

    def __iter__(self) -> Iterator[TargetScore]:
        return self._made(self._order)

    def _made(self, order: list[int]) -> Iterator[TargetScore]:
        return map(_new_target, zip(map(self._measurements.__getitem__, order),
                                    map(self._scores.__getitem__, order)))

    def __eq__(self, other: object) -> bool:  # equal to the list of the same targets
        if isinstance(other, RankedTargets | list):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"RankedTargets({list(self)!r})"


@dataclass(frozen=True)
class SloBreach:
    """One endpoint past a latency objective: the status cannot be healthy while it lasts."""

    signal: str
    component: str
    target: str
    value: float
    objective: float  # the signal's good threshold (health.slo)
    bad: float

    @property
    def past_bad(self) -> bool:
        return self.value >= self.bad

    def as_json(self) -> dict[str, Any]:
        return {"signal": self.signal, "component": self.component, "target": self.target,
                "value": self.value, "objective": self.objective, "bad": self.bad,
                "past_bad": self.past_bad}


# The order statuses are combined in: the worst wins. Unknown is better than degraded (a reason
# is a stronger word than no data) but never healthy.
SEVERITY = {HEALTHY: 0, UNKNOWN: 1, DEGRADED: 2, CRITICAL: 3}


@dataclass(frozen=True)
class StatusReason:
    """Why the status is at least `status`: one signal's state (its worst target and how many of
    its targets are in that state), the score's band, or the coverage floor."""

    status: str
    rule: str  # score_band | critical_signal | signal_past_bad | slo_breached | coverage_below_floor
    component: str
    signal: str
    target: str
    targets: int  # how many of the signal's targets are in that state
    text: str
    labels: dict[str, str] = field(default_factory=dict, compare=False)  # the worst target's
    affected: Affected | None = field(default=None, compare=False)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "rule": self.rule, "component": self.component,
                               "signal": self.signal, "target": self.target, "targets": self.targets,
                               "text": self.text}
        if self.affected is not None:
            out["affected"] = self.affected.as_json()
        return out


@dataclass
class SignalResult:
    signal: Signal
    settings: Settings
    applicable: bool
    targets: Sequence[TargetScore] = field(default_factory=list)  # worst first

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


@dataclass(frozen=True)
class DetractorPart:
    """One signal's view of a detractor's target."""

    component: str
    result: SignalResult
    target: TargetScore
    impact: float


@dataclass
class Detractor:
    """One target and what it costs: the signal costing the most first (`result`), then every
    other signal that scores the same target (a switch port seen by pfc_pause_ratio and by
    uplink_pfc_pause_ratio is one detractor naming both)."""

    rank: int
    component: str
    result: SignalResult
    target: TargetScore
    impact: float  # points of the overall score this target costs, all its signals (before caps)
    sentence: str
    others: list[DetractorPart] = field(default_factory=list)
    # A grouped signal (`Signal.group_by`): how many of its targets this detractor stands for (the
    # worst leads), and their member names. 1 and [] for a plain target.
    members: int = 1
    member_names: list[str] = field(default_factory=list)
    affected: Affected | None = None  # the workloads it hurts (blast.py); None until attached

    @property
    def signals(self) -> list[str]:
        return [self.result.signal.name] + [p.result.signal.name for p in self.others]


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
    slo_breaches: list[SloBreach] = field(default_factory=list)
    component_status: dict[str, str] = field(default_factory=dict)
    status_reasons: list[StatusReason] = field(default_factory=list)  # worst first
    workloads: WorkloadIndex | None = None  # this pass's attribution, once attached
    # Each NIC/InfiniBand port's link class (signals/link.py): {port, state, evidence}.
    links: list[dict[str, str]] = field(default_factory=list)


def status_of(score: float | None, cfg: HealthSettings, slo_breached: bool = False) -> str:
    """The status word of a score in the configured bands alone (a breached latency SLO is never
    healthy). The published status is the worst of this and each signal's state: `apply_status`."""
    if score is None:
        return UNKNOWN
    levels = cfg.status_thresholds
    if score < levels.critical:
        return CRITICAL
    if score < levels.degraded or slo_breached:
        return DEGRADED
    return HEALTHY


def attach_blast_radius(report: Report, index: WorkloadIndex) -> None:
    """Each detractor and each signal's status reason names the workloads its target's fault
    hurts (health/blast.py). A grouped detractor's members share the labels that locate it."""
    for d in report.detractors:
        d.affected = index.affected(d.target.measurement.labels)
    report.workloads = index
    report.status_reasons = [replace(r, affected=index.affected(r.labels)) if r.signal else r
                             for r in report.status_reasons]


def worst_status(*statuses: str) -> str:
    return max(statuses, key=SEVERITY.__getitem__)


def signal_states(components: dict[str, ComponentResult]) -> list[StatusReason]:
    """One reason per signal whose state alone sets a floor under the status, whatever the mean:
    a critical signal at or past its bad level (critical), any other signal at or past it
    (degraded), a latency SLO past its objective (degraded). docs/health.md has the table."""
    out = []
    for comp in components.values():
        for result in comp.signals:
            if not result.known:
                continue
            st, signal = result.settings, result.signal
            past_bad = [t for t in result.targets if t.score <= 0.0]  # worst first: a prefix
            if past_bad:
                status = CRITICAL if st.critical else DEGRADED
                rule = "critical_signal" if st.critical else "signal_past_bad"
            elif signal.slo and result.targets and result.targets[0].score < 100.0:
                past_bad = [t for t in result.targets if t.score < 100.0]
                status, rule = DEGRADED, "slo_breached"
            else:
                continue
            worst = past_bad[0]
            out.append(StatusReason(status, rule, comp.name, signal.name, worst.measurement.target,
                                    len(past_bad), sentence(signal, worst.measurement, st.bad,
                                                            st.window_seconds),
                                    dict(worst.measurement.labels)))
    out.sort(key=lambda r: (-SEVERITY[r.status], r.component, r.signal))
    return out


def apply_status(report: Report, cfg: HealthSettings) -> None:
    """The status: the worst of the score's band (the published, smoothed score) and the state of
    each signal (`signal_states`); a status that would read healthy with too little of the
    weight measured reads unknown. The same rule per component (the status page colours
    components with these), without the coverage floor."""
    report.status_reasons = signal_states(report.components)
    if report.workloads is not None:
        index = report.workloads
        report.status_reasons = [replace(r, affected=index.affected(r.labels)) if r.signal else r
                                 for r in report.status_reasons]
    band = status_of(report.score, cfg)
    report.status = worst_status(band, *(r.status for r in report.status_reasons))
    if band != HEALTHY and report.score is not None:
        levels = cfg.status_thresholds
        level = levels.critical if band == CRITICAL else levels.degraded
        text = f"score {report.score:g} is below the {band} band ({level:g})"
        report.status_reasons.insert(0, StatusReason(band, "score_band", "", "", "", 0, text))
    floor = float(cfg.coverage_floor)
    if report.status == HEALTHY and report.coverage < floor:
        report.status = UNKNOWN
        report.status_reasons.append(StatusReason(
            UNKNOWN, "coverage_below_floor", "", "", "", 0,
            f"only {report.coverage:.0%} of the applicable signals' weight has data (floor {floor:.0%}): "
            "what is not measured is never healthy"))
    by_component: dict[str, list[str]] = {}
    for r in report.status_reasons:
        if r.component:
            by_component.setdefault(r.component, []).append(r.status)
    report.component_status = {
        name: worst_status(status_of(report.component_scores.get(name, comp.score), cfg),
                           *by_component.get(name, ()))
        for name, comp in report.components.items()}


def slo_breaches(components: dict[str, ComponentResult]) -> list[SloBreach]:
    """Every target of a known latency SLO signal that is past its objective (good)."""
    out = []
    for comp in components.values():
        for result in comp.signals:
            if not (result.signal.slo and result.known):
                continue
            st = result.settings
            for t in result.targets:
                if curve(t.measurement.value, st.good, st.bad) >= 100.0:
                    break  # targets are sorted worst first
                out.append(SloBreach(result.signal.name, comp.name, t.measurement.target,
                                     t.measurement.value, st.good, st.bad))
    return out


def _weighted(pairs: list[tuple[float, float]]) -> float | None:
    total = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / total if total > 0 else None


_value, _target, _position = attrgetter("value"), attrgetter("target"), itemgetter(3)


def _scored(values: list[Measurement], good: float, bad: float) -> RankedTargets:
    """Every target's sub-score, worst first. Equal scores (two targets both past bad, or both
    within good) are ordered by how far each is towards bad, so the worst target leads whatever
    the rounding did; then by name, then as measured. A fabric has tens of thousands of targets,
    mostly healthy: those skip the curve, the sorts compare plain floats and strings, and no
    `TargetScore` is made until one is read (`RankedTargets`)."""
    measured = list(map(_value, values))
    if good < bad:
        scores = [100.0 if v <= good else round(curve(v, good, bad), SCORE_DIGITS) for v in measured]
    else:
        scores = [100.0 if v >= good else round(curve(v, good, bad), SCORE_DIGITS) for v in measured]
    if any(map(ne, measured, measured)):  # a NaN: only the tuple comparison orders it as before
        away = -1.0 if bad >= good else 1.0
        ranked = sorted(zip(scores, map(mul, repeat(away), measured), map(_target, values), count()))
        return RankedTargets(values, scores, list(map(_position, ranked)))
    # The same order as sorting (score, toward, target, position) tuples, as three stable sorts
    # from the last key to the first: each compares plain floats or strings, in C. Toward bad is
    # the value itself, descending where higher is worse (a stable reverse sort keeps ties in order).
    order = sorted(range(len(values)), key=list(map(_target, values)).__getitem__)
    order.sort(key=measured.__getitem__, reverse=bad >= good)
    order.sort(key=scores.__getitem__)
    return RankedTargets(values, scores, order)


def evaluate(measured: dict[str, list[Measurement] | None], cfg: HealthSettings,
             settings: dict[str, Settings] | None = None, timestamp: float | None = None,
             max_detractors: int | None = None) -> Report:
    """Score one pass. `measured[name]` is None when the signal does not apply here."""
    settings = settings or resolve_settings(cfg)
    weights = cfg.weights  # every component: the schema fills in the ones not named
    components: dict[str, ComponentResult] = {}
    for name, signal in SIGNALS.items():
        values = measured.get(name)
        st = settings[name]
        result = SignalResult(signal, st, values is not None)
        if values:
            result.targets = _scored(values, st.good, st.bad)
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
        comp.mean = round_score(_weighted([(s.settings.weight, score) for s, score in known]))
        comp.score = comp.mean
        # Critical signals cap their component at their own sub-score; a latency SLO signal at or
        # past its bad level caps it the same way (at 0).
        capping = [(s, score) for s, score in known if s.settings.critical or (s.signal.slo and score <= 0.0)]
        if comp.mean is not None and capping:
            worst, worst_score = min(capping, key=lambda pair: pair[1])
            if worst_score < comp.mean:
                comp.score = worst_score
                comp.capped_by = worst.signal.name

    scored_components = [(c.weight, c.score) for c in components.values()
                         if c.score is not None and c.weight > 0]
    raw = round_score(_weighted(scored_components))
    applicable_components = [c for c in components.values() if c.applicable and c.weight > 0]
    total_weight = sum(c.weight for c in applicable_components)
    coverage = (sum(c.weight * c.coverage for c in applicable_components) / total_weight
                if total_weight > 0 else 0.0)
    firing = sorted(s.signal.name for c in components.values() for s in c.signals if s.firing)
    cap = float(cfg.critical_cap)
    score = raw
    capped_by: list[str] = []
    if raw is not None and firing and raw > cap:
        score = cap
        capped_by = firing
    breaches = slo_breaches(components)
    report = Report(
        timestamp=time.time() if timestamp is None else timestamp,
        score=score, raw_score=raw, status=UNKNOWN, coverage=coverage,
        components=components, detractors=[], capped_by=capped_by, cap=cap if firing else None,
        firing=firing,
        window_seconds=cfg.window, event_window_seconds=cfg.event_window,
        slo_breaches=breaches,
    )
    report.detractors = top_detractors(report, max_detractors or cfg.detractors)
    report.component_scores = {name: c.score for name, c in components.items()}
    apply_status(report, cfg)
    return report


# One signal's view of an unhealthy target, as a tuple: (0 if firing else 1, -impact, signal name,
# component, result, target, impact). A fabric pass has thousands; the DetractorPart objects are
# made only for the targets that rank.
_Row = tuple[int, float, str, str, SignalResult, TargetScore, float]
_row_order = itemgetter(0, 1, 2)  # firing first, then costing most, then by signal name
_row_impact = itemgetter(6)


def _rank(name: str, rows: list[_Row]) -> tuple[int, float, float, str, str]:
    """A target's rank key: firing first, then the most points (all its signals), then the
    score and the signal of its part costing the most, then its name."""
    first = min(rows, key=_row_order)
    return (first[0], -sum(map(_row_impact, rows)), first[5].score, first[2], name)


def top_detractors(report: Report, count: int) -> list[Detractor]:
    """The targets costing the most points, one entry per target: firing critical signals first,
    then by impact (summed over the signals that score the target)."""
    known = [c for c in report.components.values() if c.score is not None and c.weight > 0]
    total = sum(c.weight for c in known)
    if total <= 0:
        return []
    by_target: dict[str, list[_Row]] = {}
    for comp in known:
        signals = [s for s in comp.signals if s.known]
        weight_sum = sum(s.settings.weight for s in signals)
        for result in signals:
            share = (comp.weight / total) * (result.settings.weight / weight_sum)
            critical, signal = result.settings.critical, result.signal.name
            for target in result.targets:
                score = target.score
                if score >= 100.0:
                    break  # targets are sorted worst first
                impact = share * (100.0 - score)
                row = (0 if critical and score <= 0.0 else 1, -impact, signal, comp.name, result, target,
                       impact)
                by_target.setdefault(_group_key(result.signal, target.measurement), []).append(row)

    out = []
    ranked = heapq.nsmallest(count, starmap(_rank, by_target.items()))  # each key ends with its name
    for rank, (*_, name) in enumerate(ranked, start=1):
        parts = [DetractorPart(*row[3:]) for row in sorted(by_target[name], key=_row_order)]
        first, others = parts[0], parts[1:]
        lead = first.result.signal
        if lead.group_by:  # the members are the other parts: one signal, worst first
            names = [_member_name(lead, p.target.measurement) for p in parts]
            sentence_text = _group_sentence(first, names)
            out.append(Detractor(rank, first.component, first.result, first.target,
                                 sum(p.impact for p in parts), sentence_text, [], len(parts), names))
            continue
        out.append(Detractor(rank, first.component, first.result, first.target,
                             sum(p.impact for p in parts), _detractor_sentence(first, others), others))
    return out


MAX_MEMBERS_NAMED = 6


def _group_key(signal: Signal, m: Measurement) -> str:
    """A target's detractor: its name, or for a grouped signal the signal and the labels that are
    not members (every size of one test and metric is one detractor)."""
    if not signal.group_by:
        return m.target
    rest = ",".join(f"{k}={v}" for k, v in sorted(m.labels.items()) if k not in signal.group_by)
    return f"{signal.name}{{{rest}}}"


def _member_name(signal: Signal, m: Measurement) -> str:
    if signal.member_text is not None:
        return signal.member_text(m.labels)
    return " ".join(m.labels.get(k, "") for k in signal.group_by)


def _group_sentence(first: DetractorPart, names: list[str]) -> str:
    text = sentence(first.result.signal, first.target.measurement, first.result.settings.bad,
                    first.result.settings.window_seconds)
    if len(names) == 1:
        return text
    listed = ", ".join(names[:MAX_MEMBERS_NAMED]) + (", ..." if len(names) > MAX_MEMBERS_NAMED else "")
    return f"{text}; worst of {len(names)} {first.result.signal.group_noun} ({listed})"


def _detractor_sentence(first: DetractorPart, others: list[DetractorPart]) -> str:
    """The sentence of the signal costing the most, then the other signals scoring the target:
    by name alone where they measure the same value (the uplink_* view of a switch port)."""
    text = sentence(first.result.signal, first.target.measurement, first.result.settings.bad,
                    first.result.settings.window_seconds)
    also = []
    for part in others:
        signal, value = part.result.signal, part.target.measurement.value
        if signal.unit == first.result.signal.unit and value == first.target.measurement.value:
            also.append(f"{signal.name} ({part.component})")
        else:
            phrase = signal.phrase if signal.unit == FLAG else signal.phrase.format(
                value=format_value(signal.unit, value))
            also.append(f"{signal.name} ({part.component}): {phrase}")
    return f"{text}; also scored by {', '.join(also)}" if also else text


# -- JSON ------------------------------------------------------------------------------------------

def _round(value: float | None, digits: int = SCORE_DIGITS) -> float | None:
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
            "name": name, "weight": comp.weight, "status": report.component_status.get(name, UNKNOWN),
            "score": _round(report.component_scores.get(name, comp.score)), "raw_score": _round(comp.score),
            "mean": _round(comp.mean), "coverage": round(comp.coverage, 4), "capped_by": comp.capped_by,
            "applicable": comp.applicable,
            "signals": [signal_json(s) for s in comp.signals],
        })
    return {
        "timestamp": report.timestamp,
        "score": _round(report.score), "raw_score": _round(report.raw_score), "status": report.status,
        "coverage": round(report.coverage, 4), "cap": report.cap, "capped_by": report.capped_by,
        "firing": report.firing, "slo_breaches": [b.as_json() for b in report.slo_breaches],
        "status_reasons": [r.as_json() for r in report.status_reasons],
        "window_seconds": report.window_seconds, "event_window_seconds": report.event_window_seconds,
        "components": components,
        "detractors": [{
            "rank": d.rank, "component": d.component, "signal": d.result.signal.name, "signals": d.signals,
            "target": d.target.measurement.target, "value": d.target.measurement.value,
            "value_text": format_value(d.result.signal.unit, d.target.measurement.value),
            "score": _round(d.target.score), "impact": _round(d.impact),
            "good": d.result.settings.good, "bad": d.result.settings.bad,
            "critical": d.result.settings.critical, "sentence": d.sentence, "hint": d.result.signal.hint,
            "members": d.members, "member_names": d.member_names,
            "affected": d.affected.as_json() if d.affected is not None else None,
        } for d in report.detractors],
        "serving": {ep: lat.as_json() for ep, lat in sorted(report.latency.items())},
        "coverage_notes": [note.as_json() for note in report.coverage_notes],
        "links": report.links,
    }
