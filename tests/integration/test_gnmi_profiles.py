"""Each shipped profile against the in-repo gNMI target: known values in, exact samples out."""

from __future__ import annotations

import json

import pytest

from conftest import running_daemon
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
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch, pb

NEIGHBORS = {0: ("gpu-node-01", "ens1f0np0"), 2: ("gpu-node-03", "ens1f0np0")}

CASES = [
    ("openconfig", pb.PROTO),
    ("openconfig", pb.JSON_IETF),
    ("openconfig", pb.JSON),
    ("sonic", pb.JSON_IETF),
    ("nvidia-cumulus", pb.PROTO),
    ("nvidia-cumulus", pb.JSON_IETF),
    ("nvidia-cumulus", pb.JSON),
    ("arista-eos", pb.PROTO),
    ("arista-eos", pb.JSON_IETF),
    ("arista-eos", pb.JSON),
]


@pytest.mark.parametrize("profile,encoding", CASES, ids=[f"{p}-{pb.Encoding.Name(e)}" for p, e in CASES])
async def test_profile_streams_exact_samples(profile, encoding):
    switch = SimSwitch("leaf01", profile, ports=3, neighbors=NEIGHBORS, frozen=True)
    target = GnmiTarget(switch, encodings=(encoding,))
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s"},
        "targets": [target_entry(target)],
    }) as (source, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0, what="sync")
        session = source.sessions["leaf01"]
        assert session.encoding == pb.Encoding.Name(encoding).lower()
        assert data_series(store, "leaf01") == expected_series(switch)
        assert status_value(store, "leaf01", "infrapulse_switch_malformed_updates_total") == 0.0
        assert status_value(store, "leaf01", "infrapulse_switch_updates_total") > 0
        assert store.status[("gnmi", "leaf01")].reason == "ok"


async def test_capabilities_pick_the_best_encoding_the_profile_allows():
    # openconfig prefers PROTO; a switch offering only JSON and JSON_IETF gets JSON_IETF (2nd choice)
    switch = SimSwitch("leaf01", "openconfig", ports=1, frozen=True)
    target = GnmiTarget(switch, encodings=(pb.JSON, pb.JSON_IETF))
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s"}, "targets": [target_entry(target)],
    }) as (source, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0)
        assert source.sessions["leaf01"].encoding == "json_ietf"


async def test_encoding_the_switch_lacks_is_a_clear_reason():
    switch = SimSwitch("leaf01", "sonic", ports=1, frozen=True)  # speaks JSON_IETF only
    target = GnmiTarget(switch)
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s"},
        "targets": [target_entry(target, profile="nvidia-cumulus", encoding="proto")],  # wants PROTO
    }) as (_, store):
        await wait_for(lambda: ("gnmi", "leaf01") in store.status
                       and store.status[("gnmi", "leaf01")].reason == "encoding")
        assert "JSON_IETF" in store.status[("gnmi", "leaf01")].message
        assert status_value(store, "leaf01", "infrapulse_switch_up") == 0.0


@pytest.mark.parametrize("profile,encoding", [("openconfig", pb.PROTO), ("arista-eos", pb.JSON_IETF),
                                              ("nvidia-cumulus", pb.JSON)])
async def test_deletes_drop_series(profile, encoding):
    switch = SimSwitch("leaf01", profile, ports=3, neighbors=NEIGHBORS, frozen=True)
    target = GnmiTarget(switch, encodings=(encoding,))
    # a long sample interval: series may only leave through the delete, not through expiry
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "30s"}, "targets": [target_entry(target)],
    }) as (_, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0)
        before = expected_series(switch)
        assert data_series(store, "leaf01") == before
        gone_port = switch.ports[1].name
        neighbor_port = switch.ports[2].name
        switch.remove_port(gone_port)
        switch.remove_neighbor(neighbor_port)

        def lanz_of_gone_port(key):  # LANZ records are events: their series leave by expiry, not deletes
            family, labels = key
            return family.endswith("queue_depth_bytes") and profile == "arista-eos" and labels[1] == gone_port

        def deleted():
            keys = [k for k in data_series(store, "leaf01") if not lanz_of_gone_port(k)]
            return not any(labels[1] == gone_port for _, labels in keys) and \
                not any(f.endswith("lldp_neighbor_info") and labels[1] == neighbor_port for f, labels in keys)

        await wait_for(deleted, what="deletes applied")
        after = data_series(store, "leaf01")
        assert {k: v for k, v in after.items() if not lanz_of_gone_port(k)} == expected_series(switch)
        assert (profile == "arista-eos") == any(lanz_of_gone_port(k) for k in after)
        # the other LLDP neighbour is untouched
        assert ("infrapulse_switch_lldp_neighbor_info",
                ("leaf01", switch.ports[0].name, "gpu-node-01", "ens1f0np0")) in data_series(store, "leaf01")


