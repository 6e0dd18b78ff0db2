"""The SONiC profile against real sonic-gnmi replies (shared/real/gnmi/sonic_*), fed through the
real decode path: each reply is built into the SubscribeResponse bytes sonic-gnmi sends for it
(db_client.go ValToResp: prefix = the request's prefix with the DB as target, one update whose
path is the subscribed path and whose value is json_ietf_val) and taken exactly as
`SwitchSession._read` takes a stream message (bulk wire view, then `SwitchState.apply_wire`).

Port tables (APPL_DB PORT_TABLE) are not among the captures: where a test needs one it is built
in the shape of sonic-gnmi testdata/PORT_TABLE.txt (keys = SONiC names, an `alias` field, `speed`
in Mb/s); its values are this test's assumptions, said so where used.

The same shapes over gRPC from the simulator, and a wrong profile path through the daemon:
tests/integration/test_gnmi_sonic_real_grpc.py.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from pygnmi.spec.v080 import gnmi_pb2 as pb

from helpers import real
from infrapulse.sources.gnmi import wire
from infrapulse.sources.gnmi.ingest import SwitchState
from infrapulse.sources.gnmi.paths import to_proto
from infrapulse.sources.gnmi.profile import load_profiles
from infrapulse.store import Store

SONIC = load_profiles()["sonic"]
PFC7 = "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_RX_PKTS"
QUEUES = "COUNTERS/Ethernet*/Queues"


def sonic_reply(target: str, path: str, value: bytes | dict) -> bytes:
    """The SubscribeResponse bytes sonic-gnmi sends for one DB path's JSON value."""
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    note = pb.Notification(timestamp=1_748_556_657_384_573_964, prefix=pb.Path(target=target),
                           update=[pb.Update(path=to_proto(path), val=pb.TypedValue(json_ietf_val=raw))])
    return pb.SubscribeResponse(update=note).SerializeToString()


def feed(state: SwitchState, raw: bytes) -> None:
    """What SwitchSession._read does with one stream message."""
    response = wire.SubscribeResponse.FromString(raw)
    assert response.WhichOneof("response") == "update"
    state.apply_wire(response.update, raw)


def port_table(state: SwitchState, ports: dict[str, dict[str, str]]) -> None:
    feed(state, sonic_reply("APPL_DB", "PORT_TABLE", ports))


def data(state: SwitchState, family: str) -> dict[tuple, float]:
    return dict(state.snapshot.series.get(family, {}).items())


# sonic-gnmi testdata/COUNTERS_PORT_ALIAS_MAP.txt pairs Ethernet<n> with alias Ethernet<n>/1.
ALIASED = {"Ethernet1": {"alias": "Ethernet1/1"}, "Ethernet7": {"alias": "Ethernet7/1"},
           "Ethernet68": {"alias": "Ethernet68/1"}}


@pytest.mark.parametrize("capture", ["sonic_testdata_COUNTERS_Ethernet_wildcard_PFC_7_RX.txt",
                                     "sonic_testdata_COUNTERS_Ethernet_wildcard_PFC_7_RX_alias.txt"])
def test_per_field_wildcard_reply_maps_port_field_value(capture):
    """port -> {field: value}, keyed by SONiC name or by alias: the same series either way."""
    state = SwitchState("leaf01", SONIC)
    port_table(state, ALIASED)
    feed(state, sonic_reply("COUNTERS_DB", PFC7, real("gnmi", capture).read_bytes()))
    assert data(state, "infrapulse_switch_pfc_pause_frames_total") == {
        ("leaf01", "Ethernet1", "7", "rx"): 1.0, ("leaf01", "Ethernet68", "7", "rx"): 2.0}
    assert state.coverage.series[PFC7] == 2
    assert state.coverage.unmapped == {}
    assert state.malformed == 0
    assert data(state, "infrapulse_switch_interface_alias_info")[
        ("leaf01", "Ethernet68", "Ethernet68/1")] == 1.0


