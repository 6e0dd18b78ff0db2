"""The SONiC profile over gRPC, the integration half of tests/test_gnmi_sonic_real.py: the
simulator sends the shapes of the real sonic-gnmi replies from a served target (Broadcom and
Marvell pause counters, priority groups, an LLDP neighbour removed ON_CHANGE), and a profile with
a wrong path shows in the daemon's metrics, its sources API, its health report and status page."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from conftest import running_daemon, scrape_until
from gnmi_support import (
    data_series,
    expected_series,
    running_source,
    serving,
    status_value,
    target_entry,
    wait_for,
)
from helpers import render_store, value
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch

# -- over gRPC: the simulator sends the same shapes --------------------------------------------


@pytest.mark.parametrize("platform", ["broadcom", "marvell"])
async def test_platform_pause_counters_and_priority_groups_over_grpc(platform):
    """Mellanox is in test_gnmi_profiles (profile sonic); Broadcom (ON2OFF + PFC watchdog
    estimate) and Marvell (pause quanta) answer other per-field paths, and the rest answer {}.
    Read with sonic-202511, which adds the priority-group watermarks."""
    switch = SimSwitch("leaf01", "sonic", ports=3, neighbors={1: ("gpu-node-02", "ens1f0np0")}, frozen=True,
                       platform=platform)
    target = GnmiTarget(switch)
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s"},
        "targets": [target_entry(target, profile="sonic-202511")],
    }) as (_, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0, what="sync")
        assert data_series(store, "leaf01") == expected_series(switch, profile="sonic-202511")
        headroom = data_series(store, "leaf01")[
            ("infrapulse_switch_priority_group_watermark_bytes", ("leaf01", "Ethernet4", "3", "headroom"))]
        assert headroom == 901.0  # 300 * pg + port index
        coverage = store.status[("gnmi", "leaf01")].coverage
        assert coverage["COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION_US"].series == 0
        assert coverage["COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PKTS"].series == 3
        assert sum(cov.unmapped for cov in coverage.values()) == 0


async def test_lldp_neighbor_removed_over_grpc_on_change():
    switch = SimSwitch("leaf01", "sonic", ports=2, neighbors={0: ("gpu-node-01", "ens1f0np0"),
                                                             1: ("gpu-node-02", "ens1f0np0")}, frozen=True)
    target = GnmiTarget(switch)
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "30s"}, "targets": [target_entry(target)],
    }) as (_, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0, what="sync")
        lldp = "infrapulse_switch_lldp_neighbor_info"
        assert (lldp, ("leaf01", "Ethernet0", "gpu-node-01", "ens1f0np0")) in data_series(store, "leaf01")
        switch.remove_neighbor("Ethernet0")
        await wait_for(lambda: (lldp, ("leaf01", "Ethernet0", "gpu-node-01", "ens1f0np0"))
                       not in data_series(store, "leaf01"), what="neighbour removed")
        assert (lldp, ("leaf01", "Ethernet4", "gpu-node-02", "ens1f0np0")) in data_series(store, "leaf01")


WRONG_PROFILE = """
description: SONiC with a typo in one field name
encodings: [json_ietf]
strip_module_prefixes: false
interface_table: {path: PORT_TABLE, alias: alias}
streams:
  - target: COUNTERS_DB
    alias_keys: true
    subscriptions: [COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PKTS,
                    COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_OCTETS]
  - target: APPL_DB
    subscriptions: [{path: PORT_TABLE, mode: on_change}]
metrics:
  - {path: "COUNTERS/Ethernet*/*/{interface}/SAI_PORT_STAT_PFC_{priority:\\\\d}_RX_PKT",
     family: infrapulse_switch_pfc_pause_frames_total, labels: {direction: rx}}
  - {path: "COUNTERS/Ethernet*/*/{interface}/SAI_PORT_STAT_IF_IN_OCTETS",
     family: infrapulse_switch_interface_received_bytes_total}
ignore: ["PORT_TABLE/*/*"]
"""


async def test_a_wrong_profile_path_shows_in_metrics_and_the_sources_api(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "sonic-typo.yaml").write_text(WRONG_PROFILE)
    switch = SimSwitch("leaf01", "sonic", ports=2, frozen=True)
    target = GnmiTarget(switch)
    pfc = "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PKTS"
    async with serving(target):
        config = f"""
