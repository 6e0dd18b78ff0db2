"""Source `ethtool`: per-priority PFC, ECN marking, buffer discards and PHY errors of NICs.

These exist only in the driver statistics (`ethtool -S`), not in sysfs, and matter most on
lossless RoCE. Stats come from a `StatsProvider`: the real one issues the SIOCETHTOOL ioctl
(see ethtool_ioctl.py); `FileStatsProvider` reads one JSON file per interface and exists for
simulation and tests (config `stats_dir`).

Which interfaces: by default the netdevs behind RDMA ports (gid_attrs/ndevs under the
infiniband `sysfs_root`); with `interfaces: [regex, ...]`, every interface whose name fully
matches. Each interface is a target of `infrapulse_source_up{source="ethtool"}`; an interface
whose driver has no statistics (lo) is up 0 with reason `not_supported`.

Only the stats that mean something for a lossless fabric are exported, under stable names
(the mlx5 set has ~700 per port; node_exporter exports them all, untyped). Names follow
drivers/net/ethernet/mellanox/mlx5/core/en_stats.c; other drivers simply match fewer.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from ... import catalog
from ...schema import AutoBool, Duration, ListOf, Regex, Section, Str
from ...store import Snapshot
from ..base import PollingSource, TargetResult
from .ethtool_ioctl import EthtoolIoctl, InterfaceGone, StatSetChanged, StatsNotSupported
from .families import (
    BUFFER_ALMOST_FULL,
    DRIVER_STAT,
    ETHTOOL_SOURCE,
    FEC_CORRECTED,
    GLOBAL_PAUSE,
    GLOBAL_PAUSE_DURATION,
    LANE_ERRORS,
    LINK_DOWN,
    LINK_PAUSE,
    NIC_ECN_MARKED,
    NIC_OUT_OF_BUFFER,
    PAUSE_STORM,
    PFC_DURATION,
    PFC_FRAMES,
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
    STAT_COUNT,
)
from .infiniband import rdma_netdevs

SRC = ETHTOOL_SOURCE

# Per-priority stats: rx_prio3_pause, tx_prio0_pause_duration, rx_prio5_marked, ...
_PRIO_STAT = re.compile(r"(rx|tx)_prio([0-7])_(\w+)")
_PRIO_SUFFIX: dict[str, tuple[catalog.Family, bool, float]] = {  # suffix -> family, has direction, scale
    "pause": (PFC_FRAMES, True, 1.0), "pause_duration": (PFC_DURATION, True, 1e-6),
    "bytes": (PRIO_BYTES, True, 1.0), "packets": (PRIO_PACKETS, True, 1.0),
    "pause_transition": (PFC_TRANSITIONS, False, 1.0), "discards": (PRIO_DISCARDS, False, 1.0),
    "buf_discard": (PRIO_BUF_DISCARDS, False, 1.0), "cong_discard": (PRIO_CONG_DISCARDS, False, 1.0),
    "marked": (NIC_ECN_MARKED, False, 1.0),
}
_LANE_STAT = re.compile(r"rx_err_lane_(\d+)_phy")
# stat name -> family, labels after `interface`, scale
FIXED_STATS: dict[str, tuple[catalog.Family, tuple[str, ...], float]] = {
    "tx_pause_storm_warning_events": (PAUSE_STORM, ("warning",), 1.0),
    "tx_pause_storm_error_events": (PAUSE_STORM, ("error",), 1.0),
    "rx_global_pause": (GLOBAL_PAUSE, ("rx",), 1.0), "tx_global_pause": (GLOBAL_PAUSE, ("tx",), 1.0),
    "rx_global_pause_duration": (GLOBAL_PAUSE_DURATION, ("rx",), 1e-6),
    "tx_global_pause_duration": (GLOBAL_PAUSE_DURATION, ("tx",), 1e-6),
    "rx_pause_ctrl_phy": (LINK_PAUSE, ("rx",), 1.0), "tx_pause_ctrl_phy": (LINK_PAUSE, ("tx",), 1.0),
    "rx_crc_errors_phy": (PHY_ERRORS, ("crc",), 1.0), "rx_symbol_err_phy": (PHY_ERRORS, ("symbol",), 1.0),
    "rx_pcs_symbol_err_phy": (PHY_ERRORS, ("pcs_symbol",), 1.0),
    "rx_in_range_len_errors_phy": (PHY_ERRORS, ("in_range_length",), 1.0),
    "rx_out_of_range_len_phy": (PHY_ERRORS, ("out_of_range_length",), 1.0),
    "rx_oversize_pkts_phy": (PHY_ERRORS, ("oversize",), 1.0),
    "rx_undersize_pkts_phy": (PHY_ERRORS, ("undersize",), 1.0),
    "rx_fragments_phy": (PHY_ERRORS, ("fragment",), 1.0), "rx_jabbers_phy": (PHY_ERRORS, ("jabber",), 1.0),
    "tx_errors_phy": (PHY_ERRORS, ("transmit",), 1.0),
    "rx_corrected_bits_phy": (FEC_CORRECTED, (), 1.0), "rx_bits_phy": (RX_BITS, (), 1.0),
    "link_down_events_phy": (LINK_DOWN, (), 1.0),
    "rx_discards_phy": (PORT_DISCARDS, ("rx",), 1.0), "tx_discards_phy": (PORT_DISCARDS, ("tx",), 1.0),
    "rx_bytes_phy": (PHY_BYTES, ("rx",), 1.0), "tx_bytes_phy": (PHY_BYTES, ("tx",), 1.0),
    "rx_packets_phy": (PHY_PACKETS, ("rx",), 1.0), "tx_packets_phy": (PHY_PACKETS, ("tx",), 1.0),
    "rx_buffer_passed_thres_phy": (BUFFER_ALMOST_FULL, (), 1.0),
    "rx_out_of_buffer": (NIC_OUT_OF_BUFFER, (), 1.0),
}

Plan = list[tuple[int, str, tuple[str, ...], float]]  # (stat index, family, labels, scale)


def plan_stats(interface: str, names: Sequence[str], include: Sequence[re.Pattern] = ()) -> Plan:
    """Decide once per stat set where each stat goes; reused while the names stay the same."""
    plan: Plan = []
    for index, name in enumerate(names):
        fixed = FIXED_STATS.get(name)
        if fixed is not None:
            family, labels, scale = fixed
            plan.append((index, family.name, (interface, *labels), scale))
        elif (match := _PRIO_STAT.fullmatch(name)) and match.group(3) in _PRIO_SUFFIX:
            direction, prio, suffix = match.groups()
            family, with_direction, scale = _PRIO_SUFFIX[suffix]
            labels = (interface, prio, direction) if with_direction else (interface, prio)
            if with_direction or direction == "rx":
                plan.append((index, family.name, labels, scale))
        elif match := _LANE_STAT.fullmatch(name):
            plan.append((index, LANE_ERRORS.name, (interface, match.group(1)), 1.0))
        if include and any(p.fullmatch(name) for p in include):
            plan.append((index, DRIVER_STAT.name, (interface, name), 1.0))
    return plan


class StatsProvider(Protocol):
    """Where driver statistics come from: the ioctl, or files for simulation and tests."""

    def interfaces(self) -> list[str]:
        """Interface names that `interfaces:` regexes are matched against."""

    def read(self, interface: str) -> tuple[Sequence[str], Sequence[int]]:
        """(names, values). Raises StatsNotSupported, InterfaceGone, StatSetChanged or OSError."""

    def close(self) -> None: ...


class IoctlStatsProvider:
    """The real thing: SIOCETHTOOL on the interfaces of {sysfs_root}/class/net."""

    def __init__(self, sysfs_root: str | os.PathLike = "/sys", ethtool: EthtoolIoctl | None = None) -> None:
        self.net_dir = Path(sysfs_root) / "class" / "net"
        self.ethtool = ethtool or EthtoolIoctl()

    def interfaces(self) -> list[str]:
        try:
            return sorted(os.listdir(self.net_dir))
        except OSError:
            return []

    def read(self, interface: str) -> tuple[Sequence[str], Sequence[int]]:
        return self.ethtool.read(interface)

    def close(self) -> None:
        self.ethtool.close()


class FileStatsProvider:
    """Simulation/testing only: `<stats_dir>/<interface>.json` holds `{"stat_name": value, ...}`.

    The simulator rewrites those files atomically (write + rename), so a read sees whole files.
    """

    def __init__(self, stats_dir: str | os.PathLike) -> None:
        self.stats_dir = Path(stats_dir)
        self._names: dict[str, tuple[str, ...]] = {}

    def interfaces(self) -> list[str]:
        try:
            return sorted(p[:-5] for p in os.listdir(self.stats_dir) if p.endswith(".json"))
        except OSError:
            return []

    def read(self, interface: str) -> tuple[Sequence[str], Sequence[int]]:
        try:
            with open(self.stats_dir / f"{interface}.json", "rb") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise InterfaceGone(interface) from None
        if not isinstance(data, dict):
            raise ValueError(f"{interface}.json: expected an object of stat name -> integer")
        if not data:
            raise StatsNotSupported(f"{interface}: no statistics")
        names = tuple(data)
        cached = self._names.get(interface)
        if cached == names:
            names = cached  # same object: lets the source reuse its plan by identity
        self._names[interface] = names
        return names, [int(v) for v in data.values()]

    def close(self) -> None:
        pass


class EthtoolCollector:
    """The synchronous part: resolve interfaces, read each, map stats into snapshots."""

    def __init__(self, provider: StatsProvider, interfaces: list[str] | None = None,
                 sysfs_root: str | os.PathLike = "/sys", include_stats: list[str] | None = None,
                 rescan_interval: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.provider = provider
        self._patterns = [re.compile(p) for p in interfaces] if interfaces else None
        self._include = [re.compile(p) for p in include_stats or ()]
        self.sysfs_root = sysfs_root
        self.rescan_interval = rescan_interval
        self._clock = clock
        self._interfaces: list[str] = []
        self._resolved_at: float | None = None
        self._plans: dict[str, tuple[Sequence[str], Plan]] = {}
        self._lock = threading.Lock()

    def resolve(self) -> list[str]:
        if self._patterns is None:
            found = rdma_netdevs(self.sysfs_root)
        else:
            found = [i for i in self.provider.interfaces() if any(p.fullmatch(i) for p in self._patterns)]
        self._interfaces = found
        self._resolved_at = self._clock()
        return found

    def _plan(self, interface: str, names: Sequence[str]) -> Plan:
        cached = self._plans.get(interface)
        if cached is not None and (cached[0] is names or cached[0] == names):
            return cached[1]
        plan = plan_stats(interface, names, self._include)
        self._plans[interface] = (names, plan)
        return plan

    def collect(self) -> list[TargetResult]:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("the previous collection is still running")
        try:
            if self._resolved_at is None or self._clock() - self._resolved_at >= self.rescan_interval:
                self.resolve()
            if not self._interfaces:
                return [TargetResult(SRC, reason="no_interfaces", message=self._why_none())]
            results = [self._read(interface) for interface in self._interfaces]
            if any(r.reason == "no_such_interface" for r in results):
                self._resolved_at = None  # renamed or removed: resolve again next cycle
            return results
        finally:
            self._lock.release()

    def _why_none(self) -> str:
        if self._patterns is None:
            return (f"no RDMA port with a netdev under {self.sysfs_root}/class/infiniband and no "
                    f"`interfaces:` configured")
        return "no interface matches `interfaces:`"

    def _read(self, interface: str) -> TargetResult:
        try:
            names, values = self.provider.read(interface)
        except StatsNotSupported as exc:
            return TargetResult(interface, reason="not_supported", message=str(exc))
        except InterfaceGone:
            self._plans.pop(interface, None)
            return TargetResult(interface, reason="no_such_interface", message=f"{interface}: no such interface")
        except StatSetChanged as exc:
            return TargetResult(interface, reason="stats_unstable", message=str(exc))
        except OSError as exc:
            return TargetResult(interface, reason="ioctl_error", message=f"{interface}: {exc.strerror or exc}")
        except ValueError as exc:
            return TargetResult(interface, reason="unreadable", message=f"{interface}: {exc}")
        if not names:
            return TargetResult(interface, reason="not_supported", message=f"{interface}: no statistics")
        snap = Snapshot()
        series = snap.series
        for index, family, labels, scale in self._plan(interface, names):
            bucket = series.get(family)
            if bucket is None:
                bucket = series[family] = {}
            value = values[index]
            bucket[labels] = value * scale if scale != 1.0 else value
        series[STAT_COUNT.name] = {(interface,): float(len(names))}
        return TargetResult(interface, snapshot=snap)

    def close(self) -> None:
        with self._lock:
            self.provider.close()
            self._plans.clear()


class EthtoolSource(PollingSource):
    name = SRC
    role = "node"
    CONFIG = Section(
        doc="NIC driver statistics via the SIOCETHTOOL ioctl: per-priority PFC, ECN marks, discards, PHY errors.",
        fields={
            "enabled": AutoBool("auto: on when `interfaces` or `stats_dir` is set or RDMA ports exist under "
                                "{sysfs_root}/class/infiniband; true: always; false: off."),
            "interfaces": ListOf(item=Regex(), doc="Interfaces whose name fully matches one of these regular "
                                                   "expressions. Default: the netdevs behind RDMA ports."),
            "sysfs_root": Str("Where sysfs is mounted: RDMA ports are found under "
                              "{sysfs_root}/class/infiniband, interfaces under {sysfs_root}/class/net.",
                              default="/sys"),
            "stats_dir": Str("Simulation and testing only: read stats from <stats_dir>/<interface>.json "
                             "(an object of stat name -> integer) instead of the ioctl.", default=""),
            "include_stats": ListOf(item=Regex(), doc="Also export raw driver stats whose name fully matches one "
                                                      "of these regexes as infrapulse_nic_driver_stat{stat}."),
            "interval": Duration("Poll interval of this source (default: the global interval).", min=0.05),
            "rescan_interval": Duration("How often the interface list is resolved again.", default="30s", min=0),
        },
    )

    def __init__(self, config: dict, ctx) -> None:
        super().__init__(config, ctx)
        root = config.get("sysfs_root") or "/sys"
        provider: StatsProvider = (FileStatsProvider(config["stats_dir"]) if config.get("stats_dir")
                                   else IoctlStatsProvider(root))
        self.collector = EthtoolCollector(provider, config.get("interfaces"), root, config.get("include_stats"),
                                          config.get("rescan_interval", 30.0))

    @classmethod
    def wanted(cls, config: dict) -> bool:
        enabled = config.get("enabled", "auto")
        if enabled == "auto":
            root = Path(config.get("sysfs_root") or "/sys")
            return bool(config.get("interfaces") or config.get("stats_dir")
                        or (root / "class" / "infiniband").is_dir())
        return enabled is True

    async def collect(self) -> list[TargetResult]:
        # GSTATS on mlx5 queries firmware registers (8 PPCNT reads for the per-priority group alone).
        return await asyncio.to_thread(self.collector.collect)

    async def close(self) -> None:
        await asyncio.to_thread(self.collector.close)

    def default_target(self) -> str:
        return SRC


SOURCE = EthtoolSource