def test_queues_alias_reply_pfc_watchdog_depth_and_periodic_watermarks():
    state = SwitchState("leaf01", SONIC)
    port_table(state, ALIASED)
    raw = real("gnmi", "sonic_testdata_COUNTERS_Ethernet_wildcard_Queues_alias_expected.txt").read_bytes()
    feed(state, sonic_reply("COUNTERS_DB", QUEUES, raw))
    assert data(state, "infrapulse_switch_queue_transmitted_packets_total") == {
        ("leaf01", "Ethernet68", "1"): 0.0, ("leaf01", "Ethernet68", "3"): 0.0,
        ("leaf01", "Ethernet68", "4"): 0.0, ("leaf01", "Ethernet7", "5"): 0.0}
    # the queue's own watermark (peak since the last poll); its ":periodic" twin (192) is ignored
    assert data(state, "infrapulse_switch_queue_watermark_bytes") == {
        ("leaf01", "Ethernet68", "1"): 64.0, ("leaf01", "Ethernet7", "5"): 100.0}
    # queue depth exists only on the PFC watchdog's queues 3 and 4
    assert data(state, "infrapulse_switch_queue_depth_bytes") == {
        ("leaf01", "Ethernet68", "3"): 0.0, ("leaf01", "Ethernet68", "4"): 0.0}
    assert data(state, "infrapulse_switch_pfc_watchdog_storms_detected_total") == {
        ("leaf01", "Ethernet68", "3"): 0.0, ("leaf01", "Ethernet68", "4"): 0.0}
    assert data(state, "infrapulse_switch_pfc_watchdog_storms_restored_total") == {
        ("leaf01", "Ethernet68", "3"): 0.0, ("leaf01", "Ethernet68", "4"): 0.0}
    # every leaf of the real reply is mapped or ignored on purpose (PFC_WD_ACTION "drop", ...)
    assert state.coverage.unmapped == {}
    assert state.malformed == 0


def test_lldp_entry_table_update():
    state = SwitchState("leaf01", SONIC)
    feed(state, sonic_reply("APPL_DB", "LLDP_ENTRY_TABLE",
                            real("gnmi", "sonic_testdata_LLDP_ENTRY_TABLE_UPDATE.txt").read_bytes()))
    assert data(state, "infrapulse_switch_lldp_neighbor_info") == {("leaf01", "eth0", "dummy", "dummy"): 1.0}
    assert state.coverage.series["LLDP_ENTRY_TABLE"] == 1
    assert state.coverage.unmapped == {}


def doc_replies() -> list[tuple[str, str, bytes]]:
    """(target, path, json_ietf_val) of each gnmi_get reply in sonic-gnmi's doc (text-proto output).
    The doc shortens two values with "..."; the whole-table COUNTERS/Ethernet* reply loses its
    shape to it ("........."), the etp* Queues reply only drops whole entries ("...,"), which is
    cut here."""
    out = []
    for block in real("gnmi", "sonic_gnmi_doc_virtual_path_replies.txt").read_text().split("====="):
        reply = block[block.index("== getResponse:"):]
        target = re.search(r'target: "([^"]+)"', reply).group(1)
        update = reply[reply.index("update:"):]
        names = re.findall(r'name: "([^"]+)"', update[:update.index("val:")])
        start = update.index('json_ietf_val: "') + len('json_ietf_val: "')
        text = update[start:update.rindex('"')].replace('\\"', '"')
        if "........." in text:
            continue
        text = re.sub(r"\n\s*\.\.\.,", "", text)
        out.append((target, "/".join(names), re.sub(r"\n\s*", "", text).encode()))
    return out


