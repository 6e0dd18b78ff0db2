"""Source `roce_config`: the RoCE congestion-control (DCQCN/ECN) and QoS configuration of every RDMA
netdev, its firmware and driver, a stable config hash, and drift.

Per netdev (a target of `infrapulse_source_up{source="roce_config"}`): ECN enable flags and DCQCN
parameters from sysfs (`roce_config_read.py`; debugfs `cc_params` on upstream kernels, read only
every `debugfs_interval` and when the firmware changes), PFC and the DSCP APP table over DCB
netlink (`dcb_netlink.py`), trust mode, buffers, fw_ver and ETHTOOL_GDRVINFO. Configuration
changes slowly, so the whole read runs on this source's own interval (default 60 s).

Drift: (a) the last known configuration of each netdev is kept in `{state_dir}/roce_config/
state.json`, so a change across a restart or a reboot (a firmware upgrade) is still seen; a change
is logged setting by setting (old -> new, and whether the firmware changed) and exported
(changes counter, last-change info); (b) the accepted baseline: the configuration first seen (or
last accepted) is kept beside it, and the settings differing from it are exported until the
configuration returns to it or an operator accepts the new one (`touch {state_dir}/roce_config/
accept-baseline`: every netdev's current configuration becomes its baseline); (c) fleet
consistency is in the recording rules, by hash; (d) an optional `expected:` configuration gives
a mismatch family.

For simulation and tests, `sim_dir` replaces the netlink and ioctl reads with files:
`<sim_dir>/<interface>.json` = {"dcb": {...DcbConfig.to_json()}, "drvinfo": {"driver", "version"}}.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ...schema import AutoBool, Duration, Int, ListOf, MapOf, Regex, Settings, Str, setting, settings
from ...store import Snapshot
from ..base import PollingSettings, PollingSource, SourceContext, TargetResult
from . import roce_families as F
from .dcb_netlink import DcbConfig, DcbInterfaceGone, DcbNotSupported, NetlinkDcb
from .drvinfo import DriverInfo, DrvinfoIoctl
from .roce_config_read import (
    NetdevConfig,
    netdev_devices,
    pci_address,
    read_debugfs,
    read_ecn,
    read_firmware,
    read_qos,
)

SRC = F.SRC
log = logging.getLogger("infrapulse.source.roce_config")
MAX_LISTED_CHANGES = 8
ACCEPT_FILE = "accept-baseline"  # under {state_dir}/roce_config/: accept every netdev's configuration
# A configuration change up to this long after a firmware change still counts as "with the
# firmware": an upgrade changes fw_ver and resets DCQCN together, but a cycle that reads the files
# in between sees the new firmware with the old (or half the new) configuration.
FIRMWARE_SETTLE_S = 300.0
COVERED = (F.ECN_ENABLED, F.CC_PARAMETER, F.PFC_ENABLED, F.DSCP_PRIORITY, F.TRUST_INFO)  # coverage mappings


class PlatformReader(Protocol):
    """DCB and driver info: netlink + ioctl for real, files for the simulator."""

    def dcb(self, interface: str) -> DcbConfig:
        """Raises DcbNotSupported, DcbInterfaceGone or OSError."""

    def drvinfo(self, interface: str) -> DriverInfo:
        """Raises OSError."""

    def close(self) -> None: ...


class KernelReader:
    def __init__(self) -> None:
        self._dcb = NetlinkDcb()
        self._drv = DrvinfoIoctl()

    def dcb(self, interface: str) -> DcbConfig:
        return self._dcb.read(interface)

    def drvinfo(self, interface: str) -> DriverInfo:
        return self._drv.read(interface)

    def close(self) -> None:
        self._dcb.close()
        self._drv.close()


class FileReader:
    """Simulation/testing only: `<sim_dir>/<interface>.json`."""

    def __init__(self, sim_dir: str | os.PathLike[str]) -> None:
        self.sim_dir = Path(sim_dir)

    def _load(self, interface: str) -> dict[str, Any]:
        try:
            data = json.loads((self.sim_dir / f"{interface}.json").read_text())
        except FileNotFoundError:
            raise DcbInterfaceGone(interface) from None
        if not isinstance(data, dict):
            raise ValueError(f"{interface}.json: expected an object")
        return data

    def dcb(self, interface: str) -> DcbConfig:
        raw = self._load(interface).get("dcb")
        if raw is None:
            raise DcbNotSupported(f"{interface}: no DCB support (EOPNOTSUPP)")
        return DcbConfig.from_json(raw)

    def drvinfo(self, interface: str) -> DriverInfo:
        try:
            raw = self._load(interface).get("drvinfo") or {}
        except DcbInterfaceGone:
            raise OSError(19, "No such device") from None
        return DriverInfo(str(raw.get("driver", "")), str(raw.get("version", "")),
                          str(raw.get("firmware", "")), str(raw.get("bus_info", "")))

    def close(self) -> None:
        pass


@dataclass
class Expected:
    """The intended configuration (`expected:`); empty parts are not checked."""

    pfc_priorities: list[int] = field(default_factory=list)
    ecn_priorities: list[int] = field(default_factory=list)  # NP and RP on
    cc_parameters: dict[str, int] = field(default_factory=dict)  # "roce_rp/rpg_ai_rate" or "rpg_ai_rate"
    trust: str = ""

    @property
    def empty(self) -> bool:
        return not (self.pfc_priorities or self.ecn_priorities or self.cc_parameters or self.trust)

    def mismatches(self, cfg: NetdevConfig) -> list[tuple[str, str, str]]:
        """(setting, expected, actual) for each setting that differs; "unknown" when unread."""
        out: list[tuple[str, str, str]] = []
        if self.pfc_priorities:
            if not cfg.pfc_enabled:
                out.append(("pfc", _prios(self.pfc_priorities), "unknown"))
            else:
                actual = [p for p, on in sorted(cfg.pfc_enabled.items()) if on]
                if actual != sorted(self.pfc_priorities):
                    out.append(("pfc", _prios(self.pfc_priorities), _prios(actual)))
        for prio in self.ecn_priorities:
            for role in ("roce_np", "roce_rp"):
                value = cfg.ecn.get((role, prio))
                if value != 1:
                    out.append((f"{role}/enable/{prio}", "1", "unknown" if value is None else str(value)))
        for name, want in sorted(self.cc_parameters.items()):
            role, _, param = name.rpartition("/")
            got = cfg.params.get((role, param) if role else _param_key(param))
            if got != want:
                out.append((name, str(want), "unknown" if got is None else str(got)))
        if self.trust and cfg.trust != self.trust:
            out.append(("trust", self.trust, cfg.trust or "unknown"))
        return out


def _prios(prios: list[int]) -> str:
    return ",".join(str(p) for p in sorted(prios)) or "none"


def _param_key(name: str) -> tuple[str, str]:
    from .roce_config_read import NP_PARAMS

    return ("roce_np" if name in NP_PARAMS else "roce_rp", name)


@dataclass
class _Known:
    """What the state file remembers of one netdev."""

    hash: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    firmware: str = ""
    changes: int = 0
    last_change: dict[str, Any] = field(default_factory=dict)
    # The last firmware change (wall time, and the firmware before it): the configuration reset
    # that comes with an upgrade can land a cycle later, since no read of many files is atomic.
    firmware_changed_at: float = 0.0
    previous_firmware: str = ""
    # The accepted configuration: the first seen, or the one an operator last accepted. A fabric
    # whose DCQCN was reset by an upgrade runs without the protection it was designed with until
    # the settings come back or the new ones are accepted.
    baseline: dict[str, str] = field(default_factory=dict)
    baseline_firmware: str = ""


class StateFile:
    """`{state_dir}/roce_config/state.json`: the last known configuration per netdev."""

    def __init__(self, state_dir: str) -> None:
        self.path = Path(state_dir) / "roce_config" / "state.json" if state_dir else None
        self.error = ""

    def load(self) -> dict[str, _Known]:
        if self.path is None:
            return {}
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.error = f"{self.path}: cannot read the last known configuration ({exc}); starting afresh"
            log.warning(self.error)
            return {}
        out: dict[str, _Known] = {}
        for name, item in (raw.get("interfaces") or {}).items():
            if isinstance(item, dict):
                settings = dict(item.get("settings") or {})
                # A state file written before baselines existed: its last known configuration is
                # the baseline (nothing is reported as drift on upgrade).
                baseline = item.get("baseline")
                out[name] = _Known(str(item.get("hash", "")), settings,
                                   str(item.get("firmware", "")), int(item.get("changes", 0)),
                                   dict(item.get("last_change") or {}),
                                   float(item.get("firmware_changed_at", 0.0)),
                                   str(item.get("previous_firmware", "")),
                                   dict(baseline) if isinstance(baseline, dict) else dict(settings),
                                   str(item.get("baseline_firmware", item.get("firmware", ""))))
        return out

    def save(self, known: dict[str, _Known]) -> None:
        if self.path is None:
            return
        data = {"version": 1, "interfaces": {name: {"hash": k.hash, "settings": k.settings,
                                                    "firmware": k.firmware, "changes": k.changes,
                                                    "last_change": k.last_change,
                                                    "firmware_changed_at": k.firmware_changed_at,
                                                    "previous_firmware": k.previous_firmware,
                                                    "baseline": k.baseline,
                                                    "baseline_firmware": k.baseline_firmware}
                                             for name, k in sorted(known.items())}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
            self.error = ""
        except OSError as exc:
            self.error = f"{self.path}: cannot persist the configuration ({exc.strerror or exc})"


def describe_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """"setting old->new" for every setting that differs ("-" = absent)."""
    return [f"{k} {old.get(k, '-')}->{new.get(k, '-')}" for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)]


class RoceConfigCollector:
    """The synchronous part: resolve netdevs, read each, compare with the last known state."""

    def __init__(self, reader: PlatformReader, sysfs_root: str = "/sys",
                 debugfs_root: str = "/sys/kernel/debug",
                 interfaces: list[str] | None = None, state_dir: str = "", expected: Expected | None = None,
                 debugfs_interval: float = 300.0, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.reader = reader
        self.sysfs_root = sysfs_root
        self.debugfs_root = debugfs_root
        self._patterns = [re.compile(p) for p in interfaces] if interfaces else None
        self.expected = expected or Expected()
        self.debugfs_interval = debugfs_interval
        self._clock = clock
        self._wall = wall
        self.state = StateFile(state_dir)
        self.accept_flag = self.state.path.parent / ACCEPT_FILE if self.state.path else None
        self.known = self.state.load()
        # Counted changes not yet published: a change found on the first read after a start is
        # published one cycle later, so every reader sees the counter step up from the persisted
        # value instead of a series that starts above it.
        self._first = True
        self._pending: dict[str, int] = {}
        self._debugfs: dict[str, tuple[float, str, dict[tuple[str, str], int], str]] = {}

    def interfaces(self) -> dict[str, str]:
        """netdev -> RDMA device ("" when configured by regex and not an RDMA netdev)."""
        devices = netdev_devices(self.sysfs_root)
        if self._patterns is None:
            return devices
        try:
            names = sorted(os.listdir(Path(self.sysfs_root) / "class" / "net"))
        except OSError:
            names = []
        return {n: devices.get(n, "") for n in names if any(p.fullmatch(n) for p in self._patterns)}

    def read(self, interface: str, device: str) -> NetdevConfig:
        cfg = NetdevConfig(interface, device)
        net_dir = Path(self.sysfs_root) / "class" / "net" / interface
        has_ecn = read_ecn(cfg, net_dir)
        read_qos(cfg, net_dir)
        read_firmware(cfg, self.sysfs_root)
        try:
            info = self.reader.drvinfo(interface)
            cfg.driver, cfg.driver_version = info.driver, info.version
            cfg.firmware = cfg.firmware or info.firmware
        except (OSError, ValueError) as exc:
            cfg.problems.append(f"{interface}: ETHTOOL_GDRVINFO: {getattr(exc, 'strerror', None) or exc}")
        if not has_ecn:
            self._debugfs_params(cfg, net_dir)
        self._read_dcb(cfg)
        return cfg

    def _debugfs_params(self, cfg: NetdevConfig, net_dir: Path) -> None:
        """No ecn/ in sysfs (upstream driver, or a VF): the parameters from debugfs, read rarely."""
        pci = pci_address(self.sysfs_root, cfg.interface)
        cached = self._debugfs.get(cfg.interface)
        now = self._clock()
        if cached is None or now - cached[0] >= self.debugfs_interval or cached[1] != cfg.firmware:
            probe = NetdevConfig(cfg.interface)
            why = (read_debugfs(probe, Path(self.debugfs_root) / "mlx5" / pci / "cc_params") if pci
                   else "no PCI device behind the netdev (a VF or a virtual device has no cc_params)")
            cfg.problems.extend(probe.problems)
            cached = self._debugfs[cfg.interface] = (now, cfg.firmware, probe.params, why)
        _, _, params, why = cached
        if params:
            cfg.params.update(params)
            cfg.params_from = "debugfs"
            return
        cfg.problems.append(f"{cfg.interface}: no ecn/ in sysfs (a VF, or a driver without the OFED ecn "
                            f"sysfs) "
                            f"and DCQCN parameters not readable from debugfs: {why}")

    def _read_dcb(self, cfg: NetdevConfig) -> None:
        try:
            dcb = self.reader.dcb(cfg.interface)
        except DcbNotSupported:
            cfg.dcb_state = "not_supported"
            cfg.problems.append(f"{cfg.interface}: DCB not supported (no PFC or DSCP map to read)")
            dcb = None
        except (DcbInterfaceGone, OSError, ValueError) as exc:
            cfg.dcb_state = f"error: {exc}"
            cfg.unreadable += 1  # PFC and the DSCP map unknown this cycle, not removed
            cfg.problems.append(f"{cfg.interface}: DCB netlink: {getattr(exc, 'strerror', None) or exc}")
            dcb = None
        if dcb is not None:
            cfg.dcb_state = "ok"
            cfg.pfc_enabled = dict(dcb.pfc_enabled)
            cfg.dscp_to_priority = dict(dcb.dscp_to_priority)
        if not cfg.trust and cfg.dcb_state == "ok":
            # Upstream mlx5 trusts DSCP once DSCP APP entries exist (mlx5e_dcbnl_ieee_setapp).
            cfg.trust = "dscp" if cfg.dscp_to_priority else "pcp"
            cfg.trust_source = "inferred"

    def collect(self) -> list[TargetResult]:
        netdevs = self.interfaces()
        if not netdevs:
            why = ("no interface matches `interfaces:`" if self._patterns is not None else
                   f"no RDMA port with a netdev under {self.sysfs_root}/class/infiniband")
            return [TargetResult(SRC, reason="no_interfaces", message=why)]
        results = []
        accept = self.accept_flag is not None and self.accept_flag.exists()
        dirty = False
        for interface, device in sorted(netdevs.items()):
            cfg = self.read(interface, device)
            if not (Path(self.sysfs_root) / "class" / "net" / interface).is_dir() and not cfg.params \
                    and cfg.dcb_state.startswith("error"):
                results.append(TargetResult(interface, reason="no_such_interface",
                                            message=f"{interface}: no such interface"))
                continue
            dirty |= self._track(cfg)
            if accept and not cfg.unreadable:
                dirty |= self._accept(cfg)
            results.append(TargetResult(interface, snapshot=self.snapshot(cfg), partial_errors=cfg.problems))
        if dirty:
            self.state.save(self.known)
        if accept and self.accept_flag is not None and not self.state.error:
            self.accept_flag.unlink(missing_ok=True)
        if self.state.error:  # drift across restarts is not guaranteed: say so on every netdev
            for result in results:
                if result.snapshot is not None:
                    result.partial_errors.append(self.state.error)
        self._first = False
        return results

    def _track(self, cfg: NetdevConfig) -> bool:
        """Compare with the last known configuration; True when the state file must be written."""
        settings, digest = cfg.flat(), cfg.config_hash()
        known = self.known.get(cfg.interface)
        if known is None:
            self.known[cfg.interface] = _Known(digest, settings, cfg.firmware, baseline=dict(settings),
                                               baseline_firmware=cfg.firmware)
            return True
        pending = self._pending.pop(cfg.interface, 0)
        if pending:
            known.changes += pending
        if cfg.unreadable and known.hash != digest:
            # Some setting read empty or failed: the picture is incomplete, not a new configuration
            # (a firmware command error for one file must not log every parameter as removed).
            cfg.problems.append(f"{cfg.interface}: {cfg.unreadable} setting(s) unreadable: configuration "
                                f"change tracking skipped this cycle")
            return bool(pending)
        now = self._wall()
        firmware_moved = known.firmware != cfg.firmware
        if firmware_moved:  # with or without a config change: the settle window starts now
            known.previous_firmware, known.firmware_changed_at = known.firmware, now
            known.firmware = cfg.firmware
        if known.hash == digest:  # firmware alone is remembered, not a config change
            return firmware_moved or bool(pending)
        changes = describe_changes(known.settings, settings)
        # Within the window, the reset (or the rest of it, read a cycle later) came with that upgrade.
        since_firmware = now - known.firmware_changed_at
        with_firmware = known.firmware_changed_at > 0 and 0 <= since_firmware <= FIRMWARE_SETTLE_S
        old_firmware = known.previous_firmware if with_firmware else known.firmware
        fw_changed = bool(old_firmware) and old_firmware != cfg.firmware
        fw_note = (f"; firmware {old_firmware} -> {cfg.firmware}" if fw_changed
                   else "; firmware unchanged")
        log.warning("%s: RoCE CC/QoS configuration changed: %s%s", cfg.interface, ", ".join(changes), fw_note,
                    extra={"interface": cfg.interface, "changes": changes, "firmware_changed": fw_changed,
                           "old_hash": known.hash, "new_hash": digest})
        known.last_change = {"timestamp": now, "changes": changes, "firmware_changed": fw_changed,
                             "old_firmware": old_firmware, "new_firmware": cfg.firmware}
        known.hash, known.settings = digest, settings
        if self._first:
            self._pending[cfg.interface] = 1
        else:
            known.changes += 1
        return True

    def _accept(self, cfg: NetdevConfig) -> bool:
        """An operator accepted the current configuration as the new baseline."""
        known = self.known[cfg.interface]
        if known.baseline == known.settings and known.baseline_firmware == cfg.firmware:
            return False
        log.warning("%s: RoCE CC/QoS configuration accepted as the new baseline (%d setting(s) differed)",
                    cfg.interface, len(describe_changes(known.baseline, known.settings)),
                    extra={"interface": cfg.interface, "file": str(self.accept_flag)})
        known.baseline, known.baseline_firmware = dict(known.settings), cfg.firmware
        return True

    def snapshot(self, cfg: NetdevConfig) -> Snapshot:
        snap = Snapshot()
        i = cfg.interface
        for (role, prio), on in sorted(cfg.ecn.items()):
            snap.add(F.ECN_ENABLED, (i, role, str(prio)), float(on))
        for (role, name), value in sorted(cfg.params.items()):
            snap.add(F.CC_PARAMETER, (i, role, name), float(value))
        for prio, on in sorted(cfg.pfc_enabled.items()):
            snap.add(F.PFC_ENABLED, (i, str(prio)), float(on))
        for dscp, prio in sorted(cfg.dscp_to_priority.items()):
            snap.add(F.DSCP_PRIORITY, (i, str(dscp)), float(prio))
        if cfg.trust:
            snap.add(F.TRUST_INFO, (i, cfg.trust, cfg.trust_source), 1.0)
        if cfg.tc_num is not None:
            snap.add(F.TRAFFIC_CLASSES, (i,), float(cfg.tc_num))
        for prio, buf in sorted(cfg.prio2buffer.items()):
            snap.add(F.PRIORITY_BUFFER, (i, str(prio)), float(buf))
        for buf, size in sorted(cfg.buffer_size.items()):
            snap.add(F.BUFFER_SIZE, (i, str(buf)), float(size))
        snap.add(F.FIRMWARE_INFO, (i, cfg.device, cfg.driver, cfg.driver_version, cfg.firmware), 1.0)
        snap.add(F.CONFIG_INFO, (i, cfg.config_hash()), 1.0)
        known = self.known[i]
        snap.add(F.CONFIG_CHANGES, (i,), float(known.changes))
        drift = describe_changes(known.baseline, known.settings)  # the last complete read
        snap.add(F.BASELINE_DRIFT, (i,), float(len(drift)))
        if drift:
            text = ", ".join(drift[:MAX_LISTED_CHANGES])
            if len(drift) > MAX_LISTED_CHANGES:
                text += f" (+{len(drift) - MAX_LISTED_CHANGES} more)"
            snap.add(F.BASELINE_DRIFT_INFO, (i, text, known.baseline_firmware, cfg.firmware), 1.0)
        last = known.last_change
        if last:
            snap.add(F.LAST_CHANGE_TS, (i,), float(last.get("timestamp", 0.0)))
            listed = list(last.get("changes", []))
            text = ", ".join(listed[:MAX_LISTED_CHANGES])
            if len(listed) > MAX_LISTED_CHANGES:
                text += f" (+{len(listed) - MAX_LISTED_CHANGES} more)"
            snap.add(F.LAST_CHANGE_INFO, (i, text, "true" if last.get("firmware_changed") else "false"), 1.0)
        if not self.expected.empty:
            mismatches = self.expected.mismatches(cfg)
            snap.add(F.EXPECTED_MISMATCHES, (i,), float(len(mismatches)))
            for setting, want, got in mismatches:
                snap.add(F.EXPECTED_MISMATCH, (i, setting, want, got), 1.0)
        return snap

    def close(self) -> None:
        self.reader.close()


@settings("The intended configuration; each part set is checked "
          "(infrapulse_nic_roce_config_expected_mismatches). Empty: not checked.")
@dataclass(kw_only=True, slots=True)
class ExpectedSettings(Settings):
    pfc_priorities: list[int] | None = setting(ListOf(item=Int(min=0, max=7),
                                                      doc="Exactly the priorities with PFC on."))
    ecn_priorities: list[int] | None = setting(ListOf(
        item=Int(min=0, max=7), doc="Priorities with ECN on for both roles (roce_np and roce_rp): the RDMA "
                                    "priority."))
    cc_parameters: dict[str, int] = setting(MapOf(
        value=Int(min=0), doc="DCQCN parameter -> value, by file name (`rpg_ai_rate`) or role/name "
                              "(`roce_np/min_time_between_cnps`)."))
    trust: str = setting(Str("The trust mode: dscp or pcp (\"\" = not checked).", default="",
                             choices=("", "dscp", "pcp")))


def expected_from_config(section: ExpectedSettings) -> Expected:
    return Expected(list(section.pfc_priorities or []), list(section.ecn_priorities or []),
                    dict(section.cc_parameters), section.trust)


@settings("RoCE congestion-control (ECN/DCQCN) and QoS configuration of the RDMA netdevs, with drift "
          "detection: sysfs ecn/ and qos/, debugfs cc_params, DCB netlink, fw_ver, ETHTOOL_GDRVINFO.")
@dataclass(kw_only=True, slots=True)
class RoceConfigSettings(PollingSettings):
    enabled: bool | str = setting(AutoBool(
        "auto: on when RDMA ports exist under {sysfs_root}/class/infiniband or `interfaces` is set; true: "
        "always; false: off."))
    interfaces: list[str] | None = setting(ListOf(
        item=Regex(), doc="Netdevs whose name fully matches one of these regular expressions. Default: the "
                          "netdevs behind RDMA ports."))
    sysfs_root: str = setting(Str("Where sysfs is mounted.", default="/sys"))
    debugfs_root: str = setting(Str("Where debugfs is mounted: upstream kernels expose the DCQCN parameters "
                                    "only in {debugfs_root}/mlx5/<pci>/cc_params (root, and each read is a "
                                    "firmware command).", default="/sys/kernel/debug"))
    interval: float = setting(Duration(
        "How often the configuration is read again (it changes rarely; each read is a few dozen sysfs files, "
        "one netlink request and one ioctl per netdev).", default="60s", min=0.05))
    debugfs_interval: float = setting(Duration(
        "How often debugfs cc_params is read again (also on a firmware change); only where sysfs has no "
        "ecn/.", default="5m", min=1))
    sim_dir: str = setting(Str("Simulation and testing only: read DCB and driver info from "
                               "<sim_dir>/<interface>.json instead of netlink and the ioctl.", default=""))
    expected: ExpectedSettings = setting(ExpectedSettings.SCHEMA)




class RoceConfigSource(PollingSource[RoceConfigSettings]):
    name = SRC
    role = "node"
    CONFIG = RoceConfigSettings.SCHEMA

    def __init__(self, config: RoceConfigSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        reader: PlatformReader = FileReader(config.sim_dir) if config.sim_dir else KernelReader()
        self.collector = RoceConfigCollector(
            reader, config.sysfs_root, config.debugfs_root, config.interfaces, ctx.state_dir,
            expected_from_config(config.expected), config.debugfs_interval)

    @classmethod
    def absent_reason(cls, config: RoceConfigSettings) -> str:
        return f"enabled: auto and {config.sysfs_root}/class/infiniband does not exist (no RDMA device here)"

    @classmethod
    def wanted(cls, config: RoceConfigSettings) -> bool:
        enabled = config.enabled
        if enabled == "auto":
            return bool(config.interfaces) or (
                Path(config.sysfs_root) / "class" / "infiniband").is_dir()
        return enabled is True

    async def collect(self) -> list[TargetResult]:
        results = await asyncio.to_thread(self.collector.collect)
        for result in results:
            # What each part of the configuration yields per netdev: a VF (no ecn/) or a netdev
            # without DCB shows 0 for those mappings instead of looking complete.
            if result.snapshot is not None:
                series = result.snapshot.series
                self.store.set_coverage(SRC, result.target, {
                    family.name: len(series.get(family.name, ()))
                    for family in COVERED})
        return results

    async def close(self) -> None:
        await asyncio.to_thread(self.collector.close)


SOURCE = RoceConfigSource
