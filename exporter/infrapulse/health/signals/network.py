"""Network signals: switch queues and ports (gNMI), NIC priorities and PHY (ethtool), RDMA link
counters (infiniband) — congestion (ECN, PFC), drops, link errors, flaps, telemetry blindness."""

from __future__ import annotations

from itertools import repeat
from operator import add, itemgetter

from . import link
from .base import (
    COUNT,
    FLAG,
    NICD,
    NICP,
    PER_SECOND,
    PORT,
    RATIO,
    SWI,
    SWP,
    SWQ,
    Context,
    Measurement,
    Signal,
    at_most_one,
    gauges_by,
    label_maker,
    measurements,
    nic_prio_name,
    paired,
    port_name,
    present_keys,
    queue_name,
    rates_by,
    ratio,
    ratios,
    rdma_ports,
    switch_prio_name,
)

NET = ("gnmi", "ethtool", "infiniband")
# Who paused whom: rx = pause frames received (the peer paused this port), tx = sent.
PFC_NOTE = {"rx": "PFC: the peer paused this port", "tx": "PFC: this port paused its peer"}
GLOBAL_PAUSE_NOTE = {"rx": "802.3x global pause: the peer paused this port",
                     "tx": "802.3x global pause: this port paused its peer"}
# NIC PHY error kinds that measure link errors, most direct first. mlx5 counts one corrupted
# frame in all three (386 / 386 / 386 in a real ConnectX capture), so one kind is taken per
# interface, never their sum. The length kinds (oversize, jabber, ...) are framing/MTU
# problems and `transmit` (tx_errors_phy) counts oversize transmit drops: not link errors.
PHY_ERROR_KINDS = (
    ("pcs_symbol", "PCS symbol errors FEC could not correct"),
    ("crc", "CRC (FCS) errors"),
    ("symbol", "symbol errors"),
)
# Status entries of the gnmi source that are about its config, not a switch.
GNMI_NON_SWITCH_TARGETS = frozenset({"shard", "targets_file"})
SWQ_LABELS, SWP_LABELS, SWI_LABELS = label_maker(SWQ), label_maker(SWP), label_maker(SWI)
QUEUE_SENT = "infrapulse_switch_queue_transmitted_packets_total"
_direction = itemgetter(3)  # of a SWP key

# The per-queue and per-port switch signals work on whole lists (Readings.rate_lists): a fabric
# has tens of thousands of these targets, and a Python-level step per target was most of a pass.


def measure_switch_ecn(ctx: Context) -> list[Measurement]:
    readings = ctx.readings
    keys, marked, sent = paired(readings.rate_lists("infrapulse_switch_queue_ecn_marked_packets_total", SWQ),
                                readings.rate_lists(QUEUE_SENT, SWQ))
    queues = readings.target_names(queue_name, SWQ_LABELS)
    return measurements(queues, keys, ratios(marked, map(max, sent, marked)), repeat(""))


def measure_nic_ecn(ctx: Context) -> list[Measurement]:
    received = rates_by(ctx, "infrapulse_rdma_port_received_packets_total", PORT)
    out = []
    # Per NIC priority (ethtool rx_prioN_marked) against the packets its RDMA port received.
    netdevs = {p.netdev: key for key, p in rdma_ports(ctx).items() if p.netdev}
    for (iface, prio), m in rates_by(ctx, "infrapulse_nic_ecn_marked_packets_total",
                                     ("interface", "priority")).items():
        r = received.get(netdevs.get(iface, ("", "")))
        if r is not None:
            out.append(Measurement(f"{iface} priority {prio}", ratio(m.increase, max(r.increase, m.increase)),
                                   labels={"interface": iface, "priority": prio}))
    # Per RDMA port (np_ecn_marked_roce_packets).
    for k, m in rates_by(ctx, "infrapulse_rdma_ecn_marked_packets_total", PORT).items():
        r = received.get(k)
        if r is not None:
            out.append(Measurement(port_name(k), ratio(m.increase, max(r.increase, m.increase)),
                                   labels=dict(zip(PORT, k))))
    return out


