"""The node NIC sources' specs (sources/spec.py): RDMA ports, NIC driver statistics, RoCE
congestion-control configuration."""

from __future__ import annotations

from ..spec import SourceSpec
from .ethtool import EthtoolSource
from .infiniband import InfinibandSource
from .roce_config import RoceConfigSource

SPECS = (
    SourceSpec(InfinibandSource, signals=("network", "link", "rdma", "roce_config"),
               simulator="node", dashboards=("infrapulse-correlation.json", "infrapulse-fabric.json"),
               alerts=("link.rules.yaml", "rdma.rules.yaml", "recording.rules.yaml", "roce.rules.yaml")),
    SourceSpec(EthtoolSource, signals=("network", "link"), simulator="node",
               dashboards=("infrapulse-correlation.json", "infrapulse-fabric.json"),
               alerts=("link.rules.yaml", "network.rules.yaml", "recording.rules.yaml")),
    SourceSpec(RoceConfigSource, signals=("roce_config",), simulator="roce_cc",
               dashboards=("infrapulse-fabric.json",), alerts=("roce.rules.yaml",)),
)
