"""Simulated NIC driver statistics, one JSON file per interface, for `FileStatsProvider`.

Each driver's stat table has the names and order its real `ethtool -S` output shows (the
captures under shared/real/ethtool, checked by tests/test_nic_real.py):

- mlx5_core (ConnectX): the groups in driver order (software, vport, IEEE 802.3, RFC 2863,
  RFC 2819, physical layer, PCIe, per priority 0-7, PFC for the priorities with PFC enabled (the
  driver adds and removes them with the DCB config) or 802.3x global pause when no priority has
  PFC, pause-storm counters, one channel, per-host buffer counters). `rx_bits_phy` and
  `total_success_recovery_phy` are in no capture: newer kernels add them to the physical-layer
  group (en_stats.c; the recovery counter after the per-lane errors).
- bnxt_en (NetXtreme-E): per-ring `[N]: ...` stats, port and port-extended stats including the
  per-priority PFC counters `rx/tx_pfc_ena_frames_pri<N>` and `pfc_pri<N>_rx/tx_duration_us`.
- ice (E810): a part of the PF statistics and the per-priority XON/XOFF counters.
- i40e (X722, the netdev behind an i40iw RDMA device): a part of the PF statistics; none of
  them maps to a family, so the demo shows how an unmapped driver is reported.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path

PFC_SUFFIXES = ("pause", "pause_duration", "pause_transition")
MLX5_PHY_ERROR_STATS = ("rx_crc_errors_phy", "rx_symbol_err_phy", "rx_pcs_symbol_err_phy",
                        "rx_in_range_len_errors_phy", "rx_out_of_range_len_phy", "rx_oversize_pkts_phy",
                        "rx_undersize_pkts_phy", "rx_fragments_phy", "rx_jabbers_phy")
_MLX5_SIZE_BINS = ("64", "65_to_127", "128_to_255", "256_to_511", "512_to_1023", "1024_to_1518",
                   "1519_to_2047", "2048_to_4095", "4096_to_8191", "8192_to_10239")


def mlx5_stat_names(pfc_priorities: tuple[int, ...] = (3,), lanes: int = 4, storm_counters: bool = True,
                    global_pause: bool = False) -> list[str]:
    """mlx5 names in driver order. PFC names exist only for `pfc_priorities`; the global pause
    group only when `global_pause` is set and no priority has PFC (the two are exclusive)."""
    names = ["rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_out_of_buffer",
             "rx_vport_unicast_packets", "rx_vport_unicast_bytes", "tx_vport_unicast_packets",
             "tx_vport_unicast_bytes", "rx_vport_rdma_unicast_packets", "rx_vport_rdma_unicast_bytes",
             "tx_vport_rdma_unicast_packets", "tx_vport_rdma_unicast_bytes",
             # IEEE 802.3 group
             "tx_packets_phy", "rx_packets_phy", "rx_crc_errors_phy", "tx_bytes_phy", "rx_bytes_phy",
             "rx_in_range_len_errors_phy", "rx_out_of_range_len_phy", "rx_oversize_pkts_phy",
             "rx_symbol_err_phy", "tx_mac_control_phy", "rx_mac_control_phy", "rx_pause_ctrl_phy",
             "tx_pause_ctrl_phy",
             # RFC 2863, RFC 2819
             "rx_discards_phy", "tx_discards_phy", "tx_errors_phy",
             "rx_undersize_pkts_phy", "rx_fragments_phy", "rx_jabbers_phy",
             *(f"rx_{size}_bytes_phy" for size in _MLX5_SIZE_BINS),
             # physical layer, extended Ethernet, PCIe
             "link_down_events_phy", "rx_bits_phy", "rx_pcs_symbol_err_phy", "rx_corrected_bits_phy",
             *(f"rx_err_lane_{lane}_phy" for lane in range(lanes)),
             # PPCNT recovery group (newer kernels, 32-bit): after the lanes in en_stats.c's phy group
             "total_success_recovery_phy",
             "rx_buffer_passed_thres_phy", "rx_pci_signal_integrity", "tx_pci_signal_integrity"]
    for prio in range(8):
        names += [f"rx_prio{prio}_bytes", f"rx_prio{prio}_packets", f"rx_prio{prio}_discards",
                  f"tx_prio{prio}_bytes", f"tx_prio{prio}_packets"]
    for prio in pfc_priorities:
        names += [f"rx_prio{prio}_pause", f"rx_prio{prio}_pause_duration", f"tx_prio{prio}_pause",
                  f"tx_prio{prio}_pause_duration", f"rx_prio{prio}_pause_transition"]
    if global_pause and not pfc_priorities:
        names += ["rx_global_pause", "rx_global_pause_duration", "tx_global_pause",
                  "tx_global_pause_duration", "rx_global_pause_transition"]
    if storm_counters:
        names += ["tx_pause_storm_warning_events", "tx_pause_storm_error_events"]
    names += ["module_unplug", "module_bus_stuck", "module_high_temp", "module_bad_shorted",
              "ch0_events", "ch0_poll", "rx0_packets", "rx0_bytes", "tx0_packets", "tx0_bytes"]
    for prio in range(8):
        names += [f"rx_prio{prio}_buf_discard", f"rx_prio{prio}_cong_discard", f"rx_prio{prio}_marked"]
    return names


_BNXT_RING = ("rx_ucast_packets", "rx_mcast_packets", "rx_bcast_packets", "rx_discards", "rx_errors",
              "rx_ucast_bytes", "rx_mcast_bytes", "rx_bcast_bytes", "tx_ucast_packets", "tx_mcast_packets",
              "tx_bcast_packets", "tx_errors", "tx_discards", "tx_ucast_bytes", "tx_mcast_bytes",
              "tx_bcast_bytes", "tpa_packets", "tpa_bytes", "tpa_events", "tpa_aborts", "rx_l4_csum_errors",
              "rx_resets", "rx_buf_errors", "missed_irqs")
_BNXT_SIZES = ("64b", "65b_127b", "128b_255b", "256b_511b", "512b_1023b", "1024b_1518b", "good_vlan",
               "1519b_2047b", "2048b_4095b", "4096b_9216b", "9217b_16383b")


def bnxt_stat_names(rings: int = 8) -> list[str]:
    """bnxt_en names in driver order, as a BCM5741x port on kernel 4.18 (RHEL 8) shows them."""
    names = [f"[{ring}]: {stat}" for ring in range(rings) for stat in _BNXT_RING]
    names += ["rx_total_discard_pkts", "tx_total_discard_pkts", "rx_total_netpoll_discards"]
    names += [f"rx_{size}_frames" for size in _BNXT_SIZES]
    names += ["rx_total_frames", "rx_ucast_frames", "rx_mcast_frames", "rx_bcast_frames", "rx_fcs_err_frames",
              "rx_ctrl_frames", "rx_pause_frames", "rx_pfc_frames", "rx_align_err_frames", "rx_ovrsz_frames",
              "rx_jbr_frames", "rx_mtu_err_frames", "rx_tagged_frames", "rx_double_tagged_frames",
              "rx_good_frames", *(f"rx_pfc_ena_frames_pri{p}" for p in range(8)), "rx_undrsz_frames",
              "rx_eee_lpi_events", "rx_eee_lpi_duration", "rx_bytes", "rx_runt_bytes", "rx_runt_frames",
              "rx_stat_discard", "rx_stat_err"]
    names += [f"tx_{size}_frames" for size in _BNXT_SIZES]
    names += ["tx_good_frames", "tx_total_frames", "tx_ucast_frames", "tx_mcast_frames", "tx_bcast_frames",
              "tx_pause_frames", "tx_pfc_frames", "tx_jabber_frames", "tx_fcs_err_frames", "tx_err",
              "tx_fifo_underruns", *(f"tx_pfc_ena_frames_pri{p}" for p in range(8)), "tx_eee_lpi_events",
              "tx_eee_lpi_duration", "tx_total_collisions", "tx_bytes", "tx_xthol_frames", "tx_stat_discard",
              "tx_stat_error"]
    names += ["link_down_events", "continuous_pause_events", "resume_pause_events",
              "continuous_roce_pause_events", "resume_roce_pause_events"]
    names += [f"rx_{kind}_cos{c}" for c in range(8) for kind in ("bytes", "packets")]
    names += [f"pfc_pri{p}_rx_{kind}" for p in range(8) for kind in ("duration_us", "transitions")]
    names += ["rx_bits", "rx_buffer_passed_threshold", "rx_pcs_symbol_err", "rx_corrected_bits"]
    names += [f"rx_discard_{kind}_cos{c}" for c in range(8) for kind in ("bytes", "packets")]
    names += [f"tx_{kind}_cos{c}" for c in range(8) for kind in ("bytes", "packets")]
    names += [f"pfc_pri{p}_tx_{kind}" for p in range(8) for kind in ("duration_us", "transitions")]
    names += [f"{d}_{kind}_pri{p}" for d, kind in (("rx", "bytes"), ("rx", "packets"), ("tx", "bytes"),
                                                     ("tx", "packets")) for p in range(8)]
    return names


def ice_stat_names() -> list[str]:
    """A part of Intel ice's names (E810): PF statistics, then the per-priority XON/XOFF ones."""
    names = ["rx_unicast", "tx_unicast", "rx_bytes", "tx_bytes", "rx_dropped", "rx_bytes.nic", "tx_bytes.nic",
             "rx_unicast.nic", "tx_unicast.nic", "link_xon_rx.nic", "link_xon_tx.nic", "link_xoff_rx.nic",
             "link_xoff_tx.nic", "rx_length_errors.nic", "rx_dropped.nic", "rx_crc_errors.nic"]
    for direction in ("tx", "rx"):
        for prio in range(8):
            names += [f"{direction}_priority_{prio}_xon.nic", f"{direction}_priority_{prio}_xoff.nic"]
    return names


