"""Every health signal (see base.py); this package re-exports what the scorer imports."""

from .base import (
    APPLICATION_XIDS,
    COUNT,
    CRITICAL_XIDS,
    EXPECTED_LABELS,
    FACTOR,
    FLAG,
    PER_SECOND,
    RATIO,
    SECONDS,
    SIGNALS,
    SPARSE_COUNTERS,
    Context,
    Measurement,
    Signal,
    counters_by_window,
    format_seconds,
)

__all__ = ["APPLICATION_XIDS", "COUNT", "CRITICAL_XIDS", "EXPECTED_LABELS", "FACTOR", "FLAG", "PER_SECOND",
           "RATIO", "SECONDS", "SIGNALS", "SPARSE_COUNTERS", "Context", "Measurement", "Signal",
           "counters_by_window", "format_seconds"]
