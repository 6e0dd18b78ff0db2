"""The simulated Cumulus switch sends PROTO notifications in the shape of the real 5.16 capture:
the prefix is one list entry, every leaf below it an update with a relative, key-free path.

Transport cost is per message, so the whole-process bench (bench/whole_process.py) is only
honest if the simulator neither packs several entries into one notification nor splits one
entry's leaves over several."""

from __future__ import annotations

from pygnmi.spec.v080 import gnmi_pb2 as pb

import gnmic_capture
from helpers import real
from infrapulse.simulate.gnmi_target import Renderer, SimSwitch
from infrapulse.sources.gnmi.paths import to_proto

CUMULUS_CAPTURE = "cumulus_5.16_gnmic_subscribe_response.txt"


def _names(path: pb.Path) -> list[str]:
    return [e.name for e in path.elem]


def _render(profile: str, path: str, ports: int = 3) -> list[pb.Notification]:
    switch = SimSwitch("leaf01", profile, ports=ports, frozen=True)
    sub = pb.Subscription(path=to_proto(path), mode=pb.SAMPLE, sample_interval=10_000_000_000)
    notes, _ = Renderer(switch, pb.Path(), sub, pb.PROTO).render()
    return notes


def test_the_capture_puts_the_prefix_at_the_list_entry():
    (note,) = gnmic_capture.notifications(gnmic_capture.sections(real("gnmi", CUMULUS_CAPTURE))[0])
    assert _names(note.prefix) == ["system", "cpus", "cpu"]
    assert dict(note.prefix.elem[-1].key) == {"index": "0"}
    assert len(note.update) == 8
    assert all(not e.key for u in note.update for e in u.path.elem)
    assert _names(note.update[0].path) == ["state", "kernel", "max-time"]


def test_simulated_cumulus_sends_one_notification_per_list_entry():
    notes = _render("nvidia-cumulus",
                    "/qos/interfaces/interface[interface-id=*]/switch-priority[priority=*]/state")
    assert len(notes) == 3 * 8  # ports x priorities: state and state/counters leaves share one
    for note in notes:
        assert _names(note.prefix) == ["qos", "interfaces", "interface", "switch-priority"]
        assert set(note.prefix.elem[-1].key) == {"priority"}
        paths = sorted("/".join(_names(u.path)) for u in note.update)
        assert paths == ["state/counters/in-discards", "state/counters/in-pause-pkts",
                         "state/counters/out-pause-pkts", "state/in-pause-duration",
                         "state/out-pause-duration",
                         "state/priority"]
        assert all(not e.key for u in note.update for e in u.path.elem)


def test_simulated_cumulus_interface_counters_come_in_one_notification_per_port():
    notes = _render("nvidia-cumulus", "/interfaces/interface[name=*]/state/counters")
    assert [dict(n.prefix.elem[-1].key) for n in notes] == [{"name": f"swp{i}"} for i in (1, 2, 3)]
    for note in notes:
        assert _names(note.prefix) == ["interfaces", "interface"]
        assert len(note.update) == 11
        assert all(_names(u.path)[:2] == ["state", "counters"] for u in note.update)


def test_dialects_without_a_proto_capture_keep_the_leaf_container_prefix():
    notes = _render("openconfig", "/interfaces/interface[name=*]/state/counters")
    assert len(notes) == 3
    assert all(_names(n.prefix) == ["interfaces", "interface", "state", "counters"] for n in notes)
    assert all(len(u.path.elem) == 1 for n in notes for u in n.update)
