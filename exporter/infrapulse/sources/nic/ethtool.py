"""Source `ethtool`: per-priority PFC, ECN marking, buffer discards, PHY errors and link state of NICs.

These exist only in the driver statistics (`ethtool -S`), not in sysfs, and matter most on
lossless RoCE. Stats come from a `StatsProvider`: the real one issues the SIOCETHTOOL ioctl
(see ethtool_ioctl.py); `FileStatsProvider` reads one JSON file per interface and exists for
simulation and tests (config `stats_dir`).

Which interfaces: by default the netdevs behind RDMA ports (gid_attrs/ndevs under the
infiniband `sysfs_root`); with `interfaces: [regex, ...]`, every interface whose name fully
matches. Each interface is a target of `infrapulse_source_up{source="ethtool"}`; an interface
whose driver has no statistics (lo) is up 0 with reason `not_supported`.

Only the stats that mean something for a lossless fabric are exported, under stable names
(the mlx5 set has ~700 per port; node_exporter exports them all, untyped). ethtool_map.py says
which mlx5, bnxt_en and ice statistic goes where. An interface whose statistics map to no
family is reported (reason `partial`, coverage 0) instead of looking healthy.

Next to the driver statistics each interface's carrier counters, speed and NIC hwmon
temperatures are read from `{sysfs_root}/class/net/<if>/` (link_sysfs.py); their coverage is
reported per family like the statistics'.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ...schema import AutoBool, Duration, ListOf, Regex, Str, setting, settings
from ...store import Snapshot
from ..base import PollingSettings, PollingSource, SourceContext, TargetResult
from .ethtool_ioctl import EthtoolIoctl, InterfaceGone, StatSetChanged, StatsNotSupported
from .ethtool_map import Plan, plan_coverage, plan_stats
from .families import (
    ETHTOOL_SOURCE,
    MODULE_RX_POWER,
    MODULE_TEMPERATURE,
    MODULE_TX_BIAS,
    MODULE_TX_POWER,
    STAT_COUNT,
)
from .infiniband import rdma_netdevs
from .link_sysfs import add_to, link_coverage, read_link
from .module_dom import Dom, NoDom, has_net_admin, parse_dom

ModuleRead = Callable[[str], tuple[int, bytes]]  # interface -> (ETH_MODULE_* type, EEPROM bytes)
DOM_MAPPING = "module_dom"  # coverage mapping: DOM series of the interface (0 = none, or off)

SRC = ETHTOOL_SOURCE
log = logging.getLogger("infrapulse.sources.ethtool")
UNMAPPED = "driver_stats"  # coverage mapping: driver statistics that feed some family


@dataclass
class _InterfacePlan:
    """What one stat name table maps to, kept while the table stays the same."""

    names: Sequence[str]
    plan: Plan
    coverage: dict[str, int]  # family -> series, plus UNMAPPED -> statistics that map somewhere
    unmapped_note: str  # "" when something maps; else why this interface exports nothing


class StatsProvider(Protocol):
    """Where driver statistics come from: the ioctl, or files for simulation and tests."""

    def interfaces(self) -> list[str]:
        """Interface names that `interfaces:` regexes are matched against."""

    def read(self, interface: str) -> tuple[Sequence[str], Sequence[int]]:
        """(names, values). Raises StatsNotSupported, InterfaceGone, StatSetChanged or OSError."""

    def close(self) -> None: ...


class IoctlStatsProvider:
    """The real thing: SIOCETHTOOL on the interfaces of {sysfs_root}/class/net."""

    def __init__(self, sysfs_root: str | os.PathLike[str] = "/sys",
                 ethtool: EthtoolIoctl | None = None) -> None:
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

    def __init__(self, stats_dir: str | os.PathLike[str]) -> None:
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
                 sysfs_root: str | os.PathLike[str] = "/sys", include_stats: list[str] | None = None,
                 rescan_interval: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 module_read: ModuleRead | None = None, module_interval: float = 60.0) -> None:
        self.provider = provider
        # Transceiver DOM: read only when given a reader (enabled and permitted), cached between reads.
        self.module_read = module_read
        self.module_interval = module_interval
        self._dom: dict[str, tuple[float, Dom | None, str]] = {}  # interface -> (read at, DOM, why not)
        self._patterns = [re.compile(p) for p in interfaces] if interfaces else None
        self._include = [re.compile(p) for p in include_stats or ()]
        self.sysfs_root = sysfs_root
        self.rescan_interval = rescan_interval
        self._clock = clock
        self._interfaces: list[str] = []
        self._resolved_at: float | None = None
        self._plans: dict[str, _InterfacePlan] = {}
        self._link_coverage: dict[str, dict[str, int]] = {}  # interface -> sysfs link series per family
        # (interface, sample name, count) for each new stat table that maps to nothing; the
        # source hands them to store.count_unmapped once.
        self._unmapped: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()

    def resolve(self) -> list[str]:
        if self._patterns is None:
            found = rdma_netdevs(self.sysfs_root)
        else:
            found = [i for i in self.provider.interfaces() if any(p.fullmatch(i) for p in self._patterns)]
        self._interfaces = found
        self._resolved_at = self._clock()
        return found

    def _plan(self, interface: str, names: Sequence[str]) -> _InterfacePlan:
        cached = self._plans.get(interface)
        if cached is not None and (cached.names is names or cached.names == names):
            return cached
        plan = plan_stats(interface, names, self._include)
        coverage = plan_coverage(plan)
        mapped = sum(1 for _, family, _, _ in plan if family in coverage)
        coverage[UNMAPPED] = mapped
        note = ""
        if not mapped:
            driver = self._driver(interface)
            by_driver = f" (driver {driver})" if driver else ""
            first = ", ".join(names[:3])
            note = (f"{interface}: none of its {len(names)} driver statistics maps to an infrapulse_nic_* "
                    f"family{by_driver}; only the stat count is exported (first names: {first})")
            self._unmapped.append((interface, names[0], len(names)))
        cached = self._plans[interface] = _InterfacePlan(names, plan, coverage, note)
        return cached

    def _driver(self, interface: str) -> str:
        """The kernel driver behind an interface, for messages; "" when sysfs does not say."""
        try:
            return os.path.basename(os.readlink(Path(self.sysfs_root) / "class" / "net" / interface
                                                / "device" / "driver"))
        except OSError:
            return ""

    def coverage(self, interface: str) -> dict[str, int] | None:
        """Series per family of the interface's current stat table (None before a good read)."""
        cached = self._plans.get(interface)
        if cached is None:
            return None
        return {**cached.coverage, **self._link_coverage.get(interface, {})}

    def take_unmapped(self) -> list[tuple[str, str, int]]:
        taken, self._unmapped = self._unmapped, []
        return taken

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

    def _add_dom(self, interface: str, snap: Snapshot) -> str:
        """Add the module's DOM (re-read every module_interval); returns an error to report, or ""."""
        assert self.module_read is not None
        now = self._clock()
        cached = self._dom.get(interface)
        if cached is None or now - cached[0] >= self.module_interval:
            dom, why = None, ""
            try:
                dom = parse_dom(*self.module_read(interface))
            except NoDom:
                why = ""  # no DOM on this module: nothing to report, coverage says 0
            except StatsNotSupported:
                why = ""  # no module plugged, or a driver without module EEPROM access
            except PermissionError:
                why = f"{interface}: module DOM needs CAP_NET_ADMIN (module_dom: true without it)"
            except (OSError, InterfaceGone, ValueError) as exc:
                why = f"{interface}: module EEPROM: {exc}"
            cached = self._dom[interface] = (now, dom, why)
        _, dom, why = cached
        series = 0
        if dom is not None:
            labels = (interface,)
            snap.series.setdefault(MODULE_TEMPERATURE.name, {})[labels] = dom.temperature
            for family, values in ((MODULE_RX_POWER, dom.rx_power), (MODULE_TX_POWER, dom.tx_power),
                                   (MODULE_TX_BIAS, dom.tx_bias)):
                bucket = snap.series.setdefault(family.name, {})
                for lane, value in enumerate(values):
                    bucket[(interface, str(lane))] = value
                series += len(values)
            series += 1
        self._link_coverage.setdefault(interface, {})[DOM_MAPPING] = series
        return why

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
            return TargetResult(interface, reason="no_such_interface",
                                message=f"{interface}: no such interface")
        except StatSetChanged as exc:
            return TargetResult(interface, reason="stats_unstable", message=str(exc))
        except OSError as exc:
            return TargetResult(interface, reason="ioctl_error",
                                message=f"{interface}: {exc.strerror or exc}")
        except ValueError as exc:
            return TargetResult(interface, reason="unreadable", message=f"{interface}: {exc}")
        if not names:
            return TargetResult(interface, reason="not_supported", message=f"{interface}: no statistics")
        snap = Snapshot()
        series = snap.series
        planned = self._plan(interface, names)
        for index, family, labels, divisor in planned.plan:
            bucket = series.get(family)
            if bucket is None:
                bucket = series[family] = {}
            value = values[index]
            bucket[labels] = value / divisor if divisor != 1 else value
        series[STAT_COUNT.name] = {(interface,): float(len(names))}
        partial = [planned.unmapped_note] if planned.unmapped_note else []
        # Carrier counters, speed and hwmon temperatures live in sysfs, not in the driver stats.
        link = read_link(self.sysfs_root, interface)
        add_to(snap, link)
        self._link_coverage[interface] = link_coverage(link)
        partial += link.errors
        if self.module_read is not None:
            dom_error = self._add_dom(interface, snap)
            if dom_error:
                partial.append(dom_error)
        else:
            self._link_coverage[interface][DOM_MAPPING] = 0  # off (not permitted, not wanted, files)
        return TargetResult(interface, snapshot=snap, partial_errors=partial)

    def close(self) -> None:
        with self._lock:
            self.provider.close()
            self._plans.clear()


