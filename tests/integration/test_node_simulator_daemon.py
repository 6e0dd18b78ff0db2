"""The node simulator feeding the daemon, the integration half of tests/test_node_simulator.py:
the demo part's sources, run in a daemon, serve live, moving counters on /metrics."""

from __future__ import annotations

import asyncio

import aiohttp

from conftest import running_daemon
from helpers import parse_exposition, samples_of, value
from infrapulse import config as config_mod
from infrapulse.simulate import node
from infrapulse.simulate.demo import DemoContext
from infrapulse.simulate.node import VICTIM_NETDEV
from infrapulse.simulate.scenarios import ScenarioBoard


async def test_demo_part_feeds_the_daemon(tmp_path):
    ctx = DemoContext(workdir=tmp_path, scenarios=ScenarioBoard({"pfc-storm"}))
    part = await node.demo_part(ctx)
    try:
        import yaml

        text = yaml.safe_dump({"interval": "1s", "sources": part.sources})
        config_mod.load_text(text, "<demo>")  # the fragment is valid config
        async with running_daemon(text) as daemon:
            url = f"http://127.0.0.1:{daemon.bound_port}/metrics"
            async with aiohttp.ClientSession() as session:
                seen = []
                for _ in range(60):
                    async with session.get(url) as resp:
                        values = parse_exposition(await resp.text())
                    frames = samples_of(values, "infrapulse_nic_pfc_pause_frames_total")
                    key = frozenset({"interface": VICTIM_NETDEV, "priority": "3", "direction": "rx"}.items())
                    if key in frames and (not seen or frames[key] != seen[-1]):
                        seen.append(frames[key])
                    if len(seen) >= 2:
                        break
                    await asyncio.sleep(0.25)
        assert len(seen) >= 2 and seen[1] > seen[0]  # live, moving counters
        ups = samples_of(values, "infrapulse_source_up")
        assert len(ups) == 10 + 8 and all(v == 1 for v in ups.values())
        # eno1 (i40e) maps to no family: up, but partial and empty in the coverage, not a quiet ok.
        assert value(values, "infrapulse_source_status_info", source="ethtool", target="eno1",
                     reason="partial") == 1
        assert value(values, "infrapulse_source_mapping_series", source="ethtool", target="eno1",
                     mapping="driver_stats") == 0
        assert value(values, "infrapulse_source_status_info", source="ethtool", target="ens10f0np0",
                     reason="ok") == 1  # bnxt_en maps
        assert value(values, "infrapulse_rdma_port_info", device="mlx5_0", port="1", link_layer="Ethernet",
                     netdev="ens1f0np0") == 1
    finally:
        await part.close()
