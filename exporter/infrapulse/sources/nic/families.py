"""The metric families of the node NIC sources, declared in one place.

`infiniband` (RDMA ports under /sys/class/infiniband) and `ethtool` (NIC driver statistics)
export different families; both modules import them from here, so the catalogue, the docs and
the health model see one list. Where both sources have a family of the same meaning the Python
names carry the prefix RDMA_ (sysfs hw_counters) or NIC_ (driver statistics).
"""

from __future__ import annotations

from ... import catalog

IB_SOURCE = "infiniband"
ETHTOOL_SOURCE = "ethtool"

PORT = ("device", "port")
IFACE = ("interface",)
PRIO = ("interface", "priority")
PRIO_DIR = ("interface", "priority", "direction")
DIR = ("interface", "direction")


def _ib_counter(name: str, help: str, labels: tuple[str, ...] = PORT, unit: str = "") -> catalog.Family:
    return catalog.declare(name, catalog.COUNTER, help, labels, unit=unit, source=IB_SOURCE)


def _ib_gauge(name: str, help: str, labels: tuple[str, ...] = PORT, unit: str = "") -> catalog.Family:
    return catalog.declare(name, catalog.GAUGE, help, labels, unit=unit, source=IB_SOURCE)


def _nic_counter(name: str, help: str, labels: tuple[str, ...], unit: str = "") -> catalog.Family:
    return catalog.declare(name, catalog.COUNTER, help, labels, unit=unit, source=ETHTOOL_SOURCE)


# -- infiniband ------------------------------------------------------------------------------

DEVICE_INFO = catalog.declare(
    "infrapulse_rdma_device_info", catalog.INFO,
    "RDMA device metadata from /sys/class/infiniband/<device> (hca_type, board_id, fw_ver, node_guid) and "
    "pci_address, the PCI function its `device` link points at (0000:0d:00.0, as the kernel log spells it; "
    "\"\" where the link is missing or names no PCI function, e.g. a software device).",
    ("device", "hca_type", "board_id", "firmware_version", "node_guid", "pci_address"), source=IB_SOURCE)
PORT_INFO = catalog.declare(
    "infrapulse_rdma_port_info", catalog.INFO,
    "RDMA port metadata: link_layer (InfiniBand or Ethernet = RoCE) and, for RoCE, the netdev "
    "behind the port (gid_attrs/ndevs); empty for InfiniBand ports.",
    ("device", "port", "link_layer", "netdev"), source=IB_SOURCE)
PORT_STATE = _ib_gauge("infrapulse_rdma_port_state",
                       "Logical port state id (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER).")
PORT_PHYS_STATE = _ib_gauge(
    "infrapulse_rdma_port_physical_state",
    "Physical port state id (2 Polling, 3 Disabled, 5 LinkUp, 6 LinkErrorRecovery, ...).")
PORT_RATE = _ib_gauge("infrapulse_rdma_port_rate_bytes_per_second",
                      "Port signalling rate from the `rate` file (Gb/s x 125000000).", unit="bytes")
RX_BYTES = _ib_counter(
    "infrapulse_rdma_port_received_bytes_total",
    "Data octets received: counters/port_rcv_data x 4 (4-octet words), counters_ext/port_rcv_data_64 x 4 "
    "where that legacy directory exists, x 8 on Omni-Path hfi1 (8-byte flits). On RoCE only RDMA traffic "
    "of this function.", unit="bytes")
TX_BYTES = _ib_counter(
    "infrapulse_rdma_port_transmitted_bytes_total",
    "Data octets transmitted: counters/port_xmit_data x 4 (4-octet words), counters_ext/port_xmit_data_64 "
    "x 4 where that legacy directory exists, x 8 on Omni-Path hfi1 (8-byte flits). On RoCE only RDMA traffic "
    "of this function.", unit="bytes")
RX_PACKETS = _ib_counter(
    "infrapulse_rdma_port_received_packets_total", "Packets received (counters/port_rcv_packets).")
TX_PACKETS = _ib_counter("infrapulse_rdma_port_transmitted_packets_total",
                         "Packets transmitted (counters/port_xmit_packets).")
LINK_DOWNED = _ib_counter("infrapulse_rdma_port_link_downed_total",
                          "Times the link failed to recover from an error and went down (8-bit, saturates).")
