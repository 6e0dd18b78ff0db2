"""The status page's parts without a browser (tests/e2e/test_health_page.py renders it in Chromium):
runbook links for every signal, SLO colours at their boundaries, why a latency is missing, the
sparkline's axis, folded details, and the hardware inventory (a daemon's /api/v1/sources carrying it
is checked in tests/integration/test_status_page_served.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from health_fixtures import Feed
from infrapulse.health import page
from infrapulse.health.runbooks import SIGNAL_RUNBOOKS, place_of, runbook_for, runbook_url
from infrapulse.health.signals import SIGNALS
from infrapulse.health.sparkline import sparkline_svg, tick_step
from infrapulse.inventory import inventory

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = ROOT / "docs" / "runbooks"


@pytest.mark.parametrize("signal", sorted(SIGNALS))
def test_every_signal_links_a_runbook_that_exists(signal):
    for target in ("leaf03 Ethernet12 queue 3", "mlx5_0 port 1", "GPU 0", "endpoint llama",
                   "ens1f0np0 priority 3"):
        alert = runbook_for(signal, target, {"leaf03"})
        assert (RUNBOOKS / f"{alert}.md").is_file(), (signal, target, alert)


def test_runbook_mapping_names_only_real_signals_and_picks_the_place():
    assert set(SIGNAL_RUNBOOKS) <= set(SIGNALS)
    assert place_of("leaf03 Ethernet12", {"leaf03"}) == "switch"
    assert place_of("mlx5_0 port 1", {"leaf03"}) == "rdma"
    assert place_of("ens1f0np0 priority 3", {"leaf03"}) == "node"
    assert runbook_for("link_flaps", "leaf03 Ethernet12", {"leaf03"}) == "InfrapulseSwitchInterfaceFlapping"
    assert runbook_for("link_flaps", "mlx5_0 port 1") == "InfrapulseRdmaPortFlapping"
    assert runbook_for("link_flaps", "ens1f0np0") == "InfrapulseNicLinkFlapping"
    # No alert of its own: the health-score runbook, which explains how to read detractors.
    assert runbook_for("queue_drop_ratio", "leaf03 Ethernet12", {"leaf03"}) == "InfrapulseHealthScoreLow"
    assert runbook_url("https://wiki.example/rb", "InfrapulseGpuLost") == "https://wiki.example/rb/InfrapulseGpuLost.md"


@pytest.mark.parametrize("value,expected", [(1.5, "slo-ok"), (1.51, "slo-warn"), (2.99, "slo-warn"),
                                            (3.0, "slo-bad"), (51.0, "slo-bad"), (None, "")])
def test_slo_class_at_the_boundaries(value, expected):
    assert page.slo_class(value, 1.5, 3.0) == expected


def test_missing_latency_says_why():
    busy = {"requests_per_second": 2.0}
    assert page.missing_reason("tgi", "ttft", busy) == "TGI exports no time-to-first-token metric"
    assert "histogram_latencies=true" in page.missing_reason("trtllm", "ttft", busy)
    idle = {"requests_per_second": 0.0}
    assert page.missing_reason("vllm", "ttft", idle) == "no request finished in the window"
    assert page.missing_reason("vllm", "itl", busy) == "no observation of it in the window"


@pytest.mark.parametrize("span,step", [(600, 120), (3600, 900), (86400, 21600), (300, 60)])
def test_sparkline_ticks_are_round_clock_times(span, step):
    assert tick_step(span) == step
    now = 1_700_000_000.0
    bands = {"degraded": 80.0, "critical": 50.0}
    svg = sparkline_svg([(now - span / 2, 70.0), (now - 10, 95.0)], now, span, bands)
    ticks = re.findall(r'class="xtick"[^>]*>([^<]+)<', svg)
    assert ticks[-1] == "now" and 2 <= len(ticks) - 1 <= 5
    assert 'data-latest="95"' in svg and 'data-min="70"' in svg and ">min 70 at " in svg


def test_sparkline_breaks_at_unknown_scores_and_says_when_empty():
    now = 1_700_000_000.0
    svg = sparkline_svg([(now - 300, 90.0), (now - 200, None), (now - 100, 80.0)], now, 600)
    assert svg.count("<polyline") == 2 and 'data-points="2"' in svg
    assert "no score yet" in sparkline_svg([], now, 600)


def test_long_partial_details_are_folded():
    short = {"up": True, "message": "", "skipped": ["one file skipped"]}
    assert page._detail(short) == "one file skipped"
    long = {"up": True, "message": "a; b", "skipped": ["a" * 150, "b"]}
    folded = page._detail(long)
    assert folded.startswith('<details class="fold"><summary>' + "a" * 100 + "… (+1 more)</summary>")
    assert folded.count("<li>") == 2  # every skipped item once, not again in the message
    down = {"up": False, "message": "timeout", "skipped": ["stale"]}
    assert page._detail(down) == "timeout"


def test_scenario_toggles_only_with_a_board():
    assert page.scenario_toggles(None) == ""
    html = page.scenario_toggles({"active": ["pfc-storm"], "known": {"pfc-storm": "PFC", "xid": "XID 79"}})
    assert 'data-scenario="pfc-storm" data-active="true">stop pfc-storm' in html
    assert 'data-scenario="xid" data-active="false">start xid' in html
    assert f'<script src="{page.SCRIPT}" defer></script>' in html and "onclick" not in html


def _hardware(feed: Feed) -> Feed:
    gpu1 = ("1", "GPU-b", "NVIDIA H200", "0000:9A:00.0", "570", "12.8")
    feed.gauge("nvml", "infrapulse_gpu_info", (*gpu1, "", "", ""), 1)
    feed.gauge("nvml", "infrapulse_gpu_info", (*gpu1, "1", "1g.18gb", "MIG-x"), 1)  # a MIG instance of it
    feed.gauge("nvml", "infrapulse_gpu_info", ("0", "GPU-a", "NVIDIA H200", "0000:18:00.0", "570", "12.8",
                                               "", "", ""), 1)
    feed.gauge("nvml", "infrapulse_gpu_healthy", ("0", "GPU-a", "", "", "", "", ""), 0)
    feed.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_1", "1", "InfiniBand", ""), 1, "mlx5_1")
    feed.gauge("infiniband", "infrapulse_rdma_port_state", ("mlx5_1", "1"), 1, "mlx5_1")
    feed.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_0", "1", "Ethernet", "ens1f0np0"), 1,
               "mlx5_0")
    feed.gauge("infiniband", "infrapulse_rdma_port_state", ("mlx5_0", "1"), 4, "mlx5_0")
    feed.gauge("infiniband", "infrapulse_rdma_port_rate_bytes_per_second", ("mlx5_0", "1"), 5e10, "mlx5_0")
    feed.gauge("ethtool", "infrapulse_nic_driver_stats", ("ens1f0np0",), 134, "ens1f0np0")
    return feed


def test_inventory_lists_gpus_ports_and_interfaces():
    from infrapulse.sources import registry

    registry()  # declares the families
    inv = inventory(_hardware(Feed()).publish())
    assert [(g["gpu"], g["healthy"], g.get("mig_instances")) for g in inv["gpus"]] == [
        ("0", False, None), ("1", None, 1)]
    assert inv["rdma_ports"] == [
        {"device": "mlx5_0", "port": "1", "link_layer": "Ethernet", "netdev": "ens1f0np0", "hca_type": "",
         "firmware_version": "", "state": "ACTIVE", "rate_gbps": 400.0},
        {"device": "mlx5_1", "port": "1", "link_layer": "InfiniBand", "netdev": "", "hca_type": "",
         "firmware_version": "", "state": "DOWN", "rate_gbps": None}]
    assert inv["interfaces"] == [{"interface": "ens1f0np0", "driver_stats": 134}]
