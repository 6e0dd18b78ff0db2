"""A data-driven NVML: implements `NvmlApi` from a YAML description of GPUs (data/gpus.yaml).

It answers like the real library: values in NVML's units, real `pynvml.NVMLError_*`
exceptions for unsupported values and lost GPUs, per-field return codes in field values, and
XID events delivered once per event set, woken by a condition variable. Time-driven behaviour
(XIDs at given times, throttling episodes, a GPU falling off the bus) follows the time,
seconds since the fake started (`now()`), which tests replace with a hand-driven clock. It counts every
call (`calls`) so tests and bench/nvml_poll.py can see what a poll costs.

The nvml source uses it when its config has `fake: <path>`; `infrapulse demo` registers a
live instance wired to the demo's scenario board (see `demo_part`).
"""

from __future__ import annotations

import math
import threading
import time
import uuid as uuid_mod
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pynvml  # nvidia-ml-py: importing it needs no GPU; used only for its exception classes
import yaml

from ..sources.gpu import families as fam
from ..sources.gpu import nvml_api as api
from ..sources.gpu.nvml_api import FieldValue, InitError, MemoryInfo, XidEvent

DEFAULT_DATA = Path(__file__).parent / "data" / "gpus.yaml"
SCENARIOS = {
    "xid": "a critical XID (79, fallen off the bus) on one GPU, which stays lost while active",
    "xid-app-error": "an application XID (13, graphics engine exception) on one GPU: the job's bug, "
                     "not the hardware",
    "gpu-thermal": "thermal and HW slowdown throttling on one GPU: hot, clocks down",
    "gpu-power-cap": "one GPU at its power limit, SM clock held down by power capping (not a fault)",
}
_REASON_BITS = {name: bit for bit, name in fam.CLOCK_EVENT_REASONS}
_PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
NO_MIG = 0xFFFFFFFF

# Which `not_supported` name turns off which field ids.
_FIELD_GROUPS = {
    "ecc": {api.FI_ECC_SBE_VOL, api.FI_ECC_DBE_VOL, api.FI_ECC_SBE_AGG, api.FI_ECC_DBE_AGG},
    "retired_pages": {api.FI_RETIRED_SBE, api.FI_RETIRED_DBE, api.FI_RETIRED_PENDING},
    "remapped_rows": {api.FI_REMAPPED_COR, api.FI_REMAPPED_UNC, api.FI_REMAPPED_PENDING,
                      api.FI_REMAPPED_FAILURE},
    "memory_temperature": {api.FI_MEMORY_TEMP},
    "energy": {api.FI_TOTAL_ENERGY},
    "pcie_replays": {api.FI_PCIE_REPLAY},
    "nvlink": {api.FI_NVLINK_LINK_COUNT, api.FI_NVLINK_STATE, api.FI_NVLINK_DATA_TX, api.FI_NVLINK_DATA_RX},
    "nvlink_state_field": {api.FI_NVLINK_STATE},
    # drivers before 525 answer NOT_SUPPORTED for the data-link error fields
    "nvlink_errors": {api.FI_NVLINK_ERROR_DL_REPLAY, api.FI_NVLINK_ERROR_DL_RECOVERY,
                      api.FI_NVLINK_ERROR_DL_CRC},
}
_NVLINK_ERROR_FIELDS = {api.FI_NVLINK_ERROR_DL_REPLAY: "replay", api.FI_NVLINK_ERROR_DL_RECOVERY: "recovery",
                        api.FI_NVLINK_ERROR_DL_CRC: "crc"}
_FABRIC_STATE_CODES = {name: code for code, name in api.FABRIC_STATES.items()}


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class FakeHandle:
    """A device handle: a physical GPU (mig is None) or one of its MIG instances."""

    __slots__ = ("index", "mig")

    def __init__(self, index: int, mig: dict[str, Any] | None = None) -> None:
        self.index = index
        self.mig = mig

    def __repr__(self) -> str:
        return f"<fake GPU {self.index}{' MIG ' + str(self.mig['gpu_instance']) if self.mig else ''}>"