LINK_ERROR_RECOVERY = _ib_counter("infrapulse_rdma_port_link_error_recovery_total",
                                  "Successful link error recoveries (8-bit, saturates).")
SYMBOL_ERRORS = _ib_counter(
    "infrapulse_rdma_port_symbol_errors_total",
    "Minor link errors on one or more lanes (counters/symbol_error, 16-bit, saturates).")
RECEIVE_ERRORS = _ib_counter("infrapulse_rdma_port_receive_errors_total",
                             "Packets with errors received (counters/port_rcv_errors, 16-bit, saturates).")
TRANSMIT_DISCARDS = _ib_counter("infrapulse_rdma_port_transmit_discards_total",
                                "Outbound packets discarded because the port was down or congested "
                                "(counters/port_xmit_discards, 16-bit, saturates).")
TRANSMIT_WAIT = _ib_counter(
    "infrapulse_rdma_port_transmit_wait_total",
    "Ticks with data to send but no credits (counters/port_xmit_wait, 32-bit, saturates).")
RX_REMOTE_PHYS = _ib_counter("infrapulse_rdma_port_receive_remote_physical_errors_total",
                             "Packets received marked with the EBP delimiter (16-bit, saturates).")
RX_SWITCH_RELAY = _ib_counter("infrapulse_rdma_port_receive_switch_relay_errors_total",
                              "Packets that could not be forwarded by a switch (16-bit, saturates).")
RX_CONSTRAINT = _ib_counter(
    "infrapulse_rdma_port_receive_constraint_errors_total",
    "Packets discarded on receive for partition/constraint reasons (8-bit, saturates).")
TX_CONSTRAINT = _ib_counter("infrapulse_rdma_port_transmit_constraint_errors_total",
                            "Packets not transmitted for partition/constraint reasons (8-bit, saturates).")
LOCAL_LINK_INTEGRITY = _ib_counter("infrapulse_rdma_port_local_link_integrity_errors_total",
                                   "Local physical errors beyond the threshold (4-bit, saturates).")
EXCESSIVE_OVERRUN = _ib_counter("infrapulse_rdma_port_excessive_buffer_overrun_errors_total",
                                "Consecutive flow-control update overruns (4-bit, saturates).")
VL15_DROPPED = _ib_counter("infrapulse_rdma_port_vl15_dropped_total",
                           "Subnet management packets dropped for lack of buffers (16-bit, saturates).")
RX_DISCARDS = _ib_counter("infrapulse_rdma_port_receive_discards_total",
                          "Inbound packets discarded (counters/port_rcv_discards, where the driver has it).")
RX_UNICAST = _ib_counter("infrapulse_rdma_port_received_unicast_packets_total", "Unicast packets received.")
TX_UNICAST = _ib_counter(
    "infrapulse_rdma_port_transmitted_unicast_packets_total", "Unicast packets transmitted.")
RX_MULTICAST = _ib_counter(
    "infrapulse_rdma_port_received_multicast_packets_total", "Multicast packets received.")
TX_MULTICAST = _ib_counter(
    "infrapulse_rdma_port_transmitted_multicast_packets_total", "Multicast packets transmitted.")
PORT_COUNTER = _ib_counter("infrapulse_rdma_port_counter_total",
                           "Any other file of counters/ this driver exposes, under its sysfs name, as-is.",
                           ("device", "port", "counter"))
SATURATED = _ib_gauge("infrapulse_rdma_port_saturated_counters",
                      "PMA counters of this port stuck at their maximum (2^width-1): they no longer count "
                      "until reset (perfquery -R). Rates computed from them are lower bounds.")
RDMA_ECN_MARKED = _ib_counter(
    "infrapulse_rdma_ecn_marked_packets_total",
    "RoCEv2 packets received with ECN CE marked (hw_counters/np_ecn_marked_roce_packets).")
CNP_SENT = _ib_counter(
    "infrapulse_rdma_cnp_sent_total",
    "Congestion notification packets sent by the notification point (hw_counters/np_cnp_sent).")
CNP_HANDLED = _ib_counter(
    "infrapulse_rdma_cnp_handled_total",
    "CNPs handled by the reaction point to throttle the sender (hw_counters/rp_cnp_handled).")
CNP_IGNORED = _ib_counter(
    "infrapulse_rdma_cnp_ignored_total",
    "CNPs received and ignored by the reaction point (hw_counters/rp_cnp_ignored); rising "
    "means RoCE congestion control is off.")
