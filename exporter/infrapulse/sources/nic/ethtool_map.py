"""Which driver statistic (`ethtool -S` name) becomes which series, per driver family.

Names are verified in the drivers' sources and, where one exists, a real capture; see the
per-driver table in docs/node-telemetry.md. A statistic maps to at most one series; most map to
none (an mlx5 port has ~700 statistics, a handful matter for a lossless fabric).

- mlx5_core: drivers/net/ethernet/mellanox/mlx5/core/en_stats.c and mlx5/counters.rst.
- bnxt_en: drivers/net/ethernet/broadcom/bnxt/bnxt_ethtool.c. `pri<N>` is the 802.1p priority
  (bnxt_dcb.c reports rx/tx_pfc_ena_frames_pri<N> as the IEEE PFC indications/requests of
  priority N); the per-CoS-queue `*_cos<N>` statistics are not priorities and are not mapped.
- ice: drivers/net/ethernet/intel/ice/ice_ethtool.c (`*_priority_<N>_xon/xoff.nic`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ... import catalog
from .families import (
    BUFFER_ALMOST_FULL,
    DRIVER_STAT,
    FEC_CORRECTED,
    GLOBAL_PAUSE,
    GLOBAL_PAUSE_DURATION,
    LANE_ERRORS,
    LINK_DOWN,
    LINK_PAUSE,
    LINK_RECOVERIES,
    MAPPED_FAMILIES,
    NIC_ECN_MARKED,
    NIC_OUT_OF_BUFFER,
    PAUSE_STORM,
    PFC_DURATION,
    PFC_FRAMES,
    PFC_RESUME_FRAMES,
    PFC_TRANSITIONS,
    PHY_BYTES,
    PHY_ERRORS,
    PHY_PACKETS,
    PORT_DISCARDS,
    PRIO_BUF_DISCARDS,
    PRIO_BYTES,
    PRIO_CONG_DISCARDS,
    PRIO_DISCARDS,
    PRIO_PACKETS,
    RX_BITS,
    TX_OVERSIZE_DROPS,
)

# Microseconds -> seconds by dividing: int / int true division is correctly rounded, so
# 5961284324 us exposes as 5961.284324 (multiplying by 1e-6 gave 5961.284323999999).
MICROS = 1_000_000

# Where one statistic goes: family, label values after `interface`, divisor (1 or MICROS).
Rule = tuple[catalog.Family, tuple[str, ...], int]

FIXED_STATS: dict[str, Rule] = {
    # mlx5_core
    "tx_pause_storm_warning_events": (PAUSE_STORM, ("warning",), 1),
    "tx_pause_storm_error_events": (PAUSE_STORM, ("error",), 1),
    "rx_global_pause": (GLOBAL_PAUSE, ("rx",), 1), "tx_global_pause": (GLOBAL_PAUSE, ("tx",), 1),
    "rx_global_pause_duration": (GLOBAL_PAUSE_DURATION, ("rx",), MICROS),
    "tx_global_pause_duration": (GLOBAL_PAUSE_DURATION, ("tx",), MICROS),
    "rx_pause_ctrl_phy": (LINK_PAUSE, ("rx",), 1), "tx_pause_ctrl_phy": (LINK_PAUSE, ("tx",), 1),
    "rx_crc_errors_phy": (PHY_ERRORS, ("crc",), 1), "rx_symbol_err_phy": (PHY_ERRORS, ("symbol",), 1),
    "rx_pcs_symbol_err_phy": (PHY_ERRORS, ("pcs_symbol",), 1),
    "rx_in_range_len_errors_phy": (PHY_ERRORS, ("in_range_length",), 1),
    "rx_out_of_range_len_phy": (PHY_ERRORS, ("out_of_range_length",), 1),
    "rx_oversize_pkts_phy": (PHY_ERRORS, ("oversize",), 1),
    "rx_undersize_pkts_phy": (PHY_ERRORS, ("undersize",), 1),
    "rx_fragments_phy": (PHY_ERRORS, ("fragment",), 1), "rx_jabbers_phy": (PHY_ERRORS, ("jabber",), 1),
    # counters.rst: "transmitted packets dropped due to a length which exceed MTU size" - not the PHY.
    "tx_errors_phy": (TX_OVERSIZE_DROPS, (), 1),
    "rx_corrected_bits_phy": (FEC_CORRECTED, (), 1), "rx_bits_phy": (RX_BITS, (), 1),
    "link_down_events_phy": (LINK_DOWN, (), 1),
    "total_success_recovery_phy": (LINK_RECOVERIES, (), 1),
    "rx_discards_phy": (PORT_DISCARDS, ("rx",), 1), "tx_discards_phy": (PORT_DISCARDS, ("tx",), 1),
    "rx_bytes_phy": (PHY_BYTES, ("rx",), 1), "tx_bytes_phy": (PHY_BYTES, ("tx",), 1),
    "rx_packets_phy": (PHY_PACKETS, ("rx",), 1), "tx_packets_phy": (PHY_PACKETS, ("tx",), 1),
    "rx_buffer_passed_thres_phy": (BUFFER_ALMOST_FULL, (), 1),
    "rx_out_of_buffer": (NIC_OUT_OF_BUFFER, (), 1),
    # bnxt_en (port and port-extended statistics)
    "rx_fcs_err_frames": (PHY_ERRORS, ("crc",), 1),
    "rx_pcs_symbol_err": (PHY_ERRORS, ("pcs_symbol",), 1),
    "rx_corrected_bits": (FEC_CORRECTED, (), 1), "rx_bits": (RX_BITS, (), 1),
    "link_down_events": (LINK_DOWN, (), 1),
    "rx_buffer_passed_threshold": (BUFFER_ALMOST_FULL, (), 1),
}

# mlx5 per-priority suffix -> family, whether it has a direction label, divisor. Families
# without a direction take the rx statistic only (mlx5 has no tx variant of those).
_MLX5_PRIO_SUFFIX: dict[str, tuple[catalog.Family, bool, int]] = {
    "pause": (PFC_FRAMES, True, 1), "pause_duration": (PFC_DURATION, True, MICROS),
    "pause_transition": (PFC_TRANSITIONS, True, 1),
    "bytes": (PRIO_BYTES, True, 1), "packets": (PRIO_PACKETS, True, 1),
    "discards": (PRIO_DISCARDS, False, 1), "buf_discard": (PRIO_BUF_DISCARDS, False, 1),
    "cong_discard": (PRIO_CONG_DISCARDS, False, 1), "marked": (NIC_ECN_MARKED, False, 1),
}


def _mlx5_priority(m: re.Match[str]) -> Rule | None:
    direction, prio, suffix = m.groups()
    mapped = _MLX5_PRIO_SUFFIX.get(suffix)
    if mapped is None:
        return None
    family, with_direction, divisor = mapped
    if with_direction:
        return family, (prio, direction), divisor
    return (family, (prio,), divisor) if direction == "rx" else None


def _bnxt_pfc_frames(m: re.Match[str]) -> Rule:
    return PFC_FRAMES, (m[2], m[1]), 1


def _bnxt_pfc_duration(m: re.Match[str]) -> Rule:
    return PFC_DURATION, (m[1], m[2]), MICROS


def _bnxt_pfc_transitions(m: re.Match[str]) -> Rule:
    return PFC_TRANSITIONS, (m[1], m[2]), 1


def _ice_priority(m: re.Match[str]) -> Rule:
    direction, prio, kind = m.groups()
    return (PFC_FRAMES if kind == "xoff" else PFC_RESUME_FRAMES), (prio, direction), 1


def _mlx5_lane(m: re.Match[str]) -> Rule:
    return LANE_ERRORS, (m[1],), 1


PATTERN_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Rule | None]], ...] = (
    (re.compile(r"(rx|tx)_prio([0-7])_(\w+)"), _mlx5_priority),  # rx_prio3_pause, tx_prio0_bytes
    (re.compile(r"rx_err_lane_(\d+)_phy"), _mlx5_lane),
    (re.compile(r"(rx|tx)_pfc_ena_frames_pri([0-7])"), _bnxt_pfc_frames),
    (re.compile(r"pfc_pri([0-7])_(rx|tx)_duration_us"), _bnxt_pfc_duration),
    (re.compile(r"pfc_pri([0-7])_(rx|tx)_transitions"), _bnxt_pfc_transitions),
    (re.compile(r"(rx|tx)_priority_([0-7])_(xon|xoff)\.nic"), _ice_priority),
)


def rule_for(name: str) -> Rule | None:
    """The series a driver statistic maps to, or None."""
    fixed = FIXED_STATS.get(name)
    if fixed is not None:
        return fixed
    for pattern, make in PATTERN_RULES:
        match = pattern.fullmatch(name)
        if match is not None:
            return make(match)
    return None


Plan = list[tuple[int, str, tuple[str, ...], int]]  # (stat index, family, labels, divisor)


def plan_stats(interface: str, names: Sequence[str], include: Sequence[re.Pattern[str]] = ()) -> Plan:
    """Decide once per stat set where each stat goes; reused while the names stay the same."""
    plan: Plan = []
    for index, name in enumerate(names):
        rule = rule_for(name)
        if rule is not None:
            family, labels, divisor = rule
            plan.append((index, family.name, (interface, *labels), divisor))
        if include and any(p.fullmatch(name) for p in include):
            plan.append((index, DRIVER_STAT.name, (interface, name), 1))
    return plan


def plan_coverage(plan: Plan) -> dict[str, int]:
    """Series per mapped family (0 for the families this driver does not feed)."""
    coverage = dict.fromkeys((f.name for f in MAPPED_FAMILIES), 0)
    for family, _labels in {(family, labels) for _, family, labels, _ in plan}:
        if family in coverage:
            coverage[family] += 1
    return coverage
