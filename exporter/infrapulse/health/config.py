"""Config schema of the `health:` section: `HealthSettings` and the settings classes of its
sub-sections (`link`, `slo`, `status_thresholds`, `smoothing`, and each signal's `thresholds` pair).

The per-signal thresholds and weights default to the values in each signal's definition
(`signals.SIGNALS`), so the schema and docs/health.md can never disagree with the code.
Only the signals a user names are overridden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..schema import Bool, Duration, Float, Int, ListOf, MapOf, SchemaError, Settings, Str, setting, settings

DEFAULT_RUNBOOK_BASE = "https://github.com/infrapulse/infrapulse/blob/main/docs/runbooks/"
COMPONENTS = ("network", "rdma", "gpu", "serving", "topology", "probe")
DEFAULT_COMPONENT_WEIGHTS = {"network": 0.3, "rdma": 0.15, "gpu": 0.25, "serving": 0.3, "topology": 0.1,
                             "probe": 0.15}


def _signal_names() -> tuple[str, ...]:
    from .signals import SIGNALS

    return tuple(SIGNALS)


def _signal_good(name: str) -> float:
    """An SLO's default is its signal's good threshold (bad is twice the SLO)."""
    from .signals import SIGNALS

    return SIGNALS[name].good


def _default_critical() -> list[str]:
    from .signals import SIGNALS

    return [s.name for s in SIGNALS.values() if s.critical]


def _check_weights(weights: dict[str, float], path: str) -> None:
    for name in weights:
        if name not in COMPONENTS:
            raise SchemaError(_join(path, f"weights.{name}"),
                              f"unknown component (known: {', '.join(COMPONENTS)})")


def _check_signal_keys(mapping: dict[str, Any], path: str) -> None:
    known = _signal_names()
    for name in mapping:
        if name not in known:
            raise SchemaError(f"{path}.{name}", f"unknown signal (known: {', '.join(known)})")


def _check_thresholds(value: dict[str, ThresholdPair], path: str, slo: SloSettings) -> None:
    from .signals import SIGNALS

    _check_signal_keys(value, path)
    errors: list[SchemaError] = []
    for name, pair in value.items():
        if pair.good is not None and pair.bad is not None and pair.good == pair.bad:
            errors.append(SchemaError(f"{path}.{name}", "good and bad thresholds must differ"))
            continue
        signal = SIGNALS[name]
        good, bad = _effective_pair(name, value, slo)
        # A signal's direction is fixed by what it measures (more ECN marks is never better):
        # a pair that reverses it would score the problem 100 and the healthy state 0.
        lower_is_better = signal.good < signal.bad
        if good != bad and (good > bad) == lower_is_better:
            better, side = ("lower", "below") if lower_is_better else ("higher", "above")
            errors.append(SchemaError(
                f"{path}.{name}", f"good ({good:g}) is worse than bad ({bad:g}): for {name} {better} values "
                                  f"are better, so good must be {side} bad"))
    if errors:
        raise SchemaError.of(errors)


def _effective_pair(name: str, overrides: dict[str, ThresholdPair], slo: SloSettings) -> tuple[float, float]:
    """The good/bad a signal ends up with: its defaults (an SLO for ttft/itl, bad twice it), then
    the signal it borrows thresholds from, then its own override (as scoring.resolve_settings)."""
    from .signals import SIGNALS

    signal = SIGNALS[name]
    good, bad = signal.good, signal.bad
    if name in SLO_SIGNALS:
        good = slo.objective(name)
        bad = 2 * good
    borrowed = overrides.get(signal.thresholds_from) if signal.thresholds_from else None
    for pair in (borrowed, overrides.get(name)):
        if pair:
            good = pair.good if pair.good is not None else good
            bad = pair.bad if pair.bad is not None else bad
    return good, bad


SLO_SIGNALS = {"ttft_p95": "ttft_p95_seconds", "itl_p95": "itl_p95_seconds"}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(section: HealthSettings, path: str) -> None:
    """Cross-field checks of the validated `health:` section, which also fill in the defaults
    that depend on other keys."""
    _check_weights(section.weights, path)
    _check_thresholds(section.thresholds, _join(path, "thresholds"), section.slo)
    # Components the user did not name keep their default weight.
    section.weights = {**DEFAULT_COMPONENT_WEIGHTS, **section.weights}
    _check_signal_keys(section.signal_weights, _join(path, "signal_weights"))
    known = _signal_names()
    for i, name in enumerate(section.critical_signals or []):
        if name not in known:
            raise SchemaError(_join(path, f"critical_signals[{i}]"), f"unknown signal {name!r}")
    if section.critical_signals is None:
        section.critical_signals = _default_critical()
    levels = section.status_thresholds
    if levels.critical > levels.degraded:
        raise SchemaError(_join(path, "status_thresholds"), "critical must be <= degraded")


@settings("Where this signal's sub-score is 100 (good) and 0 (bad); linear in between. good > bad "
          "means higher is better. Omit one to keep the built-in default.")
@dataclass(kw_only=True, slots=True)
class ThresholdPair(Settings):
    """One signal's `health.thresholds` entry; None keeps the built-in default of that side."""

    good: float | None = setting(Float("Value at or better than which the sub-score is 100."))
    bad: float | None = setting(Float("Value at or worse than which the sub-score is 0."))


THRESHOLD_PAIR = ThresholdPair.SCHEMA


@settings("Link health of NIC and InfiniBand ports (flapping, half-dead, degraded BER): the windows its "
          "signals count over. The class boundaries are the signals' bad thresholds (link_flaps, "
          "link_half_dead, link_post_fec_ber, link_pre_fec_ber_rise under `thresholds`).")
