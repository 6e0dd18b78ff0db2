"""Families of the `roce_config` source: the RoCE congestion-control and QoS configuration of
each RDMA netdev, its firmware and driver, a stable config hash and its drift."""

from __future__ import annotations

from ... import catalog

ROCE_CONFIG_SOURCE = "roce_config"
SRC = ROCE_CONFIG_SOURCE


def _gauge(name: str, help: str, labels: tuple[str, ...], unit: str = "") -> catalog.Family:
    return catalog.declare(name, catalog.GAUGE, help, labels, unit=unit, source=SRC)


def _info(name: str, help: str, labels: tuple[str, ...]) -> catalog.Family:
    return catalog.declare(name, catalog.INFO, help, labels, source=SRC)


ECN_ENABLED = _gauge(
    "infrapulse_nic_roce_ecn_enabled",
    "1 when RoCE ECN is enabled for the role and priority (ecn/<role>/enable/<priority>): role roce_np = "
    "notification point (answers ECN-marked packets with CNPs), roce_rp = reaction point (slows down on "
    "CNPs).",
    ("interface", "role", "priority"))
CC_PARAMETER = _gauge(
    "infrapulse_nic_roce_cc_parameter",
    "A DCQCN congestion-control parameter of the netdev (the OFED sysfs file name; from debugfs cc_params "
    "on upstream kernels), in the driver's own unit.",
    ("interface", "role", "parameter"))
PFC_ENABLED = _gauge(
    "infrapulse_nic_pfc_enabled",
    "1 when PFC is enabled on the priority (DCB netlink DCB_ATTR_IEEE_PFC pfc_en).",
    ("interface", "priority"))
DSCP_PRIORITY = _gauge(
    "infrapulse_nic_dscp_priority",
    "The priority a DSCP value maps to (DCB APP table, DSCP selector).",
    ("interface", "dscp"))
TRUST_INFO = _info(
    "infrapulse_nic_qos_trust_info",
    "The QoS trust mode (dscp or pcp); source says where it came from: qos/trust (OFED) or inferred "
    "(dscp when the DCB APP table has DSCP entries, as upstream mlx5 does; pcp otherwise).",
    ("interface", "trust", "trust_source"))
TRAFFIC_CLASSES = _gauge(
    "infrapulse_nic_qos_traffic_classes", "Traffic classes in use (qos/tc_num).", ("interface",))
PRIORITY_BUFFER = _gauge(
    "infrapulse_nic_qos_priority_buffer", "The receive buffer a priority is mapped to (qos/prio2buffer).",
    ("interface", "priority"))
BUFFER_SIZE = _gauge(
    "infrapulse_nic_qos_buffer_size_bytes", "Size of a receive buffer (qos/buffer_size).",
    ("interface", "buffer"), unit="bytes")
FIRMWARE_INFO = _info(
    "infrapulse_nic_firmware_info",
    "Firmware and driver of the netdev: fw_ver of its RDMA device (sysfs) and the driver name and version "
    "(ETHTOOL_GDRVINFO).",
    ("interface", "device", "driver", "driver_version", "firmware_version"))
CONFIG_INFO = _info(
    "infrapulse_nic_roce_config_info",
    "A stable hash of the netdev's CC/QoS configuration (ECN flags, DCQCN parameters, PFC, DSCP map, trust, "
    "buffers): equal hashes = equal configurations, across nodes and restarts.",
    ("interface", "hash"))
CONFIG_CHANGES = catalog.declare(
    "infrapulse_nic_roce_config_changes_total", catalog.COUNTER,
    "Configuration changes seen on the netdev, counted across daemon restarts and reboots (state_dir).",
    ("interface",), source=SRC)
LAST_CHANGE_TS = _gauge(
    "infrapulse_nic_roce_config_last_change_timestamp_seconds",
    "When the last configuration change was seen (Unix time).", ("interface",), unit="seconds")
LAST_CHANGE_INFO = _info(
    "infrapulse_nic_roce_config_last_change_info",
    "The last configuration change: `changes` lists setting old->new (at most 8, then +N more); "
    "firmware_changed is true when the firmware version changed with it (or at most 5m before it).",
    ("interface", "changes", "firmware_changed"))
BASELINE_DRIFT = _gauge(
    "infrapulse_nic_roce_config_baseline_drift",
    "Settings that differ from the accepted baseline configuration (the first seen, or the last accepted: "
    "`touch {state_dir}/roce_config/accept-baseline`); 0 = at its baseline. Stays above 0 until the "
    "configuration returns or the new one is accepted.",
    ("interface",))
BASELINE_DRIFT_INFO = _info(
    "infrapulse_nic_roce_config_baseline_drift_info",
    "While the configuration differs from its baseline: the settings baseline->now (at most 8, then +N more) "
    "and the firmware of the baseline and of now.",
    ("interface", "changes", "baseline_firmware", "firmware"))
EXPECTED_MISMATCHES = _gauge(
    "infrapulse_nic_roce_config_expected_mismatches",
    "Settings that differ from the configured `expected:` CC/QoS configuration (0 = as intended); absent "
    "without an `expected:` section.",
    ("interface",))
EXPECTED_MISMATCH = _gauge(
    "infrapulse_nic_roce_config_expected_mismatch",
    "1 for each setting that differs from `expected:`, with the expected and actual value.",
    ("interface", "setting", "expected", "actual"))