def test_real_nvidia_queues_reply_keyed_by_etp_aliases():
    replies = {path: raw for _, path, raw in doc_replies()}
    assert set(replies) == {"COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_ON2OFF_RX_PKTS",
                            "COUNTERS/Ethernet68/Queues",
                            QUEUES}
    state = SwitchState("sn", SONIC)
    # Assumed names: sonic-gnmi testdata/PORT_TABLE.txt has Ethernet40 <-> etp10 (8 lanes per etp);
    # etp9 and etp11a (a breakout half) follow that layout.
    port_table(state, {"Ethernet32": {"alias": "etp9"}, "Ethernet40": {"alias": "etp10"},
                       "Ethernet44": {"alias": "etp11a"}})
    feed(state, sonic_reply("COUNTERS_DB", QUEUES, replies[QUEUES]))
    sent = data(state, "infrapulse_switch_queue_transmitted_packets_total")
    assert sent[("sn", "Ethernet40", "7")] == 527.0
    assert sent[("sn", "Ethernet44", "7")] == 190.0
    assert sent[("sn", "Ethernet32", "7")] == 535.0
    # queues 8-15 answer {} (only their ":periodic" watermark, ignored): no series
    assert {labels[2] for labels in sent} == {str(q) for q in range(8)}
    assert len(data(state, "infrapulse_switch_queue_watermark_bytes")) == 3 * 8
    assert set(data(state, "infrapulse_switch_queue_depth_bytes")) == {
        ("sn", port, q) for port in ("Ethernet32", "Ethernet40", "Ethernet44") for q in ("3", "4")}
    assert len(data(state, "infrapulse_switch_pfc_watchdog_storms_detected_total")) == 6
    assert data(state, "infrapulse_switch_queue_wred_dropped_packets_total") == {}  # WRED_ECN_QUEUE off there
    assert state.coverage.unmapped == {}
    assert state.malformed == 0


def test_real_on2off_reply_and_a_single_port_queues_path():
    replies = {path: raw for _, path, raw in doc_replies()}
    state = SwitchState("sw", SONIC)
    state.on_sync()  # no port table on that 2018 switch: keys are SONiC names, exported as sent
    feed(state, sonic_reply("COUNTERS_DB", "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_ON2OFF_RX_PKTS",
                            replies["COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_ON2OFF_RX_PKTS"]))
    transitions = data(state, "infrapulse_switch_pfc_pause_transitions_total")
    assert len(transitions) == 54  # Ethernet0..48, 52, 56, 60, 64, 68
    assert transitions[("sw", "Ethernet68", "7", "rx")] == 0.0
    assert set(transitions.values()) == {0.0}
    feed(state,
         sonic_reply("COUNTERS_DB", "COUNTERS/Ethernet68/Queues", replies["COUNTERS/Ethernet68/Queues"]))
    assert len(data(state, "infrapulse_switch_queue_transmitted_packets_total")) == 8
    assert len(data(state, "infrapulse_switch_queue_watermark_bytes")) == 8
    assert state.malformed == 0


def test_counters_before_the_port_table_wait_for_it_instead_of_taking_the_alias():
    state = SwitchState("leaf01", SONIC)
    alias_reply = real("gnmi", "sonic_testdata_COUNTERS_Ethernet_wildcard_PFC_7_RX_alias.txt").read_bytes()
    feed(state, sonic_reply("COUNTERS_DB", PFC7, alias_reply))
    assert data(state, "infrapulse_switch_pfc_pause_frames_total") == {}  # not under "Ethernet68/1"
    port_table(state, ALIASED)  # the held reply is applied now
    assert data(state, "infrapulse_switch_pfc_pause_frames_total") == {
        ("leaf01", "Ethernet1", "7", "rx"): 1.0, ("leaf01", "Ethernet68", "7", "rx"): 2.0}
    assert state.malformed == 0


def test_without_a_port_table_the_sync_releases_held_keys_as_sent():
    state = SwitchState("leaf01", SONIC)
    feed(state, sonic_reply("COUNTERS_DB", PFC7, {"Ethernet8": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "5"}}))
    assert data(state, "infrapulse_switch_pfc_pause_frames_total") == {}
    state.on_sync()
    assert data(state, "infrapulse_switch_pfc_pause_frames_total") == {
        ("leaf01", "Ethernet8", "7", "rx"): 5.0}


