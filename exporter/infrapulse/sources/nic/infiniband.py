"""Source `infiniband`: RDMA port state and counters from `/sys/class/infiniband`.

For every device (optionally filtered by regex) and every port it reads `state`,
`phys_state`, `rate`, `link_layer`, the PMA `counters/` (the 64-bit legacy `counters_ext/*_64`
instead where an old kernel has them), every file of `hw_counters/`, the device-level
`hw_counters/` where the driver has one, maps a RoCE port to its netdev via `gid_attrs/ndevs`,
and names the PCI function of each device from its `device` link (`pci_address` of
infrapulse_rdma_device_info: what joins a kernel-log event to the NIC). Each device is one
target: `infrapulse_source_up{source="infiniband", target="mlx5_3"}` tells whether that device
could be read.

Robustness: a file that reads `N/A (no PMA)` (old kernels), fails with EINVAL/EOPNOTSUPP
(new hardware, bnxt_re) or cannot be opened is skipped and listed in the target's partial
errors; a missing `counters/` (irdma, bnxt_re) is normal and skipped silently. Only a device
whose files all fail is reported down, and it never hides another device.

Cost: descriptors stay open and each file is read once per cycle with `os.pread(fd, n, 0)`
(sysfs regenerates the content on a read at offset 0), so a cycle is one syscall per file and
no path lookups. The tree is re-scanned every `rescan_interval`, or at once when a read fails
with ENOENT/ENODEV (the device went away or the driver was reloaded).
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import resource
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, cast

from ... import catalog
from ...pci import device_link_address
from ...schema import AutoBool, Duration, ListOf, Regex, Str, setting, settings
from ...store import Snapshot
from ..base import PollingSettings, PollingSource, SourceContext, TargetResult
from .families import (
    CNP_HANDLED,
    CNP_IGNORED,
    CNP_SENT,
    DEVICE_INFO,
    EXCESSIVE_OVERRUN,
    HW_COUNTER,
    IB_SOURCE,
    LINK_DOWNED,
    LINK_ERROR_RECOVERY,
    LOCAL_LINK_INTEGRITY,
    PORT_COUNTER,
    PORT_INFO,
    PORT_PHYS_STATE,
    PORT_RATE,
    PORT_STATE,
    RDMA_ECN_MARKED,
    RDMA_OUT_OF_BUFFER,
    RECEIVE_ERRORS,
    RETRANSMISSIONS,
    RX_BYTES,
    RX_CONSTRAINT,
    RX_DISCARDS,
    RX_MULTICAST,
    RX_PACKETS,
    RX_REMOTE_PHYS,
    RX_SWITCH_RELAY,
    RX_UNICAST,
    SATURATED,
    SYMBOL_ERRORS,
    TRANSMIT_DISCARDS,
    TRANSMIT_WAIT,
    TX_BYTES,
    TX_CONSTRAINT,
    TX_MULTICAST,
    TX_PACKETS,
    TX_UNICAST,
    VL15_DROPPED,
)

SRC = IB_SOURCE

# PMA counters/ files and their width in bits (drivers/infiniband/core/sysfs.c). Data and packet
# counters are 64-bit on modern mlx5 (PortCountersExtended); the others saturate at 2^width-1.
PMA_COUNTER_BITS: dict[str, int] = {
    "symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16, "port_xmit_wait": 32,
    "port_xmit_data": 64, "port_rcv_data": 64, "port_xmit_packets": 64, "port_rcv_packets": 64,
    "unicast_xmit_packets": 64, "unicast_rcv_packets": 64, "multicast_xmit_packets": 64,
    "multicast_rcv_packets": 64,
}
# counters/ name -> (family, multiplier). port_*_data count 4-octet words: x4, never x link width
# (hfi1 is the exception, see DATA_COUNTERS).
PMA_FAMILIES: dict[str, tuple[catalog.Family, int]] = {
    "port_xmit_data": (TX_BYTES, 4), "port_rcv_data": (RX_BYTES, 4),
    "port_xmit_packets": (TX_PACKETS, 1), "port_rcv_packets": (RX_PACKETS, 1),
    "link_downed": (LINK_DOWNED, 1), "link_error_recovery": (LINK_ERROR_RECOVERY, 1),
    "symbol_error": (SYMBOL_ERRORS, 1), "port_rcv_errors": (RECEIVE_ERRORS, 1),
    "port_xmit_discards": (TRANSMIT_DISCARDS, 1), "port_xmit_wait": (TRANSMIT_WAIT, 1),
    "port_rcv_remote_physical_errors": (RX_REMOTE_PHYS, 1),
    "port_rcv_switch_relay_errors": (RX_SWITCH_RELAY, 1),
    "port_rcv_constraint_errors": (RX_CONSTRAINT, 1), "port_xmit_constraint_errors": (TX_CONSTRAINT, 1),
    "local_link_integrity_errors": (LOCAL_LINK_INTEGRITY, 1),
    "excessive_buffer_overrun_errors": (EXCESSIVE_OVERRUN, 1), "VL15_dropped": (VL15_DROPPED, 1),
    "port_rcv_discards": (RX_DISCARDS, 1),
    "unicast_rcv_packets": (RX_UNICAST, 1), "unicast_xmit_packets": (TX_UNICAST, 1),
    "multicast_rcv_packets": (RX_MULTICAST, 1), "multicast_xmit_packets": (TX_MULTICAST, 1),
}
# counters_ext/ (kernels before 4.5, mlx4): 64-bit PortCountersExtended values; each supersedes
# the counters/ file of the same meaning, which on those kernels is the 32-bit PortCounters one.
EXT_COUNTERS: dict[str, str] = {
    "port_xmit_data_64": "port_xmit_data", "port_rcv_data_64": "port_rcv_data",
    "port_xmit_packets_64": "port_xmit_packets", "port_rcv_packets_64": "port_rcv_packets",
    "port_unicast_xmit_packets": "unicast_xmit_packets", "port_unicast_rcv_packets": "unicast_rcv_packets",
    "port_multicast_xmit_packets": "multicast_xmit_packets",
    "port_multicast_rcv_packets": "multicast_rcv_packets",
}
# port_xmit_data / port_rcv_data: octets per counted unit. The IBA counts 4-octet words; hfi1
# (Omni-Path) answers the PortCountersExtended MAD with its flit counters (hw/hfi1/mad.c:
# pma_get_ib_portcounters_ext -> C_DC_XMIT_FLITS / C_DC_RCV_FLITS), and a flit carries 8 octets
# (opa-ff stl_pm.h: "PortXmitData and PortRcvData are in units of flits (8 bytes)").
DATA_COUNTERS = frozenset(("port_xmit_data", "port_rcv_data"))
WORD_OCTETS, FLIT_OCTETS = 4, 8
_HFI1_NAME = re.compile(r"hfi1_\d+")
HW_FAMILIES: dict[str, catalog.Family] = {
    "np_ecn_marked_roce_packets": RDMA_ECN_MARKED, "np_cnp_sent": CNP_SENT, "rp_cnp_handled": CNP_HANDLED,
    "rp_cnp_ignored": CNP_IGNORED, "out_of_buffer": RDMA_OUT_OF_BUFFER,
}
RETRANSMISSION_REASONS = frozenset((
    "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err", "implied_nak_seq_err",
    "duplicate_request", "out_of_sequence", "roce_adp_retrans", "roce_adp_retrans_to",
))
NOT_A_COUNTER = frozenset(("lifespan",))  # hw_counters cache lifetime knob (ms)

# What a failing read means: the file/device is gone (re-scan) or just this file is unreadable.
RESCAN_ERRNOS = frozenset((errno.ENOENT, errno.ENODEV, errno.ENXIO, errno.ESTALE))
READ_SIZE = 128  # longer than any counter, state or rate text

# Kinds of file, parsed differently.
K_COUNTER, K_STATE, K_RATE = 0, 1, 2
_RATE = re.compile(rb"\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")


@dataclass
class _Device:
    """What one device's collection reads: open descriptors and where each value goes."""

    name: str
    # (fd, path relative to the device, family name, label values, multiplier, kind, saturation max)
    entries: list[tuple[int, str, str, tuple[str, ...], int, int, int]] = field(default_factory=list)
    static: dict[str, dict[tuple[str, ...], float]] = field(default_factory=dict)
    scan_errors: list[str] = field(default_factory=list)
    broken: str = ""  # why the device cannot be read at all ("" if it can)
    plan: _BulkPlan | None = None  # the entries arranged for one bulk read, made on first use


