"""The NVML calls infrapulse makes, behind a Protocol, and how their errors are read.

`NvmlApi` lists exactly the calls the poller and the XID watcher use, one method per NVML
function, so the data-driven fake (simulate/nvml_fake.py) can stand in for the library in
tests, the demo and the benchmark, and so call counts mean the same thing for both.
`RealNvml` implements it over nvidia-ml-py (module `pynvml`, imported lazily: a host without
the package or without a GPU only loses this source).

Errors stay real `pynvml.NVMLError` exceptions; `classify()` sorts them into what the poller
does about them:
- ABSENT: the device cannot give this value (NotSupported, NoPermission, NotFound, ...): the
  field is left out, never exported as zero.
- SICK: the device itself is gone (GpuIsLost, ResetRequired, Unknown): the GPU is reported
  unhealthy with the reason, the others carry on.
- anything else is an unexpected error for that call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# NVML return codes (nvml.h; identical in every nvidia-ml-py). Kept here so that classifying
# an error needs no import of pynvml.
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
RESET_REQUIRED = 16
LIB_RM_VERSION_MISMATCH = 18
NO_DATA = 21
VGPU_ECC_NOT_SUPPORTED = 22
ARGUMENT_VERSION_MISMATCH = 25
DEPRECATED = 26
UNKNOWN = 999
SUCCESS = 0

ABSENT, SICK, ERROR = "absent", "sick", "error"

# "This device cannot tell you that": absent. NotFound and NoData may change (a MIG slot that
# gets populated, a counter with no sample yet); the others are fixed for the device.
_ABSENT_CODES = {NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, FUNCTION_NOT_FOUND, NO_DATA, INVALID_ARGUMENT,
                 DEPRECATED, ARGUMENT_VERSION_MISMATCH, VGPU_ECC_NOT_SUPPORTED}
_TRANSIENT_ABSENT = {NOT_FOUND, NO_DATA}
SICK_REASONS = {GPU_IS_LOST: "gpu_is_lost", RESET_REQUIRED: "reset_required", UNKNOWN: "unknown_error"}
INIT_REASONS = {LIBRARY_NOT_FOUND: "no_nvml", DRIVER_NOT_LOADED: "driver_not_loaded",
                LIB_RM_VERSION_MISMATCH: "driver_mismatch", NO_PERMISSION: "no_permission"}
CODE_NAMES = {INVALID_ARGUMENT: "InvalidArgument", NOT_SUPPORTED: "NotSupported",
              NO_PERMISSION: "NoPermission", NOT_FOUND: "NotFound",
              FUNCTION_NOT_FOUND: "FunctionNotFound", NO_DATA: "NoData",
              DEPRECATED: "Deprecated", ARGUMENT_VERSION_MISMATCH: "ArgumentVersionMismatch",
              VGPU_ECC_NOT_SUPPORTED: "VgpuEccNotSupported", GPU_IS_LOST: "GpuIsLost",
              RESET_REQUIRED: "ResetRequired", UNKNOWN: "Unknown", TIMEOUT: "Timeout"}

# Constants of the calls below (nvml.h).
TEMPERATURE_GPU = 0
CLOCK_SM = 1
CLOCK_MEM = 2
PCIE_TX = 0
PCIE_RX = 1
MIG_ENABLED = 1
SCOPE_ALL_LINKS = 0xFFFFFFFF  # a field-values scopeId meaning "summed over all NVLink links"

# Field ids (NVML_FI_DEV_*) read in the one batched nvmlDeviceGetFieldValues call per GPU.
FI_ECC_SBE_VOL = 3
FI_ECC_DBE_VOL = 4
FI_ECC_SBE_AGG = 5
FI_ECC_DBE_AGG = 6
FI_RETIRED_SBE = 29
FI_RETIRED_DBE = 30
FI_RETIRED_PENDING = 31
FI_MEMORY_TEMP = 82
FI_TOTAL_ENERGY = 83
FI_NVLINK_LINK_COUNT = 91
FI_PCIE_REPLAY = 94
FI_NVLINK_DATA_TX = 138  # KiB, cumulative, per link (scopeId = link)
FI_NVLINK_DATA_RX = 139
FI_REMAPPED_COR = 142
FI_REMAPPED_UNC = 143
FI_REMAPPED_PENDING = 144
FI_REMAPPED_FAILURE = 145
FI_NVLINK_ERROR_DL_REPLAY = 161  # per link (scopeId = link): data-link replays, cumulative
FI_NVLINK_ERROR_DL_RECOVERY = 162  # per link: link recoveries (retraining), cumulative
FI_NVLINK_ERROR_DL_CRC = 163  # per link: CRC errors (flit), cumulative
FI_NVLINK_STATE = 165  # per link: 1 active, 0 inactive

# nvmlGpuFabricState_t (nvmlDeviceGetGpuFabricInfo/V): NVSwitch systems register each GPU with
# the fabric manager; a GPU not COMPLETED cannot run multi-GPU work over NVLink.
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


def error_code(exc: BaseException) -> int | None:
    """The NVML return code carried by a pynvml.NVMLError (or a look-alike), else None."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def classify(exc: BaseException) -> str:
    code = error_code(exc)
    if code in _ABSENT_CODES:
        return ABSENT
    if code in SICK_REASONS:
        return SICK
    return ERROR


