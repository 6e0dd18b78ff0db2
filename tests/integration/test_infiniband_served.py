"""Source `infiniband` through the daemon, the integration half of tests/test_infiniband.py: the
fixture tree read by a running daemon and served on /metrics."""

from __future__ import annotations

import test_infiniband
from conftest import running_daemon, scrape_until
from helpers import value

tree = test_infiniband.tree  # the fixture tree of the unit half


# -- through the daemon ----------------------------------------------------------------------


async def test_daemon_serves_infiniband_metrics(tree):
    config = f"interval: 1s\nsources:\n  infiniband:\n    sysfs_root: {tree.root}\n"
    key = ("infrapulse_rdma_port_transmitted_bytes_total",
           frozenset({"device": "mlx5_0", "port": "1"}.items()))
    async with running_daemon(config) as daemon:
        values = await scrape_until(daemon, lambda v: key in v)
    assert value(values, "infrapulse_rdma_port_transmitted_bytes_total", device="mlx5_0", port="1") == 4000
    assert value(values, "infrapulse_source_up", source="infiniband", target="mlx5_0") == 1