def test_a_port_added_later_moves_from_its_alias_to_its_name():
    state = SwitchState("leaf01", SONIC)
    port_table(state, {"Ethernet0": {"alias": "etp1"}})
    pfc = {"etp1": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "1"}, "etp2": {"SAI_PORT_STAT_PFC_7_RX_PKTS": "2"}}
    feed(state, sonic_reply("COUNTERS_DB", PFC7, pfc))
    # etp2 is not in the table: exported as sent rather than dropped
    assert set(data(state, "infrapulse_switch_pfc_pause_frames_total")) == {
        ("leaf01", "Ethernet0", "7", "rx"), ("leaf01", "etp2", "7", "rx")}
    port_table(state, {"Ethernet4": {"alias": "etp2"}})  # ON_CHANGE: the new port only
    assert set(data(state, "infrapulse_switch_pfc_pause_frames_total")) == {
        ("leaf01", "Ethernet0", "7", "rx")}
    feed(state, sonic_reply("COUNTERS_DB", PFC7, pfc))
    assert data(state, "infrapulse_switch_pfc_pause_frames_total") == {
        ("leaf01", "Ethernet0", "7", "rx"): 1.0, ("leaf01", "Ethernet4", "7", "rx"): 2.0}
    assert state.coverage.series[PFC7] == 2


def test_port_table_oper_status_flap_count_last_down_time_and_deleted_keys():
    state = SwitchState("leaf01", SONIC)
    # shape and time format of sonic-gnmi testdata/PORT_TABLE.txt (sonic-swss strftime, UTC)
    port_table(state, {
        "Ethernet0": {"admin_status": "up", "alias": "etp0", "oper_status": "up", "flap_count": "3",
                      "speed": "100000", "lanes": "2304,2305,2306,2307",
                      "last_up_time": "Fri Jul 18 19:59:28 2025",
                      "last_down_time": "Fri Jul 18 19:59:28 2025"},
        # before May 2024 swss wrote ctime(): a space-padded day and a trailing newline
        "Ethernet40": {"alias": "etp10", "oper_status": "down", "flap_count": "0",
                       "last_down_time": "Fri Jul  4 09:05:01 2025\n"}})
    assert data(state, "infrapulse_switch_interface_oper_up") == {("leaf01", "Ethernet0"): 1.0,
                                                                   ("leaf01", "Ethernet40"): 0.0}
    assert data(state, "infrapulse_switch_interface_carrier_transitions_total") == {
        ("leaf01", "Ethernet0"): 3.0, ("leaf01", "Ethernet40"): 0.0}
    assert data(state, "infrapulse_switch_interface_last_down_timestamp_seconds") == {
        ("leaf01", "Ethernet0"): datetime(2025, 7, 18, 19, 59, 28, tzinfo=timezone.utc).timestamp(),
        ("leaf01", "Ethernet40"): datetime(2025, 7, 4, 9, 5, 1, tzinfo=timezone.utc).timestamp()}
    assert state.coverage.unmapped == {}  # admin_status, lanes, speed, ...: ignored on purpose
    feed(state, sonic_reply("APPL_DB", "LLDP_ENTRY_TABLE", {
        "Ethernet0": {"lldp_rem_sys_name": "gpu-node-01", "lldp_rem_port_id": "ens1f0np0"}}))
    # a deleted key: {"<name>": {}} (db_client.go dbSingleTableKeySubscribe on "del")
    feed(state, sonic_reply("APPL_DB", "LLDP_ENTRY_TABLE", {"Ethernet0": {}}))
    assert data(state, "infrapulse_switch_lldp_neighbor_info") == {}
    port_table(state, {"Ethernet40": {}})
    assert data(state, "infrapulse_switch_interface_oper_up") == {("leaf01", "Ethernet0"): 1.0}
    assert ("leaf01", "Ethernet40", "etp10") not in data(state, "infrapulse_switch_interface_alias_info")


