"""The workload source's spec (sources/spec.py): attribution join series for the blast radius."""

from __future__ import annotations

from ..spec import SourceSpec
from .source import WorkloadSource

SPECS = (
    SourceSpec(WorkloadSource, simulator="workloads", dashboards=("infrapulse-correlation.json",),
               alerts=("recording.rules.yaml",)),
)