class _BulkPlan:
    """A device's entries arranged so that a cycle reads and parses them with C-level loops
    (`map`) and files them a family at a time, instead of a Python loop per file: a node's 8
    devices are ~440 files, and the per-file Python work cost as much as the reads themselves.

    The files are read in family order, counters first, so that each family's values are one
    slice of the parsed list. Most families of a device hold one series (a port's counter):
    those are filed one small dict each (`singles`), the others from their slice (`multis`).
    Any failed read or parse leaves the bulk path for the per-file one
    (`InfinibandReader._read_entries`), which goes on from what was read (no file is read twice
    in a cycle) and reports each bad file in scan order, as it always did.
    """

    __slots__ = ("entries", "position", "fds", "counters", "others", "singles", "multis", "scaled",
                 "saturating")

    def __init__(self, entries: list[tuple[int, str, str, tuple[str, ...], int, int, int]]) -> None:
        by_family: dict[str, list[tuple[int, str, str, tuple[str, ...], int, int, int]]] = {}
        for entry in entries:
            by_family.setdefault(entry[2], []).append(entry)
        groups = sorted(by_family.values(), key=lambda group: group[0][5] != K_COUNTER)  # stable
        self.entries = [entry for group in groups for entry in group]  # in read order
        read_index = {entry[0]: i for i, entry in enumerate(self.entries)}  # by fd: one each
        self.position = [read_index[entry[0]] for entry in entries]  # scan order -> read order
        self.fds = [entry[0] for entry in self.entries]
        self.counters = sum(entry[5] == K_COUNTER for entry in self.entries)  # the first ones
        self.others = [PARSERS[entry[5]] for entry in self.entries[self.counters:]]
        # (family, labels, position) of a one-series family; (family, [labels], slice) of others
        self.singles: list[tuple[str, tuple[str, ...], int]] = []
        self.multis: list[tuple[str, list[tuple[str, ...]], slice]] = []
        start = 0
        for group in groups:
            family, end = group[0][2], start + len(group)
            if len(group) == 1:
                self.singles.append((family, group[0][3], start))
            else:
                self.multis.append((family, [entry[3] for entry in group], slice(start, end)))
            start = end
        # (position, multiplier) of the scaled counters; (port labels, [(position, limit)]) of
        # the width-limited ones, checked before scaling as the per-file path does
        self.scaled = [(i, e[4]) for i, e in enumerate(self.entries) if e[5] == K_COUNTER and e[4] != 1]
        saturating: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for i, e in enumerate(self.entries):
            if e[5] == K_COUNTER and e[6]:
                saturating.setdefault(e[3], []).append((i, e[6]))
        self.saturating = list(saturating.items())

    def read(self, pread: Callable[[int, int, int], bytes], raws: list[bytes]) -> None:
        """Every file's content into `raws`, in read order. A failed read raises its OSError
        with the contents read before it kept in `raws` (list.extend keeps what it appended)."""
        raws.extend(map(pread, self.fds, repeat(READ_SIZE), repeat(0)))

    def parse(self, raws: list[bytes]) -> list[Any]:
        """Every value, in read order (ValueError if any does not parse)."""
        counters = self.counters
        values: list[Any] = list(map(int, raws[:counters]))
        values += map(_call, self.others, raws[counters:])
        return values

    def fill(self, series: dict[str, dict[tuple[str, ...], Any]],
             values: list[Any]) -> dict[tuple[str, ...], float]:
        """File `values` into `series` by family; returns the saturated-counter counts by port."""
        saturated = {labels: float(sum([values[i] >= limit for i, limit in limits]))
                     for labels, limits in self.saturating}
        for i, scale in self.scaled:
            values[i] *= scale
        for family, labels, i in self.singles:  # a plain loop: a zip and a dict() per family cost 3x
            series[family] = {labels: values[i]}
        for family, keys, part in self.multis:
            series[family] = dict(zip(keys, values[part]))
        return saturated