def test_pause_quanta_become_seconds_at_the_port_speed_and_never_jump_back():
    state = SwitchState("leaf01", SONIC)
    path = "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION"
    port_table(state, {"Ethernet0": {"alias": "etp1", "speed": "100000"}})
    feed(state,
         sonic_reply("COUNTERS_DB", path, {"etp1": {"SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION": "195312500"}}))
    key = ("leaf01", "Ethernet0", "3", "rx")
    assert data(state, "infrapulse_switch_pfc_pause_duration_seconds_total")[key] == pytest.approx(1.0)
    port_table(state, {"Ethernet0": {"alias": "etp1", "speed": "400000"}})  # the port is re-speeded
    feed(state,
         sonic_reply("COUNTERS_DB", path, {"etp1": {"SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION": "976562500"}}))
    # +781250000 quanta at 400G = +1 s: 2 s in all, not the whole counter re-read at the new speed
    assert data(state, "infrapulse_switch_pfc_pause_duration_seconds_total")[key] == pytest.approx(2.0)


def test_unmapped_leaves_are_counted_per_plan_not_per_leaf_and_ignored_ones_not_at_all():
    """The bulk path: a PROTO notification with one mapped and one unmapped leaf."""
    state = SwitchState("sw", load_profiles()["openconfig"])
    note = pb.Notification(timestamp=1, prefix=to_proto("/interfaces/interface[name=E1]/state", "openconfig"),
                           update=[pb.Update(path=to_proto("counters/in-octets"),
                                             val=pb.TypedValue(uint_val=7)),
                                   pb.Update(path=to_proto("counters/in-typo"),
                                             val=pb.TypedValue(uint_val=1))])
    raw = pb.SubscribeResponse(update=note).SerializeToString()
    for _ in range(3):
        feed(state, raw)
    assert state.coverage.unmapped == {}  # the notifications are only counted on the plan...
    state.publish_coverage()  # ... until the coverage is handed on (each sweep)
    mapping = next(iter(m for m in state.coverage.unmapped))
    assert state.coverage.unmapped == {mapping: 3}
    assert state.coverage.samples[mapping] == "/interfaces/interface[name=E1]/state/counters/in-typo"
    assert data(state, "infrapulse_switch_interface_received_bytes_total") == {("sw", "E1"): 7.0}


def test_a_plan_replaced_under_the_same_shape_keeps_its_uncounted_unmapped_leaves():
    """Same prefix, same update paths, but the mapped leaf's value kind changes (uint_val, then
    int_val): a new plan replaces the first; the first plan's notifications still count."""
    state = SwitchState("sw", load_profiles()["openconfig"])

    def raw(val: pb.TypedValue) -> bytes:
        return pb.SubscribeResponse(update=pb.Notification(
            timestamp=1, prefix=to_proto("/interfaces/interface[name=E1]/state", "openconfig"),
            update=[pb.Update(path=to_proto("counters/in-octets"), val=val),
                    pb.Update(path=to_proto("counters/in-typo"), val=pb.TypedValue(uint_val=1))])
        ).SerializeToString()

    for _ in range(3):
        feed(state, raw(pb.TypedValue(uint_val=7)))
    for _ in range(2):
        feed(state, raw(pb.TypedValue(int_val=9)))
    state.publish_coverage()
    assert list(state.coverage.unmapped.values()) == [5]
    assert data(state, "infrapulse_switch_interface_received_bytes_total") == {("sw", "E1"): 9.0}


def test_series_over_max_series_are_counted_in_the_store_too():
    store = Store()
    state = SwitchState("leaf01", SONIC, max_series=3, store=store)
    port_table(state, {"Ethernet0": {"alias": "etp1", "oper_status": "up", "flap_count": "1"},
                       "Ethernet4": {"alias": "etp2", "oper_status": "up", "flap_count": "1"}})
    assert state.bound == 3
    assert store.status[("gnmi", "leaf01")].series_dropped == 3
    assert status_value_of(state, "infrapulse_switch_series_dropped_total") == 3.0


def status_value_of(state: SwitchState, family: str) -> float:
    return state.snapshot.series[family][(state.name,)]
