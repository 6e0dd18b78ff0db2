"""Source `ethtool` through the daemon, the integration half of tests/test_ethtool.py: the stats
fixture read by a running daemon and served on /metrics."""

from __future__ import annotations

import json

from conftest import running_daemon, scrape_until
from helpers import samples_of, value
from test_ethtool import FIXTURE_STATS


async def test_daemon_serves_nic_metrics(tmp_path):
    (tmp_path / "ens1f0np0.json").write_text(json.dumps(FIXTURE_STATS))
    config = f"interval: 1s\nsources:\n  ethtool:\n    stats_dir: {tmp_path}\n    interfaces: [ens1f0np0]\n"
    async with running_daemon(config) as daemon:
        values = await scrape_until(daemon, lambda v: samples_of(v, "infrapulse_nic_pfc_pause_frames_total"))
    assert value(values, "infrapulse_nic_pfc_pause_duration_seconds_total", interface="ens1f0np0",
                 priority="3", direction="rx") == 2.5
