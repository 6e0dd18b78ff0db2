"""The link alert rules, rendered from the link signals' thresholds: one table for the score,
the port classes and the alerts.

The thresholds are the `bad` thresholds of link_flaps, link_half_dead, link_post_fec_ber and
link_pre_fec_ber_rise, and the windows are `health.link.window` / `baseline_window` /
`pre_fec_ber_floor`, all as `scoring.resolve_settings` resolves them for the scorer: the
signals' defaults overlaid with a config's `health.thresholds` and `health.link`.

- `render_link_rules` writes alerts/link.rules.yaml whole (recording rules and the half-dead
  and degraded alerts);
- `patch_rules` rewrites, in place, the thresholds and windows of the link rules that live in
  other files: the flapping alerts (InfrapulseNicLinkFlapping, InfrapulseSwitchInterfaceFlapping
  in network.rules.yaml, InfrapulseRdmaPortFlapping in rdma.rules.yaml), the half-dead guard of
  InfrapulseNicPhyErrorsWhileUp and the switch carrier-transitions record (recording.rules.yaml).

Recording rules keep their names (`...:increase10m`, `...:ratio_rate1h_before10m`) whatever the
window: dashboards and the other rule files read them by those names.

alerts/generate_link_rules.py writes the repository's files from the defaults; `infrapulse rules
--config FILE --output DIR` (cli.py) writes a copy with a config's overrides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..schema import format_duration
from . import affected_annotation
from .config import DEFAULT_RUNBOOK_BASE, HealthSettings
from .scoring import resolve_settings
from .signals.link import IB_DOWN_TRANSITIONS

LINK_RULES = "link.rules.yaml"
# The files `patch_rules` rewrites (besides link.rules.yaml, which is rendered whole).
PATCHED = ("network.rules.yaml", "rdma.rules.yaml", "recording.rules.yaml")
GENERATOR = "alerts/generate_link_rules.py"
# A source checkout's alerts/ directory, when the package runs from one (exporter/infrapulse/health/).
CHECKOUT_ALERTS = Path(__file__).resolve().parents[3] / "alerts"


@dataclass(frozen=True)
class LinkThresholds:
    """What the link rules compare against: the signals' resolved bad thresholds and the windows."""

    flaps: float  # link_flaps: carrier transitions in the window (an InfiniBand link_downed is 3)
    half_dead: float  # link_half_dead: retrains without carrier loss in the window
    post_fec_ber: float  # link_post_fec_ber
    pre_fec_ber_rise: float  # link_pre_fec_ber_rise: factor over the port's own baseline
    window: float  # seconds, health.link.window
    baseline_window: float  # seconds, health.link.baseline_window
    pre_fec_ber_floor: float  # health.link.pre_fec_ber_floor


def thresholds(health: HealthSettings) -> LinkThresholds:
    """The link thresholds of a loaded config's `health:` section (the scorer's own settings)."""
    settings = resolve_settings(health)
    link = health.link
    return LinkThresholds(
        flaps=settings["link_flaps"].bad,
        half_dead=settings["link_half_dead"].bad,
        post_fec_ber=settings["link_post_fec_ber"].bad,
        pre_fec_ber_rise=settings["link_pre_fec_ber_rise"].bad,
        window=settings["link_flaps"].window_seconds,
        baseline_window=link.baseline_window,
        pre_fec_ber_floor=link.pre_fec_ber_floor,
    )