sources:
  gnmi:
    profiles_dir: {profiles}
    defaults: {{insecure: true, sample_interval: 1s}}
    targets: [{{name: leaf01, address: "{target.address}", profile: sonic-typo}}]
"""
        async with running_daemon(config) as daemon:
            values = await scrape_until(daemon, lambda v: v.get(
                ("infrapulse_source_unmapped_total", frozenset({"source": "gnmi", "target": "leaf01",
                                                                "mapping": pfc}.items())), 0) >= 4)
            labels = {"source": "gnmi", "target": "leaf01", "mapping": pfc}
            assert value(values, "infrapulse_source_mapping_series", **labels) == 0.0
            assert value(values, "infrapulse_source_unmapped_total", **labels) >= 4.0  # 2 ports x 2 samples
            good = {**labels, "mapping": "COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_OCTETS"}
            assert value(values, "infrapulse_source_mapping_series", **good) == 2.0
            assert value(values, "infrapulse_source_unmapped_total", **good) == 0.0
            assert value(values, "infrapulse_switch_interface_received_bytes_total",
                         switch="leaf01", interface="Ethernet4") == 2_000_000.0
            async with aiohttp.ClientSession() as http, \
                    http.get(f"http://127.0.0.1:{daemon.bound_port}/api/v1/sources") as resp:
                api = {(s["source"], s["target"]): s for s in (await resp.json())["sources"]}
            coverage = api[("gnmi", "leaf01")]["coverage"]
            assert pfc in coverage["empty"]
            assert coverage["unmapped_example"]["mapping"] == pfc
            assert coverage["unmapped_example"]["sample"] in (
                "/COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PKTS/etp1/SAI_PORT_STAT_PFC_3_RX_PKTS",
                "/COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PKTS/etp2/SAI_PORT_STAT_PFC_3_RX_PKTS")
            assert render_store(daemon.store)  # the in-process render agrees with the scrape


async def test_a_wrong_profile_path_shows_in_the_health_report_and_the_status_page(tmp_path):
    """The same silent loss reaches the person on call: a coverage note beside the score, in
    /api/v1/health and on the status page, naming the switch and how many paths map to nothing."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "sonic-typo.yaml").write_text(WRONG_PROFILE)
    target = GnmiTarget(SimSwitch("leaf01", "sonic", ports=2, frozen=True))
    pfc = "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PKTS"
    async with serving(target):
        config = f"""
health: {{interval: 1s}}
sources:
  gnmi:
    profiles_dir: {profiles}
    defaults: {{insecure: true, sample_interval: 1s}}
    targets: [{{name: leaf01, address: "{target.address}", profile: sonic-typo}}]
"""
        async with running_daemon(config) as daemon, aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{daemon.bound_port}"
            await scrape_until(daemon, lambda v: v.get(
                ("infrapulse_source_unmapped_total", frozenset({"source": "gnmi", "target": "leaf01",
                                                                "mapping": pfc}.items())), 0) >= 4)
            async with http.get(f"{base}/api/v1/sources") as resp:
                coverage = {(s["source"], s["target"]): s for s in (await resp.json())["sources"]}[
                    ("gnmi", "leaf01")]["coverage"]
            note = None
            for _ in range(50):  # the next health pass picks the coverage up (interval 1s)
                async with http.get(f"{base}/api/v1/health") as resp:
                    notes = (await resp.json())["coverage_notes"]
                note = next((n for n in notes if (n["source"], n["target"]) == ("gnmi", "leaf01")), None)
                if note is not None:
                    break
                await asyncio.sleep(0.2)
            assert note is not None, notes
            assert pfc in note["empty_mappings"] and note["mappings"] == coverage["mappings"] == 3
            assert note["empty"] == len(coverage["empty"])
            assert note["sentence"] == f"leaf01: {note['empty']} of 3 paths map to nothing"
            async with http.get(f"{base}/") as resp:
                page = await resp.text()
            assert note["sentence"] in page