class FakeGpu:
    def __init__(self, index: int, entry: dict[str, Any], model: dict[str, Any]) -> None:
        self.index = index
        self.spec = {**model, **entry}
        self.not_supported = set(self.spec.get("not_supported", ()))
        name = self.spec.get("name", "NVIDIA GPU")
        self.uuid = self.spec.get("uuid") or "GPU-" + str(uuid_mod.uuid5(uuid_mod.NAMESPACE_DNS,
                                                                         f"{name}/{index}"))
        bus = _PCI_BUSES[index % len(_PCI_BUSES)] + 0x100 * (index // len(_PCI_BUSES))
        self.pci_bus_id = self.spec.get("pci_bus_id") or f"00000000:{bus:02X}:00.0"
        self.handle = FakeHandle(index)
        self.migs: list[FakeHandle] = []
        for entry_mig in self.spec.get("mig", ()):
            mig = dict(entry_mig)
            mig_name = f"{self.uuid}/{mig['gpu_instance']}"
            mig["uuid"] = "MIG-" + str(uuid_mod.uuid5(uuid_mod.NAMESPACE_DNS, mig_name))
            self.migs.append(FakeHandle(index, mig))
        if self.migs:
            self.not_supported |= {"utilization", "remapped_rows"}  # not per physical GPU in MIG mode
        repair = self.spec.get("memory_repair", "row_remapping")
        self.not_supported.add("retired_pages" if repair == "row_remapping" else "remapped_rows")
        self.fired_xids: set[int] = set()  # indexes into spec["xids"] already raised
        self.lost = False
        self.lost_by_scenario = False


@dataclass
class _FieldAnswers:
    """What one nvmlDeviceGetFieldValues call answers, computed once per call."""

    scalars: dict[int, float]  # field id -> value, for the per-GPU fields
    blocked: set[int]  # field ids this GPU does not support
    links: int
    down: set[int]  # NVLink links that are down
    link_kib: float  # cumulative KiB on every link that is up
    # (link, "replay"|"recovery"|"crc") -> cumulative count (spec `nvlink_errors`: rates per second)
    link_errors: dict[tuple[int, str], float]


class FakeEventSet:
    def __init__(self) -> None:
        self.queue: deque[XidEvent] = deque()
        self.devices: set[int] = set()
        self.freed = False


class FakeNvml:
    """NvmlApi over a YAML spec. Thread-safe (the poller and the XID watcher share it)."""

    def __init__(self, spec: dict[str, Any], clock: Callable[[], float] | None = None,
                 scenarios: Any = None) -> None:
        self.spec = spec
        start = time.monotonic()
        self.now = clock or (lambda: time.monotonic() - start)  # `clock` is NVML's clock call
        # With the real clock and no scenario board, nothing but the spec's own schedule raises
        # an XID, so event_set_wait sleeps until the next one instead of ticking: the fake runs in
        # the daemon's process and stands in for a driver wait that costs no CPU.
        self._ticking = clock is not None or scenarios is not None
        self.scenarios = scenarios
        self.calls: Counter[str] = Counter()
        self._cond = threading.Condition()
        self._event_sets: list[FakeEventSet] = []
        self._scenario_was_active: dict[str, bool] = {}
        models = spec.get("models", {})
        self.gpus: list[FakeGpu] = []
        for entry in spec.get("gpus", ()):
            for _ in range(int(entry.get("count", 1))):
                model = models.get(entry.get("model", ""), {})
                self.gpus.append(FakeGpu(len(self.gpus), entry, model))
        self.initialized = False

    @classmethod
    def from_file(cls, path: str | Path = DEFAULT_DATA, **kwargs: Any) -> FakeNvml:
        with open(path, encoding="utf-8") as fh:
            return cls(yaml.safe_load(fh) or {}, **kwargs)

    # -- test controls -------------------------------------------------------------------------

    def fire_xid(self, index: int, xid: int, gpu_instance: int = NO_MIG) -> None:
        with self._cond:
            self._emit(self.gpus[index], xid, gpu_instance)

    def set_lost(self, index: int, lost: bool = True) -> None:
        with self._cond:
            self.gpus[index].lost = lost

    # -- time-driven behaviour -----------------------------------------------------------------

    def _enter(self, call: str | None) -> float:
        """Count the call (None: a timer tick) and apply everything due by now (under the lock)."""
        if call is not None:
            self.calls[call] += 1
        now = self.now()
        for gpu in self.gpus:
            for i, item in enumerate(gpu.spec.get("xids", ())):
                if i not in gpu.fired_xids and now >= float(item["at"]):
                    gpu.fired_xids.add(i)
                    self._emit(gpu, int(item["xid"]), int(item.get("gpu_instance", NO_MIG)))
            lost_at = gpu.spec.get("lost_at")
            if lost_at is not None and now >= float(lost_at) and -1 not in gpu.fired_xids:
                gpu.fired_xids.add(-1)
                self._emit(gpu, 79, NO_MIG)  # the driver's last word before the GPU is gone
                gpu.lost = True
        self._apply_xid_scenario()
        return now

    def _next_due(self) -> float:
        """Seconds until the spec's next XID or lost_at (inf when none is left)."""
        now = self.now()
        due = math.inf
        for gpu in self.gpus:
            for i, item in enumerate(gpu.spec.get("xids", ())):
                if i not in gpu.fired_xids:
                    due = min(due, float(item["at"]) - now)
            lost_at = gpu.spec.get("lost_at")
            if lost_at is not None and -1 not in gpu.fired_xids:
                due = min(due, float(lost_at) - now)
        return max(due, 0.0)

    def _apply_xid_scenario(self) -> None:
        """Scenarios with an `xid` raise it once each time they start; `lost: true` keeps the
        GPU lost while active."""
        if self.scenarios is None:
            return
        for name, scenario in self.spec.get("scenarios", {}).items():
            if "xid" not in scenario:
                continue
            active = self.scenarios.active(name)
            gpu = self.gpus[int(scenario.get("gpu", 0)) % len(self.gpus)]
            if active and not self._scenario_was_active.get(name):
                self._emit(gpu, int(scenario["xid"]), NO_MIG)
            if scenario.get("lost"):
                gpu.lost_by_scenario = active
            self._scenario_was_active[name] = active

    def _emit(self, gpu: FakeGpu, xid: int, gpu_instance: int) -> None:
        if "xid_events" in gpu.not_supported:
            return
        for event_set in self._event_sets:
            if gpu.index in event_set.devices and not event_set.freed:
                event_set.queue.append(XidEvent(gpu.handle, xid, gpu_instance, NO_MIG))
        self._cond.notify_all()

    def _state(self, gpu: FakeGpu, now: float) -> dict[str, Any]:
        """The GPU's values right now: spec, plus swing, episodes and scenarios."""
        s = gpu.spec
        state: dict[str, Any] = {
            "utilization": float(s.get("utilization", 0)),
            "memory_utilization": float(s.get("memory_utilization", 0)),
            "power_w": float(s.get("power_w", 0.0)),
            "temperature": float(s.get("temperature", 40)),
            "memory_temperature": float(s.get("memory_temperature", s.get("temperature", 40))),
            "clock_sm_mhz": float(s.get("clock_sm_mhz", 1000)),
            "clock_mem_mhz": float(s.get("clock_mem_mhz", 1000)),
            "reasons": list(s.get("reasons", ())),
        }
        swing = float(s.get("swing", 0))
        if swing:
            wave = math.sin(2 * math.pi * now / float(s.get("period", 120)))
            state["utilization"] = min(100.0, max(0.0, state["utilization"] + swing * wave))
            state["power_w"] *= 1 + swing / 100 * wave
        for episode in s.get("episodes", ()):
            t = now % float(episode["every"]) if episode.get("every") else now
            if float(episode["from"]) <= t < float(episode["to"]):
                self._override(state, episode)
        if self.scenarios is not None:  # a scenario's values on its GPU while it is active
            for name, scenario in self.spec.get("scenarios", {}).items():
                if int(scenario.get("gpu", 0)) % len(self.gpus) == gpu.index and self.scenarios.active(name):
                    self._override(state, scenario)
        return state

    @staticmethod
    def _override(state: dict[str, Any], changes: dict[str, Any]) -> None:
        for key in ("utilization", "power_w", "temperature", "memory_temperature", "clock_sm_mhz",
                    "clock_mem_mhz"):
            if key in changes:
                state[key] = float(changes[key])
        if "reasons" in changes:
            state["reasons"] = list(changes["reasons"])

    def _device(self, h: FakeHandle, call: str, what: str | None = None, mig_ok: bool = False) -> FakeGpu:
        """Count the call, check the handle: lost GPU, MIG handle, unsupported value."""
        self._enter(call)
        gpu = self.gpus[h.index]
        if gpu.lost or gpu.lost_by_scenario:
            raise _error(api.GPU_IS_LOST)
        if h.mig is not None and not mig_ok:
            raise _error(api.NOT_SUPPORTED)  # physical-GPU-wide values are not per instance
        if what is not None and what in gpu.not_supported:
            raise _error(api.NOT_SUPPORTED)
        return gpu

    # -- NvmlApi ------------------------------------------------------------------------------

    def init(self) -> None:
        with self._cond:
            self.calls["init"] += 1
            if self.spec.get("library") == "missing":
                raise InitError("no_nvml", "nvmlInit failed: NVML Shared Library Not Found (fake)")
            self.initialized = True

    def shutdown(self) -> None:
        with self._cond:
            self.calls["shutdown"] += 1
            self.initialized = False

    def driver_version(self) -> str:
        with self._cond:
            self._enter("driver_version")
            return str(self.spec.get("driver_version", "570.0"))

    def cuda_driver_version(self) -> int:
        with self._cond:
            self._enter("cuda_driver_version")
            return int(self.spec.get("cuda_driver_version", 12080))

    def device_count(self) -> int:
        with self._cond:
            self._enter("device_count")
            return len(self.gpus)

    def handle_by_index(self, index: int) -> FakeHandle:
        with self._cond:
            self._enter("handle_by_index")
            if not 0 <= index < len(self.gpus):
                raise _error(api.INVALID_ARGUMENT)
            gpu = self.gpus[index]
            if gpu.lost or gpu.lost_by_scenario:
                raise _error(api.GPU_IS_LOST)
            return gpu.handle

    def name(self, h: FakeHandle) -> str:
        with self._cond:
            gpu = self._device(h, "name", mig_ok=True)
            base = gpu.spec.get("name", "NVIDIA GPU")
            return f"{base} MIG {h.mig['profile']}" if h.mig else base

    def uuid(self, h: FakeHandle) -> str:
        with self._cond:
            gpu = self._device(h, "uuid", mig_ok=True)
            return h.mig["uuid"] if h.mig else gpu.uuid

    def pci_bus_id(self, h: FakeHandle) -> str:
        with self._cond:
            return self._device(h, "pci_bus_id", mig_ok=True).pci_bus_id

    def fabric_info(self, h: FakeHandle) -> tuple[int, int, int]:
        """Spec `fabric: {state: completed, status: 0, clique: 1}` on NVSwitch systems; without it
        the GPU answers as a PCIe or NVLink-bridge GPU does: state not_supported, with success."""
        with self._cond:
            fabric = self._device(h, "fabric_info", "fabric").spec.get("fabric")
            if not fabric:
                return 0, api.SUCCESS, 0
            return (_FABRIC_STATE_CODES[str(fabric.get("state", "completed"))], int(fabric.get("status", 0)),
                    int(fabric.get("clique", 0)))

    def compute_processes(self, h: FakeHandle) -> list[int]:
        with self._cond:
            return [int(pid) for pid in self._device(h, "processes").spec.get("processes", [])]

    def mig_mode(self, h: FakeHandle) -> int:
        with self._cond:
            gpu = self._device(h, "mig_mode", "mig")
            return api.MIG_ENABLED if gpu.migs else 0

    def max_mig_device_count(self, h: FakeHandle) -> int:
        with self._cond:
            gpu = self._device(h, "max_mig_device_count", "mig")
            return int(gpu.spec.get("mig_slots", 7))

    def mig_device_handle(self, h: FakeHandle, index: int) -> FakeHandle:
        with self._cond:
            gpu = self._device(h, "mig_device_handle", "mig")
            if index >= len(gpu.migs):
                raise _error(api.NOT_FOUND)
            return gpu.migs[index]

    def gpu_instance_id(self, h: FakeHandle) -> int:
        with self._cond:
            self._device(h, "gpu_instance_id", mig_ok=True)
            if h.mig is None:
                raise _error(api.INVALID_ARGUMENT)
            return int(h.mig["gpu_instance"])

    def supported_clocks_event_reasons(self, h: FakeHandle) -> int:
        with self._cond:
            self._device(h, "supported_clocks_event_reasons", "clocks_event_reasons")
            return fam.ALL_CLOCK_EVENT_BITS

    def utilization(self, h: FakeHandle) -> tuple[int, int]:
        with self._cond:
            gpu = self._device(h, "utilization", "utilization")
            state = self._state(gpu, self.now())
            return int(round(state["utilization"])), int(round(state["memory_utilization"]))

    def memory_info(self, h: FakeHandle) -> MemoryInfo:
        with self._cond:
            gpu = self._device(h, "memory_info", "memory_info", mig_ok=True)
            if h.mig is not None:
                return MemoryInfo(int(h.mig["memory_total"]), int(h.mig["memory_used"]), None)
            spec = gpu.spec
            reserved = None if "memory_reserved" in gpu.not_supported else int(spec.get("memory_reserved", 0))
            return MemoryInfo(int(spec.get("memory_total", 0)), int(spec.get("memory_used", 0)), reserved)

    def power_usage(self, h: FakeHandle) -> int:
        with self._cond:
            gpu = self._device(h, "power_usage", "power")
            return int(round(self._state(gpu, self.now())["power_w"] * 1000))

    def enforced_power_limit(self, h: FakeHandle) -> int:
        with self._cond:
            gpu = self._device(h, "enforced_power_limit", "power_limit")
            return int(float(gpu.spec.get("power_limit_w", 700)) * 1000)

    def temperature(self, h: FakeHandle, sensor: int) -> int:
        with self._cond:
            gpu = self._device(h, "temperature", "temperature")
            if sensor != api.TEMPERATURE_GPU:
                raise _error(api.INVALID_ARGUMENT)
            return int(round(self._state(gpu, self.now())["temperature"]))

    def clock(self, h: FakeHandle, clock_type: int) -> int:
        with self._cond:
            what = {api.CLOCK_SM: "clock_sm", api.CLOCK_MEM: "clock_mem"}.get(clock_type)
            gpu = self._device(h, "clock", what)
            if what is None:
                raise _error(api.INVALID_ARGUMENT)
            return int(round(self._state(gpu, self.now())[what + "_mhz"]))

    def clocks_event_reasons(self, h: FakeHandle) -> int:
        with self._cond:
            gpu = self._device(h, "clocks_event_reasons", "clocks_event_reasons")
            return sum(_REASON_BITS[r] for r in set(self._state(gpu, self.now())["reasons"]))

    def performance_state(self, h: FakeHandle) -> int:
        with self._cond:
            gpu = self._device(h, "performance_state", "performance_state")
            return int(gpu.spec.get("pstate", 0))

    def pcie_throughput(self, h: FakeHandle, counter: int) -> int:
        with self._cond:
            gpu = self._device(h, "pcie_throughput", "pcie_throughput")
            kbps = gpu.spec.get("pcie_kbps", {})
            return int(kbps.get("tx" if counter == api.PCIE_TX else "rx", 0))

    def nvlink_state(self, h: FakeHandle, link: int) -> int:
        with self._cond:
            gpu = self._device(h, "nvlink_state", "nvlink")
            if not 0 <= link < int(gpu.spec.get("nvlinks", 0)):
                raise _error(api.INVALID_ARGUMENT)
            return 0 if link in gpu.spec.get("nvlink_down", ()) else 1

    def field_values(self, h: FakeHandle, fields: list[tuple[int, int]]) -> list[FieldValue]:
        with self._cond:
            gpu = self._device(h, "field_values")
            now = self.now()
            answers = self._field_answers(gpu, now)
            return [self._field(gpu, fid, scope, now, answers) for fid, scope in fields]

    def _field_answers(self, gpu: FakeGpu, now: float) -> _FieldAnswers:
        """Per-call values of the scalar fields (computed once per nvmlDeviceGetFieldValues)."""
        s = gpu.spec
        ecc = s.get("ecc", {})
        rows = s.get("remapped_rows", {})
        pages = s.get("retired_pages", {})
        scalars = {
            api.FI_ECC_SBE_VOL: ecc.get("corrected_volatile", 0),
            api.FI_ECC_DBE_VOL: ecc.get("uncorrected_volatile", 0),
            api.FI_ECC_SBE_AGG: ecc.get("corrected_aggregate", 0),
            api.FI_ECC_DBE_AGG: ecc.get("uncorrected_aggregate", 0),
            api.FI_RETIRED_SBE: pages.get("single_bit_ecc", 0),
            api.FI_RETIRED_DBE: pages.get("double_bit_ecc", 0),
            api.FI_RETIRED_PENDING: pages.get("pending", 0),
            api.FI_REMAPPED_COR: rows.get("correctable", 0),
            api.FI_REMAPPED_UNC: rows.get("uncorrectable", 0),
            api.FI_REMAPPED_PENDING: rows.get("pending", 0),
            api.FI_REMAPPED_FAILURE: rows.get("failure", 0),
            api.FI_PCIE_REPLAY: s.get("pcie_replays", 0),
            api.FI_NVLINK_LINK_COUNT: int(s.get("nvlinks", 0)),
            # mJ; integrates the nominal power so the counter never goes back
            api.FI_TOTAL_ENERGY: int(s.get("energy_start_mj", 0) + float(s.get("power_w", 0)) * 1000 * now),
            api.FI_MEMORY_TEMP: round(self._state(gpu, now)["memory_temperature"]),
        }
        return _FieldAnswers(
            scalars={fid: float(v) for fid, v in scalars.items()},
            blocked=set().union(*(ids for name, ids in _FIELD_GROUPS.items() if name in gpu.not_supported)),
            links=int(s.get("nvlinks", 0)),
            down=set(s.get("nvlink_down", ())),
            link_kib=float(int(float(s.get("nvlink_kibps", 0)) * now)),
            link_errors={(int(e["link"]), kind): float(int(float(e.get(kind, 0)) * now))
                         for e in s.get("nvlink_errors", ()) for kind in ("replay", "recovery", "crc")},
        )

    @staticmethod
    def _field(gpu: FakeGpu, fid: int, scope: int, now: float, answers: _FieldAnswers) -> FieldValue:
        if fid in answers.blocked:
            return FieldValue(fid, scope, api.NOT_SUPPORTED, 0.0)
        if fid in (api.FI_NVLINK_STATE, api.FI_NVLINK_DATA_TX, api.FI_NVLINK_DATA_RX):
            if not 0 <= scope < answers.links:
                return FieldValue(fid, scope, api.INVALID_ARGUMENT, 0.0)
            up = scope not in answers.down
            if fid == api.FI_NVLINK_STATE:
                return FieldValue(fid, scope, api.SUCCESS, 1.0 if up else 0.0)
            return FieldValue(fid, scope, api.SUCCESS, answers.link_kib if up else 0.0)
        if fid in _NVLINK_ERROR_FIELDS:
            if not 0 <= scope < answers.links:
                return FieldValue(fid, scope, api.INVALID_ARGUMENT, 0.0)
            return FieldValue(fid, scope, api.SUCCESS,
                              answers.link_errors.get((scope, _NVLINK_ERROR_FIELDS[fid]), 0.0))
        value = answers.scalars.get(fid)
        if value is None:
            return FieldValue(fid, scope, api.NOT_SUPPORTED, 0.0)
        return FieldValue(fid, scope, api.SUCCESS, value)

    def event_set_create(self) -> FakeEventSet:
        with self._cond:
            self._enter("event_set_create")
            event_set = FakeEventSet()
            self._event_sets.append(event_set)
            return event_set

    def register_xid_events(self, h: FakeHandle, event_set: FakeEventSet) -> None:
        with self._cond:
            gpu = self._device(h, "register_xid_events", "xid_events")
            event_set.devices.add(gpu.index)

    def event_set_wait(self, event_set: FakeEventSet, timeout_ms: int) -> XidEvent | None:
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cond:
            self._enter("event_set_wait")
            while True:
                if event_set.queue:
                    return event_set.queue.popleft()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                # Wake up now and then for time-driven XIDs (a hand-driven clock or scenarios), or
                # at the next scheduled one; fire_xid/_emit wake the wait at once either way.
                self._cond.wait(min(remaining, 0.05 if self._ticking else self._next_due()))
                self._enter(None)

    def event_set_free(self, event_set: FakeEventSet) -> None:
        with self._cond:
            self._enter("event_set_free")
            event_set.freed = True
            event_set.queue.clear()
            if event_set in self._event_sets:
                self._event_sets.remove(event_set)

    def nvml_calls(self) -> int:
        """NVML calls made so far."""
        return sum(self.calls.values())


# Live fakes by config path: the demo registers one wired to its scenario board, and the nvml
# source (config `fake: <path>`) uses it instead of building a scenario-less one from the file.
_LIVE: dict[str, FakeNvml] = {}


def open_fake(path: str) -> FakeNvml:
    live = _LIVE.get(str(Path(path).resolve()))
    return live if live is not None else FakeNvml.from_file(path)


def register_live(path: str | Path, fake: FakeNvml) -> None:
    _LIVE[str(Path(path).resolve())] = fake


def unregister_live(path: str | Path) -> None:
    _LIVE.pop(str(Path(path).resolve()), None)