@settings("NIC driver statistics via the SIOCETHTOOL ioctl: per-priority PFC, ECN marks, discards, "
          "PHY errors.")
@dataclass(kw_only=True, slots=True)
class EthtoolSettings(PollingSettings):
    enabled: bool | str = setting(AutoBool(
        "auto: on when `interfaces` or `stats_dir` is set or RDMA ports exist under "
        "{sysfs_root}/class/infiniband; true: always; false: off."))
    interfaces: list[str] | None = setting(ListOf(
        item=Regex(), doc="Interfaces whose name fully matches one of these regular expressions. Default: "
                          "the netdevs behind RDMA ports."))
    sysfs_root: str = setting(Str("Where sysfs is mounted: RDMA ports are found under "
                                  "{sysfs_root}/class/infiniband, interfaces under {sysfs_root}/class/net.",
                                  default="/sys"))
    stats_dir: str = setting(Str("Simulation and testing only: read stats from <stats_dir>/<interface>.json "
                                 "(an object of stat name -> integer) instead of the ioctl.", default=""))
    include_stats: list[str] | None = setting(ListOf(
        item=Regex(), doc="Also export raw driver stats whose name fully matches one of these regexes as "
                          "infrapulse_nic_driver_stat{stat}."))
    interval: float | None = setting(Duration("Poll interval of this source (default: the global interval).",
                                              min=0.05))
    rescan_interval: float = setting(Duration("How often the interface list is resolved again.",
                                              default="30s", min=0))
    module_dom: bool | str = setting(AutoBool(
        "Transceiver DOM (temperature, rx/tx power, bias per lane) from the module EEPROM, which needs "
        "CAP_NET_ADMIN. auto: read when the daemon has CAP_NET_ADMIN, else off (coverage mapping "
        "module_dom 0, logged once); true: read, and report each interface partial when not permitted; "
        "false: off. Never with stats_dir."))
    module_dom_interval: float = setting(Duration("How often the module EEPROM is read again (an I2C access "
                                                  "per module).", default="60s", min=1))




