"""SwitchState and path/value decoding on hand-built notifications (no network)."""

from __future__ import annotations

import gc
import json

import pytest
from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb

from infrapulse.sources.gnmi.ingest import SwitchState
from infrapulse.sources.gnmi.paths import (
    PathPattern,
    expand_ranges,
    format_path,
    from_proto,
    parse_path,
    path_covers,
    to_proto,
)
from infrapulse.sources.gnmi.profile import load_profiles

PROFILES = load_profiles()


def note(prefix: str, updates: list[tuple[str, pb.TypedValue]], origin: str = "openconfig", target: str = "",
         deletes: tuple[str, ...] = ()) -> pb.Notification:
    return pb.Notification(timestamp=1, prefix=to_proto(prefix, origin, target),
                           update=[pb.Update(path=to_proto(p), val=v) for p, v in updates],
                           delete=[to_proto(d) for d in deletes])


def series(state: SwitchState) -> dict:
    return {(f, labels): v for f, s in state.snapshot.series.items() for labels, v in s.items()
            if f.startswith("infrapulse_switch_") and labels[1:]}


def test_paths_parse_escape_and_expand():
    assert parse_path(r"/a/b[name=x\]y][k=1/2]/c") == [("a", {}), ("b", {"name": "x]y", "k": "1/2"}),
                                                       ("c", {})]
    elems = from_proto(to_proto("/openconfig-interfaces:interfaces/interface[name=E1]"), strip=True)
    assert elems == (("interfaces", ()), ("interface", (("name", "E1"),)))
    assert format_path(elems) == "/interfaces/interface[name=E1]"
    assert expand_ranges("X_{0..2}_Y") == ["X_0_Y", "X_1_Y", "X_2_Y"]
    assert path_covers(elems[:2], elems + (("state", ()),))
    assert not path_covers((("interfaces", ()), ("interface", (("name", "E2"),))), elems)
    pattern = PathPattern("COUNTERS/Ethernet*/Queues/{interface}:{queue:\\d+}/F")
    key = lambda s: tuple((p, ()) for p in s.split("/"))  # noqa: E731
    assert pattern.match(key("COUNTERS/Ethernet*/Queues/Ethernet68:3/F")) == {"interface": "Ethernet68",
                                                                              "queue": "3"}
    assert pattern.match(key("COUNTERS/Ethernet*/Queues/Ethernet68:3:periodic/F")) is None


def test_json_ietf_quirks_module_prefixes_strings_and_list_keys():
    state = SwitchState("sw", PROFILES["openconfig"])
    doc = {"openconfig-qos:queue": [
        {"name": "3", "state": {"name": "3", "transmit-pkts": "18446744073709551615",
                                "ecn-marked-pkts": "7", "openconfig-qos-ext:vendor-leaf": "x"}},
        {"openconfig-qos:name": "5", "state": {"dropped-pkts": "2"}},
        {"state": {"dropped-pkts": "99"}},  # no key: skipped, never a garbage series
    ]}
    state.apply(note("", [("/qos/interfaces/interface[interface-id=E1]/output/queues",
                           pb.TypedValue(json_ietf_val=json.dumps(doc).encode()))]))
    assert series(state) == {
        ("infrapulse_switch_queue_transmitted_packets_total", ("sw", "E1", "3")): 18446744073709551615.0,
        ("infrapulse_switch_queue_ecn_marked_packets_total", ("sw", "E1", "3")): 7.0,
        ("infrapulse_switch_queue_dropped_packets_total", ("sw", "E1", "5")): 2.0,
    }
    assert state.malformed == 0


