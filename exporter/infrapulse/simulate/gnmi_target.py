"""A simulated switch fabric that speaks gNMI (grpc.aio), one server per switch.

Each `SimSwitch` holds ports x 8 priorities/queues of counters that advance with simulated
traffic and with the demo's scenarios; `GnmiTarget` serves it over gNMI in the dialect of one
shipped profile:

  openconfig      OpenConfig paths (openconfig-interfaces 3.8: interface-, link- and the deprecated
                  carrier-transitions; Ethernet CRC, 802.3x pause, FEC), PROTO leaves (or JSON_IETF /
                  JSON subtrees)
  sonic           COUNTERS_DB virtual paths keyed by port alias, APPL_DB whole tables, JSON_IETF
                  maps with all-string values (simulate/gnmi_sonic.py)
  nvidia-cumulus  OpenConfig + Cumulus 5.16 leaves: switch-priority PFC and discards, queue drops
                  (no-buffer, WRED), carrier up/down transitions, RS-FEC, priority-group shared and
                  headroom buffer occupancy; PROTO, JSON_IETF or JSON
  arista-eos      OpenConfig + Arista PFC / PFC watchdog / ECN / WRED augments (module-qualified in
                  JSON_IETF), LANZ congestion records on origin eos_native (JSON values, as captured)

`SimSwitch.absent` names leaves the simulated device does not send (tests take a preferred leaf
away to see the fallback feed the series).

The target honours STREAM subscriptions (SAMPLE with its interval, ON_CHANGE with heartbeats) and
ONCE ones, sends sync_response after the initial state, answers Get with the current state (but
not as Cumulus, which has no Get: `get`), announces each system's models in Capabilities
(`MODELS`), and can be told to misbehave: refuse (every RPC
fails UNAVAILABLE), drop (abort the stream after the sync), stall (stop sending), malformed
(a counter becomes text). Like a Cumulus switch it can refuse a Subscribe set up while another
is being set up (CANCELLED "System is busy", `reject_concurrent_setup`), and like an EOS switch
without the eos-native provider refuse a whole origin (`refuse_origins`). It checks the
`username`/`password` metadata when a password is set and serves TLS from a generated test CA
(see simulate/certs.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2 as pb
from pygnmi.spec.v080 import gnmi_pb2_grpc as pb_grpc

from ..sources.gnmi.paths import parse_path, strip_module
from . import gnmi_sonic
from .gnmi_port import PRIORITIES, SimPort
from .scenarios import PAUSE_US_PER_FRAME, ScenarioBoard

if TYPE_CHECKING:  # demo imports every simulator module, so only for the annotations
    from .demo import DemoContext, DemoPart

SCENARIOS = {
    "pfc-storm": "switch side: leaf01's port to the first node receives a climbing PFC pause storm on "
                 "priority 3; its queue 3 fills",
    "ecn-spike": "switch side: ECN marking on queue 3 of leaf01's port to the second node ramps up over 60s",
    "link-flap": "switch side: leaf01's port to the third node flaps every 5s (oper-status, "
                 "carrier transitions)",
}

PROFILES = ("openconfig", "sonic", "nvidia-cumulus", "arista-eos")
SUPPORTED = {
    "openconfig": (pb.PROTO, pb.JSON_IETF, pb.JSON),
    "sonic": (pb.JSON_IETF,),
    "nvidia-cumulus": (pb.PROTO, pb.JSON_IETF, pb.JSON),  # the 5.16 capture's Capabilities
    "arista-eos": (pb.PROTO, pb.JSON_IETF, pb.JSON),
}
# Capabilities supported_models, as each system announces them (name, organization, version):
# sonic-gnmi's DB client announces one model (sonic_data_client/db_client.go); Cumulus 5.16 lists
# OpenConfig models of the "OpenConfig working group" (shared/real/gnmi, the capabilities capture);
# EOS lists the OpenConfig models with Arista's augments.
_OC = "OpenConfig working group"
MODELS = {
    "openconfig": (("openconfig-interfaces", _OC, "3.8.0"), ("openconfig-if-ethernet", _OC, "2.13.0"),
                   ("openconfig-qos", _OC, "0.11.0"), ("openconfig-lldp", _OC, "0.2.1")),
    "sonic": (("sonic-db", "SONiC", "0.1.0"),),
    "nvidia-cumulus": (("openconfig-interfaces", _OC, "3.8.0"), ("openconfig-if-ethernet", _OC, "2.13.0"),
                       ("openconfig-qos", _OC, "0.11.0"), ("openconfig-lldp", _OC, "0.2.1"),
                       ("openconfig-platform", _OC, "0.24.0")),
    "arista-eos": (("openconfig-interfaces", _OC, "3.8.0"), ("openconfig-if-ethernet", _OC, "2.13.0"),
                   ("openconfig-qos", _OC, "0.11.0"), ("openconfig-lldp", _OC, "0.2.1"),
                   ("arista-intf-augments", "Arista Networks <http://arista.com/>", "1.0.0"),
                   ("arista-qos-augments", "Arista Networks <http://arista.com/>", "1.0.0")),
}
# Cumulus's gNMI server has Capabilities and Subscribe only, no Get (shared/reference).
NO_GET = ("nvidia-cumulus",)
# RFC 7951 module of each top-level tree, and the vendor augments that change it.
BASE_MODULES = {"interfaces": "openconfig-interfaces", "qos": "openconfig-qos", "lldp": "openconfig-lldp"}
AUGMENT_MODULES = {
    "arista-eos": {"pfc": "arista-intf-augments", "ecn-marked-pkts": "arista-qos-augments",
                   "wred-dropped-pkts": "arista-qos-augments"},
    "nvidia-cumulus": {},
    "openconfig": {},
}
FAULTS = ("refuse", "drop", "stall", "malformed")
LANZ_SEGMENT = 16  # bytes per LANZ segment (configRecord.segmentSize in the EOS capture)
BUSY = "System is busy"  # Cumulus's answer to a Subscribe set up during another one [unconfirmed]

Elem = tuple[str, tuple[tuple[str, str], ...]]
# What Renderer.render() returns beside the notifications, and takes back as `previous` for an
# ON_CHANGE diff: the leaves it rendered by path, {"table": ...} for a SONiC table or
# {"records": ...} for LANZ. Opaque to the caller; which shape is fixed by the subscription.
RenderState = dict[Any, Any]


def port_name(profile: str, index: int) -> str:
    if profile == "sonic":
        return f"Ethernet{index * 4}"
    if profile == "nvidia-cumulus":
        return f"swp{index + 1}"
    return f"Ethernet{index + 1}"


class SimSwitch:
    """One switch's state. `frozen` switches never advance (tests assert exact values)."""

    def __init__(self, name: str, profile: str, ports: int = 8,
                 neighbors: dict[int, tuple[str, str]] | None = None,
                 frozen: bool = False, seed: int = 0, platform: str = "mellanox") -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}")
        if platform not in gnmi_sonic.PLATFORMS:
            raise ValueError(f"unknown platform {platform!r}")
        self.name = name
        self.profile = profile
        self.platform = platform  # SONiC: which PFC watchdog counters the ports carry
        neighbors = neighbors or {}
        self.ports = [SimPort.initial(i, port_name(profile, i), neighbors.get(i)) for i in range(ports)]
        self.frozen = frozen
        self.rng = random.Random(seed)
        self.scenarios: ScenarioBoard | None = None
        self.storm_port, self.ecn_port, self.flap_port = 0, 1, 2
        self._last = time.monotonic()
        self._flap_phase = 0
        self._storming = False
        # paths announced deleted on every stream (SONiC: see gnmi_sonic)
        self.pending_deletes: list[str] = []
        self.absent: set[str] = set()  # leaf names this device does not send (tests)
        self.version = 0  # bumped on every structural change (ports, neighbours)

    def port(self, name: str) -> SimPort:
        for p in self.ports:
            if p.name == name:
                return p
        raise KeyError(name)

    # -- structural changes (tests) -------------------------------------------------------------

    def remove_port(self, name: str) -> None:
        port = self.port(name)
        self.ports.remove(port)
        if self.profile != "sonic":
            self.pending_deletes += [f"/interfaces/interface[name={name}]",
                                     f"/qos/interfaces/interface[interface-id={name}]",
                                     f"/lldp/interfaces/interface[name={name}]"]
        self.version += 1

    def remove_neighbor(self, name: str) -> None:
        port = self.port(name)
        if port.neighbor and self.profile != "sonic":
            self.pending_deletes.append(f"/lldp/interfaces/interface[name={name}]/neighbors/neighbor[id={port.neighbor[0]}]")
        port.neighbor = None
        self.version += 1

    # -- traffic ----------------------------------------------------------------------------------

    def advance(self) -> None:
        now = time.monotonic()
        dt, self._last = now - self._last, now
        if self.frozen or dt <= 0:
            return
        board = self.scenarios
        rng = self.rng
        for p in self.ports:
            if not p.oper_up:
                continue
            rate = 1.0e9 * (0.8 + 0.4 * rng.random())  # bytes/s each way, ~8 Gb/s
            rx, tx = int(rate * dt), int(rate * 0.9 * dt)
            p.in_octets += rx
            p.out_octets += tx
            p.in_pkts += rx // 4096
            p.out_pkts += tx // 4096
            p.q_tx_pkts[3] += int(tx * 0.8) // 4096
            p.q_tx_bytes[3] += int(tx * 0.8)
            p.q_tx_pkts[0] += int(tx * 0.2) // 4096
            p.q_tx_bytes[0] += int(tx * 0.2)
            p.q_ecn[3] += int(rng.random() * 3 * dt)
            # A healthy lossless port: a pause frame now and then, each holding the priority for
            # the 134 us a real ConnectX-6 Dx averaged (scenarios.PAUSE_US_PER_FRAME).
            frames = int(rng.random() * 2 * dt)
            p.pfc_rx[3] += frames
            p.pfc_rx_us[3] += frames * PAUSE_US_PER_FRAME
            p.q_depth[3] = int(rng.random() * 20_000)
            p.q_watermark[3] = max(p.q_watermark[3], p.q_depth[3])
        if board is None:
            return
        ports = self.ports
        storming = board.active("pfc-storm") and self.storm_port < len(ports)
        if storming:
            p = ports[self.storm_port]
            p.pfc_rx[3] += int(50_000 * dt)
            p.pfc_on2off[3] += int(10 * dt)
            p.pfc_rx_us[3] += int(900_000 * dt)  # paused 90% of the time
            p.q_depth[3] = 4_000_000
            p.q_watermark[3] = max(p.q_watermark[3], 6_000_000)
            p.pg_shared[3] = 4_000_000  # the paused priority group fills its buffers
            p.pg_headroom[3] = 60_000
            p.pg_headroom_wm[3] = max(p.pg_headroom_wm[3], 180_000)
        if storming != self._storming and self.storm_port < len(ports):  # the PFC watchdog acts
            self._storming = storming
            p = ports[self.storm_port]
            if storming:
                p.q_storms_detected[3] += 1
                p.wd_stuck[3] += 1
            else:
                p.q_storms_restored[3] += 1
                p.wd_recovered[3] += 1
        if board.active("ecn-spike") and self.ecn_port < len(ports):
            p = ports[self.ecn_port]
            ramp = min(1.0, board.elapsed("ecn-spike") / 60.0)
            sent = int(200_000 * dt)
            p.q_tx_pkts[3] += sent
            p.q_ecn[3] += int(sent * 0.5 * ramp)
            p.q_depth[3] = int(2_000_000 * ramp)
            p.q_watermark[3] = max(p.q_watermark[3], p.q_depth[3])
        if board.active("link-flap") and self.flap_port < len(ports):
            phase = int(board.elapsed("link-flap") // 5)  # toggle every 5 s
            if phase != self._flap_phase:
                self._flap_phase = phase
                p = ports[self.flap_port]
                p.oper_up = not p.oper_up
                p.carrier_transitions += 1
                if not p.oper_up:
                    p.last_down = time.time()
        elif self._flap_phase and self.flap_port < len(ports):
            self._flap_phase = 0
            p = ports[self.flap_port]
            if not p.oper_up:
                p.oper_up = True
                p.carrier_transitions += 1

    # -- the data tree in the profile's dialect ----------------------------------------------------

    def containers(self, malformed: bool = False) -> list[tuple[tuple[Elem, ...], dict[str, object]]]:
        """OpenConfig-style (container path, {leaf: value}) pairs for every port, in the profile's
        dialect, less the leaves named in `absent`."""
        absent = self.absent
        if not absent:
            return self._containers(malformed)
        out: list[tuple[tuple[Elem, ...], dict[str, object]]] = []
        for container, values in self._containers(malformed):
            kept = {k: v for k, v in values.items() if k not in absent}
            if kept:
                out.append((container, kept))
        return out

    def _containers(self, malformed: bool) -> list[tuple[tuple[Elem, ...], dict[str, object]]]:
        out: list[tuple[tuple[Elem, ...], dict[str, object]]] = []
        prof = self.profile
        for p in self.ports:
            iface = (("interfaces", ()), ("interface", (("name", p.name),)))
            counters: dict[str, object] = {
                "in-octets": p.in_octets, "out-octets": p.out_octets, "in-pkts": p.in_pkts,
                "out-pkts": p.out_pkts, "in-errors": p.in_errors, "out-errors": p.out_errors,
                "in-discards": p.in_discards, "out-discards": p.out_discards,
                "carrier-transitions": p.carrier_transitions}
            if malformed and p.index == 0:
                counters["in-octets"] = "n/a (garbage)"
            if prof != "nvidia-cumulus":
                counters["in-fcs-errors"] = p.fcs_errors
            if prof == "openconfig":  # openconfig-interfaces 3.8.0 (EOS 4.36 does not send these)
                counters.update({"interface-transitions": p.interface_transitions,
                                 "link-transitions": p.link_transitions})
            if prof == "nvidia-cumulus":
                counters.update({"carrier-up-transitions": p.carrier_up,
                                 "carrier-down-transitions": p.carrier_down})
            out.append((iface + (("state", ()), ("counters", ())), counters))
            out.append((iface + (("state", ()),), {"oper-status": "UP" if p.oper_up else "DOWN"}))
            ethernet: dict[str, object] = {"in-crc-errors": p.crc_errors,
                                           "in-mac-pause-frames": p.mac_pause_rx,
                                           "out-mac-pause-frames": p.mac_pause_tx}
            if prof == "nvidia-cumulus":
                ethernet["in-fcs-errors"] = p.fcs_errors  # Cumulus keeps it under ethernet/
            if prof == "openconfig":
                ethernet["fec-uncorrectable-blocks"] = p.fec_uncorrectable
            out.append((iface + (("ethernet", ()), ("state", ()), ("counters", ())), ethernet))
            if prof == "nvidia-cumulus":
                out.append((iface + (("phy", ()), ("fec", ()), ("state", ())),
                            {"rs-fec-uncorrectable-blocks": p.fec_uncorrectable}))
            if prof == "arista-eos":
                pfc = iface + (("ethernet", ()), ("pfc", ()))
                for prio in range(PRIORITIES):
                    out.append((pfc + (("priorities", ()), ("priority", (("index", str(prio)),)),
                                       ("state", ())),
                                {"index": prio, "in-frames": p.pfc_rx[prio], "out-frames": p.pfc_tx[prio]}))
                for q in range(PRIORITIES):
                    for qtype, stuck, recovered in (("UNICAST", p.wd_stuck[q], p.wd_recovered[q]),
                                                    ("MULTICAST", 1000 + q, 1000 + q)):
                        keys = (("index", str(q)), ("queue-type", qtype))
                        out.append((pfc + (("watchdog", ()), ("tx-queues", ()), ("tx-queue", keys),
                                           ("state", ())),
                                    {"index": q, "queue-type": qtype, "stuck-count": stuck,
                                     "recovery-count": recovered}))
            qif = (("qos", ()), ("interfaces", ()), ("interface", (("interface-id", p.name),)))
            if prof == "nvidia-cumulus":
                for prio in range(PRIORITIES):
                    sp = qif + (("switch-priority", (("priority", str(prio)),)), ("state", ()))
                    out.append((sp, {"priority": prio, "in-pause-duration": p.pfc_rx_us[prio],
                                     "out-pause-duration": p.pfc_tx_us[prio]}))
                    out.append((sp + (("counters", ()),), {"in-pause-pkts": p.pfc_rx[prio],
                                                           "out-pause-pkts": p.pfc_tx[prio],
                                                           "in-discards": p.prio_discards[prio]}))
                for pg in range(PRIORITIES):
                    pgk = (("pg-id", str(pg)),)
                    out.append((qif + (("input", ()), ("priority-group", pgk), ("state", ()),
                                       ("shared-buffer", ()),
                                       ("data", ())), {"instant-occupancy": p.pg_shared[pg]}))
                    for btype, value in (("primary", p.pg_headroom[pg]), ("secondary", 0)):
                        out.append((qif + (("input", ()), ("headroom-buffer", (("buffer-type", btype),)),
                                           ("priority-group", pgk), ("state", ())),
                                    {"instant-occupancy": value}))
            for q in range(PRIORITIES):
                state: dict[str, object] = {"name": str(q), "transmit-pkts": p.q_tx_pkts[q],
                                            "transmit-octets": p.q_tx_bytes[q], "ecn-marked-pkts": p.q_ecn[q]}
                if prof == "nvidia-cumulus":
                    state.update({"no-buffer-uc-dropped-pkts": p.q_dropped[q],
                                  "wred-dropped-pkts": p.q_wred[q],
                                  "instant-queue-len": p.q_depth[q], "max-queue-len": p.q_watermark[q]})
                elif prof == "arista-eos":
                    state.update({"dropped-pkts": p.q_dropped[q], "wred-dropped-pkts": p.q_wred[q]})
                else:
                    state.update({"dropped-pkts": p.q_dropped[q], "max-queue-len": p.q_watermark[q]})
                out.append((qif + (("output", ()), ("queues", ()), ("queue", (("name", str(q)),)),
                                   ("state", ())),
                            state))
            if p.neighbor:
                system, port_id = p.neighbor
                out.append(((("lldp", ()), ("interfaces", ()), ("interface", (("name", p.name),)),
                             ("neighbors", ()),
                             ("neighbor", (("id", system),)), ("state", ())),
                            {"id": system, "system-name": system, "port-id": port_id,
                             "port-id-type": "INTERFACE_NAME"}))
        return out

    def lanz_records(self) -> list[dict[str, object]]:
        """EOS LANZ congestion records (field names and types as in the EOS capture): one per
        queue holding data, queueSize in segments of LANZ_SEGMENT bytes."""
        records: list[dict[str, object]] = []
        for p in self.ports:
            for q in range(PRIORITIES):
                if p.q_depth[q] <= 0:
                    continue
                records.append({"entryType": "POLLING", "fabricPeerIntfName": "", "intfName": p.name,
                                "portID": 100 + p.index, "qDropCount": p.q_dropped[q],
                                "queueSize": p.q_depth[q] // LANZ_SEGMENT, "switchID": 0, "timeOfMaxQLen": 0,
                                "timestamp": time.time_ns() // 1000, "trafficClass": q, "txLatency": 0})
        return records

    def sonic_table(self, path: list[str], malformed: bool = False) -> dict[str, Any] | None:
        """The JSON map a SONiC path returns, or None if sonic-gnmi would not serve the path."""
        return gnmi_sonic.table(self, path, malformed)


# -- encoding ----------------------------------------------------------------------------------


def _elems(path: pb.Path) -> list[tuple[str, dict[str, str]]]:
    return [(strip_module(e.name), dict(e.key)) for e in path.elem]


def _matches(sub: list[tuple[str, dict[str, str]]], full: tuple[Elem, ...]) -> bool:
    if len(sub) > len(full):
        return False
    for (sname, skeys), (name, keys) in zip(sub, full):
        if sname != name and sname != "*":
            return False
        if skeys:
            have = dict(keys)
            for k, v in skeys.items():
                if v != "*" and have.get(k) != v:
                    return False
    return True


# The same few thousand paths go out on every sample: built once. Each use copies the message
# into the Notification or Update it is passed to, so the cached one is never changed.
@functools.lru_cache(maxsize=1 << 16)
def _proto_path(elems: tuple[Elem, ...], origin: str = "", target: str = "") -> pb.Path:
    return pb.Path(origin=origin, target=target, elem=[pb.PathElem(name=n, key=dict(k)) for n, k in elems])


def scalar_value(value: object) -> pb.TypedValue:
    """A Python scalar as the TypedValue a switch sends for it (non-negative ints as uint)."""
    if isinstance(value, bool):
        return pb.TypedValue(bool_val=value)
    if isinstance(value, int):
        return pb.TypedValue(uint_val=value) if value >= 0 else pb.TypedValue(int_val=value)
    if isinstance(value, float):
        return pb.TypedValue(double_val=value)
    return pb.TypedValue(string_val=str(value))


# Leaves whose YANG type is 32 bits or narrower (uint8 index, counter32 PFC watchdog counts):
# RFC 7951 sends those as JSON numbers, as the EOS capture does for ifindex and mtu.
_NARROW_INT_LEAVES = frozenset({"index", "priority", "stuck-count", "recovery-count"})


def _json_scalar(value: object, ietf: bool, name: str = "") -> object:
    if ietf and isinstance(value, int) and not isinstance(value, bool) and name not in _NARROW_INT_LEAVES:
        return str(value)  # RFC 7951: 64-bit integers travel as strings
    return value


def _json_subtree(rel_leaves: list[tuple[tuple[Elem, ...], object]], ietf: bool, module: str,
                  augments: dict[str, str]) -> object:
    """Nest leaves below one subscription instance into RFC 7951-style JSON (lists keep their keys)."""
    if len(rel_leaves) == 1 and not rel_leaves[0][0]:
        return _json_scalar(rel_leaves[0][1], ietf)
    root: dict[str, Any] = {}
    entries: dict[tuple[Elem, ...], dict[str, Any]] = {}
    for rel, value in rel_leaves:
        node, current = root, module
        trail: tuple[Elem, ...] = ()
        for depth, (name, keys) in enumerate(rel):
            owner = augments.get(name, current)
            member = f"{owner}:{name}" if ietf and (depth == 0 or owner != current) else name
            current = owner
            trail += ((name, keys),)
            if keys:
                entry = entries.get(trail)
                if entry is None:
                    entry = entries[trail] = {k: v for k, v in keys}
                    node.setdefault(member, []).append(entry)
                node = entry
            elif depth == len(rel) - 1:
                node[member] = _json_scalar(value, ietf, name)
            else:
                node = node.setdefault(member, {})
    return root


class SwitchView:
    """A switch's data tree as one tick of a stream sees it: built on first use, then shared by
    every subscription of the stream that is due in that tick (a stream of four subscriptions
    walked the whole switch four times a second)."""

    def __init__(self, switch: SimSwitch, malformed: bool) -> None:
        self.switch, self.malformed = switch, malformed
        self._containers: list[tuple[tuple[Elem, ...], dict[str, object]]] | None = None

    def containers(self) -> list[tuple[tuple[Elem, ...], dict[str, object]]]:
        if self._containers is None:
            self._containers = self.switch.containers(self.malformed)
        return self._containers


class Renderer:
    """Notifications for one subscription, in one encoding, from a switch's current state."""

    def __init__(self, switch: SimSwitch, prefix: pb.Path, sub: pb.Subscription, encoding: int) -> None:
        self.switch = switch
        self.prefix = prefix
        self.sub = sub
        self.sub_elems = _elems(sub.path)
        self.encoding = encoding

    def leaves(self, malformed: bool, view: SwitchView | None = None) -> dict[tuple[Elem, ...], object]:
        # The container is matched once, the leaves only below a container that matches: a
        # 64-port switch has ~9,000 leaves per subscription to look at, and the whole-process
        # bench needs the simulator to keep up with 32 of them on a shared machine.
        out: dict[tuple[Elem, ...], object] = {}
        sub = self.sub_elems
        view = view or SwitchView(self.switch, malformed)
        for container, values in view.containers():
            depth = len(container)
            if len(sub) <= depth:
                if _matches(sub, container):
                    for leaf, value in values.items():
                        out[container + ((leaf, ()),)] = value
            elif len(sub) == depth + 1 and _matches(sub[:depth], container):
                for leaf, value in values.items():
                    full = container + ((leaf, ()),)
                    if _matches(sub, full):
                        out[full] = value
        return out

    def render(self, malformed: bool = False, previous: RenderState | None = None,
               view: SwitchView | None = None) -> tuple[list[pb.Notification], RenderState]:
        """(notifications, state); with `previous`, only what changed since that state (ON_CHANGE).
        `view`: the switch as this tick sees it, shared by the stream's subscriptions."""
        ts = time.time_ns()
        if [name for name, _ in self.sub_elems[:2]] in (["LANZ"], ["LANZ", "congestion"]):
            return self._render_lanz(ts, previous)
        if self.switch.profile == "sonic":
            names = [name for name, _ in self.sub_elems]
            table = self.switch.sonic_table(names, malformed)
            if table is None:
                return [], {"table": table}
            # ON_CHANGE on an APPL_DB table: only what changed, a deleted key as {}
            sent = table if previous is None else gnmi_sonic.changes(previous.get("table"), table)
            if previous is not None and not sent:
                return [], {"table": table}
            update = pb.Update(path=self.sub.path, val=pb.TypedValue(json_ietf_val=json.dumps(sent).encode()))
            return [pb.Notification(timestamp=ts, prefix=self.prefix, update=[update])], {"table": table}
        leaves = self.leaves(malformed, view)
        if previous is not None:
            changed = {k: v for k, v in leaves.items() if previous.get(k, _ABSENT) != v}
        else:
            changed = leaves
        if not changed:
            return [], leaves
        origin, target = self.prefix.origin, self.prefix.target
        notes = []
        if self.encoding == pb.PROTO:
            groups: dict[tuple[Elem, ...], list[tuple[tuple[Elem, ...], object]]] = {}
            for full, value in changed.items():
                cut = self._prefix_depth(full)
                groups.setdefault(full[:cut], []).append((full[cut:], value))
            for container, items in groups.items():
                notes.append(pb.Notification(
                    timestamp=ts, prefix=_proto_path(container, origin, target),
                    update=[pb.Update(path=_proto_path(rel), val=scalar_value(v)) for rel, v in items]))
            return notes, leaves
        ietf = self.encoding == pb.JSON_IETF
        depth = len(self.sub_elems)
        instances = {full[:depth] for full in changed}
        below: dict[tuple[Elem, ...], list[tuple[tuple[Elem, ...], object]]] = {}
        for full, v in leaves.items():  # a changed instance is sent whole, every leaf below it
            if full[:depth] in instances:
                below.setdefault(full[:depth], []).append((full[depth:], v))
        augments = AUGMENT_MODULES.get(self.switch.profile, {})
        for inst in sorted(instances):
            module = BASE_MODULES.get(inst[0][0], "openconfig")
            for name, _ in inst:
                module = augments.get(name, module)
            rel = below[inst]
            doc = _json_subtree(rel, ietf, module, augments)
            raw = json.dumps(doc).encode()
            val = pb.TypedValue(json_ietf_val=raw) if ietf else pb.TypedValue(json_val=raw)
            notes.append(pb.Notification(timestamp=ts, prefix=pb.Path(origin=origin, target=target),
                                         update=[pb.Update(path=_proto_path(inst), val=val)]))
        return notes, leaves


    def _prefix_depth(self, full: tuple[Elem, ...]) -> int:
        """Where a PROTO notification's prefix ends. Cumulus 5.16 (the capture in
        shared/real/gnmi/) puts the prefix at the list entry (`system/cpus/cpu[index=0]`) and
        sends every leaf below it with a relative path (`state/kernel/max`): one notification per
        list entry. Other dialects (no PROTO capture): the leaf's parent container."""
        if self.switch.profile == "nvidia-cumulus":
            keyed = [i for i, (_, keys) in enumerate(full) if keys]
            if keyed:
                return keyed[-1] + 1
        return len(full) - 1

    def _render_lanz(self, ts: int, previous: RenderState | None
                     ) -> tuple[list[pb.Notification], RenderState]:
        """EOS eos_native LANZ as captured: prefix LANZ/congestion, one notification per congestion
        record, the record a JSON value of the update path `congestionRecord`."""
        if self.switch.profile != "arista-eos":
            return [], {}
        records = self.switch.lanz_records()
        state = {"records": [{k: v for k, v in r.items() if k != "timestamp"} for r in records]}
        if previous is not None and previous.get("records") == state["records"]:
            return [], state
        prefix = pb.Path(origin=self.prefix.origin, target=self.prefix.target,
                         elem=[pb.PathElem(name="LANZ"), pb.PathElem(name="congestion")])
        notes = [pb.Notification(timestamp=ts, prefix=prefix, update=[pb.Update(
            path=pb.Path(elem=[pb.PathElem(name="name")]), val=pb.TypedValue(string_val="congestion"))])]
        for record in records:
            raw = json.dumps(record).encode()
            val = (pb.TypedValue(json_ietf_val=raw) if self.encoding == pb.JSON_IETF
                   else pb.TypedValue(json_val=raw))
            notes.append(pb.Notification(timestamp=ts, prefix=prefix, update=[pb.Update(
                path=pb.Path(elem=[pb.PathElem(name="congestionRecord")]), val=val)]))
        return notes, state


_ABSENT = object()


# -- the gRPC service ----------------------------------------------------------------------------


# pygnmi ships no types (ignore_missing_imports): its generated gNMIServicer base is Any to mypy.
class GnmiTarget(pb_grpc.gNMIServicer):  # type: ignore[misc]
    """Serves one SimSwitch on its own loopback port."""

    def __init__(self, switch: SimSwitch, *, username: str = "", password: str = "",
                 tls: tuple[bytes, bytes] | None = None, client_ca: bytes | None = None,
                 encodings: tuple[int, ...] | None = None, min_sample_interval: float = 1.0,
                 host: str = "127.0.0.1", port: int = 0, reject_concurrent_setup: bool = False,
                 busy_setups: int = 0, setup_delay: float = 0.0,
                 refuse_origins: tuple[str, ...] = (), get: bool | None = None) -> None:
        self.switch = switch
        self.get = switch.profile not in NO_GET if get is None else get  # serve Get (else UNIMPLEMENTED)
        self.get_calls = 0
        self.username = username
        self.password = password
        self.tls = tls  # (cert chain PEM, key PEM)
        self.client_ca = client_ca  # require client certificates signed by this CA
        self.encodings = encodings or SUPPORTED[switch.profile]
        self.min_sample_interval = min_sample_interval
        self.host = host
        self.port = port
        self.fault: str | None = None
        self.fault_changed = asyncio.Event()
        self.subscribe_calls = 0
        self.active_streams = 0
        # Cumulus-like set-up refusals: while another Subscribe is being set up (until its
        # sync_response), and/or the next `busy_setups` ones, answer CANCELLED "System is busy".
        self.reject_concurrent_setup = reject_concurrent_setup
        self.busy_setups = busy_setups
        self.setup_delay = setup_delay  # seconds a set-up takes before the initial state goes out
        self.busy_refusals = 0
        self._setting_up = 0
        self.refuse_origins = refuse_origins  # e.g. ("eos_native",): EOS without that provider
        self._server: grpc.aio.Server | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        pb_grpc.add_gNMIServicer_to_server(self, server)
        bind = f"{self.host}:{self.port}"
        if self.tls:
            creds = grpc.ssl_server_credentials([(self.tls[1], self.tls[0])],
                                                root_certificates=self.client_ca,
                                                require_client_auth=self.client_ca is not None)
            self.port = server.add_secure_port(bind, creds)
        else:
            self.port = server.add_insecure_port(bind)
        await server.start()
        self._server = server

    async def stop(self, grace: float | None = None) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    async def restart(self) -> None:
        """Stop (dropping every stream) and serve again on the same port."""
        await self.stop()
        await self.start()

    def set_fault(self, fault: str | None) -> None:
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        self.fault = fault
        self.fault_changed.set()
        self.fault_changed = asyncio.Event()

    async def _gate(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        if self.fault == "refuse":
            await context.abort(grpc.StatusCode.UNAVAILABLE, "target refuses service (simulated fault)")
        if self.password:
            metadata = context.invocation_metadata()
            assert metadata is not None  # a server-side call always has its (possibly empty) metadata
            md = dict(metadata)
            if md.get("username") != self.username or md.get("password") != self.password:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid username or password")

    async def Capabilities(self, request: pb.CapabilityRequest,
                           context: grpc.aio.ServicerContext[Any, Any]) -> pb.CapabilityResponse:
        await self._gate(context)
        models = [pb.ModelData(name=n, organization=o, version=v) for n, o, v in MODELS[self.switch.profile]]
        return pb.CapabilityResponse(supported_models=models, supported_encodings=list(self.encodings),
                                     gNMI_version="0.8.0")

    async def Get(self, request: pb.GetRequest,
                  context: grpc.aio.ServicerContext[Any, Any]) -> pb.GetResponse:
        """The current state of each path, in one notification list (as a Subscribe's initial
        state would send it); a path the switch does not serve answers nothing."""
        await self._gate(context)
        self.get_calls += 1
        if not self.get:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Get is not supported")
        if request.encoding not in self.encodings:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                                f"encoding {pb.Encoding.Name(request.encoding)} not supported")
        prefix = pb.Path(origin=request.prefix.origin, target=request.prefix.target)
        if prefix.origin in self.refuse_origins:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"origin {prefix.origin} is not enabled")
        self.switch.advance()
        notes: list[pb.Notification] = []
        for path in request.path:
            rendered, _ = Renderer(self.switch, prefix, pb.Subscription(path=path), request.encoding).render()
            notes += rendered
        return pb.GetResponse(notification=notes)

    async def Set(self, request: pb.SetRequest,
                  context: grpc.aio.ServicerContext[Any, Any]) -> pb.SetResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Set is not simulated")

    async def Subscribe(self, request_iterator: AsyncIterator[pb.SubscribeRequest],
                        context: grpc.aio.ServicerContext[Any, Any]
                        ) -> AsyncIterator[pb.SubscribeResponse]:
        await self._gate(context)
        self.subscribe_calls += 1
        try:
            first = await request_iterator.__anext__()
        except StopAsyncIteration:
            return
        if not first.HasField("subscribe"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "the first request must be a SubscriptionList")
        sl = first.subscribe
        if sl.encoding not in self.encodings:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                                f"encoding {pb.Encoding.Name(sl.encoding)} not supported")
        if sl.mode not in (pb.SubscriptionList.STREAM, pb.SubscriptionList.ONCE):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                                "only STREAM and ONCE subscriptions are simulated")
        prefix = pb.Path(origin=sl.prefix.origin, target=sl.prefix.target)
        if prefix.origin in self.refuse_origins:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"origin {prefix.origin} is not enabled")
        if self.busy_setups > 0 or (self.reject_concurrent_setup and self._setting_up):
            self.busy_setups = max(0, self.busy_setups - 1)
            self.busy_refusals += 1
            await context.abort(grpc.StatusCode.CANCELLED, BUSY)
        plans = []
        for sub in sl.subscription:
            interval = sub.sample_interval / 1e9
            if sub.mode == pb.SAMPLE and 0 < interval < self.min_sample_interval:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"invalid interval: sample_interval below {self.min_sample_interval:g}s")
            plans.append(_Plan(Renderer(self.switch, prefix, sub, sl.encoding), sub))
        self.active_streams += 1
        self._setting_up += 1
        setting_up = True
        try:
            if self.setup_delay:
                await asyncio.sleep(self.setup_delay)
            async for resp in self._stream(plans, once=sl.mode == pb.SubscriptionList.ONCE):
                if setting_up and resp.sync_response:
                    self._setting_up -= 1
                    setting_up = False
                yield resp
            # the target stops serving a dropped stream with an error, as a reset switch would
            if self.fault == "drop":
                await context.abort(grpc.StatusCode.UNAVAILABLE, "stream dropped (simulated fault)")
        finally:
            self.active_streams -= 1
            if setting_up:
                self._setting_up -= 1

    async def _stream(self, plans: list[_Plan], once: bool = False) -> AsyncIterator[pb.SubscribeResponse]:
        switch = self.switch
        switch.advance()
        sent_deletes = len(switch.pending_deletes)
        while self.fault == "stall":
            await self.fault_changed.wait()
        malformed = self.fault == "malformed"
        view = SwitchView(switch, malformed)
        for plan in plans:
            notes, plan.state = plan.renderer.render(malformed, view=view)
            plan.last_sent = time.monotonic()
            for n in notes:
                yield pb.SubscribeResponse(update=n)
        yield pb.SubscribeResponse(sync_response=True)
        if self.fault == "drop" or once:  # ONCE: everything, the sync, then the RPC ends
            return
        tick = min([p.period for p in plans if p.period] + [1.0])
        tick = max(0.05, min(tick, 0.5))
        while True:
            await asyncio.sleep(tick)
            while self.fault == "stall":
                await self.fault_changed.wait()
            if self.fault in ("drop", "refuse"):
                return
            malformed = self.fault == "malformed"
            switch.advance()
            if len(switch.pending_deletes) > sent_deletes:
                origin = plans[0].renderer.prefix.origin if plans else ""
                deletes = [_proto_path(_tuple_path(p)) for p in switch.pending_deletes[sent_deletes:]]
                sent_deletes = len(switch.pending_deletes)
                yield pb.SubscribeResponse(update=pb.Notification(
                    timestamp=time.time_ns(), prefix=pb.Path(origin=origin), delete=deletes))
            now = time.monotonic()
            view = SwitchView(switch, malformed)
            for plan in plans:
                notes = plan.due(now, view)
                for n in notes:
                    yield pb.SubscribeResponse(update=n)


