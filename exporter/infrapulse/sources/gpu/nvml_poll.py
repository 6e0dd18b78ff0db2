"""One full NVML poll of every GPU on the node, turned into a Snapshot (runs in a worker thread).

Cost per healthy GPU and poll: 12 NVML calls, whatever the number of NVLink links — the
counters (ECC, remapped rows / retired pages, PCIe replays, energy, memory temperature) and
every per-link NVLink value travel in ONE nvmlDeviceGetFieldValues call. Identity, NVLink link
count, MIG layout and the supported clock-event reasons are read at enumeration only (at start,
then every `rescan_every` polls). A value the device cannot give (NotSupported, NoPermission,
...) is left out — never exported as zero — logged once, and never asked for again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar, overload

from ... import catalog
from ...store import Snapshot
from . import families as fam
from . import nvml_api as api_mod
from .nvml_api import ABSENT, SICK, FieldValue, NvmlApi
from .nvml_xid import XidState

T = TypeVar("T")

_SCALAR_FIELDS = (
    api_mod.FI_ECC_SBE_VOL, api_mod.FI_ECC_DBE_VOL, api_mod.FI_ECC_SBE_AGG, api_mod.FI_ECC_DBE_AGG,
    api_mod.FI_RETIRED_SBE, api_mod.FI_RETIRED_DBE, api_mod.FI_RETIRED_PENDING,
    api_mod.FI_MEMORY_TEMP, api_mod.FI_TOTAL_ENERGY, api_mod.FI_PCIE_REPLAY,
    api_mod.FI_REMAPPED_COR, api_mod.FI_REMAPPED_UNC, api_mod.FI_REMAPPED_PENDING,
    api_mod.FI_REMAPPED_FAILURE,
)
_LINK_FIELDS = (api_mod.FI_NVLINK_STATE, api_mod.FI_NVLINK_DATA_TX, api_mod.FI_NVLINK_DATA_RX,
                api_mod.FI_NVLINK_ERROR_DL_REPLAY, api_mod.FI_NVLINK_ERROR_DL_RECOVERY,
                api_mod.FI_NVLINK_ERROR_DL_CRC)

# field id -> (family, extra label values, scale to base units)
_SCALAR_MAP: dict[int, tuple[catalog.Family, tuple[str, ...], float]] = {
    api_mod.FI_ECC_SBE_VOL: (fam.ECC, ("corrected", "volatile"), 1.0),
    api_mod.FI_ECC_DBE_VOL: (fam.ECC, ("uncorrected", "volatile"), 1.0),
    api_mod.FI_ECC_SBE_AGG: (fam.ECC, ("corrected", "aggregate"), 1.0),
    api_mod.FI_ECC_DBE_AGG: (fam.ECC, ("uncorrected", "aggregate"), 1.0),
    api_mod.FI_RETIRED_SBE: (fam.RETIRED_PAGES, ("single_bit_ecc",), 1.0),
    api_mod.FI_RETIRED_DBE: (fam.RETIRED_PAGES, ("double_bit_ecc",), 1.0),
    api_mod.FI_RETIRED_PENDING: (fam.RETIRED_PAGES_PENDING, (), 1.0),
    api_mod.FI_MEMORY_TEMP: (fam.TEMPERATURE, ("memory",), 1.0),
    api_mod.FI_TOTAL_ENERGY: (fam.ENERGY, (), 1e-3),  # mJ -> J
    api_mod.FI_PCIE_REPLAY: (fam.PCIE_REPLAYS, (), 1.0),
    api_mod.FI_REMAPPED_COR: (fam.REMAPPED_ROWS, ("correctable",), 1.0),
    api_mod.FI_REMAPPED_UNC: (fam.REMAPPED_ROWS, ("uncorrectable",), 1.0),
    api_mod.FI_REMAPPED_PENDING: (fam.ROW_REMAP_PENDING, (), 1.0),
    api_mod.FI_REMAPPED_FAILURE: (fam.ROW_REMAP_FAILURE, (), 1.0),
}
# field id -> (family, scale, label values after `link`)
_LINK_MAP: dict[int, tuple[catalog.Family, float, tuple[str, ...]]] = {
    api_mod.FI_NVLINK_STATE: (fam.NVLINK_UP, 1.0, ()),
    api_mod.FI_NVLINK_DATA_TX: (fam.NVLINK_TX, 1024.0, ()),  # KiB -> bytes
    api_mod.FI_NVLINK_DATA_RX: (fam.NVLINK_RX, 1024.0, ()),
    api_mod.FI_NVLINK_ERROR_DL_REPLAY: (fam.NVLINK_ERRORS, 1.0, ("replay",)),
    api_mod.FI_NVLINK_ERROR_DL_RECOVERY: (fam.NVLINK_ERRORS, 1.0, ("recovery",)),
    api_mod.FI_NVLINK_ERROR_DL_CRC: (fam.NVLINK_ERRORS, 1.0, ("crc",)),
}
_FIELD_NAMES = {
    api_mod.FI_ECC_SBE_VOL: "ecc_sbe_volatile", api_mod.FI_ECC_DBE_VOL: "ecc_dbe_volatile",
    api_mod.FI_ECC_SBE_AGG: "ecc_sbe_aggregate", api_mod.FI_ECC_DBE_AGG: "ecc_dbe_aggregate",
    api_mod.FI_RETIRED_SBE: "retired_pages_sbe", api_mod.FI_RETIRED_DBE: "retired_pages_dbe",
    api_mod.FI_RETIRED_PENDING: "retired_pages_pending", api_mod.FI_MEMORY_TEMP: "memory_temperature",
    api_mod.FI_TOTAL_ENERGY: "total_energy", api_mod.FI_PCIE_REPLAY: "pcie_replays",
    api_mod.FI_REMAPPED_COR: "remapped_rows_correctable",
    api_mod.FI_REMAPPED_UNC: "remapped_rows_uncorrectable",
    api_mod.FI_REMAPPED_PENDING: "row_remap_pending", api_mod.FI_REMAPPED_FAILURE: "row_remap_failure",
    api_mod.FI_NVLINK_STATE: "nvlink_state", api_mod.FI_NVLINK_DATA_TX: "nvlink_data_tx",
    api_mod.FI_NVLINK_DATA_RX: "nvlink_data_rx", api_mod.FI_NVLINK_ERROR_DL_REPLAY: "nvlink_replay",
    api_mod.FI_NVLINK_ERROR_DL_RECOVERY: "nvlink_recovery", api_mod.FI_NVLINK_ERROR_DL_CRC: "nvlink_crc",
}
# No documented limit on entries per nvmlDeviceGetFieldValues; a guard for very wide devices
# (an 18-link H100 needs 14 + 18*6 = 122 entries: one call).
FIELD_BATCH_MAX = 128
KB = 1024.0  # NVML's PCIe throughput is in "KB/s"; NVML's KB is binary, as its NVLink KiB counters


# (field id, scope) -> (family name, label values, scale; None = a 0/1 state)
FieldTargets = dict[tuple[int, int], tuple[str, tuple[str, ...], float | None]]


def _field_targets(fields: list[tuple[int, int]], base: tuple[str, str],
                   opt: tuple[str, ...]) -> FieldTargets:
    """The lookup of one GPU's field values, built once so a poll only looks values up."""
    targets: FieldTargets = {}
    for fid, scope in fields:
        if fid in _SCALAR_MAP:
            family, extra, scale = _SCALAR_MAP[fid]
            targets[(fid, scope)] = (family.name, base + extra + opt, scale)
        else:
            family, scale, extra = _LINK_MAP[fid]
            targets[(fid, scope)] = (family.name, base + (str(scope),) + extra + opt,
                                     None if family is fam.NVLINK_UP else scale)
    return targets