async def test_on_change_oper_status_and_counters_advance_over_metrics():
    switch = SimSwitch("leaf01", "openconfig", ports=2, frozen=True)
    target = GnmiTarget(switch)
    async with serving(target):
        config = f"""
sources:
  gnmi:
    defaults: {{insecure: true, sample_interval: 1s}}
    targets: [{{name: leaf01, address: "{target.address}", profile: openconfig}}]
"""
        async with running_daemon(config) as daemon:
            await wait_for(lambda: status_value(daemon.store, "leaf01", "infrapulse_switch_up") == 1.0)
            metrics = render_store(daemon.store)
            assert value(metrics, "infrapulse_switch_interface_oper_up", switch="leaf01",
                         interface="Ethernet2") == 1.0
            assert value(metrics, "infrapulse_switch_up", switch="leaf01") == 1.0
            assert value(metrics, "infrapulse_source_up", source="gnmi", target="leaf01") == 1.0
            switch.port("Ethernet2").oper_up = False
            switch.port("Ethernet1").in_octets += 12345
            await wait_for(lambda: value(render_store(daemon.store), "infrapulse_switch_interface_oper_up",
                                         switch="leaf01", interface="Ethernet2") == 0.0, what="oper down")
            await wait_for(lambda: value(render_store(daemon.store),
                                         "infrapulse_switch_interface_received_bytes_total",
                                         switch="leaf01", interface="Ethernet1") == 1_012_345.0,
                           what="sample")
            # the status API shows the switch with its reason
            from infrapulse.http import sources_status
            api = {(s["source"], s["target"]): s for s in sources_status(daemon.store)}
            assert api[("gnmi", "leaf01")]["up"] is True


async def test_json_ietf_subtrees_keep_list_keys_out_of_metric_names():
    """Queues and LLDP neighbours arrive as lists inside one JSON_IETF value per interface."""
    switch = SimSwitch("leaf01", "arista-eos", ports=1, neighbors={0: ("gpu-node-01", "ens1f0np0")},
                       frozen=True)
    target = GnmiTarget(switch, encodings=(pb.JSON_IETF,))
    seen_raw = []
    original = target.Subscribe

    async def spy(request_iterator, context):
        async for resp in original(request_iterator, context):
            if resp.HasField("update"):
                for u in resp.update.update:
                    seen_raw.append(u.val.json_ietf_val)
            yield resp

    target.Subscribe = spy
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s"}, "targets": [target_entry(target)],
    }) as (_, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0)
        raw = [json.loads(r) for r in seen_raw if r]
        # the quirks really were on the wire: module-qualified members, 64-bit numbers as strings
        assert any("arista-intf-augments:priority" in doc for doc in raw if isinstance(doc, dict))
        queues = next(doc for doc in raw if isinstance(doc, dict) and "openconfig-qos:queue" in doc)
        ecn = queues["openconfig-qos:queue"][3]["state"]["arista-qos-augments:ecn-marked-pkts"]
        assert ecn == "30"
        names = {family for family, _ in data_series(store, "leaf01")}
        assert names <= {f"infrapulse_switch_{n}" for n in (
            "interface_received_bytes_total", "interface_transmitted_bytes_total", "interface_errors_total",
            "interface_discards_total", "interface_fcs_errors_total", "interface_carrier_transitions_total",
            "interface_oper_up", "pfc_pause_frames_total", "queue_transmitted_packets_total",
            "queue_dropped_packets_total", "queue_ecn_marked_packets_total", "lldp_neighbor_info",
            "interface_mac_pause_frames_total", "pfc_watchdog_storms_detected_total",
            "pfc_watchdog_storms_restored_total", "queue_wred_dropped_packets_total", "queue_depth_bytes")}
        assert data_series(store, "leaf01")[
            ("infrapulse_switch_queue_ecn_marked_packets_total", ("leaf01", "Ethernet1", "3"))] == 30.0
