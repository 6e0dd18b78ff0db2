"""The SONiC dialect of the simulated switch: what sonic-gnmi answers for each path.

Shapes follow sonic-gnmi (sonic_data_client/virtual_db.go, db_client.go) and the real replies in
shared/real/gnmi/sonic_*:

  COUNTERS/Ethernet*/<FIELD>       {"<port key>": {"<FIELD>": "<n>"}, ...}; ports without the
                                   field are left out (a field nobody collects answers {})
  COUNTERS/Ethernet*/Queues        {"<port key>:<q>": {fields}, "<port key>:<q>:periodic":
                                   {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": ...}}; PFC-watchdog
                                   fields and CURR_OCCUPANCY_BYTES only on the watchdog's queues
  PERIODIC_WATERMARKS/Ethernet*/PriorityGroups
                                   {"<port key>:<pg>": {shared and XOFF-room watermarks}}
  PORT_TABLE, LLDP_ENTRY_TABLE     APPL_DB whole tables keyed by SONiC name; ON_CHANGE sends the
                                   changed keys only and a deleted key as {"<name>": {}}

The port key of the COUNTERS_DB wildcard paths is the CONFIG_DB alias (here etp<n>, as on NVIDIA
SONiC), never the SONiC name (Ethernet<4n>). Every value is a string. Which PFC pause-duration
field a port has depends on the platform, as in sonic-swss orchagent/orchdaemon.cpp.
"""

from __future__ import annotations

import re
import time
from typing import Any, Protocol

from .gnmi_port import SimPort


class SimSwitch(Protocol):
    """What the SONiC dialect reads of a simulated switch (gnmi_target.SimSwitch)."""

    ports: list[SimPort]
    platform: str

PLATFORMS = ("mellanox", "broadcom", "marvell")
PFC_WD_QUEUES = (3, 4)  # the lossless queues the PFC watchdog polls (pfc_enable 3,4)
SPEED_MBPS = 400_000
_PFC_FIELD = re.compile(r"(SAI|EST)_PORT_STAT_PFC_(\d)_(RX_PKTS|TX_PKTS|ON2OFF_RX_PKTS|RX_PAUSE_DURATION_US|"
                        r"RX_PAUSE_DURATION)")
_PORT_FIELDS = {
    "SAI_PORT_STAT_IF_IN_OCTETS": "in_octets", "SAI_PORT_STAT_IF_OUT_OCTETS": "out_octets",
    "SAI_PORT_STAT_IF_IN_ERRORS": "in_errors", "SAI_PORT_STAT_IF_OUT_ERRORS": "out_errors",
    "SAI_PORT_STAT_IF_IN_DISCARDS": "in_discards", "SAI_PORT_STAT_IF_OUT_DISCARDS": "out_discards",
    "SAI_PORT_STAT_DOT3_STATS_FCS_ERRORS": "fcs_errors",
}


def alias(index: int) -> str:
    return f"etp{index + 1}"


def ctime_utc(when: float) -> str:
    """sonic-swss's last_down_time format (strftime "%a %b %d %H:%M:%S %Y" of gmtime)."""
    return time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(when))


def pause_quanta(port: SimPort, prio: int) -> int:
    """SAI_PORT_STAT_PFC_n_RX_PAUSE_DURATION: pause quanta of 512 bit times at the port speed."""
    return port.pfc_rx_us[prio] * SPEED_MBPS // 512


def port_field(port: SimPort, name: str, platform: str) -> int | None:
    """A port's COUNTERS field, or None where the platform does not have it."""
    attr = _PORT_FIELDS.get(name)
    if attr is not None:
        return int(getattr(port, attr))
    m = _PFC_FIELD.fullmatch(name)
    if m is None:
        return None
    kind, prio, what = m.group(1), int(m.group(2)), m.group(3)
    if kind == "SAI" and what == "RX_PKTS":
        return port.pfc_rx[prio]
    if kind == "SAI" and what == "TX_PKTS":
        return port.pfc_tx[prio]
    # written by the PFC watchdog, per platform (orchdaemon.cpp, pfc_detect_<platform>.lua)
    if platform == "mellanox" and kind == "SAI" and what == "RX_PAUSE_DURATION_US":
        return port.pfc_rx_us[prio]
    if platform == "marvell" and kind == "SAI" and what == "RX_PAUSE_DURATION":
        return pause_quanta(port, prio)
    if platform == "broadcom" and kind == "SAI" and what == "ON2OFF_RX_PKTS":
        return port.pfc_on2off[prio]
    if platform == "broadcom" and kind == "EST" and what == "RX_PAUSE_DURATION_US":
        return port.pfc_rx_us[prio]
    return None


