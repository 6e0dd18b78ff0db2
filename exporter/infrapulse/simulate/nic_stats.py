"""Simulated mlx5 driver statistics, one JSON file per interface, for `FileStatsProvider`.

The stat set mirrors what `ethtool -S` shows on a ConnectX port in a lossless RoCE set-up:
per-priority bytes/packets/discards/ECN marks for priorities 0-7, PFC pause counters only for
the priorities with PFC enabled (like mlx5, which adds and removes them with the DCB config),
pause-storm events, and the PHY counters (CRC, symbol, FEC, per-lane, link down).
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

PFC_SUFFIXES = ("pause", "pause_duration", "pause_transition")
PHY_ERROR_STATS = ("rx_crc_errors_phy", "rx_symbol_err_phy", "rx_pcs_symbol_err_phy", "rx_in_range_len_errors_phy",
                   "rx_out_of_range_len_phy", "rx_oversize_pkts_phy", "rx_undersize_pkts_phy", "rx_fragments_phy",
                   "rx_jabbers_phy", "tx_errors_phy")


def mlx5_stat_names(pfc_priorities: tuple[int, ...] = (3,), lanes: int = 4, storm_counters: bool = True) -> list[str]:
    names = ["rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_out_of_buffer",
             "rx_packets_phy", "rx_bytes_phy", "tx_packets_phy", "tx_bytes_phy",
             "rx_discards_phy", "tx_discards_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy",
             "rx_buffer_passed_thres_phy", "link_down_events_phy", "rx_bits_phy", "rx_corrected_bits_phy",
             *PHY_ERROR_STATS, *(f"rx_err_lane_{lane}_phy" for lane in range(lanes))]
    for prio in range(8):
        names += [f"rx_prio{prio}_bytes", f"rx_prio{prio}_packets", f"rx_prio{prio}_discards",
                  f"tx_prio{prio}_bytes", f"tx_prio{prio}_packets",
                  f"rx_prio{prio}_buf_discard", f"rx_prio{prio}_cong_discard", f"rx_prio{prio}_marked"]
        if prio in pfc_priorities:
            names += [f"rx_prio{prio}_pause", f"rx_prio{prio}_pause_duration", f"tx_prio{prio}_pause",
                      f"tx_prio{prio}_pause_duration", f"rx_prio{prio}_pause_transition"]
    if storm_counters:
        names += ["tx_pause_storm_warning_events", "tx_pause_storm_error_events"]
    return names


def ice_stat_names() -> list[str]:
    """A few of Intel ice's names (E810, behind irdma/iWARP ports): none of them maps to a family."""
    names = ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_crc_errors.nic", "rx_length_errors.nic",
             "link_xon_rx.nic", "link_xoff_rx.nic", "link_xon_tx.nic", "link_xoff_tx.nic"]
    for prio in range(8):
        names += [f"rx_priority_{prio}_xon.nic", f"rx_priority_{prio}_xoff.nic",
                  f"tx_priority_{prio}_xon.nic", f"tx_priority_{prio}_xoff.nic"]
    return names


def _initial(interface: str, name: str) -> int:
    h = zlib.crc32(f"{interface}/{name}".encode())
    if name.endswith(("bytes", "bytes_phy", "bits_phy")):
        return 10**9 + h % 10**12
    if name.endswith(("packets", "packets_phy")):
        return 10**6 + h % 10**9
    if name.endswith("pause_duration"):
        return h % 10**7
    if "storm" in name:
        return 0
    if name == "link_down_events_phy":
        return h % 3
    return h % 1000


class NicStats:
    """The stats of one interface; `write()` publishes them atomically to `<dir>/<interface>.json`."""

    def __init__(self, interface: str, pfc_priorities: tuple[int, ...] = (3,), driver: str = "mlx5") -> None:
        self.interface = interface
        self.pfc_priorities = pfc_priorities
        names = mlx5_stat_names(pfc_priorities) if driver == "mlx5" else ice_stat_names()
        self.values: dict[str, int] = {n: _initial(interface, n) for n in names}

    def add(self, name: str, delta: int) -> None:
        if name in self.values and delta:
            self.values[name] = (self.values[name] + int(delta)) % 2**64

    def set_pfc(self, priorities: tuple[int, ...]) -> None:
        """Change which priorities have PFC: the stat set grows or shrinks, as on mlx5."""
        old = self.values
        self.pfc_priorities = priorities
        self.values = {n: old.get(n, 0) for n in mlx5_stat_names(priorities)}

    def write(self, stats_dir: str | os.PathLike) -> Path:
        path = Path(stats_dir) / f"{self.interface}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.values))
        os.replace(tmp, path)  # readers see the old or the new file, never half of one
        return path


def write_stats(stats_dir: str | os.PathLike, interfaces: list[str] | dict[str, str],
                pfc_priorities: tuple[int, ...] = (3,)) -> dict[str, NicStats]:
    """`interfaces`: names (all mlx5) or a mapping of name -> driver ("mlx5" or "ice")."""
    Path(stats_dir).mkdir(parents=True, exist_ok=True)
    drivers = interfaces if isinstance(interfaces, dict) else dict.fromkeys(interfaces, "mlx5")
    nics = {name: NicStats(name, pfc_priorities, driver) for name, driver in drivers.items()}
    for nic in nics.values():
        nic.write(stats_dir)
    return nics