def i40e_stat_names() -> list[str]:
    """A part of Intel i40e's names (X722): none maps to an infrapulse_nic_* family."""
    names = ["rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_errors", "tx_errors", "rx_dropped",
             "tx_dropped", "port.rx_bytes", "port.tx_bytes", "port.rx_crc_errors", "port.link_xon_rx",
             "port.link_xoff_rx", "port.link_xon_tx", "port.link_xoff_tx"]
    for prio in range(8):
        names += [f"port.tx_priority_{prio}_xon_tx", f"port.tx_priority_{prio}_xoff_tx",
                  f"port.rx_priority_{prio}_xon_rx", f"port.rx_priority_{prio}_xoff_rx"]
    return names


# What the node simulator counts, per driver: event -> stat name template ({d} direction rx/tx,
# {p} priority). An event a driver has no statistic for is not counted on that driver.
EVENTS: dict[str, dict[str, str]] = {
    "mlx5": {
        "wire_bytes": "{d}_bytes_phy", "wire_packets": "{d}_packets_phy", "eth_bytes": "{d}_bytes",
        "eth_packets": "{d}_packets", "prio_bytes": "{d}_prio{p}_bytes",
        "prio_packets": "{d}_prio{p}_packets",
        "pfc_frames": "{d}_prio{p}_pause", "pfc_us": "{d}_prio{p}_pause_duration",
        "pfc_transitions": "rx_prio{p}_pause_transition", "link_pause_frames": "{d}_pause_ctrl_phy",
        "prio_discards": "rx_prio{p}_discards", "ecn_marked": "rx_prio{p}_marked",
        "storm_warning": "tx_pause_storm_warning_events", "storm_error": "tx_pause_storm_error_events",
        "buffer_threshold": "rx_buffer_passed_thres_phy", "rx_bits": "rx_bits_phy",
        "fec_corrected_bits": "rx_corrected_bits_phy", "lane_errors": "rx_err_lane_{p}_phy",
        "link_down": "link_down_events_phy", "crc_errors": "rx_crc_errors_phy",
        "symbol_errors": "rx_symbol_err_phy", "pcs_symbol_errors": "rx_pcs_symbol_err_phy",
        "link_recovery": "total_success_recovery_phy",
    },
    "bnxt_en": {
        "wire_bytes": "{d}_bytes", "wire_packets": "{d}_total_frames",
        "eth_packets": "[0]: {d}_ucast_packets",
        "eth_bytes": "[0]: {d}_ucast_bytes", "pfc_frames": "{d}_pfc_ena_frames_pri{p}",
        "pfc_us": "pfc_pri{p}_{d}_duration_us", "pfc_transitions": "pfc_pri{p}_{d}_transitions",
        "link_pause_frames": "{d}_pfc_frames", "buffer_threshold": "rx_buffer_passed_threshold",
        "rx_bits": "rx_bits", "fec_corrected_bits": "rx_corrected_bits", "link_down": "link_down_events",
        "crc_errors": "rx_fcs_err_frames",
    },
    "ice": {
        "wire_bytes": "{d}_bytes.nic", "eth_bytes": "{d}_bytes", "pfc_frames": "{d}_priority_{p}_xoff.nic",
        "pfc_resume_frames": "{d}_priority_{p}_xon.nic", "crc_errors": "rx_crc_errors.nic",
    },
    "i40e": {
        "wire_bytes": "port.{d}_bytes", "eth_bytes": "{d}_bytes", "eth_packets": "{d}_packets",
        "pfc_frames": "port.{d}_priority_{p}_xoff_{d}", "crc_errors": "port.rx_crc_errors",
    },
}
STAT_NAMES: dict[str, Callable[[], list[str]]] = {
    "bnxt_en": bnxt_stat_names, "ice": ice_stat_names, "i40e": i40e_stat_names,
}


