"""The active probes' specs (sources/spec.py): nccl-tests/perftest runs and the latency mesh."""

from __future__ import annotations

from ..spec import SourceSpec
from .mesh import MeshSource
from .source import ProbeSource

SPECS = (
    SourceSpec(ProbeSource, signals=("probe",), simulator="probe",
               dashboards=("infrapulse-baselines.json",), alerts=("probe.rules.yaml",)),
    SourceSpec(MeshSource, signals=("probe",), simulator="mesh",
               dashboards=("infrapulse-baselines.json", "infrapulse-fabric.json"),
               alerts=("mesh.rules.yaml",)),
)
