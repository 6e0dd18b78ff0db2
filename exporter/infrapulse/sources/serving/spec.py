"""The serving-engine source's spec (sources/spec.py)."""

from __future__ import annotations

from ..spec import SourceSpec
from .source import ServingSource

SPECS = (
    SourceSpec(ServingSource, signals=("serving", "gpu"), doctor="probes:serving",
               simulator="serving_engines",
               dashboards=("infrapulse-correlation.json", "infrapulse-serving.json"),
               alerts=("recording.rules.yaml", "serving.rules.yaml")),
)