def number(value: float) -> str:
    """A PromQL number, as short as it stays exact: 3, 0.5, 1e-12, 1e-9 (not 3.0 or 1e-09)."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite threshold: {value!r}")
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m[1] == "-" else "") + m[2], repr(value))


def duration(seconds: float) -> str:
    """A PromQL duration (10m, 1h, 90s, 1500ms): PromQL takes no fractional units."""
    if seconds == int(seconds) and seconds >= 1:
        return format_duration(seconds)
    millis = seconds * 1000
    if seconds <= 0 or abs(millis - round(millis)) > 1e-6:
        raise ValueError(f"a rule window must be a whole number of milliseconds, got {seconds:g}s")
    return f"{round(millis)}ms"


def in_words(seconds: float) -> str:
    """10 minutes, 1 hour, 90 seconds: how the switch flapping summary says the window."""
    if seconds != int(seconds):
        return duration(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{int(seconds)} seconds"


def _values(t: LinkThresholds) -> dict[str, str]:
    return {
        "FLAPS": number(t.flaps), "HALF_DEAD": number(t.half_dead), "POST_FEC": number(t.post_fec_ber),
        "PRE_FEC_RISE": number(t.pre_fec_ber_rise), "WINDOW": duration(t.window),
        "BASELINE": duration(t.baseline_window), "FLOOR": number(t.pre_fec_ber_floor),
    }


def _fill(template: str, values: dict[str, str]) -> str:
    text = re.sub(r"<<(\w+)>>", lambda m: values[m[1]], template)
    assert "<<" not in text, "a placeholder left unfilled"
    return text


def header(t: LinkThresholds, source: str) -> str:
    v = _values(t)
    return f"""# GENERATED {source} - do not edit.