def _initial(interface: str, name: str) -> int:
    """A stable, plausible starting value (CRC of the name, so golden outputs do not drift)."""
    h = zlib.crc32(f"{interface}/{name}".encode())
    if name in ("link_down_events_phy", "link_down_events", "total_success_recovery_phy"):
        return h % 3
    if "storm" in name:
        return 0
    if "err" in name:
        return h % 1000
    if "duration" in name:
        return h % 10**7
    if "bytes" in name or name in ("rx_bits_phy", "rx_bits"):
        return 10**9 + h % 10**12
    if "packets" in name or "frames" in name:
        return 10**6 + h % 10**9
    return h % 1000


class NicStats:
    """The stats of one interface; `write()` publishes them atomically to `<dir>/<interface>.json`."""

    def __init__(self, interface: str, pfc_priorities: tuple[int, ...] = (3,), driver: str = "mlx5") -> None:
        if driver != "mlx5" and driver not in STAT_NAMES:
            raise ValueError(f"{interface}: unknown simulated driver {driver!r}")
        self.interface = interface
        self.driver = driver
        self.pfc_priorities = pfc_priorities
        names = mlx5_stat_names(pfc_priorities) if driver == "mlx5" else STAT_NAMES[driver]()
        self.values: dict[str, int] = {n: _initial(interface, n) for n in names}

    def add(self, name: str, delta: int) -> None:
        if name in self.values and delta:
            self.values[name] = (self.values[name] + int(delta)) % 2**64

    def count(self, event: str, delta: int, direction: str = "rx", priority: int = 0) -> None:
        """Count `delta` of an event under this driver's statistic for it (none: not counted)."""
        template = EVENTS[self.driver].get(event)
        if template is not None:
            self.add(template.format(d=direction, p=priority), delta)

    def set_pfc(self, priorities: tuple[int, ...]) -> None:
        """Change which priorities have PFC: the mlx5 stat set grows or shrinks, as the driver's does."""
        if self.driver != "mlx5":
            raise ValueError(f"{self.interface}: only mlx5 changes its stat set with the PFC config")
        old = self.values
        self.pfc_priorities = priorities
        self.values = {n: old.get(n, 0) for n in mlx5_stat_names(priorities)}

    def write(self, stats_dir: str | os.PathLike[str]) -> Path:
        path = Path(stats_dir) / f"{self.interface}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.values))
        os.replace(tmp, path)  # readers see the old or the new file, never half of one
        return path


def write_stats(stats_dir: str | os.PathLike[str], interfaces: list[str] | dict[str, str],
                pfc_priorities: tuple[int, ...] = (3,)) -> dict[str, NicStats]:
    """`interfaces`: names (all mlx5) or a mapping of name -> driver (mlx5, bnxt_en, ice, i40e)."""
    Path(stats_dir).mkdir(parents=True, exist_ok=True)
    drivers = interfaces if isinstance(interfaces, dict) else dict.fromkeys(interfaces, "mlx5")
    nics = {name: NicStats(name, pfc_priorities, driver) for name, driver in drivers.items()}
    for nic in nics.values():
        nic.write(stats_dir)
    return nics
