"""The switch families the gNMI source exports (declared once; profiles map vendor paths onto them)."""

from __future__ import annotations

from ... import catalog

FAMILY_SOURCE = "gnmi"  # the catalogue's `source` of every family declared here
C, G, INFO = catalog.COUNTER, catalog.GAUGE, catalog.INFO
SW = ("switch",)
IF = ("switch", "interface")
DIR = ("switch", "interface", "direction")
PRIO = ("switch", "interface", "priority", "direction")
QUEUE = ("switch", "interface", "queue")
SWPRIO = ("switch", "interface", "priority")
PG = ("switch", "interface", "priority_group", "pool")


def _declare(name: str, type_: str, help_: str, labels: tuple[str, ...], unit: str = "") -> catalog.Family:
    return catalog.declare(name, type_, help_, labels, unit=unit, source=FAMILY_SOURCE)


# -- stream health (written by the source itself, never by a profile) --------------------------
SWITCH_UP = _declare(
    "infrapulse_switch_up", G,
    "1 while the gNMI Subscribe stream to this switch is established and has synced, else 0 "
    "(the reason is in infrapulse_source_status_info{source=\"gnmi\"}).", SW)
LAST_UPDATE = _declare(
    "infrapulse_switch_last_update_timestamp_seconds", G,
    "Unix time the last gNMI notification from this switch arrived.", SW, unit="seconds")
UPDATES = _declare(
    "infrapulse_switch_updates_total", C,
    "gNMI updates (leaves or JSON values) received from this switch.", SW)
MALFORMED = _declare(
    "infrapulse_switch_malformed_updates_total", C,
    "gNMI updates from this switch whose value could not be decoded for its path (counted, skipped).", SW)
SERIES_DROPPED = _declare(
    "infrapulse_switch_series_dropped_total", C,
    "New series refused because this switch reached its series limit (sources.gnmi max_series): a "
    "switch streaming ever-new paths cannot grow the daemon's memory without bound.", SW)
RECONNECTS = _declare(
    "infrapulse_switch_reconnects_total", C,
    "Times the gNMI stream to this switch was (re)established after a failure.", SW)
# -- the collector's own shard (one series per fabric instance) ----------------------------------
SHARD_COUNT = _declare(
    "infrapulse_fabric_shards", G,
    "Number of fabric collectors this one was told share the switches (sources.gnmi.shard.count, "
    "INFRAPULSE_SHARD_COUNT; 1 unsharded); `index` is its own shard. The collectors of one fabric must "
    "agree on the count and together report every index 0..count-1 exactly once, else some switches "
    "are collected twice or not at all (InfrapulseFabricShardsInconsistent).", ("index",))

