"""Sentences a person can act on: "leaf03 Ethernet12 queue 3: 7.9% of packets ECN-marked over
the last 1m (bad at 5%)".

Values and thresholds are written in the signal's unit (percent, per second, seconds, counts),
so the API, the CLI and the status page all say the same thing.
"""

from __future__ import annotations

from .signals import COUNT, FACTOR, FLAG, PER_SECOND, RATIO, SECONDS, Measurement, Signal, format_seconds


def format_window(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text


def _percent(value: float) -> str:
    pct = value * 100
    if pct == 0:
        return "0%"
    if abs(pct) >= 1:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%"


def format_value(unit: str, value: float | None) -> str:
    if value is None:
        return "-"
    if unit == RATIO:
        return _percent(value)
    if unit == PER_SECOND:
        return f"{value:,.0f}/s" if value >= 100 else f"{value:.3g}/s"
    if unit == SECONDS:
        return format_seconds(value)
    if unit == COUNT:
        return f"{value:g}"
    if unit == FACTOR:
        return f"{value:.3g}"
    if unit == FLAG:
        return "yes" if value >= 1 else "no"
    return f"{value:g}"


def format_threshold(unit: str, value: float) -> str:
    """Thresholds are round numbers: write them without spurious digits (0.05 -> 5%)."""
    if unit == RATIO:
        if 0 < value < 1e-8:  # bit error ratios: 1e-12 is "1e-10%", not "0%"
            return f"{value * 100:g}%"
        return f"{round(value * 100, 6):g}%"
    if unit == PER_SECOND:
        return f"{value:g}/s"
    if unit == SECONDS:
        return format_seconds(value)
    return f"{value:g}"


def sentence(signal: Signal, m: Measurement, bad: float, window_seconds: float) -> str:
    """One line naming the target, the measured value, the window and the threshold."""
    if signal.unit == FLAG:
        detail = f" ({m.note})" if m.note else ""
        return f"{m.target}: {signal.phrase}{detail}"
    text = signal.phrase.format(value=format_value(signal.unit, m.value))
    over = f" over the last {format_window(window_seconds)}" if signal.window != "instant" else ""
    context = "; ".join(x for x in (m.note, f"bad at {format_threshold(signal.unit, bad)}") if x)
    return f"{m.target}: {text}{over} ({context})"
