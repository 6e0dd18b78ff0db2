"""Which exposition a scrape asked for, as prometheus_client's content negotiation decided it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from prometheus_client import exposition
from prometheus_client.openmetrics import exposition as om_exposition

UNDERSCORES = om_exposition.UNDERSCORES
ALLOW_UTF8 = om_exposition.ALLOWUTF8


@dataclass(frozen=True)
class Style:
    """The format (text 0.0.4 or OpenMetrics) and the name escaping scheme of one exposition."""

    openmetrics: bool = False
    escaping: str = UNDERSCORES


def style_of(encoder: Callable[..., bytes]) -> Style | None:
    """The style of an encoder `exposition.choose_encoder` returned, or None for one this
    package does not write (the dots and values escapings: prometheus_client renders those)."""
    func: Any = encoder
    escaping = UNDERSCORES
    if isinstance(encoder, partial):
        func = encoder.func
        escaping = encoder.keywords.get("escaping", UNDERSCORES)
    if escaping not in (UNDERSCORES, ALLOW_UTF8):
        return None
    if func is exposition.generate_latest:
        return Style(False, escaping)
    if func is om_exposition.generate_latest:
        return Style(True, escaping)
    return None
