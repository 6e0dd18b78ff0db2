"""Config schema of the `health:` section.

The per-signal thresholds and weights default to the values in each signal's definition
(`signals.SIGNALS`), so the schema and docs/health.md can never disagree with the code.
Only the signals a user names are overridden.
"""

from __future__ import annotations

from typing import Any

from ..schema import Bool, Duration, Float, Int, ListOf, MapOf, SchemaError, Section, Str

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


def _check_weights(weights: dict[str, Any], path: str) -> None:
    for name in weights:
        if name not in COMPONENTS:
            raise SchemaError(_join(path, f"weights.{name}"),
                              f"unknown component (known: {', '.join(COMPONENTS)})")


def _check_signal_keys(mapping: dict[str, Any], path: str) -> None:
    known = _signal_names()
    for name in mapping:
        if name not in known:
            raise SchemaError(f"{path}.{name}", f"unknown signal (known: {', '.join(known)})")


def _check_thresholds(value: dict[str, Any], path: str, slo: dict[str, float]) -> None:
    from .signals import SIGNALS

    _check_signal_keys(value, path)
    errors: list[SchemaError] = []
    for name, pair in value.items():
        if pair["good"] is not None and pair["bad"] is not None and pair["good"] == pair["bad"]:
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


def _effective_pair(name: str, overrides: dict[str, Any], slo: dict[str, float]) -> tuple[float, float]:
    """The good/bad a signal ends up with: its defaults (an SLO for ttft/itl, bad twice it), then
    the signal it borrows thresholds from, then its own override (as scoring.resolve_settings)."""
    from .signals import SIGNALS

    signal = SIGNALS[name]
    good, bad = signal.good, signal.bad
    if name in SLO_SIGNALS:
        good = slo[SLO_SIGNALS[name]]
        bad = 2 * good
    borrowed = overrides.get(signal.thresholds_from) if signal.thresholds_from else None
    for pair in (borrowed, overrides.get(name)):
        if pair:
            good = pair["good"] if pair["good"] is not None else good
            bad = pair["bad"] if pair["bad"] is not None else bad
    return good, bad


SLO_SIGNALS = {"ttft_p95": "ttft_p95_seconds", "itl_p95": "itl_p95_seconds"}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(section: dict[str, Any], path: str) -> None:
    _check_weights(section["weights"], path)
    _check_thresholds(section["thresholds"], _join(path, "thresholds"), section["slo"])
    # Components the user did not name keep their default weight.
    section["weights"] = {**DEFAULT_COMPONENT_WEIGHTS, **section["weights"]}
    _check_signal_keys(section["signal_weights"], _join(path, "signal_weights"))
    known = _signal_names()
    for i, name in enumerate(section["critical_signals"] or []):
        if name not in known:
            raise SchemaError(_join(path, f"critical_signals[{i}]"), f"unknown signal {name!r}")
    if section["critical_signals"] is None:
        section["critical_signals"] = _default_critical()
    levels = section["status_thresholds"]
    if levels["critical"] > levels["degraded"]:
        raise SchemaError(_join(path, "status_thresholds"), "critical must be <= degraded")


THRESHOLD_PAIR = Section(
    doc="Where this signal's sub-score is 100 (good) and 0 (bad); linear in between. good > bad "
        "means higher is better. Omit one to keep the built-in default.",
    fields={
        "good": Float("Value at or better than which the sub-score is 100."),
        "bad": Float("Value at or worse than which the sub-score is 0."),
    },
)