@dataclass(kw_only=True, slots=True)
class LinkSettings(Settings):
    window: float = setting(Duration("Window of the link signals: carrier transitions, retrains and bit "
                                     "error ratios are counted over it.", default="10m", min=1))
    baseline_window: float = setting(Duration("How far back a port's own pre-FEC BER baseline reaches (the "
                                              "span before the current window).", default="1h", min=1))
    pre_fec_ber_floor: float = setting(Float("Lowest baseline the pre-FEC BER rise divides by: a port that "
                                             "corrected (almost) nothing before does not turn a first few "
                                             "corrected bits into a huge factor.", default=1e-9, min=0))


@settings("Serving latency objectives: the good threshold of ttft_p95 / itl_p95 (bad defaults to twice the "
          "SLO).")
@dataclass(kw_only=True, slots=True)
class SloSettings(Settings):
    ttft_p95_seconds: float = setting(Float("Time-to-first-token p95 objective.",
                                            default=_signal_good("ttft_p95"), min=0.001))
    itl_p95_seconds: float = setting(Float("Inter-token-latency p95 objective.",
                                           default=_signal_good("itl_p95"), min=0.0001))

    def objective(self, signal: str) -> float:
        """The objective (good threshold) of an SLO signal (ttft_p95 or itl_p95)."""
        return self.ttft_p95_seconds if signal == "ttft_p95" else self.itl_p95_seconds


@settings("Score bands for the status word and `infrapulse score`'s exit code.")
@dataclass(kw_only=True, slots=True)
class StatusThresholdsSettings(Settings):
    degraded: float = setting(Float("Below this the status is degraded (exit 1).",
                                    default=80, min=0, max=100))
    critical: float = setting(Float("Below this the status is critical (exit 2).",
                                    default=50, min=0, max=100))


@settings("Anti-flap: drops are shown at once, recoveries can be eased and small wiggles ignored.")
@dataclass(kw_only=True, slots=True)
class SmoothingSettings(Settings):
    recovery: float = setting(Duration("Time constant of the exponential ease when a score rises (0s: off).",
                                       default="0s", min=0))
    hysteresis: float = setting(Float("A published score moves only when the raw score differs by at least "
                                      "this many points (0: off).", default=0, min=0, max=50))


@settings("Health score: signals -> sub-scores 0-100 -> component scores -> one score with reasons. "
          "See docs/health.md for every signal's formula, window and default thresholds.", check=_check)
@dataclass(kw_only=True, slots=True)
class HealthSettings(Settings):
    """The `health:` section. Validation (its `_check`) completes `weights` with the components not
    named and fills `critical_signals` with the signals marked critical when none are given."""

    enabled: bool = setting(Bool("Compute and export the health score.", default=True))
    interval: float | None = setting(Duration(
        "How often the score is computed (default: the daemon's interval). A pass costs about 0.4 us of "
        "CPU per series (0.04 s per 100k on a fabric instance; docs/scaling.md, Health pass cost)."))
    window: float = setting(Duration(
        "Window of rate and ratio signals (ECN ratio, PFC pause ratio, CNP rate, TTFT p95 ...).",
        default="1m", min=1))
    event_window: float = setting(Duration(
        "Window of event signals (XID errors, link flaps, uncorrectable ECC increases): an event keeps "
        "counting against the score this long.", default="5m", min=1))
    link: LinkSettings = setting(LinkSettings.SCHEMA)
    weights: dict[str, float] = setting(MapOf(
        "Relative weight of each component (network, rdma, gpu, serving, topology, probe) in the overall "
        "score; renormalised over the components that have data.",
        value=Float(min=0), default=dict(DEFAULT_COMPONENT_WEIGHTS)))
    signal_weights: dict[str, float] = setting(MapOf(
        "Relative weight of a signal inside its component, overriding the default (0 disables the signal).",
        value=Float(min=0), default={}))
    slo: SloSettings = setting(SloSettings.SCHEMA)
    thresholds: dict[str, ThresholdPair] = setting(MapOf(
        "Per-signal good/bad thresholds, e.g. {ecn_marked_ratio: {good: 0.001, bad: 0.05}}.",
        value=THRESHOLD_PAIR, default={}))
    critical_signals: list[str] = setting(ListOf(
        "Signals that cap their component at their own sub-score, and the overall score at critical_cap "
        "when they fire (sub-score 0). Default: the signals marked critical in docs/health.md.",
        item=Str()))
    critical_cap: float = setting(Float("Highest overall score while any critical signal fires.",
                                        default=40, min=0, max=100))
    status_thresholds: StatusThresholdsSettings = setting(StatusThresholdsSettings.SCHEMA)
    coverage_floor: float = setting(Float(
        "Below this share of the applicable signals' weight that has data, a status that would read healthy "
        "reads unknown (exit 3): what is not measured is never healthy. 0 turns the floor off.",
        default=0.2, min=0, max=1))
    smoothing: SmoothingSettings = setting(SmoothingSettings.SCHEMA)
    detractors: int = setting(Int("How many top detractors /api/v1/health lists (the metric keeps 3).",
                                  default=5, min=1, max=50))
    history: float = setting(Duration("How much score history the status page sparkline keeps in memory.",
                                      default="1h", min=60, max=86400))
    runbook_base_url: str = setting(Str(
        "Where the runbooks (docs/runbooks/<Alert>.md) are published: the status page links each detractor "
        "to <base><Alert>.md. Use the base the alert rules were generated with "
        "(alerts/generate_runbook_urls.py --runbook-base).", default=DEFAULT_RUNBOOK_BASE, pattern=r"https?://\S+"))


CONFIG = HealthSettings.SCHEMA