def global_pause_name(k: tuple[str, ...]) -> str:
    return f"{k[0]} global pause {k[1]}"


def measure_pfc_ratio(ctx: Context) -> list[Measurement]:
    """Share of the window a pause was in effect: PFC per priority (switch and NIC) and IEEE
    802.3x global pause per NIC, which stops the whole link (all priorities) just the same."""
    priorities = ctx.readings.target_names(switch_prio_name, SWP_LABELS)
    paused = ctx.readings.rate_lists("infrapulse_switch_pfc_pause_duration_seconds_total", SWP)
    out = measurements(priorities, paused.keys, at_most_one(paused.per_second),
                       map(PFC_NOTE.get, map(_direction, paused.keys), repeat("")))
    for k, r in rates_by(ctx, "infrapulse_nic_pfc_pause_duration_seconds_total", NICP).items():
        out.append(Measurement(nic_prio_name(k), min(r.per_second, 1.0), PFC_NOTE.get(k[2], ""),
                               labels=dict(zip(NICP, k))))
    for k, r in rates_by(ctx, "infrapulse_nic_global_pause_duration_seconds_total", NICD).items():
        out.append(Measurement(global_pause_name(k), min(r.per_second, 1.0), GLOBAL_PAUSE_NOTE.get(k[1], ""),
                               labels=dict(zip(NICD, k))))
    return out


def measure_pfc_frames(ctx: Context) -> list[Measurement] | None:
    """Pause frames per second, only where no pause duration is reported for the same port.

    None (not applicable) when every port with pause frames also reports a duration: then
    pfc_pause_ratio covers them and this signal must not count as missing data."""
    out = []
    untimed_ports = timed_ports = 0
    for frames, durations, keys, name, notes in (
            ("infrapulse_switch_pfc_pause_frames_total", "infrapulse_switch_pfc_pause_duration_seconds_total",
             SWP, switch_prio_name, PFC_NOTE),
            ("infrapulse_nic_pfc_pause_frames_total", "infrapulse_nic_pfc_pause_duration_seconds_total",
             NICP, nic_prio_name, PFC_NOTE),
            ("infrapulse_nic_global_pause_frames_total", "infrapulse_nic_global_pause_duration_seconds_total",
             NICD, global_pause_name, GLOBAL_PAUSE_NOTE)):
        same = _same_series(ctx, frames, durations, keys)
        if same is not None:  # every port with frames reports a duration
            timed_ports += same
            continue
        timed = present_keys(ctx, durations, keys)
        frame_keys = present_keys(ctx, frames, keys)
        untimed = len(frame_keys - timed)
        untimed_ports += untimed
        timed_ports += len(frame_keys & timed)
        if not untimed:
            continue  # every port with frames reports a duration: no frame rate is needed
        for k, r in rates_by(ctx, frames, keys).items():
            if k not in timed:
                out.append(Measurement(name(k), r.per_second, notes.get(k[-1], ""),
                                       labels=dict(zip(keys, k))))
    if not untimed_ports and timed_ports:
        return None
    return out


def _same_series(ctx: Context, a: str, b: str, keys: tuple[str, ...]) -> int | None:
    """How many series family `a` has where `keys` are its labels and family `b` has the same
    label tuples in the same order in every source instance (a switch's pause frames and
    durations): then `present_keys` of both are one set, and comparing the lists, mostly
    identical tuples, is cheaper than building it. Else None."""
    readings = ctx.readings
    store = readings.store
    if store is None or readings.label_names(a) != keys or readings.label_names(b) != keys:
        return None
    count = 0
    for _, snap in store.snapshots():
        mine = list(snap.series.get(a) or ())
        if mine != list(snap.series.get(b) or ()):
            return None
        count += len(mine)
    return count