def is_permanent_absence(code: int | None) -> bool:
    return code in _ABSENT_CODES and code not in _TRANSIENT_ABSENT


def code_name(code: int | None) -> str:
    return CODE_NAMES.get(code, f"code {code}") if code is not None else "unknown"


@dataclass(frozen=True)
class FieldValue:
    """One entry of nvmlDeviceGetFieldValues: per-field errors come back here, not raised."""

    field_id: int
    scope_id: int
    ret: int
    value: float


@dataclass(frozen=True)
class MemoryInfo:
    total: int
    used: int
    reserved: int | None  # None where only nvmlMemory_v1 is available


@dataclass(frozen=True)
class XidEvent:
    device: Any  # the physical device handle the event came from
    xid: int
    gpu_instance_id: int  # 0xFFFFFFFF when not a MIG instance
    compute_instance_id: int


class InitError(Exception):
    """NVML could not start: `reason` is a short code for infrapulse_source_status_info."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class NvmlApi(Protocol):
    """Exactly the NVML calls infrapulse makes; each method is one NVML call."""

    def init(self) -> None: ...                                    # nvmlInit (raises InitError)
    def shutdown(self) -> None: ...                                # nvmlShutdown
    def driver_version(self) -> str: ...                           # nvmlSystemGetDriverVersion
    def cuda_driver_version(self) -> int: ...                      # nvmlSystemGetCudaDriverVersion
    def device_count(self) -> int: ...                             # nvmlDeviceGetCount
    def handle_by_index(self, index: int) -> Any: ...              # nvmlDeviceGetHandleByIndex
    def name(self, h: Any) -> str: ...                             # nvmlDeviceGetName
    def uuid(self, h: Any) -> str: ...                             # nvmlDeviceGetUUID
    def pci_bus_id(self, h: Any) -> str: ...                       # nvmlDeviceGetPciInfo().busId
    def compute_processes(self, h: Any) -> list[int]: ...          # nvmlDeviceGetComputeRunningProcesses
    # nvmlDeviceGetGpuFabricInfo: (state, status: an NVML return code, clique id)
    def fabric_info(self, h: Any) -> tuple[int, int, int]: ...
    def mig_mode(self, h: Any) -> int: ...                         # nvmlDeviceGetMigMode (current)
    def max_mig_device_count(self, h: Any) -> int: ...             # nvmlDeviceGetMaxMigDeviceCount
    def mig_device_handle(self, h: Any, index: int) -> Any: ...    # nvmlDeviceGetMigDeviceHandleByIndex
    def gpu_instance_id(self, h: Any) -> int: ...                  # nvmlDeviceGetGpuInstanceId
    def supported_clocks_event_reasons(self, h: Any) -> int: ...   # nvmlDeviceGetSupportedClocksEventReasons
    # nvmlDeviceGetUtilizationRates (gpu %, mem %)
    def utilization(self, h: Any) -> tuple[int, int]: ...
    def memory_info(self, h: Any) -> MemoryInfo: ...               # nvmlDeviceGetMemoryInfo(v2)
    def power_usage(self, h: Any) -> int: ...                      # nvmlDeviceGetPowerUsage (mW)
    def enforced_power_limit(self, h: Any) -> int: ...             # nvmlDeviceGetEnforcedPowerLimit (mW)
    def temperature(self, h: Any, sensor: int) -> int: ...         # nvmlDeviceGetTemperatureV (°C)
    def clock(self, h: Any, clock_type: int) -> int: ...           # nvmlDeviceGetClockInfo (MHz)
    def clocks_event_reasons(self, h: Any) -> int: ...             # nvmlDeviceGetCurrentClocksEventReasons
    def performance_state(self, h: Any) -> int: ...                # nvmlDeviceGetPerformanceState
    def pcie_throughput(self, h: Any, counter: int) -> int: ...    # nvmlDeviceGetPcieThroughput (KB/s)
    def nvlink_state(self, h: Any, link: int) -> int: ...          # nvmlDeviceGetNvLinkState (old drivers)
    # nvmlDeviceGetFieldValues
    def field_values(self, h: Any, fields: list[tuple[int, int]]) -> list[FieldValue]: ...
    def event_set_create(self) -> Any: ...                         # nvmlEventSetCreate
    # nvmlDeviceRegisterEvents(XidCritical)
    def register_xid_events(self, h: Any, event_set: Any) -> None: ...
    # nvmlEventSetWait; None on timeout
    def event_set_wait(self, event_set: Any, timeout_ms: int) -> XidEvent | None: ...
    def event_set_free(self, event_set: Any) -> None: ...          # nvmlEventSetFree


class RealNvml:
    """NvmlApi over nvidia-ml-py. Thread-safe as NVML itself is."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._fallbacks: dict[str, str] = {}  # newer call -> deprecated one this driver needs

    def init(self) -> None:
        try:
            import pynvml  # nvidia-ml-py; never the deprecated `pynvml` wrapper package
        except ImportError:
            raise InitError("no_nvml", "nvidia-ml-py (module pynvml) is not installed") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            code = error_code(exc)
            reason = INIT_REASONS.get(code, "init_failed") if code is not None else "init_failed"
            raise InitError(reason, f"nvmlInit failed: {exc}") from None
        self._nvml = pynvml

    def shutdown(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None

    def driver_version(self) -> str:
        return _text(self._nvml.nvmlSystemGetDriverVersion())

    def cuda_driver_version(self) -> int:
        return int(self._nvml.nvmlSystemGetCudaDriverVersion())

    def device_count(self) -> int:
        return int(self._nvml.nvmlDeviceGetCount())

    def handle_by_index(self, index: int) -> Any:
        return self._nvml.nvmlDeviceGetHandleByIndex(index)

    def name(self, h: Any) -> str:
        return _text(self._nvml.nvmlDeviceGetName(h))

    def uuid(self, h: Any) -> str:
        return _text(self._nvml.nvmlDeviceGetUUID(h))

    def pci_bus_id(self, h: Any) -> str:
        return _text(self._nvml.nvmlDeviceGetPciInfo(h).busId)

    def compute_processes(self, h: Any) -> list[int]:
        return [int(p.pid) for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(h)]

    def fabric_info(self, h: Any) -> tuple[int, int, int]:
        info = self._nvml.c_nvmlGpuFabricInfo_t()
        self._nvml.nvmlDeviceGetGpuFabricInfo(h, self._nvml.byref(info))
        return int(info.state), int(info.status), int(info.cliqueId)

    def mig_mode(self, h: Any) -> int:
        return int(self._nvml.nvmlDeviceGetMigMode(h)[0])

    def max_mig_device_count(self, h: Any) -> int:
        return int(self._nvml.nvmlDeviceGetMaxMigDeviceCount(h))

    def mig_device_handle(self, h: Any, index: int) -> Any:
        return self._nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, index)

    def gpu_instance_id(self, h: Any) -> int:
        return int(self._nvml.nvmlDeviceGetGpuInstanceId(h))

    def supported_clocks_event_reasons(self, h: Any) -> int:
        return self._newer_or_older("nvmlDeviceGetSupportedClocksEventReasons",
                                    "nvmlDeviceGetSupportedClocksThrottleReasons", h)

    def utilization(self, h: Any) -> tuple[int, int]:
        rates = self._nvml.nvmlDeviceGetUtilizationRates(h)
        return int(rates.gpu), int(rates.memory)

    def memory_info(self, h: Any) -> MemoryInfo:
        nvml = self._nvml
        try:
            mem = nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2)
            return MemoryInfo(int(mem.total), int(mem.used), int(mem.reserved))
        except nvml.NVMLError as exc:  # drivers before r510 only have v1 (no reserved)
            if classify(exc) != ABSENT:
                raise
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        return MemoryInfo(int(mem.total), int(mem.used), None)

    def power_usage(self, h: Any) -> int:
        return int(self._nvml.nvmlDeviceGetPowerUsage(h))

    def enforced_power_limit(self, h: Any) -> int:
        return int(self._nvml.nvmlDeviceGetEnforcedPowerLimit(h))

    def temperature(self, h: Any, sensor: int) -> int:
        return self._newer_or_older("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature", h, sensor)

    def clock(self, h: Any, clock_type: int) -> int:
        return int(self._nvml.nvmlDeviceGetClockInfo(h, clock_type))

    def clocks_event_reasons(self, h: Any) -> int:
        return self._newer_or_older("nvmlDeviceGetCurrentClocksEventReasons",
                                    "nvmlDeviceGetCurrentClocksThrottleReasons", h)

    def _newer_or_older(self, newer: str, older: str, *args: Any) -> int:
        """The current call; on a driver that lacks it (FunctionNotFound, before r535) its
        deprecated predecessor, remembered so the failing lookup is not repeated."""
        name = self._fallbacks.get(newer, newer)
        try:
            return int(getattr(self._nvml, name)(*args))
        except self._nvml.NVMLError as exc:
            if name != newer or error_code(exc) != FUNCTION_NOT_FOUND:
                raise
        self._fallbacks[newer] = older
        return int(getattr(self._nvml, older)(*args))

    def performance_state(self, h: Any) -> int:
        return int(self._nvml.nvmlDeviceGetPerformanceState(h))

    def pcie_throughput(self, h: Any, counter: int) -> int:
        return int(self._nvml.nvmlDeviceGetPcieThroughput(h, counter))

    def nvlink_state(self, h: Any, link: int) -> int:
        return int(self._nvml.nvmlDeviceGetNvLinkState(h, link))

    def field_values(self, h: Any, fields: list[tuple[int, int]]) -> list[FieldValue]:
        raw = self._nvml.nvmlDeviceGetFieldValues(h, fields)
        return [FieldValue(int(v.fieldId), int(v.scopeId), int(v.nvmlReturn), _field_number(v)) for v in raw]

    def event_set_create(self) -> Any:
        return self._nvml.nvmlEventSetCreate()

    def register_xid_events(self, h: Any, event_set: Any) -> None:
        self._nvml.nvmlDeviceRegisterEvents(h, self._nvml.nvmlEventTypeXidCriticalError, event_set)

    def event_set_wait(self, event_set: Any, timeout_ms: int) -> XidEvent | None:
        nvml = self._nvml
        try:
            data = nvml.nvmlEventSetWait(event_set, timeout_ms)
        except nvml.NVMLError as exc:
            if error_code(exc) == TIMEOUT:
                return None
            raise
        if data.eventType != nvml.nvmlEventTypeXidCriticalError:
            return None
        return XidEvent(data.device, int(data.eventData), int(data.gpuInstanceId),
                        int(data.computeInstanceId))

    def event_set_free(self, event_set: Any) -> None:
        self._nvml.nvmlEventSetFree(event_set)


def _text(value: Any) -> str:
    """A string from nvidia-ml-py: str in current releases, bytes in some older ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


# c_nvmlValue_t union member per NVML_VALUE_TYPE_*.
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def _field_number(v: Any) -> float:
    if v.nvmlReturn != SUCCESS:
        return 0.0
    member = _VALUE_MEMBERS[v.valueType] if 0 <= v.valueType < len(_VALUE_MEMBERS) else "ullVal"
    return float(getattr(v.value, member))