RDMA_OUT_OF_BUFFER = _ib_counter(
    "infrapulse_rdma_out_of_buffer_total",
    "Packets dropped because the receive queue had no WQE posted (hw_counters/out_of_buffer; "
    "32-bit, wraps).")
RETRANSMISSIONS = _ib_counter(
    "infrapulse_rdma_retransmission_events_total",
    "Events that cause or indicate RDMA retransmission, by hw_counters name (packet_seq_err, "
    "local_ack_timeout_err, rnr_nak_retry_err, implied_nak_seq_err, duplicate_request, out_of_sequence, "
    "roce_adp_retrans, roce_adp_retrans_to). mlx5 Q counters are 32-bit and wrap.",
    ("device", "port", "reason"))
HW_COUNTER = _ib_counter("infrapulse_rdma_hw_counter_total",
                         "Every other hw_counters file, under its sysfs name, as-is (driver-specific; "
                         "device-level counters have port=\"\").",
                         ("device", "port", "counter"))


# -- ethtool ---------------------------------------------------------------------------------
# Help texts name the driver statistics behind each family (mlx5, bnxt_en, ice); the per-driver
# evidence is in docs/node-telemetry.md.

PFC_FRAMES = _nic_counter(
    "infrapulse_nic_pfc_pause_frames_total",
    "PFC pause (XOFF) frames per priority and direction: mlx5 rx/tx_prioN_pause (only for priorities "
    "with PFC enabled), bnxt_en rx/tx_pfc_ena_frames_priN (PFC frames whose class-enable vector has "
    "priority N set; one frame counts under every priority it pauses), ice rx/tx_priority_N_xoff.nic.",
    PRIO_DIR)
PFC_RESUME_FRAMES = _nic_counter(
    "infrapulse_nic_pfc_resume_frames_total",
    "PFC resume (XON, pause time 0) frames per priority and direction (ice rx/tx_priority_N_xon.nic).",
    PRIO_DIR)
PFC_DURATION = _nic_counter(
    "infrapulse_nic_pfc_pause_duration_seconds_total",
    "Time paused by PFC per priority and direction (mlx5 rx/tx_prioN_pause_duration, bnxt_en "
    "pfc_priN_rx/tx_duration_us; microseconds / 1e6). rate() of it is the paused fraction of time.",
    PRIO_DIR, unit="seconds")
PFC_TRANSITIONS = _nic_counter(
    "infrapulse_nic_pfc_pause_transitions_total",
    "Pause state transitions per priority and direction: mlx5 rx_prioN_pause_transition (XOFF to XON, "
    "receive side only), bnxt_en pfc_priN_rx/tx_transitions.", PRIO_DIR)
PAUSE_STORM = _nic_counter("infrapulse_nic_pause_storm_events_total",
                           "Pause storm events: level=warning (the NIC sent pauses for a long time) or error "
                           "(it stopped sending pauses after the timeout; drops may have occurred).",
                           ("interface", "level"))
PRIO_DISCARDS = _nic_counter("infrapulse_nic_priority_discards_total",
                             "Received packets discarded for lack of receive buffers, per priority "
                             "(rx_prioN_discards).", PRIO)
PRIO_BUF_DISCARDS = _nic_counter("infrapulse_nic_priority_buffer_discards_total",
                                 "Packets discarded for lack of per-host receive buffers, per priority "
                                 "(rx_prioN_buf_discard).", PRIO)
PRIO_CONG_DISCARDS = _nic_counter("infrapulse_nic_priority_congestion_discards_total",
                                  "Packets discarded by per-host congestion (WRED), per priority "
                                  "(rx_prioN_cong_discard).", PRIO)
NIC_ECN_MARKED = _nic_counter("infrapulse_nic_ecn_marked_packets_total",
                              "Packets ECN-marked by the device for per-host congestion, per priority "
                              "(rx_prioN_marked).", PRIO)
PRIO_BYTES = _nic_counter("infrapulse_nic_priority_bytes_total",
                          "Bytes per priority and direction (rx/tx_prioN_bytes).", PRIO_DIR, unit="bytes")
PRIO_PACKETS = _nic_counter("infrapulse_nic_priority_packets_total",
                            "Packets per priority and direction (rx/tx_prioN_packets).", PRIO_DIR)
