"""Topology signals: the switch ports whose LLDP neighbour is this host, scored with the network
signals' values (in-process, when one instance runs both a node source and gnmi)."""

from __future__ import annotations

from collections.abc import Callable

from .base import (
    PER_SECOND,
    RATIO,
    Context,
    Measurement,
    Signal,
)

NODE_SOURCES = "infiniband|ethtool|nvml|dcgm|serving"


def _same_host(a: str, b: str) -> bool:
    """LLDP system names may be FQDNs; compare the first label, case-insensitively."""
    a, b = a.strip().lower(), b.strip().lower()
    return bool(a) and (a == b or a.split(".")[0] == b.split(".")[0])


def served_ports(ctx: Context) -> dict[tuple[str, str], str]:
    """(switch, interface) of every switch port whose LLDP neighbour is this host -> NIC port."""
    out = {}
    for s in ctx.readings.series("infrapulse_switch_lldp_neighbor_info"):
        if _same_host(s.labels.get("neighbor_system", ""), ctx.hostname):
            port = (s.labels.get("switch", ""), s.labels.get("interface", ""))
            out[port] = s.labels.get("neighbor_port", "")
    return out


def _uplink(base: str) -> Callable[[Context], list[Measurement] | None]:
    def measure(ctx: Context) -> list[Measurement] | None:
        ports = served_ports(ctx)
        if ctx.results.get(base) is None and base in ctx.results:
            return None  # the base signal does not apply (e.g. no frame-only ports)
        out = []
        for m in ctx.results.get(base) or []:
            key = (m.labels.get("switch", ""), m.labels.get("interface", ""))
            if "switch" in m.labels and key in ports:
                note = f"serves {ctx.hostname} {ports[key]}".rstrip()
                out.append(Measurement(m.target, m.value, "; ".join(x for x in (m.note, note) if x),
                                       m.labels))
        return out
    return measure



SIGNALS: list[Signal] = [
    Signal(
        name="uplink_ecn_marked_ratio",
        component="topology",
        title="ECN-marked ratio on this host's switch ports",
        formula=("ecn_marked_ratio of the switch queues on ports whose "
                 "lldp_neighbor_info{neighbor_system} is this host"),
        unit=RATIO,
        window="window",
        good=0.001,
        bad=0.05,
        weight=1.0,
        phrase="{value} of packets ECN-marked",
        hint=("the switch port serving this host is congested: traffic to this node (incast) or a slow "
              "NIC; compare with the node's CNP rate"),
        measure=_uplink("ecn_marked_ratio"),
        families=("infrapulse_switch_lldp_neighbor_info", "infrapulse_switch_queue_ecn_marked_packets_total"),
        sources=("gnmi", NODE_SOURCES),
        thresholds_from="ecn_marked_ratio",
        requires_all_sources=True,
    ),
    Signal(
        name="uplink_pfc_pause_ratio",
        component="topology",
        title="PFC pause time on this host's switch ports",
        formula="pfc_pause_ratio of the switch ports whose LLDP neighbour is this host",
        unit=RATIO,
        window="window",
        good=0.005,
        bad=0.2,
        weight=1.0,
        phrase="pause in effect {value} of the time",
        hint=("the switch port serving this host is paused: this node (or its peer) cannot drain; check "
              "for a PFC storm from the NIC"),
        measure=_uplink("pfc_pause_ratio"),
        families=(
            "infrapulse_switch_lldp_neighbor_info",
            "infrapulse_switch_pfc_pause_duration_seconds_total",
        ),
        sources=("gnmi", NODE_SOURCES),
        thresholds_from="pfc_pause_ratio",
        requires_all_sources=True,
    ),
    Signal(
        name="uplink_pfc_pause_frames_rate",
        component="topology",
        title="PFC pause frames on this host's switch ports",
        formula="pfc_pause_frames_rate of the switch ports whose LLDP neighbour is this host",
        unit=PER_SECOND,
        window="window",
        good=50.0,
        bad=1000.0,
        weight=1.0,
        phrase="{value} PFC pause frames",
        hint=("the switch port serving this host is paused: this node (or its peer) cannot drain; check "
              "for a PFC storm from the NIC"),
        measure=_uplink("pfc_pause_frames_rate"),
        families=("infrapulse_switch_lldp_neighbor_info", "infrapulse_switch_pfc_pause_frames_total"),
        sources=("gnmi", NODE_SOURCES),
        thresholds_from="pfc_pause_frames_rate",
        requires_all_sources=True,
    ),
]