# -- data (profiles map vendor paths to these) --------------------------------------------------
DATA_FAMILIES = [
    _declare("infrapulse_switch_interface_received_bytes_total", C,
             "Bytes received on a switch interface.", IF, unit="bytes"),
    _declare("infrapulse_switch_interface_transmitted_bytes_total", C,
             "Bytes transmitted on a switch interface.", IF, unit="bytes"),
    _declare("infrapulse_switch_interface_errors_total", C,
             "Errored packets on a switch interface, by direction (rx, tx).", DIR),
    _declare("infrapulse_switch_interface_discards_total", C,
             "Packets discarded on a switch interface (no error, e.g. buffer), by direction (rx, tx).", DIR),
    _declare("infrapulse_switch_interface_fcs_errors_total", C,
             "Frames received with a bad FCS/CRC on a switch interface (cabling, optics).", IF),
    _declare("infrapulse_switch_interface_carrier_transitions_total", C,
             "Carrier (link) up/down transitions of a switch interface: link flaps.", IF),
    _declare("infrapulse_switch_interface_oper_up", G,
             "1 if the switch interface is operationally up, else 0.", IF),
    _declare("infrapulse_switch_pfc_pause_frames_total", C,
             "Priority flow control (802.1Qbb) pause frames per priority, by direction "
             "(rx: received from the neighbour, tx: sent to it).", PRIO),
    _declare("infrapulse_switch_pfc_pause_duration_seconds_total", C,
             "Time a priority was paused by PFC, where the switch reports it, by direction.", PRIO,
             unit="seconds"),
    _declare("infrapulse_switch_queue_transmitted_packets_total", C,
             "Packets transmitted from an egress queue.", QUEUE),
    _declare("infrapulse_switch_queue_dropped_packets_total", C,
             "Packets dropped at an egress queue (tail or WRED drop).", QUEUE),
    _declare("infrapulse_switch_queue_ecn_marked_packets_total", C,
             "Packets ECN-marked (CE) by an egress queue: the congestion signal DCQCN reacts to.", QUEUE),
    _declare("infrapulse_switch_queue_depth_bytes", G,
             "Instantaneous occupancy of an egress queue.", QUEUE, unit="bytes"),
    _declare("infrapulse_switch_queue_watermark_bytes", G,
             "Peak occupancy of an egress queue (the switch's watermark or max queue length), where given.",
             QUEUE, unit="bytes"),
    _declare("infrapulse_switch_lldp_neighbor_info", INFO,
             "The LLDP neighbour seen on a switch port: joins switch ports to the hosts (infrapulse_node_info"
             "{hostname}) and NICs behind them.",
             ("switch", "interface", "neighbor_system", "neighbor_port")),
    # -- lossless-fabric detail and vendor depth (SONiC, NVIDIA Cumulus, Arista EOS, OpenConfig) ---
    _declare("infrapulse_switch_queue_wred_dropped_packets_total", C,
             "Packets dropped by WRED (weighted random early detection) at an egress queue. Whether "
             "infrapulse_switch_queue_dropped_packets_total includes them depends on the platform (see "
             "docs/gnmi.md): never add the two.", QUEUE),
    _declare("infrapulse_switch_pfc_watchdog_storms_detected_total", C,
             "PFC storms the switch's PFC watchdog detected on an egress queue (the queue was stuck "
             "paused and the watchdog acted).", QUEUE),
    _declare("infrapulse_switch_pfc_watchdog_storms_restored_total", C,
             "PFC storms on an egress queue that the PFC watchdog saw end (the queue recovered).", QUEUE),
    _declare("infrapulse_switch_interface_fec_uncorrectable_blocks_total", C,
             "FEC codewords (blocks) a switch interface received that forward error correction could not "
             "correct: each is a corrupted frame; a rising count means a failing link or optic.", IF),
    _declare("infrapulse_switch_interface_mac_pause_frames_total", C,
             "Link-level (802.3x, not per-priority) pause frames on a switch interface, by direction "
             "(rx, tx).", DIR),
    _declare("infrapulse_switch_priority_discards_total", C,
             "Packets a switch interface discarded on ingress for one switch priority (Cumulus "
             "switch-priority in-discards).", SWPRIO),
    _declare("infrapulse_switch_priority_group_occupancy_bytes", G,
             "Instantaneous ingress buffer occupancy of a priority group, by pool: shared (the shared "
             "buffer) or headroom (the lossless headroom that absorbs in-flight data after a PFC pause).",
             PG, unit="bytes"),
    _declare("infrapulse_switch_pfc_pause_transitions_total", C,
             "Transitions of a priority from paused to unpaused (XOFF to XON) per PFC priority, by "
             "direction, where the switch counts them.", PRIO),
    _declare("infrapulse_switch_priority_group_watermark_bytes", G,
             "Peak buffer use of an ingress priority group in the switch's watermark period, by pool: "
             "shared (shared buffer) or headroom (the XOFF headroom that absorbs in-flight data once PFC "
             "pauses the sender).", PG, unit="bytes"),
    _declare("infrapulse_switch_interface_alias_info", INFO,
             "The vendor alias of a switch interface (SONiC: CONFIG_DB PORT alias, e.g. etp10 or "
             "Ethernet1/1); the interface label is always the switch's own port name.",
             ("switch", "interface", "alias")),
    _declare("infrapulse_switch_interface_last_down_timestamp_seconds", G,
             "Unix time the switch last saw this interface go operationally down, where it records it.",
             IF, unit="seconds"),
]

STATUS_FAMILIES = (SWITCH_UP, LAST_UPDATE, UPDATES, MALFORMED, RECONNECTS, SERIES_DROPPED)
BY_NAME = {f.name: f for f in DATA_FAMILIES}