def _tuple_path(text: str) -> tuple[Elem, ...]:
    return tuple((name, tuple(sorted(keys.items()))) for name, keys in parse_path(text))


class _Plan:
    """When and what to send for one subscription."""

    def __init__(self, renderer: Renderer, sub: pb.Subscription) -> None:
        self.renderer = renderer
        self.on_change = sub.mode == pb.ON_CHANGE
        self.period = (sub.sample_interval / 1e9 or 1.0) if not self.on_change else 0.0
        self.heartbeat = sub.heartbeat_interval / 1e9
        self.state: RenderState = {}
        self.last_sent = 0.0

    def due(self, now: float, view: SwitchView) -> list[pb.Notification]:
        malformed = view.malformed
        if self.on_change:
            if self.heartbeat and now - self.last_sent >= self.heartbeat:
                notes, self.state = self.renderer.render(malformed, view=view)
                self.last_sent = now
                return notes
            notes, self.state = self.renderer.render(malformed, previous=self.state, view=view)
            if notes:
                self.last_sent = now
            return notes
        if now - self.last_sent + 1e-3 < self.period:
            return []
        self.last_sent = now
        notes, self.state = self.renderer.render(malformed, view=view)
        return notes


# -- a fabric of targets (demo, tests) ------------------------------------------------------------