CONFIG = Section(
    doc="Health score: signals -> sub-scores 0-100 -> component scores -> one score with reasons. "
        "See docs/health.md for every signal's formula, window and default thresholds.",
    fields={
        "enabled": Bool("Compute and export the health score.", default=True),
        "interval": Duration("How often the score is computed (default: the daemon's interval). A pass "
                             "costs about 0.4 us of CPU per series (0.04 s per 100k on a fabric instance; "
                             "docs/scaling.md, Health pass cost)."),
        "window": Duration("Window of rate and ratio signals (ECN ratio, PFC pause ratio, CNP rate, "
                           "TTFT p95 ...).", default="1m", min=1),
        "event_window": Duration("Window of event signals (XID errors, link flaps, uncorrectable ECC "
                                 "increases): an event keeps counting against the score this long.",
                                 default="5m", min=1),
        "link": Section(doc="Link health of NIC and InfiniBand ports (flapping, half-dead, degraded BER): "
                            "the windows its signals count over. The class boundaries are the signals' bad "
                            "thresholds (link_flaps, link_half_dead, link_post_fec_ber, "
                            "link_pre_fec_ber_rise under `thresholds`).", fields={
            "window": Duration("Window of the link signals: carrier transitions, retrains and bit error "
                               "ratios are counted over it.", default="10m", min=1),
            "baseline_window": Duration("How far back a port's own pre-FEC BER baseline reaches (the span "
                                        "before the current window).", default="1h", min=1),
            "pre_fec_ber_floor": Float("Lowest baseline the pre-FEC BER rise divides by: a port that "
                                       "corrected (almost) nothing before does not turn a first few "
                                       "corrected bits into a huge factor.", default=1e-9, min=0),
        }),
        "weights": MapOf("Relative weight of each component (network, rdma, gpu, serving, topology, probe) "
                         "in the overall score; renormalised over the components that have data.",
                         value=Float(min=0), default=dict(DEFAULT_COMPONENT_WEIGHTS)),
        "signal_weights": MapOf("Relative weight of a signal inside its component, overriding the "
                                "default (0 disables the signal).", value=Float(min=0), default={}),
        "slo": Section(doc="Serving latency objectives: the good threshold of ttft_p95 / itl_p95 "
                           "(bad defaults to twice the SLO).", fields={
            "ttft_p95_seconds": Float("Time-to-first-token p95 objective.",
                                      default=_signal_good("ttft_p95"), min=0.001),
            "itl_p95_seconds": Float("Inter-token-latency p95 objective.",
                                     default=_signal_good("itl_p95"), min=0.0001),
        }),
        "thresholds": MapOf("Per-signal good/bad thresholds, e.g. "
                                  "{ecn_marked_ratio: {good: 0.001, bad: 0.05}}.",
                                  value=THRESHOLD_PAIR, default={}),
        "critical_signals": ListOf("Signals that cap their component at their own sub-score, and the "
                                   "overall score at critical_cap when they fire (sub-score 0). "
                                   "Default: the signals marked critical in docs/health.md.",
                                   item=Str()),
        "critical_cap": Float("Highest overall score while any critical signal fires.",
                              default=40, min=0, max=100),
        "status_thresholds": Section(doc="Score bands for the status word and `infrapulse score`'s "
                                         "exit code.", fields={
            "degraded": Float("Below this the status is degraded (exit 1).", default=80, min=0, max=100),
            "critical": Float("Below this the status is critical (exit 2).", default=50, min=0, max=100),
        }),
        "coverage_floor": Float("Below this share of the applicable signals' weight that has data, a status "
                                "that would read healthy reads unknown (exit 3): what is not measured is "
                                "never healthy. 0 turns the floor off.", default=0.2, min=0, max=1),
        "smoothing": Section(doc="Anti-flap: drops are shown at once, recoveries can be eased and small "
                                 "wiggles ignored.", fields={
            "recovery": Duration("Time constant of the exponential ease when a score rises (0s: off).",
                                 default="0s", min=0),
            "hysteresis": Float("A published score moves only when the raw score differs by at least "
                                "this many points (0: off).", default=0, min=0, max=50),
        }),
        "detractors": Int("How many top detractors /api/v1/health lists (the metric keeps 3).",
                          default=5, min=1, max=50),
        "history": Duration("How much score history the status page sparkline keeps in memory.",
                            default="1h", min=60, max=86400),
        "runbook_base_url": Str("Where the runbooks (docs/runbooks/<Alert>.md) are published: the status "
                                "page links each detractor to <base><Alert>.md. Use the base the alert "
                                "rules were generated with (alerts/generate_runbook_urls.py --runbook-base).",
                                default=DEFAULT_RUNBOOK_BASE, pattern=r"https?://\S+"),
    },
    check=_check,
)