def _call(parse: Callable[[bytes], Any], raw: bytes) -> Any:
    return parse(raw)


def parse_state(raw: bytes) -> int:
    """'4: ACTIVE' -> 4."""
    return int(raw.split(b":", 1)[0])


def parse_rate(raw: bytes) -> float:
    """'100 Gb/sec (4X EDR)' -> 12500000000.0 bytes/s; '2.5 Gb/sec (1X SDR)' works too."""
    match = _RATE.match(raw)
    if match is None:
        raise ValueError(f"unrecognised rate {raw!r}")
    return float(match.group(1)) * 125_000_000


PARSERS: dict[int, Callable[[bytes], Any]] = {K_STATE: parse_state, K_RATE: parse_rate}


def _first_line(raw: bytes) -> bytes:
    return raw.split(b"\n", 1)[0].strip()


class InfinibandReader:
    """The synchronous part: scans the tree, keeps descriptors, reads one cycle.

    Not thread-safe by itself; `collect()` holds a lock so an overrunning cycle cannot overlap
    the next one.
    """

    def __init__(self, sysfs_root: str | os.PathLike[str] = "/sys", devices: list[str] | None = None,
                 rescan_interval: float = 30.0, pread: Callable[[int, int, int], bytes] = os.pread,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.class_dir = Path(sysfs_root) / "class" / "infiniband"
        self._patterns = [re.compile(p) for p in devices] if devices else None
        self.rescan_interval = rescan_interval
        self._pread = pread  # injectable so tests can make reads fail with any errno
        self._clock = clock
        self._devices: list[_Device] = []
        self._fds: list[int] = []
        self._scanned_at: float | None = None
        self._lock = threading.Lock()
        self.scans = 0  # how many times the tree was scanned (tests and self-checks)
        self.fd_paths: dict[int, str] = {}  # fd -> absolute path, for error messages and tests

    # -- scanning --------------------------------------------------------------------------------

    def _wanted(self, name: str) -> bool:
        return self._patterns is None or any(p.fullmatch(name) for p in self._patterns)

    def rescan(self) -> None:
        self._close_fds()
        self._devices = []
        self.scans += 1
        self._scanned_at = self._clock()
        try:
            names = sorted(os.listdir(self.class_dir))
        except OSError:
            return  # reported by collect() as "no_devices"
        for name in names:
            if self._wanted(name):
                self._devices.append(self._scan_device(name))

    def _open(self, path: str, dev: _Device, rel: str) -> int | None:
        # `path` is a str, not a Path: a rescan opens every counter file, and pathlib's joins
        # and str() were half of its cost.
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.EMFILE and _raise_fd_limit():
                return self._open(path, dev, rel)
            dev.scan_errors.append(f"{rel}: cannot open: {exc.strerror}")
            return None
        self._fds.append(fd)
        self.fd_paths[fd] = path
        return fd

    def _scan_device(self, name: str) -> _Device:
        dev = _Device(name)
        base = self.class_dir / name
        meta = {key: _read_text(base / key) or "" for key in ("hca_type", "board_id", "fw_ver", "node_guid")}
        dev.static[DEVICE_INFO.name] = {
            (name, meta["hca_type"], meta["board_id"], meta["fw_ver"], meta["node_guid"],
             device_link_address(base / "device")): 1.0}
        self._scan_counter_dir(dev, base / "hw_counters", "hw_counters", (name, ""), "hw")
        data_octets = data_unit_octets(base, name)
        try:
            ports = sorted(os.listdir(base / "ports"),
                           key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p))
        except OSError as exc:
            dev.broken = f"ports/: {exc.strerror}"
            return dev
        if not ports:
            dev.broken = "no ports under ports/"
            return dev
        port_info: dict[tuple[str, ...], float] = {}
        for port in ports:
            pdir = base / "ports" / port
            labels = (name, port)
            link_layer = _read_text(pdir / "link_layer") or ""
            netdev = first_netdev(pdir) if link_layer != "InfiniBand" else ""
            port_info[(name, port, link_layer, netdev)] = 1.0
            for fname, family, kind in (("state", PORT_STATE, K_STATE),
                                        ("phys_state", PORT_PHYS_STATE, K_STATE),
                                        ("rate", PORT_RATE, K_RATE)):
                rel = f"ports/{port}/{fname}"
                fd = self._open(f"{pdir}/{fname}", dev, rel)
                if fd is not None:
                    dev.entries.append((fd, rel, family.name, labels, 1, kind, 0))
            rel_port = f"ports/{port}"
            superseded = self._scan_counter_dir(dev, pdir / "counters_ext", f"{rel_port}/counters_ext",
                                                labels, "ext", data_octets)
            self._scan_counter_dir(dev, pdir / "counters", f"{rel_port}/counters", labels, "pma", data_octets,
                                   skip=superseded)
            self._scan_counter_dir(dev, pdir / "hw_counters", f"ports/{port}/hw_counters", labels, "hw")
        dev.static[PORT_INFO.name] = port_info
        return dev

    def _scan_counter_dir(self, dev: _Device, path: Path, rel_dir: str, labels: tuple[str, str], kind: str,
                          data_octets: int = WORD_OCTETS,
                          skip: frozenset[str] = frozenset()) -> frozenset[str]:
        """Add one entry per counter file of a counters/ ("pma"), counters_ext/ ("ext") or
        hw_counters/ ("hw") directory; files named in `skip` are left out. Returns, for "ext",
        the counters/ names its files supersede. A missing directory (irdma, bnxt_re) is normal."""
        directory = str(path)
        try:
            files = sorted(os.listdir(directory))
        except FileNotFoundError:
            return frozenset()
        except OSError as exc:
            dev.scan_errors.append(f"{rel_dir}/: {exc.strerror}")
            return frozenset()
        superseded = set()
        for fname in files:
            if fname in NOT_A_COUNTER or fname in skip:
                continue
            if kind == "hw":
                family_name, target_labels = _hw_target(fname, labels)
                scale, saturate_at = 1, 0
            else:
                pma_name = EXT_COUNTERS.get(fname, fname) if kind == "ext" else fname
                mapped = PMA_FAMILIES.get(pma_name)
                if mapped is not None:
                    family_name, target_labels = mapped[0].name, labels
                    scale = data_octets if pma_name in DATA_COUNTERS else mapped[1]
                    if kind == "ext":
                        superseded.add(pma_name)
                else:
                    family_name, target_labels, scale = PORT_COUNTER.name, labels + (fname,), 1
                bits = PMA_COUNTER_BITS.get(pma_name, 64) if kind == "pma" else 64
                saturate_at = 2**bits - 1 if bits < 64 and mapped is not None else 0
            rel = f"{rel_dir}/{fname}"
            fd = self._open(f"{directory}/{fname}", dev, rel)
            if fd is not None:
                dev.entries.append((fd, rel, family_name, target_labels, scale, K_COUNTER, saturate_at))
        return frozenset(superseded)

    # -- reading ---------------------------------------------------------------------------------

    def collect(self) -> list[TargetResult]:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("the previous collection is still running")
        try:
            if self._scanned_at is None or self._clock() - self._scanned_at >= self.rescan_interval:
                self.rescan()
            results, vanished = self._read_all()
            if vanished:  # a device or file went away: re-scan now and read once more
                self.rescan()
                results, _ = self._read_all()
            return results
        finally:
            self._lock.release()

    def _read_all(self) -> tuple[list[TargetResult], bool]:
        if not self._devices:
            why = (f"no RDMA devices under {self.class_dir}" if self.class_dir.is_dir()
                   else f"{self.class_dir} does not exist")
            if self._patterns is not None and self.class_dir.is_dir():
                why += " match the devices: filter"
            return [TargetResult(SRC, reason="no_devices", message=why)], False
        results = []
        vanished = False
        now = time.time()
        for dev in self._devices:
            result, gone = self._read_device(dev, now)
            results.append(result)
            vanished = vanished or gone
        return results, vanished

    def _read_device(self, dev: _Device, now: float) -> tuple[TargetResult, bool]:
        if dev.broken:
            return TargetResult(dev.name, reason="unreadable", message=dev.broken), False
        snap = Snapshot(now)
        series = snap.series
        for family, static in dev.static.items():
            series[family] = dict(static)
        plan = dev.plan
        if plan is None:
            plan = dev.plan = _BulkPlan(dev.entries)
        raws: list[bytes] = []
        failed: OSError | None = None
        try:
            plan.read(self._pread, raws)
            values = plan.parse(raws)
        except OSError as exc:
            failed = exc  # the read of plan.entries[len(raws)]
        except ValueError:
            pass
        else:
            saturated = plan.fill(series, values)
            if saturated:
                series[SATURATED.name] = dict(saturated)
            return TargetResult(dev.name, snapshot=snap, partial_errors=list(dev.scan_errors)), False
        return self._read_entries(dev, snap, plan, raws, failed)

    def _read_entries(self, dev: _Device, snap: Snapshot, plan: _BulkPlan, raws: list[bytes],
                      failed: OSError | None) -> tuple[TargetResult, bool]:
        """The per-file path, in scan order: each entry's content taken from `raws` (by its read
        position) where the bulk read got it, the failure of the read that stopped it (`failed`),
        the others read now; each parsed on its own, a failure skipped and listed in the target's
        partial errors."""
        pread = self._pread
        read_before, failed_at = len(raws), len(raws) if failed is not None else -1
        series = snap.series
        errors = list(dev.scan_errors)
        saturated: dict[tuple[str, ...], int] = {}  # ports with a readable width-limited PMA counter
        good = 0
        gone = False
        for (fd, rel, family, labels, scale, kind, saturate_at), at in zip(dev.entries, plan.position):
            value: float  # counters stay int (exact to 2^64), state ids int, rates float
            try:
                if at == failed_at:
                    raise cast(OSError, failed)
                raw = raws[at] if at < read_before else pread(fd, READ_SIZE, 0)
            except OSError as exc:
                gone = gone or exc.errno in RESCAN_ERRNOS
                errors.append(f"{rel}: {exc.strerror or exc}")
                continue
            try:
                if kind == K_COUNTER:
                    try:
                        value = int(raw)
                    except ValueError:
                        value = int(_first_line(raw), 0)  # a value mid-rewrite, or hex
                    if saturate_at:
                        saturated[labels] = saturated.get(labels, 0) + (value >= saturate_at)
                    value *= scale
                elif kind == K_STATE:
                    value = parse_state(raw)
                else:
                    value = parse_rate(raw)
            except ValueError:
                text = _first_line(raw).decode("ascii", "replace")
                errors.append(f"{rel}: {text}" if "N/A" in text else f"{rel}: unparsable {text!r}")
                continue
            good += 1
            bucket = series.get(family)
            if bucket is None:
                bucket = series[family] = {}
            bucket[labels] = value
        if dev.entries and good == 0:
            return TargetResult(dev.name, reason="unreadable",
                                message=f"no file of {dev.name} could be read; "
                                        + "; ".join(errors[:3])), gone
        if saturated:
            series[SATURATED.name] = {labels: float(n) for labels, n in saturated.items()}
        return TargetResult(dev.name, snapshot=snap, partial_errors=errors), gone

    # -- teardown --------------------------------------------------------------------------------

    def _close_fds(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        self.fd_paths = {}

    def close(self) -> None:
        with self._lock:
            self._close_fds()
            self._devices = []
            self._scanned_at = None


def _hw_target(fname: str, labels: tuple[str, str]) -> tuple[str, tuple[str, ...]]:
    family = HW_FAMILIES.get(fname)
    if family is not None:
        return family.name, labels
    if fname in RETRANSMISSION_REASONS:
        return RETRANSMISSIONS.name, labels + (fname,)
    return HW_COUNTER.name, labels + (fname,)


def data_unit_octets(device_dir: Path, name: str) -> int:
    """Octets per unit of port_xmit_data/port_rcv_data: 8 on hfi1 (flits), else 4 (words).

    The driver is read from the device/driver link; a tree without it (a copied fixture) falls
    back to the name the hfi1 driver registers, hfi1_<n>."""
    try:
        driver = os.path.basename(os.readlink(device_dir / "device" / "driver"))
    except OSError:
        driver = "hfi1" if _HFI1_NAME.fullmatch(name) else ""
    return FLIT_OCTETS if driver == "hfi1" else WORD_OCTETS


def _read_text(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None


def first_netdev(port_dir: Path) -> str:
    """The netdev behind a RoCE port: the first non-empty gid_attrs/ndevs/<index> entry.

    Unused GID entries read empty or fail with EINVAL; both are skipped.
    """
    try:
        entries = os.listdir(port_dir / "gid_attrs" / "ndevs")
    except OSError:
        return ""
    for entry in sorted(entries, key=lambda e: (not e.isdigit(), int(e) if e.isdigit() else 0)):
        text = _read_text(port_dir / "gid_attrs" / "ndevs" / entry)
        if text:
            return text
    return ""


def netdev_ports(sysfs_root: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """(RDMA device, netdev) of every RDMA port with a netdev under `sysfs_root`, in name order."""
    class_dir = Path(sysfs_root) / "class" / "infiniband"
    try:
        devices = sorted(os.listdir(class_dir))
    except OSError:
        return
    for device in devices:
        try:
            ports = sorted(os.listdir(class_dir / device / "ports"))
        except OSError:
            continue
        for port in ports:
            netdev = first_netdev(class_dir / device / "ports" / port)
            if netdev:
                yield device, netdev


def rdma_netdevs(sysfs_root: str | os.PathLike[str]) -> list[str]:
    """Every netdev behind an RDMA port under `sysfs_root` (used by the ethtool source)."""
    return list(dict.fromkeys(netdev for _, netdev in netdev_ports(sysfs_root)))


def _raise_fd_limit() -> bool:
    """Lift the soft RLIMIT_NOFILE to the hard limit once (what Go programs do at start-up)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft >= target:
        return False
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return False
    return True


def _sysfs_has_infiniband(config: InfinibandSettings) -> bool:
    return (Path(config.sysfs_root) / "class" / "infiniband").is_dir()


@settings("RDMA devices and ports from /sys/class/infiniband (PMA counters/, hw_counters/, port state).")
@dataclass(kw_only=True, slots=True)
class InfinibandSettings(PollingSettings):
    enabled: bool | str = setting(AutoBool(
        "auto: on when {sysfs_root}/class/infiniband exists; true: always (reports source_up 0 when "
        "there is nothing to read); false: off."))
    sysfs_root: str = setting(Str("Where sysfs is mounted (a container with the host's /sys at /host/sys "
                                  "sets that here).", default="/sys"))
    devices: list[str] | None = setting(ListOf(
        item=Regex(), doc="Only devices whose name fully matches one of these regular expressions (e.g. "
                          "\"mlx5_[0-7]\"). Default: every device."))
    interval: float | None = setting(Duration("Poll interval of this source (default: the global interval).",
                                              min=0.05))
    rescan_interval: float = setting(Duration(
        "How often the device/port/file list is re-read and descriptors re-opened; a read failing with "
        "ENOENT/ENODEV re-scans at once.", default="30s", min=0))




class InfinibandSource(PollingSource[InfinibandSettings]):
    name = SRC
    role = "node"
    CONFIG = InfinibandSettings.SCHEMA

    def __init__(self, config: InfinibandSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.reader = InfinibandReader(config.sysfs_root, config.devices, config.rescan_interval)

    @classmethod
    def absent_reason(cls, config: InfinibandSettings) -> str:
        return f"enabled: auto and {config.sysfs_root}/class/infiniband does not exist (no RDMA device here)"

    @classmethod
    def wanted(cls, config: InfinibandSettings) -> bool:
        enabled = config.enabled
        if enabled == "auto":
            return _sysfs_has_infiniband(config)
        return enabled is True

    async def collect(self) -> list[TargetResult]:
        # Reads of PMA counters turn into firmware MADs on real HCAs (milliseconds each): keep
        # them off the event loop.
        return await asyncio.to_thread(self.reader.collect)

    async def close(self) -> None:
        await asyncio.to_thread(self.reader.close)

    def default_target(self) -> str:
        return SRC


SOURCE = InfinibandSource