def measure_pause_storms(ctx: Context) -> list[Measurement]:
    family = "infrapulse_nic_pause_storm_events_total"
    total = rates_by(ctx, family, ("interface",))
    by_level = rates_by(ctx, family, ("interface", "level"))
    out = []
    for (iface,), r in total.items():
        levels = sorted(lv for (i, lv), lr in by_level.items() if i == iface and lr.increase > 0)
        out.append(Measurement(iface, r.increase, ", ".join(levels), labels={"interface": iface}))
    return out


def measure_queue_drops(ctx: Context) -> list[Measurement]:
    readings = ctx.readings
    keys, dropped, sent = paired(readings.rate_lists("infrapulse_switch_queue_dropped_packets_total", SWQ),
                                 readings.rate_lists(QUEUE_SENT, SWQ))
    queues = readings.target_names(queue_name, SWQ_LABELS)
    return measurements(queues, keys, ratios(dropped, map(add, sent, dropped)), repeat(""))


def measure_phy_errors(ctx: Context) -> list[Measurement]:
    """Link errors per switch port (FCS), per NIC (one PHY error kind, PHY_ERROR_KINDS) and per
    InfiniBand port (symbol errors; on RoCE ports the NIC's own PHY counters say it)."""
    out = []
    for k, r in rates_by(ctx, "infrapulse_switch_interface_fcs_errors_total", SWI).items():
        out.append(Measurement(f"{k[0]} {k[1]}", r.per_second, "FCS", labels=SWI_LABELS(k)))
    by_kind = rates_by(ctx, "infrapulse_nic_phy_errors_total", ("interface", "kind"))
    for iface in sorted({iface for iface, _ in by_kind}):
        for kind, note in PHY_ERROR_KINDS:
            rate = by_kind.get((iface, kind))
            if rate is not None:
                out.append(Measurement(iface, rate.per_second, note,
                                       labels={"interface": iface, "kind": kind}))
                break
    ports = rdma_ports(ctx)
    for k, r in rates_by(ctx, "infrapulse_rdma_port_symbol_errors_total", PORT).items():
        port = ports.get((k[0], k[1]))
        if port is not None and port.roce:
            continue  # the PMA counters of an Ethernet port are not its link health
        note = "symbol errors; counter saturated, true rate may be higher" if r.saturated else "symbol errors"
        out.append(Measurement(port_name(k), r.per_second, note, labels=dict(zip(PORT, k))))
    return out


def measure_link_flaps(ctx: Context) -> list[Measurement]:
    """Carrier transitions per switch port, per NIC and per InfiniBand port over link.window
    (signals/link.py defines a port's transitions; >= the bad threshold is "flapping").

    `link_downed` is an InfiniBand PMA counter, not meaningful on a RoCE (Ethernet) port: there
    the NIC's carrier changes and `link_down_events_phy` of the port's netdev count, through the
    NIC target."""
    out = []
    for k, r in rates_by(ctx, "infrapulse_switch_interface_carrier_transitions_total", SWI,
                         link.LINK).items():
        out.append(Measurement(f"{k[0]} {k[1]}", r.increase, labels=SWI_LABELS(k)))
    ports = rdma_ports(ctx)
    roce_netdevs = {p.netdev: p for p in ports.values() if p.roce and p.netdev}
    for iface, moved in link.nic_transitions(ctx).items():
        port = roce_netdevs.get(iface)
        roce = f"RoCE {port_name((port.device, port.port))}" if port is not None else ""
        out.append(Measurement(iface, moved.value, link.join(moved.evidence, roce, link.behind(ctx, iface)),
                               labels={"interface": iface}))
    for k, moved in link.ib_transitions(ctx).items():
        out.append(Measurement(port_name(k), moved.value, moved.evidence, labels=dict(zip(PORT, k))))
    return out


