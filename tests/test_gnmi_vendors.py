"""Vendor depth: real captures through the real decode path, one leaf per series by preference,
EOS LANZ and augments. Over gRPC (the fallbacks on the wire, EOS without eos_native, Cumulus's
"System is busy" subscription set-up): tests/integration/test_gnmi_vendors_grpc.py."""

from __future__ import annotations

import itertools
import json

import pytest
from pygnmi.spec.v080 import gnmi_pb2 as pb

import gnmic_capture
from helpers import real
from infrapulse.sources.gnmi.ingest import SwitchState
from infrapulse.sources.gnmi.paths import to_proto
from infrapulse.sources.gnmi.profile import load_profiles, parse_profile

PROFILES = load_profiles()
FLAPS = "infrapulse_switch_interface_carrier_transitions_total"
FCS = "infrapulse_switch_interface_fcs_errors_total"
DEPTH = "infrapulse_switch_queue_depth_bytes"
ECN = "infrapulse_switch_queue_ecn_marked_packets_total"


def note(prefix: str, updates: list[tuple[str, pb.TypedValue]], origin: str = "openconfig",
         deletes: tuple[str, ...] = ()) -> pb.Notification:
    return pb.Notification(timestamp=1, prefix=to_proto(prefix, origin),
                           update=[pb.Update(path=to_proto(p), val=v) for p, v in updates],
                           delete=[to_proto(d) for d in deletes])


def uint(n: int) -> pb.TypedValue:
    return pb.TypedValue(uint_val=n)


def series(state: SwitchState) -> dict:
    return {(f, labels): v for f, s in state.snapshot.series.items() for labels, v in s.items()
            if f.startswith("infrapulse_switch_") and labels[1:]}


def flaps(state: SwitchState, interface: str = "E1") -> float | None:
    return state.snapshot.series.get(FLAPS, {}).get(("sw", interface))


# -- one leaf per series, by preference (profile `rank`, sources/gnmi/prefer.py) ----------------

TRANSITIONS = {"interface-transitions": 3, "carrier-transitions": 1, "link-transitions": 7}