class GpuSick(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class MigInstance:
    handle: Any
    gpu_instance: str
    profile: str
    name: str
    uuid: str


@dataclass
class Gpu:
    index: int
    handle: Any = None
    uuid: str = ""
    name: str = ""
    pci_bus_id: str = ""
    links: int = 0
    mig_enabled: bool | None = None
    supported_reasons: int = fam.ALL_CLOCK_EVENT_BITS
    migs: list[MigInstance] = field(default_factory=list)
    fields: list[tuple[int, int]] = field(default_factory=list)
    absent: set[str] = field(default_factory=set)  # calls this device will never answer
    link_state_by_call: bool = False  # old drivers: no NVLink state field, ask per link
    field_targets: tuple[tuple[str, str], FieldTargets] | None = None  # (base labels, lookup) for _add_fields
    sick: str | None = None  # why NVML cannot talk to it (gpu_is_lost, ...)
    sick_message: str = ""

    @property
    def label(self) -> str:
        return str(self.index)


class GpuPoller:
    """Enumerates GPUs and polls them. Owned by one worker thread at a time."""

    def __init__(self, api: NvmlApi, log: logging.Logger | None = None, rescan_every: int = 12) -> None:
        self.api = api
        self.log = log or logging.getLogger("infrapulse.source.nvml")
        self.rescan_every = rescan_every
        self.gpus: list[Gpu] = []
        self.driver_version = ""
        self.cuda_version = ""
        self._polls = 0
        self._logged: set[tuple[str, str]] = set()
        self._new_absent: dict[str, list[str]] = {}  # logged as one line per GPU after a pass
        self._errors: list[str] = []

    # -- enumeration ---------------------------------------------------------------------------

    def enumerate(self) -> None:
        api = self.api
        self.driver_version = self._system(api.driver_version) or ""
        cuda = self._system(api.cuda_driver_version)
        self.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else ""
        previous = {g.index: g for g in self.gpus}
        self.gpus = [self._enumerate_one(i, previous.get(i)) for i in range(api.device_count())]
        self._flush_absent()

    def _system(self, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except Exception as exc:
            self._note_absent("system", call.__name__, exc)
            return None

    def _enumerate_one(self, index: int, previous: Gpu | None) -> Gpu:
        gpu = Gpu(index)
        if previous is not None:  # keep identity (a lost GPU has none to give) and known absences
            gpu.uuid, gpu.name, gpu.pci_bus_id = previous.uuid, previous.name, previous.pci_bus_id
            gpu.absent = previous.absent
        try:
            gpu.handle = self._call(gpu, "handle", lambda _h: self.api.handle_by_index(index), required=True)
            gpu.uuid = self._call(gpu, "uuid", self.api.uuid, required=True)
            gpu.name = self._call(gpu, "name", self.api.name) or gpu.name
            gpu.pci_bus_id = self._call(gpu, "pci_bus_id", self.api.pci_bus_id) or gpu.pci_bus_id
            mig = self._call(gpu, "mig_mode", self.api.mig_mode)
            gpu.mig_enabled = None if mig is None else mig == api_mod.MIG_ENABLED
            reasons = self._call(gpu, "supported_clocks_event_reasons",
                                 self.api.supported_clocks_event_reasons)
            all_bits = fam.ALL_CLOCK_EVENT_BITS
            gpu.supported_reasons = all_bits if reasons is None else reasons & all_bits
            gpu.links = self._link_count(gpu)
            gpu.fields = [(f, 0) for f in _SCALAR_FIELDS]
            gpu.fields += [(f, link) for link in range(gpu.links) for f in _LINK_FIELDS]
            if gpu.mig_enabled:
                gpu.migs = self._enumerate_migs(gpu)
        except GpuSick as sick:
            gpu.sick, gpu.sick_message = sick.reason, str(sick)
            if previous is not None and previous.handle is not None:
                # Keep what we knew: the XID watcher's device list stays the same, and the GPU
                # is polled in full again as soon as its old handle answers (after a reset).
                gpu.handle, gpu.links, gpu.fields = previous.handle, previous.links, previous.fields
                gpu.mig_enabled, gpu.migs = previous.mig_enabled, previous.migs
                gpu.supported_reasons = previous.supported_reasons
        return gpu

    def _link_count(self, gpu: Gpu) -> int:
        values = self._call(gpu, "nvlink_link_count",
                            lambda h: self.api.field_values(h, [(api_mod.FI_NVLINK_LINK_COUNT, 0)]))
        if not values or values[0].ret != api_mod.SUCCESS:
            return 0
        return int(values[0].value)

    def _enumerate_migs(self, gpu: Gpu) -> list[MigInstance]:
        migs: list[MigInstance] = []
        slots = self._call(gpu, "max_mig_device_count", self.api.max_mig_device_count) or 0
        for slot in range(slots):
            handle = self._call(gpu, f"mig_device_handle[{slot}]",
                                partial(self.api.mig_device_handle, index=slot), quiet=True)
            if handle is None:  # an empty slot answers NotFound
                continue
            try:
                gi = self.api.gpu_instance_id(handle)
                name = self.api.name(handle)
                uuid = self.api.uuid(handle)
            except Exception as exc:
                self._note_absent(gpu.uuid, f"mig[{slot}]", exc)
                continue
            profile = name.rpartition(" MIG ")[2] if " MIG " in name else ""
            migs.append(MigInstance(handle, str(gi), profile, name, uuid))
        return migs

    # -- polling -------------------------------------------------------------------------------

    def poll(self, xid_state: XidState | None = None) -> tuple[Snapshot, list[str]]:
        """Read every GPU once. xid_state: XidWatcher.state() ({uuid: (counts by xid, last xid,
        registered)}), or None when XID events are off."""
        if not self.gpus or (self.rescan_every and self._polls % self.rescan_every == 0 and self._polls):
            self.enumerate()
        self._polls += 1
        self._errors = []
        snap = Snapshot()
        for gpu in self.gpus:
            self._poll_gpu(gpu, snap, xid_state)
        self._flush_absent()
        return snap, self._errors

    def _poll_gpu(self, gpu: Gpu, snap: Snapshot, xid_state: XidState | None) -> None:
        opt = fam.NO_OPTIONAL
        if gpu.handle is None:  # lost when enumerated: one cheap retry per poll
            retry = self._enumerate_one(gpu.index, gpu)
            self.gpus[gpu.index] = gpu = retry
            self._flush_absent()
        base = (gpu.label, gpu.uuid)
        if gpu.handle is not None:
            try:
                self._read_gpu(gpu, snap, base, opt)
                gpu.sick = None
            except GpuSick as sick:
                gpu.sick, gpu.sick_message = sick.reason, str(sick)
        if gpu.sick is not None:
            # Whatever was read before the failure is not trusted: keep identity and health only.
            for name in list(snap.series):
                series = snap.series[name]
                for labels in [k for k in series if k[:2] == base]:
                    del series[labels]
            self._errors.append(f"gpu {gpu.label}: {gpu.sick} ({gpu.sick_message})")
        snap.add(fam.INFO, (gpu.label, gpu.uuid, gpu.name, gpu.pci_bus_id, self.driver_version,
                            self.cuda_version, "", "", ""), 1.0)
        snap.add(fam.HEALTHY, base + opt, 0.0 if gpu.sick else 1.0)
        snap.add(fam.HEALTH_STATUS, base + (gpu.sick or "ok",) + opt, 1.0)
        if gpu.mig_enabled is not None:
            snap.add(fam.MIG_ENABLED, base + opt, 1.0 if gpu.mig_enabled else 0.0)
        if xid_state is not None:
            known = xid_state.get(gpu.uuid)
            snap.add(fam.XID_WATCH, base + opt, 1.0 if known is not None and known[2] else 0.0)
            if known is not None:
                counts, last, _registered = known
                snap.add(fam.LAST_XID, base + opt, float(last))
                for xid, count in counts.items():
                    snap.add(fam.XID, base + (str(xid),) + opt, float(count))
        if gpu.sick is None:
            for mig in gpu.migs:
                self._poll_mig(gpu, mig, snap)

    def _read_gpu(self, gpu: Gpu, snap: Snapshot, base: tuple[str, str], opt: tuple[str, ...]) -> None:
        api, call = self.api, self._call
        if gpu.handle is None:
            raise GpuSick(gpu.sick or "gpu_is_lost", gpu.sick_message)
        util = call(gpu, "utilization", api.utilization)
        if util is not None:
            snap.add(fam.UTILIZATION, base + opt, util[0] / 100.0)
            snap.add(fam.MEMORY_UTILIZATION, base + opt, util[1] / 100.0)
        mem = call(gpu, "memory_info", api.memory_info)
        if mem is not None:
            snap.add(fam.MEMORY_TOTAL, base + opt, float(mem.total))
            snap.add(fam.MEMORY_USED, base + opt, float(mem.used))
            if mem.reserved is not None:
                snap.add(fam.MEMORY_RESERVED, base + opt, float(mem.reserved))
        power = call(gpu, "power_usage", api.power_usage)
        if power is not None:
            snap.add(fam.POWER, base + opt, power / 1000.0)  # mW -> W
        limit = call(gpu, "enforced_power_limit", api.enforced_power_limit)
        if limit is not None:
            snap.add(fam.POWER_LIMIT, base + opt, limit / 1000.0)
        temp = call(gpu, "temperature", lambda h: api.temperature(h, api_mod.TEMPERATURE_GPU))
        if temp is not None:
            snap.add(fam.TEMPERATURE, base + ("gpu",) + opt, float(temp))
        for clock_type, clock in ((api_mod.CLOCK_SM, "sm"), (api_mod.CLOCK_MEM, "memory")):
            mhz = call(gpu, f"clock_{clock}", partial(api.clock, clock_type=clock_type))
            if mhz is not None:
                snap.add(fam.CLOCK, base + (clock,) + opt, mhz * 1e6)
        reasons = call(gpu, "clocks_event_reasons", api.clocks_event_reasons)
        if reasons is not None:
            fam.add_clock_events(snap, gpu.label, gpu.uuid, reasons, gpu.supported_reasons, opt)
        pstate = call(gpu, "performance_state", api.performance_state)
        if pstate is not None and pstate <= 15:  # 32 = unknown
            snap.add(fam.PERFORMANCE_STATE, base + opt, float(pstate))
        for counter, direction in ((api_mod.PCIE_TX, "tx"), (api_mod.PCIE_RX, "rx")):
            kbs = call(gpu, f"pcie_throughput_{direction}", partial(api.pcie_throughput, counter=counter))
            if kbs is not None:
                snap.add(fam.PCIE_THROUGHPUT, base + (direction,) + opt, kbs * KB)
        fabric = call(gpu, "fabric_info", api.fabric_info)
        if fabric is not None and fabric[0] == 0:  # not_supported: no NVSwitch fabric, never asked again
            gpu.absent.add("fabric_info")
        elif fabric is not None:
            fabric_state, status, clique = fabric
            snap.add(fam.FABRIC_STATE, base + (api_mod.FABRIC_STATES.get(fabric_state, str(fabric_state)),
                                               str(status), str(clique)) + opt, 1.0)
        if gpu.fields:
            for start in range(0, len(gpu.fields), FIELD_BATCH_MAX):
                chunk = gpu.fields[start:start + FIELD_BATCH_MAX]
                # transient=True: a whole batch refused says nothing about each field; ask again next poll
                values = call(gpu, "field_values", partial(api.field_values, fields=chunk), transient=True)
                if values is not None:
                    self._add_fields(gpu, values, snap, base, opt)
        if gpu.link_state_by_call:
            for link in range(gpu.links):
                state = call(gpu, f"nvlink_state[{link}]", partial(api.nvlink_state, link=link))
                if state is not None:
                    snap.add(fam.NVLINK_UP, base + (str(link),) + opt, 1.0 if state else 0.0)

    def _add_fields(self, gpu: Gpu, values: list[FieldValue], snap: Snapshot,
                    base: tuple[str, str], opt: tuple[str, ...]) -> None:
        targets = gpu.field_targets
        if targets is None or targets[0] != base:
            gpu.field_targets = targets = (base, _field_targets(gpu.fields, base, opt))
        series = snap.series
        dropped: set[tuple[int, int]] = set()
        for fv in values:
            if fv.ret != api_mod.SUCCESS:
                self._field_failed(gpu, fv, dropped)
                continue
            name, labels, scale = targets[1][(fv.field_id, fv.scope_id)]
            bucket = series.get(name)
            if bucket is None:
                bucket = series[name] = {}
            bucket[labels] = (1.0 if fv.value else 0.0) if scale is None else fv.value * scale
        if dropped:
            gpu.fields = [f for f in gpu.fields if f not in dropped]
            if any(f == api_mod.FI_NVLINK_STATE for f, _ in dropped) and gpu.links:
                gpu.link_state_by_call = True  # drivers without the state field still answer per link

    def _field_failed(self, gpu: Gpu, fv: FieldValue, dropped: set[tuple[int, int]]) -> None:
        error = _CodeError(fv.ret)
        what = f"field {_FIELD_NAMES.get(fv.field_id, fv.field_id)}"  # logged once per field, not per link
        if fv.field_id in _LINK_MAP:
            what_here = f"{what} link {fv.scope_id}"
        else:
            what_here = what
        kind = api_mod.classify(error)
        if kind == SICK:
            raise GpuSick(api_mod.SICK_REASONS[fv.ret], f"{what_here}: {api_mod.code_name(fv.ret)}")
        if kind == ABSENT:
            self._note_absent(gpu.uuid or gpu.label, what, error)
            if api_mod.is_permanent_absence(fv.ret):
                dropped.add((fv.field_id, fv.scope_id))
        else:
            self._errors.append(f"gpu {gpu.label} {what_here}: {api_mod.code_name(fv.ret)}")

    def _poll_mig(self, gpu: Gpu, mig: MigInstance, snap: Snapshot) -> None:
        # A MIG instance reports its identity and its own memory; utilization, power, clocks,
        # temperature, ECC and NVLink belong to the physical GPU (DCGM profiling fields are
        # the per-instance activity measure).
        opt = (mig.gpu_instance, mig.profile, "", "", "")
        base = (gpu.label, gpu.uuid)
        snap.add(fam.INFO, (gpu.label, gpu.uuid, mig.name, gpu.pci_bus_id, self.driver_version,
                            self.cuda_version, mig.gpu_instance, mig.profile, mig.uuid), 1.0)
        what = f"mig {mig.gpu_instance} memory_info"
        if what in gpu.absent:
            return
        try:
            mem = self.api.memory_info(mig.handle)
        except Exception as exc:
            if api_mod.classify(exc) == ABSENT:
                self._note_absent(gpu.uuid, what, exc)
                if api_mod.is_permanent_absence(api_mod.error_code(exc)):
                    gpu.absent.add(what)
            else:
                self._errors.append(f"gpu {gpu.label} {what}: {exc}")
            return
        snap.add(fam.MEMORY_TOTAL, base + opt, float(mem.total))
        snap.add(fam.MEMORY_USED, base + opt, float(mem.used))

    # -- error handling ------------------------------------------------------------------------

    @overload
    def _call(self, gpu: Gpu, what: str, fn: Callable[[Any], T], required: Literal[True],
              quiet: bool = False, transient: bool = False) -> T: ...

    @overload
    def _call(self, gpu: Gpu, what: str, fn: Callable[[Any], T], required: bool = False,
              quiet: bool = False, transient: bool = False) -> T | None: ...

    def _call(self, gpu: Gpu, what: str, fn: Callable[[Any], T], required: bool = False,
              quiet: bool = False, transient: bool = False) -> T | None:
        """Call fn(handle); absent -> None (remembered when permanent); sick -> GpuSick."""
        if what in gpu.absent:
            return None
        try:
            return fn(gpu.handle)
        except Exception as exc:
            kind = api_mod.classify(exc)
            code = api_mod.error_code(exc)
            if kind == SICK and code is not None:  # SICK: the code is one of SICK_REASONS
                raise GpuSick(api_mod.SICK_REASONS[code], f"{what}: {exc}") from None
            if kind == ABSENT and not required:
                if not quiet:
                    self._note_absent(gpu.uuid or gpu.label, what, exc)
                if api_mod.is_permanent_absence(code) and not quiet and not transient:
                    gpu.absent.add(what)
                return None
            if required:  # without a handle or uuid the GPU cannot be reported as itself
                reason = "inaccessible" if kind == ABSENT else "unknown_error"
                raise GpuSick(reason, f"{what}: {exc}") from None
            self._errors.append(f"gpu {gpu.label} {what}: {type(exc).__name__}: {exc}")
            return None

    def _note_absent(self, device: str, what: str, exc: BaseException) -> None:
        key = (device, what)
        if key not in self._logged:
            self._logged.add(key)
            code = api_mod.code_name(api_mod.error_code(exc))
            self._new_absent.setdefault(device, []).append(f"{what} ({code})")

    def _flush_absent(self) -> None:
        for device, values in self._new_absent.items():
            self.log.info("NVML values this GPU does not report are left out",
                          extra={"gpu": device, "values": values})
        self._new_absent = {}


class _CodeError(Exception):
    """A per-field NVML return code wrapped so it classifies like a raised NVMLError."""

    def __init__(self, value: int) -> None:
        super().__init__(api_mod.code_name(value))
        self.value = value