class EthtoolSource(PollingSource[EthtoolSettings]):
    name = SRC
    role = "node"
    CONFIG = EthtoolSettings.SCHEMA

    def __init__(self, config: EthtoolSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        root = config.sysfs_root
        provider: StatsProvider = (FileStatsProvider(config.stats_dir) if config.stats_dir
                                   else IoctlStatsProvider(root))
        module_read: ModuleRead | None = None
        if isinstance(provider, IoctlStatsProvider) and self._dom_wanted(config.module_dom):
            module_read = provider.ethtool.module_eeprom
        self.collector = EthtoolCollector(provider, config.interfaces, root, config.include_stats,
                                          config.rescan_interval, module_read=module_read,
                                          module_interval=config.module_dom_interval)

    @staticmethod
    def _dom_wanted(setting: bool | str) -> bool:
        if setting == "auto":
            if has_net_admin():
                return True
            log.info("ethtool: module DOM off: the daemon has no CAP_NET_ADMIN (sources.ethtool.module_dom)")
            return False
        return setting is True

    @classmethod
    def absent_reason(cls, config: EthtoolSettings) -> str:
        return f"enabled: auto and {config.sysfs_root}/class/infiniband does not exist (no RDMA device here)"

    @classmethod
    def wanted(cls, config: EthtoolSettings) -> bool:
        enabled = config.enabled
        if enabled == "auto":
            root = Path(config.sysfs_root)
            return bool(config.interfaces or config.stats_dir
                        or (root / "class" / "infiniband").is_dir())
        return enabled is True

    async def collect(self) -> list[TargetResult]:
        # GSTATS on mlx5 queries firmware registers (8 PPCNT reads for the per-priority group alone).
        results = await asyncio.to_thread(self.collector.collect)
        for result in results:
            coverage = self.collector.coverage(result.target) if result.snapshot is not None else None
            if coverage is not None:
                self.store.set_coverage(SRC, result.target, coverage)
        for interface, sample, count in self.collector.take_unmapped():
            self.store.count_unmapped(SRC, interface, UNMAPPED, sample, count)
        return results

    async def close(self) -> None:
        await asyncio.to_thread(self.collector.close)

    def default_target(self) -> str:
        return SRC


SOURCE = EthtoolSource
