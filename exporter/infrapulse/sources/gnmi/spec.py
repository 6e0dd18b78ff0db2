"""The gNMI fabric source's spec (sources/spec.py)."""

from __future__ import annotations

from ..spec import SourceSpec
from .source import GnmiSource

SPECS = (
    SourceSpec(GnmiSource, signals=("network", "topology"), doctor="probes:gnmi", simulator="gnmi_target",
               dashboards=("infrapulse-correlation.json", "infrapulse-fabric.json"),
               alerts=("health-score.rules.yaml", "network.rules.yaml", "recording.rules.yaml",
                       "sharding.rules.yaml")),
)
