"""The kmsg source's spec (sources/spec.py): kernel-log events per PCI function."""

from __future__ import annotations

from ..spec import SourceSpec
from .source import KmsgSource

SPECS = (
    SourceSpec(KmsgSource, signals=("kmsg",), simulator="kmsg",
               dashboards=("infrapulse-gpu.json", "infrapulse-fabric.json"), alerts=("kmsg.rules.yaml",)),
)