# The thresholds are the link signals' bad thresholds and windows (exporter/infrapulse/health/
# signals/link.py, network.py): link_flaps >= {v['FLAPS']}, link_half_dead >= {v['HALF_DEAD']}, \
link_post_fec_ber
# >= {v['POST_FEC']}, link_pre_fec_ber_rise >= {v['PRE_FEC_RISE']}; health.link.window {v['WINDOW']}, \
baseline_window {v['BASELINE']},
# pre_fec_ber_floor {v['FLOOR']}. Rules for a config's health.thresholds / health.link overrides:
# `infrapulse rules --config FILE --output DIR` (docs/alerting.md). Record names keep their
# 10m/1h suffixes whatever the window: dashboards and the other rule files read them by name.
#
# Link health of NIC (RoCE/Ethernet) and InfiniBand ports: the quantities the health signals in
# exporter/infrapulse/health/signals/link.py measure, over the link window and, for the pre-FEC
# baseline, the span before it. docs/node-telemetry.md ("Link health") explains them; the
# flapping alerts (InfrapulseNicLinkFlapping, InfrapulseRdmaPortFlapping) read the transitions
# recorded here. One event pages once: a flapping port is not also half-dead or degraded, a
# half-dead port is not also degraded (and InfrapulseNicPhyErrorsWhileUp stands back while it
# is half-dead).
"""


DEFAULT_SOURCE = f"by {GENERATOR} from the health signals' defaults"


def render_link_rules(t: LinkThresholds, source: str = DEFAULT_SOURCE) -> str:
    """alerts/link.rules.yaml for these thresholds; `source` says what generated it."""
    rules = header(t, source) + _fill(TEMPLATE.read_text(encoding="utf-8"), _values(t))
    return affected_annotation.rewrite(rules)


# alerts/link.rules.yaml past its header, with <<NAME>> where `_values` puts a threshold or window.
TEMPLATE = Path(__file__).with_name("rules") / "link.rules.yaml.tmpl"


# -- the link rules that live in other files: (file, "alert"/"record", name, [(pattern, replacement)]),
# each pattern matched inside that rule only and required to match.

Patch = tuple[str, Callable[[re.Match[str]], str]]


SWITCH_TRANSITIONS = "switch_interface:infrapulse_switch_interface_carrier_transitions:increase10m"


def _ib_flaps(t: LinkThresholds) -> str:
    """link_downed increases that are flapping: each is IB_DOWN_TRANSITIONS transitions."""
    return number(t.flaps / IB_DOWN_TRANSITIONS)


def _patches(t: LinkThresholds) -> list[tuple[str, str, str, list[Patch]]]:
    v = _values(t)
    words = in_words(t.window)
    ib = _ib_flaps(t)
    return [
        ("network.rules.yaml", "alert", "InfrapulseSwitchInterfaceFlapping", [
            (r"(carrier_transitions:increase10m >= )\S+", lambda m: m[1] + v["FLAPS"]),
            (r"\(\S+ or more carrier transitions in [^)]*\)",
             lambda m: f"({v['FLAPS']} or more carrier transitions in {words})"),
            (r"(times in the last )\S+?(\.')", lambda m: m[1] + v["WINDOW"] + m[2]),
        ]),
        ("network.rules.yaml", "alert", "InfrapulseNicPhyErrorsWhileUp", [
            (r"(recoveries_without_carrier_loss:increase10m >= )[^)\s]+", lambda m: m[1] + v["HALF_DEAD"]),
        ]),
        ("network.rules.yaml", "alert", "InfrapulseNicLinkFlapping", [
            (r"(link_transitions:increase10m >= )\S+", lambda m: m[1] + v["FLAPS"]),
            (r"(times in )\S+?(\.')", lambda m: m[1] + v["WINDOW"] + m[2]),
        ]),
        ("rdma.rules.yaml", "alert", "InfrapulseRdmaPortFlapping", [
            (r"increase\(infrapulse_rdma_port_link_downed_total\[[^\]]+\]\) >=? \S+",
             lambda m: f"increase(infrapulse_rdma_port_link_downed_total[{v['WINDOW']}]) >= {ib}"),
            (r"(times in )\S+?(\.')", lambda m: m[1] + v["WINDOW"] + m[2]),
        ]),
        ("recording.rules.yaml", "record", SWITCH_TRANSITIONS, [
            (r"(carrier_transitions_total\[)[^\]]+(\])", lambda m: m[1] + v["WINDOW"] + m[2]),
        ]),
    ]


# The signals whose bad thresholds the rules compare against.
PATCHED_RULES_SIGNALS = ("link_flaps", "link_half_dead", "link_post_fec_ber", "link_pre_fec_ber_rise")
PATCHED_RULES = tuple(name for _, _, name, _ in _patches(LinkThresholds(3, 2, 1e-12, 10, 600, 3600, 1e-9)))
_NEXT_RULE = re.compile(r"^\s*- (alert|record): ", re.M)


def patch_rules(filename: str, text: str, t: LinkThresholds) -> str:
    """`text` (the rule file `filename`) with its link rules set to `t`; other files unchanged."""
    for file, kind, name, subs in _patches(t):
        if file != filename:
            continue
        start = text.find(f"- {kind}: {name}\n")
        if start < 0:
            raise ValueError(f"{filename}: no {kind} {name}")
        match = _NEXT_RULE.search(text, start + 1)
        end = match.start() if match else len(text)
        rule = text[start:end]
        for pattern, replace in subs:
            rule, count = re.subn(pattern, replace, rule)
            if count == 0:
                raise ValueError(f"{filename}: {name} has no match for {pattern!r} to rewrite")
        text = text[:start] + rule + text[end:]
    return text


def render_all(t: LinkThresholds, alerts_dir: Path | None, source: str = DEFAULT_SOURCE) -> dict[str, str]:
    """File name -> text: link.rules.yaml, and the patched files of `alerts_dir` when given."""
    out = {LINK_RULES: render_link_rules(t, source)}
    if alerts_dir is not None:
        for name in PATCHED:
            out[name] = patch_rules(name, (alerts_dir / name).read_text(encoding="utf-8"), t)
    return out


def with_runbook_base(text: str, base: str) -> str:
    """The runbook_url annotations under the config's health.runbook_base_url (the base the
    status page links detractors with), as alerts/generate_runbook_urls.py --runbook-base."""
    base = base if base.endswith("/") else base + "/"
    return text.replace(f"runbook_url: {DEFAULT_RUNBOOK_BASE}", f"runbook_url: {base}")


def patched_differ(t: LinkThresholds, default: LinkThresholds) -> bool:
    """Whether the rules outside link.rules.yaml read differently under `t` than under `default`."""
    return (t.flaps, t.half_dead, t.window) != (default.flaps, default.half_dead, default.window)


def check(t: LinkThresholds) -> None:
    """ValueError when PromQL cannot write one of `t`'s windows (a fraction of a millisecond)."""
    _values(t)