def measure_switch_ports_down(ctx: Context) -> list[Measurement]:
    """1 for a cabled switch port that is operationally down: one with an LLDP neighbour, or
    whose carrier moved over link.window (it was up a moment ago). An unused, never-cabled port
    is not a fault; InfrapulseSwitchInterfaceDown pages on the same ports."""
    cabled = set(gauges_by(ctx, "infrapulse_switch_lldp_neighbor_info", SWI))
    cabled |= {k for k, r in rates_by(ctx, "infrapulse_switch_interface_carrier_transitions_total", SWI,
                                      link.LINK).items() if r.increase > 0}
    out = []
    for k, up in sorted(gauges_by(ctx, "infrapulse_switch_interface_oper_up", SWI, min).items()):
        if k in cabled:
            down = up < 1
            out.append(Measurement(f"{k[0]} {k[1]}", 1.0 if down else 0.0, "oper down" if down else "",
                                   labels=SWI_LABELS(k)))
    return out


def measure_gnmi_down(ctx: Context) -> list[Measurement]:
    out = {}
    for (switch,), up in gauges_by(ctx, "infrapulse_switch_up", ("switch",)).items():
        out[switch] = Measurement(switch, 0.0 if up >= 1 else 1.0, labels={"switch": switch})
    store = ctx.readings.store
    if store is not None:
        # A switch whose stream never came up has no infrapulse_switch_up yet, only a status.
        for (source, target), status in list(store.status.items()):
            if source != "gnmi" or target in GNMI_NON_SWITCH_TARGETS:
                continue
            if not status.up:
                out[target] = Measurement(target, 1.0, status.reason, labels={"switch": target})
            elif target not in out:
                out[target] = Measurement(target, 0.0, labels={"switch": target})
    return list(out.values())