class SimFabric:
    """N switches x M ports, one target each; nodes' NICs are the LLDP neighbours (rail-optimised:
    NIC j of every node is cabled to switch j, node k on port k)."""

    def __init__(self, switches: list[SimSwitch], **target_options: Any) -> None:
        self.switches = switches
        self.targets = [GnmiTarget(s, **target_options) for s in switches]

    @classmethod
    def rails(cls, nodes: Iterable[str], profiles: Iterable[str], ports: int = 16,
              nics: tuple[str, ...] = ("ens1f0np0", "ens2f0np0", "ens3f0np0", "ens4f0np0"),
              scenarios: ScenarioBoard | None = None, **target_options: Any) -> SimFabric:
        nodes = list(nodes)
        switches = []
        for rail, profile in enumerate(profiles):
            nic = nics[rail % len(nics)]
            neighbors = {k: (node, nic) for k, node in enumerate(nodes) if k < ports}
            sw = SimSwitch(f"leaf{rail + 1:02d}", profile, ports=ports, neighbors=neighbors, seed=rail)
            # anomalies hit rail 1 only: leaf01's ports to the first three nodes (storm, ECN, flap)
            sw.scenarios = scenarios if rail == 0 else None
            if scenarios is not None and rail == 0:  # the node on each faulty port (fault_coupling.py)
                for name, port in (("pfc-storm", sw.storm_port), ("ecn-spike", sw.ecn_port),
                                   ("link-flap", sw.flap_port)):
                    if port in neighbors:
                        scenarios.place(name, *neighbors[port])
            switches.append(sw)
        return cls(switches, **target_options)

    async def start(self) -> None:
        for target in self.targets:
            await target.start()

    async def close(self) -> None:
        for target in self.targets:
            await target.stop()


