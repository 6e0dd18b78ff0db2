"""Windowed p50/p95/p99 TTFT and ITL per serving endpoint, as the score reads them.

The serving source keeps these itself (`sources/serving_window.py`: reset-aware histogram
deltas, engine restarts are not latency spikes, quantiles interpolated as histogram_quantile
does). This module is the one seam between that API and the score: it asks for the health
window and turns the answer into `EndpointLatency` values.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..store import Store

QUANTILES = (0.5, 0.95, 0.99)
_NAMES = {0.5: "p50", 0.95: "p95", 0.99: "p99"}


@dataclass(frozen=True)
class EndpointLatency:
    endpoint: str
    ttft: dict[float, float | None]  # quantile -> seconds (None: no requests in the window)
    itl: dict[float, float | None]
    requests_per_second: float | None
    window_seconds: float
    engine: str = ""
    resets: int = 0

    def as_json(self) -> dict:
        def q(d: dict[float, float | None]) -> dict:
            return {_NAMES[k]: (None if v is None else round(v, 6)) for k, v in d.items()}

        return {"engine": self.engine, "ttft_seconds": q(self.ttft), "itl_seconds": q(self.itl),
                "requests_per_second": None if self.requests_per_second is None
                else round(self.requests_per_second, 4),
                "window_seconds": round(self.window_seconds, 3), "restarts": self.resets}


def _quantiles(summary: dict | None) -> dict[float, float | None]:
    return {q: (summary or {}).get(_NAMES[q]) for q in QUANTILES}


def endpoint_latency(store: Store, window: float) -> dict[str, EndpointLatency]:
    """Per endpoint over the last `window` seconds; {} when this instance runs no serving source."""
    try:
        from .latency import serving_quantiles
    except ImportError:  # a build without the serving source
        return {}
    out = {}
    for endpoint, s in serving_quantiles(store, window).items():
        out[endpoint] = EndpointLatency(endpoint, _quantiles(s.get("ttft")), _quantiles(s.get("itl")),
                                        s.get("request_rate"), s.get("window") or 0.0,
                                        s.get("engine", ""), s.get("resets", 0))
    return out