GLOBAL_PAUSE = _nic_counter("infrapulse_nic_global_pause_frames_total",
                            "IEEE 802.3x global pause frames (rx/tx_global_pause).", DIR)
GLOBAL_PAUSE_DURATION = _nic_counter(
    "infrapulse_nic_global_pause_duration_seconds_total",
    "Time paused by global pause (rx/tx_global_pause_duration, microseconds / 1e6).", DIR, unit="seconds")
LINK_PAUSE = _nic_counter("infrapulse_nic_pause_frames_total",
                          "All link-level pause frames at the PHY, any priority (rx/tx_pause_ctrl_phy).", DIR)
PHY_ERRORS = _nic_counter(
    "infrapulse_nic_phy_errors_total",
    "Received frames or symbols in error at the physical layer, by kind: crc (mlx5 rx_crc_errors_phy, "
    "bnxt_en rx_fcs_err_frames), symbol, pcs_symbol (not corrected by FEC; bnxt_en rx_pcs_symbol_err), "
    "in_range_length, out_of_range_length, oversize, undersize, fragment, jabber. Kinds overlap (one bad "
    "symbol can also fail the CRC): compare kinds, do not sum them.",
    ("interface", "kind"))
TX_OVERSIZE_DROPS = _nic_counter(
    "infrapulse_nic_tx_oversize_drops_total",
    "Transmitted packets dropped by the port because they were longer than the MTU (mlx5 tx_errors_phy): "
    "an MTU mismatch on this host, not a physical-layer error.", IFACE)
LANE_ERRORS = _nic_counter("infrapulse_nic_lane_errors_total",
                           "Raw per-lane errors before FEC (rx_err_lane_N_phy).", ("interface", "lane"))
FEC_CORRECTED = _nic_counter("infrapulse_nic_fec_corrected_bits_total",
                             "Bits corrected by FEC (mlx5 rx_corrected_bits_phy, bnxt_en rx_corrected_bits); "
                             "over received bits it is the pre-FEC bit error ratio.", IFACE)
RX_BITS = _nic_counter("infrapulse_nic_received_bits_total",
                       "Bits received at the PHY (mlx5 rx_bits_phy, bnxt_en rx_bits): the BER denominator.",
                       IFACE)
LINK_DOWN = _nic_counter("infrapulse_nic_link_down_events_total",
                         "Link down events seen by the PHY (mlx5 link_down_events_phy, bnxt_en "
                         "link_down_events).", IFACE)
PORT_DISCARDS = _nic_counter("infrapulse_nic_port_discards_total",
                             "Packets dropped by the port for lack of buffers (rx/tx_discards_phy).", DIR)
PHY_BYTES = _nic_counter("infrapulse_nic_phy_bytes_total",
                         "Bytes on the wire, RoCE included (rx/tx_bytes_phy).", DIR, unit="bytes")
PHY_PACKETS = _nic_counter("infrapulse_nic_phy_packets_total",
                           "Packets on the wire, RoCE included (rx/tx_packets_phy).", DIR)
BUFFER_ALMOST_FULL = _nic_counter(
    "infrapulse_nic_rx_buffer_almost_full_events_total",
    "Times the port receive buffer passed its threshold (mlx5 rx_buffer_passed_thres_phy: 85% full; "
    "bnxt_en rx_buffer_passed_threshold).", IFACE)
NIC_OUT_OF_BUFFER = _nic_counter(
    "infrapulse_nic_rx_out_of_buffer_total",
    "Ethernet receive queue had no software buffer (rx_out_of_buffer; not RDMA).", IFACE)
LINK_RECOVERIES = _nic_counter(
    "infrapulse_nic_link_recoveries_total",
    "Successful PHY recovery events of any kind (mlx5 total_success_recovery_phy): the link retrained "
    "without the carrier going down. Rising with no carrier change is a half-dead link.", IFACE)
# -- link state from sysfs class/net (link_sysfs.py) -----------------------------------------
CARRIER_CHANGES = _nic_counter(
    "infrapulse_nic_carrier_changes_total",
    "Carrier transitions, up and down (sysfs class/net/<if>/carrier_changes).", IFACE)
CARRIER_UP_EVENTS = _nic_counter(
    "infrapulse_nic_carrier_up_events_total",
    "Times the carrier came up (sysfs carrier_up_count, kernel >= 4.16).", IFACE)
