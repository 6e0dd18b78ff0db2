"""The hardware inventory as a daemon serves it: /api/v1/sources on loopback carries the RDMA
ports, the GPUs and the source targets the store holds. The integration half of
tests/test_status_page.py."""

from __future__ import annotations

import aiohttp

from conftest import running_daemon
from health_fixtures import Feed
from test_status_page import _hardware


async def test_sources_api_carries_the_inventory():
    async with running_daemon("interval: 5s\nsources: {nvml: {enabled: false}}\n") as daemon:
        _hardware(Feed(daemon.store)).publish()
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{daemon.bound_port}/api/v1/sources") as resp:
                body = await resp.json()
    assert [p["device"] for p in body["inventory"]["rdma_ports"]] == ["mlx5_0", "mlx5_1"]
    assert [g["uuid"] for g in body["inventory"]["gpus"]] == ["GPU-a", "GPU-b"]
    assert {s["target"] for s in body["sources"]} >= {"mlx5_0", "mlx5_1", "ens1f0np0"}