@pytest.mark.parametrize("order", list(itertools.permutations(TRANSITIONS)), ids="-".join)
def test_one_transitions_leaf_by_preference_whatever_the_order_never_the_sum(order):
    """openconfig-interfaces 3.8: interface-transitions is preferred to the deprecated
    carrier-transitions, then link-transitions; all three in one PROTO notification, any order:
    the series is interface-transitions from the first sample on (1+3+7=11 would be the sum)."""
    state = SwitchState("sw", PROFILES["openconfig"])
    for bump in (0, 10, 20):
        state.apply(note("/interfaces/interface[name=E1]/state/counters",
                         [(leaf, uint(TRANSITIONS[leaf] + bump)) for leaf in order]))
        assert flaps(state) == 3 + bump
        assert state.updates == 3 * (bump // 10 + 1)  # a settled notification is counted once
    assert state.bound == 1  # the other two leaves feed nothing


def test_a_fallback_feeds_until_the_preferred_leaf_comes_and_again_once_it_goes():
    state = SwitchState("sw", PROFILES["openconfig"])
    path = "/interfaces/interface[name=E1]/state/counters"
    state.apply(note(path, [("carrier-transitions", uint(1))]))
    assert flaps(state) == 1  # only the deprecated leaf: it feeds the series
    # the preferred leaf appears *before* the bound fallback in the same notification: the
    # fallback, written last, must not show even for that sample
    state.apply(note(path, [("interface-transitions", uint(40)), ("carrier-transitions", uint(2))]))
    assert flaps(state) == 40
    state.apply(note(path, [("interface-transitions", uint(41)), ("carrier-transitions", uint(3))]))
    assert flaps(state) == 41 and state.bound == 1
    # the preferred leaf goes (the switch deletes it): the fallback binds again on its next sample
    state.apply(note(path, [], deletes=("interface-transitions",)))
    assert flaps(state) is None and state.bound == 0
    state.apply(note(path, [("carrier-transitions", uint(4))]))
    assert flaps(state) == 4 and state.bound == 1


@pytest.mark.parametrize("encoding", ["proto", "json_ietf"])
def test_fcs_is_preferred_to_crc_per_interface(encoding):
    """E1 sends in-fcs-errors and the Ethernet in-crc-errors, E2 only the latter."""
    state = SwitchState("sw", PROFILES["openconfig"])
    sent = {"E1": {"crc": 1005, "fcs": 5}, "E2": {"crc": 1010}}
    for interface, leaves in sent.items():
        if encoding == "proto":  # crc before fcs in the notification
            updates = [("ethernet/state/counters/in-crc-errors", uint(leaves["crc"]))]
            if "fcs" in leaves:
                updates.append(("state/counters/in-fcs-errors", uint(leaves["fcs"])))
            state.apply(note(f"/interfaces/interface[name={interface}]", updates))
        else:  # one JSON_IETF subtree per interface, crc before fcs in member order
            doc = {"openconfig-if-ethernet:ethernet": {
                "state": {"counters": {"in-crc-errors": str(leaves["crc"])}}}}
            if "fcs" in leaves:
                doc["openconfig-interfaces:state"] = {"counters": {"in-fcs-errors": str(leaves["fcs"])}}
            state.apply(note("", [(f"/interfaces/interface[name={interface}]",
                                   pb.TypedValue(json_ietf_val=json.dumps(doc).encode()))]))
    assert {k: v for k, v in series(state).items() if k[0] == FCS} == {(FCS, ("sw", "E1")): 5.0,
                                                                         (FCS, ("sw", "E2")): 1010.0}


def test_cumulus_carrier_up_and_down_are_never_added_to_carrier_transitions():
    """Cumulus sends carrier-up/-down-transitions beside carrier-transitions (their sum): the
    family takes carrier-transitions alone, and nothing when a switch sends only the halves."""
    state = SwitchState("sw", PROFILES["nvidia-cumulus"])
    path = "/interfaces/interface[name=swp1]/state/counters"
    state.apply(note(path, [("carrier-transitions", uint(5)), ("carrier-up-transitions", uint(3)),
                            ("carrier-down-transitions", uint(2))]))
    assert flaps(state, "swp1") == 5
    state.apply(note("/interfaces/interface[name=swp2]/state/counters",
                     [("carrier-up-transitions", uint(3)), ("carrier-down-transitions", uint(2))]))
    assert flaps(state, "swp2") is None


# -- Arista EOS: real captures, augments, LANZ -----------------------------------------------------

EOS_CAPTURE = "arista_eos_gnmic_interface_state_and_lanz.txt"


def test_eos_interface_state_capture_decodes_with_values():
    """EOS's own reply (aristanetworks/openmgmt): module-qualified JSON_IETF members, counter64
    as strings, an arista augment leaf among them."""
    get_reply = gnmic_capture.sections(real("gnmi", EOS_CAPTURE))[0]
    (n,) = gnmic_capture.notifications(get_reply)
    assert n.update[0].val.WhichOneof("value") == "json_ietf_val"
    state = SwitchState("sw", PROFILES["arista-eos"])
    state.apply(n)
    f = "infrapulse_switch_"
    assert series(state) == {
        (f + "interface_received_bytes_total", ("sw", "Ethernet1")): 111398.0,
        (f + "interface_transmitted_bytes_total", ("sw", "Ethernet1")): 117389.0,
        (f + "interface_errors_total", ("sw", "Ethernet1", "rx")): 0.0,
        (f + "interface_errors_total", ("sw", "Ethernet1", "tx")): 0.0,
        (f + "interface_discards_total", ("sw", "Ethernet1", "rx")): 0.0,
        (f + "interface_discards_total", ("sw", "Ethernet1", "tx")): 0.0,
        (f + "interface_fcs_errors_total", ("sw", "Ethernet1")): 0.0,
        (f + "interface_oper_up", ("sw", "Ethernet1")): 1.0,
    }
    assert state.malformed == 0 and state.updates == 1


@pytest.mark.parametrize("json_field", ["json_val", "json_ietf_val"])
def test_eos_lanz_capture_decodes_queue_depth_in_bytes(json_field):
    """The captured eos_native:LANZ stream: config, buffer and error records map to nothing; the
    congestion record becomes the queue depth of Ethernet6 traffic class 1, queueSize segments
    x 16 bytes (the capture's configRecord.segmentSize)."""
    stream = gnmic_capture.sections(real("gnmi", EOS_CAPTURE))[1]
    notes = gnmic_capture.notifications(stream)
    config = next(json.loads(u.val.json_val) for n in notes for u in n.update
                  if u.path.elem[-1].name == "configRecord")
    assert config["segmentSize"] == 16  # what the profile's scale stands for
    state = SwitchState("sw", PROFILES["arista-eos"])
    for n in notes:
        for u in n.update:
            if json_field == "json_ietf_val" and u.val.WhichOneof("value") == "json_val":
                u.val.json_ietf_val = u.val.json_val  # setting one member of the oneof clears the other
        state.apply(n)
    assert series(state) == {(DEPTH, ("sw", "Ethernet6", "1")): 1998240.0 * 16}
    assert state.malformed == 0
    assert state.updates == sum(len(n.update) for n in notes) == 14


def test_lanz_series_expire_when_no_record_refreshes_them():
    """A congestion record is an event: its series lives while records come (`expire: true`)."""
    state = SwitchState("sw", PROFILES["arista-eos"])

    def record(interface: str, tc: int, segments: int) -> pb.Notification:
        doc = {"intfName": interface, "trafficClass": tc, "queueSize": segments, "qDropCount": 0,
               "entryType": "UPDATE"}
        return note("/LANZ/congestion",
                    [("congestionRecord", pb.TypedValue(json_val=json.dumps(doc).encode()))],
                    origin="eos_native")

    state.apply(record("Ethernet1", 3, 100))
    state.apply(record("Ethernet2", 1, 10))
    assert series(state) == {(DEPTH, ("sw", "Ethernet1", "3")): 1600.0,
                             (DEPTH, ("sw", "Ethernet2", "1")): 160.0}
    for segments in (200, 300, 400):  # Ethernet1/3 stays congested, Ethernet2/1 is quiet
        state.sweep()
        state.apply(record("Ethernet1", 3, segments))
    assert series(state) == {(DEPTH, ("sw", "Ethernet1", "3")): 6400.0}


@pytest.mark.parametrize("values", [(30, 30), (30, 31)], ids=["equal", "different"])
def test_eos_native_and_augment_ecn_never_double_count(values):
    """openconfig-qos and arista-qos-augments both define state/ecn-marked-pkts; with module
    prefixes stripped they are one path: one series, one of the two values, never their sum."""
    native, augment = values
    state = SwitchState("sw", PROFILES["arista-eos"])
    queue = "/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue[name=3]/state"
    # JSON_IETF: both members in one object
    doc = {"openconfig-qos:ecn-marked-pkts": str(native), "arista-qos-augments:ecn-marked-pkts": str(augment)}
    state.apply(note("", [(queue, pb.TypedValue(json_ietf_val=json.dumps(doc).encode()))]))
    assert series(state) == {(ECN, ("sw", "Ethernet1", "3")): float(augment)}  # the last member
    # PROTO: the same leaf sent qualified and plain, under another interface
    state.apply(note(queue.replace("Ethernet1", "Ethernet2"),
                     [("openconfig-qos:ecn-marked-pkts", uint(native)),
                      ("arista-qos-augments:ecn-marked-pkts", uint(augment))]))
    got = series(state)[(ECN, ("sw", "Ethernet2", "3"))]
    assert got in (native, augment) and len(series(state)) == 2


# -- NVIDIA Cumulus -------------------------------------------------------------------------------

CUMULUS_CAPTURE = "cumulus_5.16_gnmic_subscribe_response.txt"
# A probe profile reading the captured CPU leaves into stand-in families (the catalogue has no
# CPU family): it shows what the decode path makes of prefix + relative paths and typed scalars.
CPU_PROBE = {
    "subscriptions": [{"path": "/system/cpus/cpu[index=*]/state", "mode": "sample"}],
    "metrics": [
        {"path": "/system/cpus/cpu[index={interface}]/state/{queue}/avg", "family": DEPTH},
        {"path": "/system/cpus/cpu[index={interface}]/state/{queue}/seconds",
         "family": "infrapulse_switch_queue_transmitted_packets_total"},
        {"path": "/system/cpus/cpu[index={interface}]/state/kernel/max-time",
         "family": "infrapulse_switch_interface_received_bytes_total"},
    ],
}


def test_cumulus_capture_decodes_prefix_relative_paths_and_typed_scalars():
    (n,) = gnmic_capture.notifications(gnmic_capture.sections(real("gnmi", CUMULUS_CAPTURE))[0])
    assert [e.name for e in n.prefix.elem] == ["system", "cpus", "cpu"] and len(n.update) == 8
    # the built-in profile maps none of it: nothing is mis-mapped, every leaf is counted unmapped
    state = SwitchState("sw", PROFILES["nvidia-cumulus"])
    state.apply(n)
    assert series(state) == {}
    assert state.updates == 8 and state.malformed == 0
    assert state._unmapped == 8  # noqa: SLF001  (cached unmapped leaf paths)
    # through a profile that maps them, the values come out exact (doubles and 64-bit integers)
    probe = SwitchState("sw", parse_profile(CPU_PROBE, "cpu-probe", "<test>"))
    for _ in range(2):  # the first sample plans the notification's shape, the second takes the bulk path
        probe.apply(n)
    assert series(probe) == {
        (DEPTH, ("sw", "0", "kernel")): 0.33359713753109865,
        (DEPTH, ("sw", "0", "user")): 0.2680692284537066,
        ("infrapulse_switch_queue_transmitted_packets_total", ("sw", "0", "kernel")): 595.0,
        ("infrapulse_switch_interface_received_bytes_total", ("sw", "0")): float(1752848657055588900),
    }
    assert probe.malformed == 0
