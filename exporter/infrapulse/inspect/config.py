"""Config schema of the `inspect:` section: `InspectSettings` and its `switch_prometheus` block."""

from __future__ import annotations

from dataclasses import dataclass

from ..health.config import COMPONENTS
from ..schema import Bool, Duration, Float, Int, MapOf, SchemaError, Settings, Str, setting, settings


def _check(section: InspectSettings, path: str) -> None:
    for name in section.component_below:
        if name not in COMPONENTS:
            where = f"{path}.component_below.{name}" if path else f"component_below.{name}"
            raise SchemaError(where, f"unknown component (known: {', '.join(COMPONENTS)})")


@settings("Optional: a Prometheus query API for the switch side, on a node whose switches another "
          "infrapulse instance collects.")
@dataclass(kw_only=True, slots=True)
class SwitchPrometheusSettings(Settings):
    url: str = setting(Str(
        "Base URL of the Prometheus (or compatible) HTTP API, e.g. http://prometheus:9090. Empty: the switch "
        "side comes only from this daemon's own gNMI sources.", default="", pattern=r"(https?://\S+)?"))
    bearer_token_file: str = setting(Str("File holding a bearer token sent to that API (never stored in "
                                         "reports).", default=""))
    timeout: float = setting(Duration("Timeout of each query.", default="5s", min=0.1, max=60))


@settings("Inspections: when the score (or a component's) falls below a threshold, or on demand, compare "
          "each layer (queue, compute, network) before and since the drop and name a verdict. "
          "See docs/inspections.md.", check=_check)
@dataclass(kw_only=True, slots=True)
class InspectSettings(Settings):
    enabled: bool = setting(Bool("Run inspections (automatic and on demand).", default=True))
    score_below: float = setting(Float("An automatic inspection starts when the overall score falls below "
                                       "this (0: never on the overall score).", default=80, min=0, max=100))
    component_below: dict[str, float] = setting(MapOf(
        "Per-component thresholds, e.g. {network: 70}: an automatic inspection also starts when that "
        "component's score falls below its value.", value=Float(min=0, max=100), default={}))
    rearm_margin: float = setting(Float("After a crossing, the score must climb this many points above the "
                                        "threshold before another crossing counts (a flapping score does not "
                                        "start a storm).", default=5, min=0, max=50))
    before: float = setting(Duration("Length of the window before the drop that the values are compared "
                                     "with.", default="2m", min=1, max=3600))
    since: float = setting(Duration(
        "Length of the window since the crossing: an automatic inspection runs this long after the crossing; "
        "an on-demand one compares the last `since` with the `before` window ending there.",
        default="30s", min=1, max=3600))
    min_interval: float = setting(Duration("At least this long between two automatic inspections.",
                                           default="10m", min=0))
    on_demand_min_interval: float = setting(Duration("At least this long between two on-demand inspections "
                                                     "(POST /api/v1/inspections answers 429 before).",
                                                     default="30s", min=0))
    allow_unauthenticated: bool = setting(Bool("Accept POST /api/v1/inspections without basic auth. Off: the "
                                               "web config's basic_auth_users must admit the caller (403 "
                                               "otherwise).", default=False))
    timeout: float = setting(Duration("An inspection taking longer (the switch-side query included) is "
                                      "abandoned.", default="20s", min=1, max=600))
    keep: int = setting(Int("How many reports are kept under state_dir/inspections/.", default=50, min=1,
                            max=1000))
    max_bytes: int = setting(Int("Upper bound of the stored reports' total size; the oldest go first.",
                                 default=5 * 1024 * 1024, min=64 * 1024))
    max_series: int = setting(Int("At most this many (target, value) series are recorded per pass; more are "
                                  "counted in infrapulse_inspection_series_dropped_total.",
                                  default=2000, min=10))
    switch_prometheus: SwitchPrometheusSettings = setting(SwitchPrometheusSettings.SCHEMA)


CONFIG = InspectSettings.SCHEMA