def test_sonic_keys_keep_their_colons_and_strings_become_numbers():
    state = SwitchState("sw", PROFILES["sonic"])
    state.apply(note("", [("PORT_TABLE", pb.TypedValue(json_ietf_val=b'{"Ethernet0": {"alias": "etp1"}}'))],
                     origin="", target="APPL_DB"))
    table = {"etp1:3": {"SAI_QUEUE_STAT_PACKETS": "12", "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES": "4096",
                        "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "8192"},
             "etp1:3:periodic": {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "9000"}}
    pfc = {"etp1": {"SAI_PORT_STAT_PFC_3_RX_PKTS": "41"},
           "Ethernet4": {"SAI_PORT_STAT_PFC_3_RX_PKTS": "not-a-number"}}
    state.apply(note("",
                     [("COUNTERS/Ethernet*/Queues", pb.TypedValue(json_ietf_val=json.dumps(table).encode())),
                      ("COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_3_RX_PKTS",
                       pb.TypedValue(json_ietf_val=json.dumps(pfc).encode()))],
                     origin="", target="COUNTERS_DB"))
    assert series(state) == {
        ("infrapulse_switch_interface_alias_info", ("sw", "Ethernet0", "etp1")): 1.0,
        ("infrapulse_switch_queue_transmitted_packets_total", ("sw", "Ethernet0", "3")): 12.0,
        ("infrapulse_switch_queue_depth_bytes", ("sw", "Ethernet0", "3")): 4096.0,
        ("infrapulse_switch_queue_watermark_bytes", ("sw", "Ethernet0", "3")): 8192.0,
        ("infrapulse_switch_pfc_pause_frames_total", ("sw", "Ethernet0", "3", "rx")): 41.0,
    }
    assert state.malformed == 1


def test_malformed_values_are_counted_and_do_not_overwrite():
    state = SwitchState("sw", PROFILES["openconfig"])
    prefix = "/interfaces/interface[name=E1]/state"
    state.apply(note(prefix, [("counters/in-octets", pb.TypedValue(uint_val=10)),
                              ("oper-status", pb.TypedValue(string_val="UP"))]))
    state.apply(note(prefix, [("counters/in-octets", pb.TypedValue(string_val="n/a")),
                              ("counters/out-octets", pb.TypedValue(bytes_val=b"\x00")),
                              ("oper-status", pb.TypedValue(string_val="SOMETHING_NEW"))]))  # default: 0
    state.apply(note("", [("/interfaces", pb.TypedValue(json_ietf_val=b"{not json"))]))
    assert series(state) == {
        ("infrapulse_switch_interface_received_bytes_total", ("sw", "E1")): 10.0,
        ("infrapulse_switch_interface_oper_up", ("sw", "E1")): 0.0,
    }
    assert state.malformed == 3
    assert state.updates == 6


def test_sync_drops_what_the_new_session_did_not_refresh_and_sweep_spares_on_change():
    state = SwitchState("sw", PROFILES["openconfig"])
    for port in ("E1", "E2"):
        state.apply(note(f"/interfaces/interface[name={port}]/state",
                         [("counters/in-octets", pb.TypedValue(uint_val=1)),
                          ("oper-status", pb.TypedValue(string_val="UP"))]))
    state.begin_session()  # reconnect: E2 is gone from the switch
    state.apply(note("/interfaces/interface[name=E1]/state",
                     [("counters/in-octets", pb.TypedValue(uint_val=2)),
                      ("oper-status", pb.TypedValue(string_val="UP"))]))
    state.on_sync()
    assert series(state) == {("infrapulse_switch_interface_received_bytes_total", ("sw", "E1")): 2.0,
                             ("infrapulse_switch_interface_oper_up", ("sw", "E1")): 1.0}
    # oper-status on its own ON_CHANGE notification; counters stop arriving
    state.apply(note("/interfaces/interface[name=E1]/state",
                     [("oper-status", pb.TypedValue(string_val="DOWN"))],
                     origin="openconfig"))
    assert state.snapshot.series["infrapulse_switch_interface_oper_up"] == {("sw", "E1"): 0.0}
    state2 = SwitchState("sw", PROFILES["openconfig"])
    state2.apply(note("/interfaces/interface[name=E1]/state/counters",
                      [("in-octets", pb.TypedValue(uint_val=5))]))
    state2.apply(note("/interfaces/interface[name=E1]/state",
                      [("oper-status", pb.TypedValue(string_val="UP"))]))
    for _ in range(3):
        state2.sweep()
    assert series(state2) == {("infrapulse_switch_interface_oper_up", ("sw", "E1")): 1.0}


def test_lldp_entity_needs_both_leaves_and_follows_changes():
    state = SwitchState("sw", PROFILES["openconfig"])
    base = "/lldp/interfaces/interface[name=E1]/neighbors/neighbor[id=n1]/state"
    state.apply(note(base, [("system-name", pb.TypedValue(string_val="gpu-node-01"))]))
    assert series(state) == {}
    state.apply(note(base, [("port-id", pb.TypedValue(string_val="ens1f0np0"))]))
    info = "infrapulse_switch_lldp_neighbor_info"
    assert series(state) == {(info, ("sw", "E1", "gpu-node-01", "ens1f0np0")): 1.0}
    state.apply(note(base, [("port-id", pb.TypedValue(string_val="ens2f0np0"))]))
    assert series(state) == {(info, ("sw", "E1", "gpu-node-01", "ens2f0np0")): 1.0}
    state.apply(note("", [], deletes=("/lldp/interfaces/interface[name=E1]/neighbors/neighbor[id=n1]",)))
    assert series(state) == {}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_builtin_profile_knows_its_streams(profile):
    p = PROFILES[profile]
    assert p.streams and all(s.subscriptions for s in p.streams)
    assert all(rule.sample is not None for rule in p.rules)  # every rule's mode is unambiguous


def test_series_limit_bounds_a_flood_of_new_paths():
    state = SwitchState("sw", PROFILES["openconfig"], max_series=50)
    key = ("sw",)
    for i in range(200):  # 200 interfaces, one mapped leaf each, one prefix each
        state.apply(note(f"/interfaces/interface[name=Ethernet{i}]",
                         [("state/counters/in-octets", pb.TypedValue(uint_val=i))]))
    received = state.snapshot.series["infrapulse_switch_interface_received_bytes_total"]
    assert len(received) == 50
    assert state.bound == 50
    assert state.snapshot.series["infrapulse_switch_series_dropped_total"][key] == 150
    assert state.snapshot.series["infrapulse_switch_updates_total"][key] == 200
    assert len(state._prefixes) == 50  # noqa: SLF001 - the memory the limit protects
    # Known series keep updating at the limit.
    state.apply(note("/interfaces/interface[name=Ethernet0]",
                     [("state/counters/in-octets", pb.TypedValue(uint_val=7))]))
    assert received[("sw", "Ethernet0")] == 7
    # Deleting series frees room for new ones.
    state.apply(note("", [], deletes=tuple(f"/interfaces/interface[name=Ethernet{i}]" for i in range(10))))
    assert state.bound == 40
    state.apply(note("/interfaces/interface[name=Ethernet0]",
                     [("state/counters/in-octets", pb.TypedValue(uint_val=9))]))
    assert received[("sw", "Ethernet0")] == 9 and state.bound == 41


# -- the bulk path (gnmi_wire) against the per-update path --------------------------------------


def cumulus_notes(ports: int, bump: int) -> list[pb.Notification]:
    """A Cumulus switch's whole tree as a switch sends it: one notification per port subtree
    (interface, PFC priority, queue), every leaf relative to that prefix; values move with `bump`."""
    from infrapulse.simulate.gnmi_target import SimSwitch

    switch = SimSwitch("sw", "nvidia-cumulus", ports=ports, frozen=True)
    groups: dict[tuple, list] = {}
    for container, leaves in switch.containers():
        depth = 2 if container[0][0] in ("interfaces", "lldp") else 3
        prefix, rest = container[:depth], container[depth:]
        for leaf, value in leaves.items():
            groups.setdefault(prefix, []).append((rest + ((leaf, ()),), value))
    out = []
    for prefix, leaves in groups.items():
        updates = []
        for i, (rel, value) in enumerate(leaves):
            val = (pb.TypedValue(string_val=value) if isinstance(value, str)
                   else pb.TypedValue(uint_val=value + bump * (i + 1)))
            updates.append(pb.Update(path=to_proto(format_path(rel)), val=val))
        out.append(pb.Notification(prefix=to_proto(format_path(prefix), "openconfig"), update=updates))
    return out


def bulk_plans(state: SwitchState) -> int:
    return sum(1 for p in state._prefixes.values() for plan in p.all_plans() if plan.runs is not None)  # noqa: SLF001


def test_bulk_path_writes_exactly_what_the_per_update_path_writes(monkeypatch):
    bulk, each = SwitchState("sw", PROFILES["nvidia-cumulus"]), SwitchState("sw", PROFILES["nvidia-cumulus"])
    monkeypatch.setattr(each, "_apply_bulk", lambda *args: None)
    for bump in (0, 7, 1000):
        for n in cumulus_notes(ports=3, bump=bump):
            bulk.apply(n)
            each.apply(n)
        assert series(bulk) == series(each)
    assert bulk.bound == each.bound == len(series(bulk)) > 100
    assert bulk.updates == each.updates and bulk.malformed == each.malformed == 0
    # The QoS subtree of each port (PFC + queues, all numbers) went in bulk; the interface and
    # LLDP subtrees hold strings (oper-status, neighbour names) and went leaf by leaf.
    assert bulk_plans(bulk) == 3 and bulk_plans(each) == 0
    # The profile's scale applies in bulk too: pause duration is sent in microseconds.
    got = series(bulk)
    durations = {k: v for k, v in got.items() if k[0] == "infrapulse_switch_pfc_pause_duration_seconds_total"}
    assert len(durations) == 3 * 8 * 2
    qos = next(n for n in cumulus_notes(3, 1000) if format_path(from_proto(n.prefix, True)).endswith(
        "interface[interface-id=swp1]"))
    sent = {format_path(from_proto(u.path, True)): u.val.uint_val for u in qos.update}
    assert got[("infrapulse_switch_pfc_pause_duration_seconds_total",
                ("sw", "swp1", "3", "rx"))] == pytest.approx(
        sent["/switch-priority[priority=3]/state/in-pause-duration"] * 1e-6)
    assert got[("infrapulse_switch_queue_ecn_marked_packets_total", ("sw", "swp1", "5"))] == \
        sent["/output/queues/queue[name=5]/state/ecn-marked-pkts"]


def test_bulk_path_falls_back_for_mixed_kinds_and_values_stay_exact():
    state = SwitchState("sw", PROFILES["openconfig"])
    prefix = "/interfaces/interface[name=E1]/state/counters"
    state.apply(note(prefix,
                     [("in-octets", pb.TypedValue(uint_val=10)), ("out-octets", pb.TypedValue(uint_val=20))]))
    state.apply(note(prefix, [("in-octets", pb.TypedValue(uint_val=11)),
                              ("out-octets", pb.TypedValue(double_val=2.5))]))
    state.apply(note(prefix,
                     [("in-octets", pb.TypedValue(int_val=-3)), ("out-octets", pb.TypedValue(int_val=40))]))
    assert series(state) == {("infrapulse_switch_interface_received_bytes_total", ("sw", "E1")): -3.0,
                             ("infrapulse_switch_interface_transmitted_bytes_total", ("sw", "E1")): 40.0}
    state.apply(note(prefix, [("in-octets", pb.TypedValue(uint_val=12)), ("out-octets", pb.TypedValue())]))
    assert series(state)[("infrapulse_switch_interface_received_bytes_total", ("sw", "E1"))] == 12.0
    assert state.malformed == 1  # the empty value, found by the per-update path
    assert all(isinstance(v, float) for v in series(state).values())


def test_updates_with_more_than_a_path_and_a_value_take_the_per_update_path():
    """The bulk view keeps every update's path field as sent (the shape a plan is found by); an
    update that carries anything more (here `duplicates`) matches no plan and goes leaf by leaf,
    with the same series."""
    state = SwitchState("sw", PROFILES["openconfig"])
    prefix = to_proto("/interfaces/interface[name=E1]/state/counters", "openconfig")
    updates = [pb.Update(path=to_proto("in-octets"), val=pb.TypedValue(uint_val=10), duplicates=2),
               pb.Update(path=to_proto("out-octets"), val=pb.TypedValue(uint_val=20))]
    for _ in range(2):
        state.apply(pb.Notification(prefix=prefix, update=updates))
    expected = {("infrapulse_switch_interface_received_bytes_total", ("sw", "E1")): 10.0,
                ("infrapulse_switch_interface_transmitted_bytes_total", ("sw", "E1")): 20.0}
    assert series(state) == expected
    assert bulk_plans(state) == 0 and state.updates == 4 and state.malformed == 0
    updates[0].ClearField("duplicates")
    updates[1].val.uint_val = 21
    state.apply(pb.Notification(prefix=prefix, update=updates))
    assert bulk_plans(state) == 1 and state.updates == 6
    assert series(state) == {**expected,
                             ("infrapulse_switch_interface_transmitted_bytes_total", ("sw", "E1")): 21.0}


def test_deletes_and_sweeps_invalidate_bulk_plans():
    """A plan writes straight into series dicts: once a binding is gone, the plan must go too,
    or the next sample would revive a series nothing tracks (and nothing would ever expire)."""
    state = SwitchState("sw", PROFILES["nvidia-cumulus"])
    notes = cumulus_notes(ports=2, bump=0)
    for n in notes:
        state.apply(n)
    full = len(series(state))
    state.apply(note("", [], deletes=("/qos/interfaces/interface[interface-id=swp1]",)))
    assert state.bound == len(series(state)) < full
    for n in notes:
        state.apply(n)
    assert state.bound == len(series(state)) == full
    # Three sweeps without data: every SAMPLE series expires; ON_CHANGE (oper-status, LLDP) stays.
    for _ in range(3):
        state.sweep()
    remaining = series(state)
    assert state.bound == len(remaining)
    assert {f for f, _ in remaining} <= {"infrapulse_switch_interface_oper_up",
                                         "infrapulse_switch_lldp_neighbor_info"}
    for n in notes:
        state.apply(n)
    assert state.bound == len(series(state)) == full


def test_undecodable_bytes_inside_a_notification_are_counted_and_skipped():
    from infrapulse.sources.gnmi import wire as wire
    def response(prefix: bytes, updates: list[bytes]) -> bytes:
        return wire.RawSubscribeResponse(update={"prefix": prefix, "update": updates}).SerializeToString()

    state = SwitchState("sw", PROFILES["openconfig"])
    prefix = to_proto("/interfaces/interface[name=E1]/state", "openconfig").SerializeToString()
    good = pb.Update(path=to_proto("counters/in-octets"), val=pb.TypedValue(uint_val=5)).SerializeToString()
    bad_path = b"\x0a\x03\xff\xff\xff" + b"\x1a\x02\x18\x01"  # path: truncated field; val: uint 1
    bad_val = pb.Update(path=to_proto("counters/out-octets")).SerializeToString() + b"\x1a\x02\x0a\xff"
    raw = response(prefix, [good, bad_path, bad_val])
    assert pb.SubscribeResponse.FromString(response(prefix, [good])).update.update[0].val.uint_val == 5
    with pytest.raises(DecodeError):  # the bulk view refuses it; the stream reader then passes None
        wire.SubscribeResponse.FromString(raw)
    state.apply_wire(None, raw)
    assert series(state) == {("infrapulse_switch_interface_received_bytes_total", ("sw", "E1")): 5.0}
    assert state.malformed == 2 and state.updates == 3
    raw = response(b"\x0a\x05zz", [good])  # undecodable prefix
    state.apply_wire(wire.SubscribeResponse.FromString(raw).update, raw)
    assert state.malformed == 3 and state.updates == 4 and len(series(state)) == 1
    state.apply_wire(None, b"\x0a\x05\xff")  # not even a notification frame
    assert state.malformed == 4 and state.updates == 4


def test_switches_share_decoded_prefixes_and_a_prefix_makes_its_spare_dicts_on_first_use():
    """Every switch sends the same prefixes (swp1's queue 3 ...): one decoded copy of each is
    shared, so a switch's ~2,600 prefixes cost their own dicts only; a prefix without unmapped
    leaves keeps no misses dict, and one with a single shape no plans dict."""
    profile = PROFILES["nvidia-cumulus"]
    first, second = SwitchState("sw1", profile), SwitchState("sw2", profile)
    # the captured shape: one notification per list entry, its leaves relative to it
    from infrapulse.simulate.gnmi_target import SimSwitch

    switch = SimSwitch("sw", "nvidia-cumulus", ports=2, frozen=True)
    entries: dict[tuple, list] = {}
    for container, leaves in switch.containers():
        cut = max(i for i, (_, keys) in enumerate(container) if keys) + 1
        prefix, rest = container[:cut], container[cut:]
        entries.setdefault(prefix, []).extend(
            pb.Update(path=to_proto(format_path(rest + ((leaf, ()),))),
                      val=pb.TypedValue(string_val=value) if isinstance(value, str)
                      else pb.TypedValue(uint_val=value))
            for leaf, value in leaves.items())
    notes = [pb.Notification(prefix=to_proto(format_path(prefix), "openconfig"), update=updates)
             for prefix, updates in entries.items()]
    for n in notes:
        first.apply(n)
        second.apply(n)
    assert first._prefixes.keys() == second._prefixes.keys() and len(first._prefixes) > 20  # noqa: SLF001
    keys = {raw: raw for raw in second._prefixes}  # noqa: SLF001
    shared_plans = 0
    for raw, mine in first._prefixes.items():  # noqa: SLF001
        theirs = second._prefixes[raw]  # noqa: SLF001
        assert mine.elems is theirs.elems  # one copy for both switches
        assert raw is keys[raw]  # the serialized prefix each keys its state by, too
        assert mine.elems == from_proto(pb.Path.FromString(raw), first.strip)  # and the path as sent
        # and each plan's value signature and run pickers (the slots are each switch's own)
        if mine.last is None or not mine.last.runs:
            continue
        assert theirs.last is not None and theirs.last.runs is not None
        assert mine.last.signature is theirs.last.signature
        assert len(mine.last.runs) == len(theirs.last.runs)
        assert all(a[1] is b[1] for a, b in zip(mine.last.runs, theirs.last.runs))
        shared_plans += 1
    assert shared_plans > 20
    # an element (one port's interface entry) is one object in every prefix under it
    copies: dict[tuple, set[int]] = {}
    for pctx in first._prefixes.values():  # noqa: SLF001
        for elem in pctx.elems:
            copies.setdefault(elem, set()).add(id(elem))
    port = ("interface", (("interface-id", "swp1"),))
    under_port = [p for p in first._prefixes.values() if port in p.elems]  # noqa: SLF001
    assert len(under_port) >= 8 and all(len(ids) == 1 for ids in copies.values())
    planned = [p for p in first._prefixes.values() if p.last is not None]  # noqa: SLF001
    assert len(planned) > 20 and all(p.plans is None for p in first._prefixes.values())  # noqa: SLF001
    assert all(not isinstance(p.misses, dict) for p in first._prefixes.values())  # noqa: SLF001
    # series are each switch's own: the shared path carries no switch
    assert {k[1][0] for k in series(first)} == {"sw1"} and {k[1][0] for k in series(second)} == {"sw2"}


def test_release_frees_a_switch_state_without_the_cyclic_gc():
    """Bindings point back at the dicts that hold them; release() breaks those cycles so that a
    removed switch's state is freed at once, not at the next full collection."""
    from infrapulse.columns import Column
    from infrapulse.sources.gnmi.ingest import Binding

    def live(kind) -> int:
        return sum(1 for o in gc.get_objects() if type(o) is kind)

    gc.collect()
    gc.disable()
    try:
        baseline, columns = live(Binding), live(Column)
        state = SwitchState("sw", PROFILES["nvidia-cumulus"])
        for n in cumulus_notes(ports=2, bump=0):
            state.apply(n)
        assert live(Binding) - baseline == state.bound > 100
        assert live(Column) - columns >= 10
        state.release()
        del state
        assert live(Binding) == baseline and live(Column) == columns
    finally:
        gc.enable()


# -- the columnar store under the bulk path (columns.py) ---------------------------------------


def qos_plan_runs(state: SwitchState, interface: str) -> tuple:
    pctx = next(p for p in state._prefixes.values()  # noqa: SLF001
                if p.elems[-1] == ("interface", (("interface-id", interface),)))
    (plan,) = [plan for plan in pctx.all_plans() if plan.runs is not None]
    return plan.runs


def test_a_sample_of_counters_is_written_as_one_run_per_value_kind_and_scale():
    """The slots of a new notification's series are allocated side by side, grouped by value kind
    and scale, so a Cumulus QoS sample (PFC pause counters and discards, queue counters, priority-group
    buffers, pause durations in microseconds) is two slice assignments, whatever order the leaves
    come in, unmapped leaves (the secondary headroom buffer) between them or not."""
    state = SwitchState("sw", PROFILES["nvidia-cumulus"])
    for n in cumulus_notes(ports=2, bump=3):
        state.apply(n)
    runs = qos_plan_runs(state, "swp1")
    per_priority = 2 + 1  # pause frames rx/tx, discards
    per_queue = 6  # transmitted, no-buffer drops, WRED drops, ECN, depth, watermark
    per_group = 2  # shared, headroom (primary)
    assert sorted((stop - start, scale or 1.0) for _kind, _pick, start, stop, scale in runs) == [
        (8 * 2, 1e-6), (8 * (per_priority + per_queue + per_group), 1.0)]


def test_compaction_after_ports_vanish_keeps_every_value_exact():
    """Most ports stop streaming: their series expire, the slots are packed (renumbered) and the
    surviving ports' plans are rebuilt: the next samples land on the right series."""
    def survivors(notes):
        return [n for n in notes if format_path(from_proto(n.prefix, True)).endswith(("=swp23]", "=swp24]"))]

    state = SwitchState("sw", PROFILES["nvidia-cumulus"])
    for n in cumulus_notes(ports=24, bump=1):
        state.apply(n)
    allocated = len(state.slots.values)
    assert allocated == state.slots.live > 1900
    for bump in (2, 3, 4):
        state.sweep()
        for n in survivors(cumulus_notes(ports=24, bump=bump)):
            state.apply(n)
    assert state.slots.dead == 0 and state.slots.live < allocated / 4  # packed
    reference = SwitchState("sw", PROFILES["nvidia-cumulus"])
    for bump in (4, 5):
        for n in survivors(cumulus_notes(ports=24, bump=bump)):
            state.apply(n)
            reference.apply(n)
    wanted = series(reference)
    got = {k: v for k, v in series(state).items() if k[1][1] in ("swp23", "swp24")}
    assert got == wanted and len(wanted) > 150
    assert bulk_plans(state) == 2


def test_a_series_written_by_two_leaf_paths_stays_while_either_streams():
    state = SwitchState("sw", PROFILES["openconfig"])
    key = ("infrapulse_switch_interface_received_bytes_total", ("sw", "E1"))
    long_path = note("/interfaces/interface[name=E1]",
                     [("state/counters/in-octets", pb.TypedValue(uint_val=1))])
    state.apply(long_path)
    state.apply(note("/interfaces/interface[name=E1]/state",
                     [("counters/in-octets", pb.TypedValue(uint_val=2))]))
    assert state.bound == 2 and series(state) == {key: 2.0}
    for value in (3, 4):  # only the first path goes on
        state.sweep()
        state.apply(note("/interfaces/interface[name=E1]",
                         [("state/counters/in-octets", pb.TypedValue(uint_val=value))]))
    assert state.bound == 2
    state.sweep()  # the other path's binding expires; the series is still held by the first
    assert state.bound == 1 and series(state) == {key: 4.0}
    state.apply(note("/interfaces/interface[name=E1]",
                     [("state/counters/in-octets", pb.TypedValue(uint_val=5))]))
    assert series(state) == {key: 5.0}
    for _ in range(3):
        state.sweep()
    assert state.bound == 0 and series(state) == {}
    state.apply(long_path)
    assert series(state) == {key: 1.0}