SIGNALS: list[Signal] = [
    Signal(
        name="ecn_marked_ratio",
        component="network",
        title="ECN-marked ratio (switch queues)",
        formula="increase(queue_ecn_marked_packets) / increase(queue_transmitted_packets) per switch queue",
        unit=RATIO,
        window="window",
        good=0.001,
        bad=0.05,
        weight=3.0,
        phrase="{value} of packets ECN-marked",
        hint=("congestion on this queue: look at the flows behind it, the ECN/WRED thresholds and DCQCN "
              "tuning"),
        measure=measure_switch_ecn,
        families=(
            "infrapulse_switch_queue_ecn_marked_packets_total",
            "infrapulse_switch_queue_transmitted_packets_total",
        ),
        sources=("gnmi",),
        counters=(
            "infrapulse_switch_queue_ecn_marked_packets_total",
            "infrapulse_switch_queue_transmitted_packets_total",
        ),
    ),
    Signal(
        name="nic_ecn_marked_ratio",
        component="network",
        title="ECN-marked ratio (NIC priorities and RDMA ports)",
        formula=("increase(nic_ecn_marked_packets{priority}) or increase(rdma_ecn_marked_packets) / "
                 "increase(rdma_port_received_packets) of the port behind the NIC"),
        unit=RATIO,
        window="window",
        good=0.001,
        bad=0.05,
        weight=2.0,
        phrase="{value} of received packets ECN-marked",
        hint=("the path into this NIC is congested: check the switch port that serves it (topology) and "
              "the senders' DCQCN settings"),
        measure=measure_nic_ecn,
        families=(
            "infrapulse_nic_ecn_marked_packets_total",
            "infrapulse_rdma_ecn_marked_packets_total",
            "infrapulse_rdma_port_received_packets_total",
            "infrapulse_rdma_port_info",
        ),
        sources=("ethtool", "infiniband"),
        counters=(
            "infrapulse_nic_ecn_marked_packets_total",
            "infrapulse_rdma_ecn_marked_packets_total",
            "infrapulse_rdma_port_received_packets_total",
        ),
    ),
    Signal(
        name="pfc_pause_ratio",
        component="network",
        title="Pause time ratio (PFC and 802.3x global pause)",
        formula=("increase(pfc_pause_duration_seconds) / window per port, priority and direction (switch "
                 "and NIC), and increase(nic_global_pause_duration_seconds) / window per NIC and direction"),
        unit=RATIO,
        window="window",
        good=0.005,
        bad=0.2,
        weight=3.0,
        phrase="pause in effect {value} of the time",
        hint=("a lossless priority (with 802.3x global pause: the whole link) is being paused: find the "
              "congested receiver (PFC storm or a slow host), check the PFC watchdog and buffer headroom"),
        measure=measure_pfc_ratio,
        families=(
            "infrapulse_switch_pfc_pause_duration_seconds_total",
            "infrapulse_nic_pfc_pause_duration_seconds_total",
            "infrapulse_nic_global_pause_duration_seconds_total",
        ),
        sources=("gnmi", "ethtool"),
        counters=(
            "infrapulse_switch_pfc_pause_duration_seconds_total",
            "infrapulse_nic_pfc_pause_duration_seconds_total",
            "infrapulse_nic_global_pause_duration_seconds_total",
        ),
        critical=True,
    ),
    Signal(
        name="pfc_pause_frames_rate",
        component="network",
        title="Pause frames per second (where no pause time is reported)",
        formula=("rate(pfc_pause_frames) per port, priority and direction, and rate(nic_global_pause_frames) "
                 "per NIC and direction, where no pause duration is reported"),
        unit=PER_SECOND,
        window="window",
        good=50.0,
        bad=1000.0,
        weight=2.0,
        phrase="{value} pause frames",
        hint=("a lossless priority (with 802.3x global pause: the whole link) is being paused: find the "
              "congested receiver (PFC storm or a slow host), check the PFC watchdog and buffer headroom"),
        measure=measure_pfc_frames,
        families=(
            "infrapulse_switch_pfc_pause_frames_total",
            "infrapulse_nic_pfc_pause_frames_total",
            "infrapulse_nic_global_pause_frames_total",
            "infrapulse_switch_pfc_pause_duration_seconds_total",
            "infrapulse_nic_pfc_pause_duration_seconds_total",
            "infrapulse_nic_global_pause_duration_seconds_total",
        ),
        sources=("gnmi", "ethtool"),
        counters=(
            "infrapulse_switch_pfc_pause_frames_total",
            "infrapulse_nic_pfc_pause_frames_total",
            "infrapulse_nic_global_pause_frames_total",
        ),
    ),
    Signal(
        name="pfc_storm_events",
        component="network",
        title="PFC pause storm events",
        formula=("increase(nic_pause_storm_events) summed over levels (warning, error), per NIC, over the "
                 "window"),
        unit=COUNT,
        window="window",
        good=0.0,
        bad=1.0,
        weight=2.0,
        phrase="{value} PFC pause storm event(s)",
        hint=("the NIC's storm guard tripped: this host stopped draining its receive queue (hung driver "
              "or application, PCIe backpressure); check the host and drain it if the storm goes on"),
        measure=measure_pause_storms,
        families=("infrapulse_nic_pause_storm_events_total",),
        sources=("ethtool",),
        counters=("infrapulse_nic_pause_storm_events_total",),
        critical=True,
    ),
    Signal(
        name="queue_drop_ratio",
        component="network",
        title="Queue drop ratio",
        formula=("increase(queue_dropped_packets) / (increase(queue_transmitted_packets) + "
                 "increase(queue_dropped_packets))"),
        unit=RATIO,
        window="window",
        good=1e-05,
        bad=0.001,
        weight=2.0,
        phrase="{value} of packets dropped",
        hint=("packets are lost on this queue: on a lossless (RoCE) priority check PFC is enabled end to "
              "end; otherwise check buffer profiles and oversubscription"),
        measure=measure_queue_drops,
        families=(
            "infrapulse_switch_queue_dropped_packets_total",
            "infrapulse_switch_queue_transmitted_packets_total",
        ),
        sources=("gnmi",),
        counters=(
            "infrapulse_switch_queue_dropped_packets_total",
            "infrapulse_switch_queue_transmitted_packets_total",
        ),
    ),
    Signal(
        name="phy_error_rate",
        component="network",
        title="FCS / symbol error rate",
        formula=("rate(switch_interface_fcs_errors) per switch port; rate(nic_phy_errors) of one kind per "
                 "NIC (pcs_symbol, else crc, else symbol: never their sum); rate(rdma_port_symbol_errors) "
                 "per InfiniBand port"),
        unit=PER_SECOND,
        window="window",
        good=0.01,
        bad=1.0,
        weight=2.0,
        phrase="{value} link errors",
        hint="a bad cable, optic or connector: reseat or replace it and check the optic's DOM readings",
        measure=measure_phy_errors,
        families=(
            "infrapulse_switch_interface_fcs_errors_total",
            "infrapulse_nic_phy_errors_total",
            "infrapulse_rdma_port_symbol_errors_total",
            "infrapulse_rdma_port_info",
        ),
        sources=NET,
        counters=(
            "infrapulse_switch_interface_fcs_errors_total",
            "infrapulse_nic_phy_errors_total",
            "infrapulse_rdma_port_symbol_errors_total",
        ),
    ),
    Signal(
        name="switch_port_down",
        component="network",
        title="Cabled switch port down",
        formula=("1 when switch_interface_oper_up == 0 on a port with an LLDP neighbour or whose carrier "
                 "moved over link.window"),
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=3.0,
        phrase="switch port down",
        hint="a cabled port lost its link: check the optic/cable and the host NIC on the other end",
        measure=measure_switch_ports_down,
        families=("infrapulse_switch_interface_oper_up", "infrapulse_switch_lldp_neighbor_info"),
        sources=("gnmi",),
        counters=("infrapulse_switch_interface_carrier_transitions_total",),
        critical=True,
    ),
    Signal(
        name="link_flaps",
        component="network",
        title="Link flaps (carrier transitions)",
        formula=("increase(switch_interface_carrier_transitions) per switch port; max(increase("
                 "nic_carrier_changes), 2 x increase(nic_link_down_events)) per NIC; 3 x "
                 "increase(rdma_port_link_downed) per InfiniBand port (a RoCE port counts through its "
                 "NIC); over link.window. At or above bad the port is flapping"),
        unit=COUNT,
        window="link_window",
        good=0.0,
        bad=3.0,
        weight=3.0,
        phrase="flapping: {value} carrier transition(s)",
        hint=("an unstable link: check the cable/optic and both ends' logs; drain the node if it keeps "
              "flapping"),
        measure=measure_link_flaps,
        families=(
            "infrapulse_switch_interface_carrier_transitions_total",
            "infrapulse_nic_carrier_changes_total",
            "infrapulse_nic_link_down_events_total",
            "infrapulse_rdma_port_link_downed_total",
            "infrapulse_rdma_port_info",
            "infrapulse_switch_lldp_neighbor_info",
        ),
        sources=NET,
        counters=(
            "infrapulse_switch_interface_carrier_transitions_total",
            "infrapulse_nic_carrier_changes_total",
            "infrapulse_nic_link_down_events_total",
            "infrapulse_rdma_port_link_downed_total",
        ),
        critical=True,
    ),
    Signal(
        name="gnmi_stream_down",
        component="network",
        title="gNMI stream down",
        formula="1 - switch_up per switch (or the gnmi source's status when the stream never came up)",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=1.0,
        phrase="gNMI telemetry stream is down",
        hint="the switch's telemetry is blind: check its gNMI server, credentials, TLS and reachability",
        measure=measure_gnmi_down,
        families=("infrapulse_switch_up",),
        sources=("gnmi",),
    ),
]