# The demo's switches stream their counters every 2 s, the demo daemon's default --interval (make
# demo's Prometheus scrapes every 5 s, the end-to-end alerting walk every 2 s). A sample every
# second cost the demo a third of a core more (four simulated switches rendering 16 ports each, and
# the gRPC streams carrying them) for values a scrape mostly never read.
DEMO_SAMPLE_INTERVAL = "2s"


async def demo_part(ctx: DemoContext) -> DemoPart:
    """Four leaf switches (one per profile) on loopback, TLS from a throwaway CA, password auth."""
    from .certs import make_test_pki
    from .demo import DemoPart

    pki_dir = Path(ctx.workdir) / "gnmi-pki"
    pki = make_test_pki(pki_dir)
    password_file = pki_dir / "gnmi-password"
    password = f"demo-{random.Random().getrandbits(48):012x}"
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)
    # leaf01 carries the anomalies, so it speaks the dialect with every family (PFC durations,
    # queue depth, carrier transitions): nvidia-cumulus.
    demo_profiles = ("nvidia-cumulus", "sonic", "openconfig", "arista-eos")
    fabric = SimFabric.rails(ctx.nodes, demo_profiles, ports=16, scenarios=ctx.scenarios,
                             username="infrapulse", password=password,
                             tls=(pki.read("server_cert"), pki.read("server_key")))
    await fabric.start()
    sources = {"gnmi": {
        "defaults": {"sample_interval": DEMO_SAMPLE_INTERVAL, "username": "infrapulse",
                     "password_file": str(password_file),
                     "tls": {"ca_file": str(pki.ca_file), "server_name": "localhost"}},
        # the simulated SONiC is a current release: read it with the profile that has PG watermarks
        "targets": [{"name": t.switch.name, "address": t.address,
                     "profile": "sonic-202511" if t.switch.profile == "sonic" else t.switch.profile}
                    for t in fabric.targets],
    }}
    return DemoPart(name="gnmi", sources=sources, close=fabric.close,
                    description=f"{len(fabric.targets)} gNMI switches (TLS, password) on "
                                + ", ".join(t.address for t in fabric.targets))
