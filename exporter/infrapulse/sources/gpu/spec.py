"""The GPU sources' specs (sources/spec.py): NVML and dcgm-exporter ingestion."""

from __future__ import annotations

from ..spec import SourceSpec
from .dcgm import DcgmSource
from .nvml import NvmlSource

SPECS = (
    SourceSpec(NvmlSource, signals=("gpu",), doctor="probes:nvml", simulator="gpus",
               dashboards=("infrapulse-gpu.json",), alerts=("gpu.rules.yaml", "recording.rules.yaml")),
    SourceSpec(DcgmSource, signals=("gpu",), simulator="gpus",
               dashboards=("infrapulse-gpu.json",), alerts=("gpu.rules.yaml", "recording.rules.yaml")),
)