CARRIER_DOWN = _nic_counter(
    "infrapulse_nic_carrier_down_events_total",
    "Times the carrier went down (sysfs carrier_down_count, kernel >= 4.16).", IFACE)
CARRIER_UP = catalog.declare(
    "infrapulse_nic_carrier_up", catalog.GAUGE,
    "1 while the interface has carrier (sysfs carrier), 0 without (or administratively down).", IFACE,
    source=ETHTOOL_SOURCE)
LINK_SPEED = catalog.declare(
    "infrapulse_nic_link_speed_bytes_per_second", catalog.GAUGE,
    "Negotiated link speed (sysfs speed, Mb/s x 125000); absent without a link. x 8 x time is the bit "
    "count a BER divides by where the driver has no received-bits counter.", IFACE, unit="bytes",
    source=ETHTOOL_SOURCE)
NIC_TEMPERATURE = catalog.declare(
    "infrapulse_nic_temperature_celsius", catalog.GAUGE,
    "NIC hwmon temperatures (class/net/<if>/device/hwmon/*/temp<N>_input / 1000), by the channel's "
    "label: the ASIC sensors and, where the module reports one, the transceiver module (mlx5 hwmon).",
    ("interface", "sensor"), unit="celsius", source=ETHTOOL_SOURCE)
NIC_TEMPERATURE_CRIT = catalog.declare(
    "infrapulse_nic_temperature_critical_celsius", catalog.GAUGE,
    "Critical threshold of a NIC hwmon temperature channel (temp<N>_crit / 1000).",
    ("interface", "sensor"), unit="celsius", source=ETHTOOL_SOURCE)
# -- transceiver DOM from the module EEPROM (module_dom.py; needs CAP_NET_ADMIN) -------------
MODULE_TEMPERATURE = catalog.declare(
    "infrapulse_nic_module_temperature_celsius", catalog.GAUGE,
    "Transceiver module temperature from its EEPROM DOM (SFF-8636 / SFF-8472); only with module_dom "
    "and CAP_NET_ADMIN.", IFACE, unit="celsius", source=ETHTOOL_SOURCE)
MODULE_RX_POWER = catalog.declare(
    "infrapulse_nic_module_rx_power_watts", catalog.GAUGE,
    "Received optical power per lane from the module DOM.", ("interface", "lane"), unit="watts",
    source=ETHTOOL_SOURCE)
MODULE_TX_POWER = catalog.declare(
    "infrapulse_nic_module_tx_power_watts", catalog.GAUGE,
    "Transmitted optical power per lane from the module DOM.", ("interface", "lane"), unit="watts",
    source=ETHTOOL_SOURCE)
MODULE_TX_BIAS = catalog.declare(
    "infrapulse_nic_module_tx_bias_amperes", catalog.GAUGE,
    "Laser bias current per lane from the module DOM.", ("interface", "lane"), unit="amperes",
    source=ETHTOOL_SOURCE)
STAT_COUNT = catalog.declare(
    "infrapulse_nic_driver_stats", catalog.GAUGE,
    "How many statistics the driver reported in the last collection.", IFACE, source=ETHTOOL_SOURCE)
DRIVER_STAT = catalog.declare("infrapulse_nic_driver_stat", catalog.GAUGE,
                              "Raw driver statistics selected by `include_stats` (counter or gauge, as the "
                              "driver defines it).", ("interface", "stat"), source=ETHTOOL_SOURCE)
# Families a driver statistic maps into: the per-interface coverage reports each one's series.
MAPPED_FAMILIES: tuple[catalog.Family, ...] = (
    PFC_FRAMES, PFC_RESUME_FRAMES, PFC_DURATION, PFC_TRANSITIONS, PAUSE_STORM, PRIO_DISCARDS,
    PRIO_BUF_DISCARDS, PRIO_CONG_DISCARDS, NIC_ECN_MARKED, PRIO_BYTES, PRIO_PACKETS, GLOBAL_PAUSE,
    GLOBAL_PAUSE_DURATION, LINK_PAUSE, PHY_ERRORS, TX_OVERSIZE_DROPS, LANE_ERRORS, FEC_CORRECTED, RX_BITS,
    LINK_DOWN, PORT_DISCARDS, PHY_BYTES, PHY_PACKETS, BUFFER_ALMOST_FULL, NIC_OUT_OF_BUFFER, LINK_RECOVERIES,
)