def table(switch: SimSwitch, path: list[str], malformed: bool = False) -> dict[str, Any] | None:
    """The JSON map a SONiC path returns, or None for a path sonic-gnmi would not serve."""
    ports = switch.ports
    if len(path) == 3 and path[0] == "COUNTERS" and path[1] == "Ethernet*":
        if path[2] == "Queues":
            return _queues(ports)
        out: dict[str, Any] = {}
        for p in ports:
            value = port_field(p, path[2], switch.platform)
            if value is not None:
                bad = malformed and p.index == 0 and path[2] == "SAI_PORT_STAT_IF_IN_OCTETS"
                out[alias(p.index)] = {path[2]: "garbage" if bad else str(value)}
        return out
    if path == ["PERIODIC_WATERMARKS", "Ethernet*", "PriorityGroups"]:
        return {f"{alias(p.index)}:{pg}": {
            "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES": str(p.pg_shared_wm[pg]),
            "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES": str(p.pg_headroom_wm[pg])}
            for p in ports for pg in range(len(p.pg_shared_wm))}
    if path == ["PORT_TABLE"]:
        return {p.name: _port_entry(p) for p in ports}
    if path == ["LLDP_ENTRY_TABLE"]:
        return {p.name: {"lldp_rem_sys_name": p.neighbor[0], "lldp_rem_port_id": p.neighbor[1],
                         "lldp_rem_port_desc": f"{p.neighbor[0]} {p.neighbor[1]}", "lldp_rem_index": "1"}
                for p in ports if p.neighbor}
    return None


def changes(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """An APPL_DB whole-table ON_CHANGE update: changed keys in full, deleted ones as {}."""
    old = old or {}
    out = {k: v for k, v in new.items() if old.get(k) != v}
    out.update({k: {} for k in old if k not in new})
    return out


def _queues(ports: list[SimPort]) -> dict[str, Any]:
    out: dict[str, dict[str, str]] = {}
    for p in ports:
        key = alias(p.index)
        for q in range(len(p.q_tx_pkts)):
            fields = {
                "SAI_QUEUE_STAT_PACKETS": str(p.q_tx_pkts[q]), "SAI_QUEUE_STAT_BYTES": str(p.q_tx_bytes[q]),
                "SAI_QUEUE_STAT_DROPPED_PACKETS": str(p.q_dropped[q]), "SAI_QUEUE_STAT_DROPPED_BYTES": "0",
                "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": str(p.q_watermark[q]),
                # the WRED_ECN_QUEUE flex counter group is on in this simulation
                "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": str(p.q_ecn[q]),
                "SAI_QUEUE_STAT_WRED_DROPPED_PACKETS": str(p.q_wred_dropped[q]),
            }
            if q in PFC_WD_QUEUES:
                stormed = p.q_storms_detected[q] > p.q_storms_restored[q]
                fields.update({
                    "PFC_WD_ACTION": "drop", "PFC_WD_DETECTION_TIME": "200000",
                    "PFC_WD_DETECTION_TIME_LEFT": "200000", "PFC_WD_RESTORATION_TIME": "200000",
                    "PFC_WD_STATUS": "stormed" if stormed else "operational",
                    "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": str(p.q_storms_detected[q]),
                    "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": str(p.q_storms_restored[q]),
                    "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES": str(p.q_depth[q]),
                    "SAI_QUEUE_STAT_PACKETS_last": str(p.q_tx_pkts[q]),
                })
            out[f"{key}:{q}"] = fields
            out[f"{key}:{q}:periodic"] = {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": str(p.q_watermark[q])}
    return out


def _port_entry(p: SimPort) -> dict[str, str]:
    entry = {"admin_status": "up", "alias": alias(p.index), "description": "", "index": str(p.index),
             "lanes": ",".join(str(8 * p.index + lane) for lane in range(8)), "mtu": "9100",
             "oper_status": "up" if p.oper_up else "down", "speed": str(SPEED_MBPS), "fec": "rs",
             "flap_count": str(p.carrier_transitions)}
    if p.last_down:
        entry["last_down_time"] = ctime_utc(p.last_down)
    return entry
