"""The `mesh` source's config: a bad key is an error naming it, and the source is off unless
enabled. (The source on loopback sockets: tests/integration/test_mesh.py.)"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from infrapulse.config import ConfigError, load_text
from infrapulse.sources.probe.mesh import MeshSource
from infrapulse.sources.probe.mesh_config import MeshSettings


@pytest.mark.parametrize("section,key,reason", [
    ({"dscp": 64}, "sources.mesh.dscp", "must be <= 63"),
    ({"local_addresses": ["10.0.0.300"]}, "sources.mesh.local_addresses[0]", "expected an IP address"),
    ({"port": 0, "peers": [{"address": "10.0.0.2"}]}, "sources.mesh.peers[0].port", "required when"),
    ({"size": 20}, "sources.mesh.size", "must be >= 28"),
    ({"timeout": "30s"}, "sources.mesh.timeout", "must be at most 10s"),
])
def test_config_errors_name_the_key(section: dict[str, Any], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_text(yaml.safe_dump({"sources": {"mesh": section}}))
    assert err.value.key == key and reason in err.value.reason


def test_off_by_default() -> None:
    config = load_text("").sources["mesh"]
    assert not MeshSource.wanted(config)
    assert isinstance(config, MeshSettings)
    defaults = (config.port, config.probe_interval, config.max_peers, config.dscp)
    assert defaults == (9478, 5.0, 64, 0)
