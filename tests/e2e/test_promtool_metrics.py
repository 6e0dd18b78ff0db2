"""`promtool check metrics` on a live daemon's /metrics (the demo: every simulator, every source)
finds exactly what docs/metrics.md lists under "promtool check metrics", each with its reason.
A new finding fails here until the family is fixed or the finding explained there."""

from __future__ import annotations

import re
import shutil
import subprocess

import aiohttp

from conftest import ROOT, free_port
from infrapulse.daemon import Daemon
from infrapulse.simulate import demo
from infrapulse.simulate.nvml_fake import open_fake
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources.gpu.nvml import OPEN_FAKE_KEY
from test_status_page_demo import _until

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def documented_findings() -> set[tuple[str, str]]:
    text = (ROOT / "docs" / "metrics.md").read_text()
    section = text.split("## `promtool check metrics`", 1)[1]
    rows = re.findall(r"^\| `(infrapulse_\w+)` \| (.+?) \| (.+?) \|$", section, re.MULTILINE)
    assert all(len(why) > 40 for _, _, why in rows)  # each finding comes with a reason
    return {(name, said) for name, said, _ in rows}


async def test_promtool_findings_on_the_demo_are_the_documented_ones(short_workdir):
    board = ScenarioBoard()
    ctx = demo.DemoContext(workdir=short_workdir, scenarios=board)
    parts = await demo.start_parts(ctx)
    port = free_port()
    daemon = Daemon(demo.demo_config(parts, f"127.0.0.1:{port}", "1s"), hostname=ctx.hostname,
                    source_options={OPEN_FAKE_KEY: open_fake})
    try:
        await daemon.start()
        # Every demo source has published (the gNMI switches sync last) and health has scored.
        await _until(lambda: {src for (src, _), _ in daemon.store.snapshots()} >= {
            "infiniband", "ethtool", "nvml", "dcgm", "gnmi", "serving", "health"},
            lambda: f"every source (have {sorted({src for (src, _), _ in daemon.store.snapshots()})})", 30)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
                exposition = await resp.text()
    finally:
        await daemon.stop()
        await demo.close_parts(parts)
    families = set(re.findall(r"^# TYPE (\S+)", exposition, re.MULTILINE))
    assert len(families) > 120 and "infrapulse_rdma_hw_counter_total{" in exposition
    result = subprocess.run([PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, text=True,
                            timeout=120)
    findings = set()
    for line in (result.stdout + result.stderr).splitlines():
        name, _, said = line.partition(" ")
        findings.add((name, said))
    assert findings == documented_findings()
    assert result.returncode == (3 if findings else 0)  # promtool: 3 = lint problems only
