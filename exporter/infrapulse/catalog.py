"""The catalogue of every metric family infrapulse exports.

Each source module declares its families here at import time. The catalogue is the one
source of truth for a family's type, unit, help text and label names: the /metrics
collector reads help/type from it, and docs/metrics.md is generated from it (a test fails
when the committed file drifts).
"""

from __future__ import annotations

from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"
INFO = "info"  # a gauge whose value is always 1 and whose labels carry metadata

_TYPES = (COUNTER, GAUGE, HISTOGRAM, INFO)


@dataclass(frozen=True)
class Family:
    name: str
    type: str
    help: str
    labels: tuple[str, ...]
    unit: str = ""
    source: str = ""
    # Labels a series may carry in addition to `labels` (e.g. pod/namespace from DCGM).
    optional_labels: tuple[str, ...] = ()
    # A family re-exposed unchanged from a scraped exporter (serving `passthrough: true`): its
    # series are keyed by sorted (label, value) pairs, not by declared label order.
    passthrough: bool = False


_FAMILIES: dict[str, Family] = {}
# Passthrough families: named by the scraped engine, so kept apart from the documented catalogue.
_PASSTHROUGH: dict[str, Family] = {}
UNTYPED = "unknown"  # passthrough only: a family whose type the engine did not declare


def declare(
    name: str,
    type: str,
    help: str,
    labels: tuple[str, ...] | list[str] = (),
    *,
    unit: str = "",
    source: str = "",
    optional_labels: tuple[str, ...] | list[str] = (),
) -> Family:
    """Register a family and return it. Re-declaring the same family identically is a no-op."""
    if type not in _TYPES:
        raise ValueError(f"{name}: unknown metric type {type!r}")
    if not name.startswith("infrapulse_"):
        raise ValueError(f"{name}: every family is prefixed infrapulse_")
    if type == COUNTER and not name.endswith("_total"):
        raise ValueError(f"{name}: counters end in _total")
    if type == INFO and not name.endswith("_info"):
        raise ValueError(f"{name}: info families end in _info")
    family = Family(name, type, help, tuple(labels), unit, source, tuple(optional_labels))
    existing = _FAMILIES.get(name)
    if existing is not None and existing != family:
        raise ValueError(f"{name}: declared twice with different definitions")
    _FAMILIES[name] = family
    return family


def get(name: str) -> Family:
    family = _FAMILIES.get(name)
    return family if family is not None else _PASSTHROUGH[name]


def declare_passthrough(name: str, type: str, help: str) -> Family | None:
    """Register another exporter's family for re-exposure; None if the name is already taken
    with another type (by infrapulse or by a different engine), in which case it is skipped."""
    if type not in _TYPES + (UNTYPED,):
        raise ValueError(f"{name}: unknown metric type {type!r}")
    if name in _FAMILIES:
        return None
    existing = _PASSTHROUGH.get(name)
    if existing is not None:
        return existing if existing.type == type else None
    family = _PASSTHROUGH[name] = Family(name, type, help, (), source="passthrough", passthrough=True)
    return family


def all_families() -> list[Family]:
    return sorted(_FAMILIES.values(), key=lambda f: f.name)
