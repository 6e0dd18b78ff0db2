"""The GPU metric families, shared by the `nvml` and `dcgm` sources, and who owns which.

Both sources write the same families with the same label tuples, so a series looks the same
whichever source produced it. When both run on one node each family is produced by exactly
one of them (see `Ownership`): that is what keeps /metrics free of duplicate series.

Label tuples: every per-GPU family is `(gpu, uuid, <its own labels>..., *OPTIONAL)`, where
OPTIONAL are the MIG instance labels and the Kubernetes attribution labels that dcgm-exporter
adds. An empty string means "label absent" and is dropped on exposition. A MIG instance keeps
the `gpu` index and `uuid` of its physical GPU (as dcgm-exporter does) and is told apart by
`gpu_instance` (the GPU instance id) and `mig_profile` (e.g. `1g.10gb`).
"""

from __future__ import annotations

import fnmatch
import weakref
from collections.abc import Callable

from ... import catalog
from ...store import Snapshot, Store

MIG_LABELS = ("gpu_instance", "mig_profile")
POD_LABELS = ("pod", "namespace", "container")
OPTIONAL = MIG_LABELS + POD_LABELS
NO_OPTIONAL = ("",) * len(OPTIONAL)

BOTH = "nvml, dcgm"


def _gpu(name: str, type_: str, help_: str, extra: tuple[str, ...] = (), unit: str = "",
         source: str = BOTH) -> catalog.Family:
    return catalog.declare(name, type_, help_, ("gpu", "uuid") + extra, unit=unit, source=source,
                           optional_labels=OPTIONAL)


INFO = catalog.declare(
    "infrapulse_gpu_info", catalog.INFO,
    "Identity of a GPU (or of a MIG instance, with gpu_instance/mig_profile/mig_uuid): model name, "
    "PCI bus id, driver and CUDA driver versions.",
    ("gpu", "uuid", "name", "pci_bus_id", "driver_version", "cuda_version"),
    source=BOTH, optional_labels=MIG_LABELS + ("mig_uuid",))
HEALTHY = _gpu("infrapulse_gpu_healthy", catalog.GAUGE,
               "1 if NVML can talk to the GPU, 0 if it is lost, needs a reset or cannot be opened (reason in "
               "infrapulse_gpu_health_status_info).", source="nvml")
HEALTH_STATUS = _gpu("infrapulse_gpu_health_status_info", catalog.INFO,
                     "Why infrapulse_gpu_healthy is what it is: ok, gpu_is_lost, reset_required, "
                     "unknown_error, inaccessible.", ("reason",), source="nvml")
UTILIZATION = _gpu("infrapulse_gpu_utilization_ratio", catalog.GAUGE,
                   "Share of the last sample period (1/6 s to 1 s) in which a kernel ran on the GPU.",
                   unit="ratio")
MEMORY_UTILIZATION = _gpu("infrapulse_gpu_memory_utilization_ratio", catalog.GAUGE,
                          "Share of the last sample period in which device memory was read or written.",
                          unit="ratio")
MEMORY_USED = _gpu("infrapulse_gpu_memory_used_bytes", catalog.GAUGE,
                   "Device memory allocated (on a MIG instance: of that instance).", unit="bytes")
MEMORY_TOTAL = _gpu("infrapulse_gpu_memory_total_bytes", catalog.GAUGE,
                    "Device memory size (on a MIG instance: of that instance).", unit="bytes")
MEMORY_RESERVED = _gpu("infrapulse_gpu_memory_reserved_bytes", catalog.GAUGE,
                       "Device memory reserved by the driver and firmware (not allocatable).", unit="bytes")
POWER = _gpu("infrapulse_gpu_power_watts", catalog.GAUGE,
             "Power draw of the board (1 s average on Ampere and newer, except GA100).", unit="watts")
POWER_LIMIT = _gpu("infrapulse_gpu_power_limit_watts", catalog.GAUGE,
                   "Power limit the driver enforces right now (power capping throttles above it).",
                   unit="watts")
ENERGY = _gpu("infrapulse_gpu_energy_joules_total", catalog.COUNTER,
              "Energy the GPU consumed since the driver was loaded.", unit="joules")
TEMPERATURE = _gpu("infrapulse_gpu_temperature_celsius", catalog.GAUGE,
                   "Temperature of a GPU sensor: gpu (die) or memory (HBM).", ("sensor",), unit="celsius")
CLOCK = _gpu("infrapulse_gpu_clock_hertz", catalog.GAUGE,
             "Current clock frequency: sm or memory.", ("clock",), unit="hertz")
CLOCK_EVENT = _gpu("infrapulse_gpu_clock_event_active", catalog.GAUGE,
                   "1 while this reason holds the clocks down (clock event / throttle reason), else 0. "
                   "Reason names follow dcgm-exporter: gpu_idle, clocks_setting, power_cap, hw_slowdown, "
                   "sync_boost, sw_thermal, hw_thermal, hw_power_brake, display_clocks.", ("reason",))
PERFORMANCE_STATE = _gpu("infrapulse_gpu_performance_state", catalog.GAUGE,
                         "Performance state P0 (maximum) to P15 (minimum), as a number.")
ECC = _gpu("infrapulse_gpu_ecc_errors_total", catalog.COUNTER,
           "ECC errors by type (corrected, uncorrected) and scope (volatile: since the driver loaded; "
           "aggregate: over the board's life).", ("type", "scope"))
ROW_REMAP_PENDING = _gpu("infrapulse_gpu_row_remap_pending", catalog.GAUGE,
                         "1 if a row remapping is pending (the GPU needs a reset to apply it). Ampere and "
                         "newer.")
ROW_REMAP_FAILURE = _gpu("infrapulse_gpu_row_remap_failure", catalog.GAUGE,
                         "1 if a row remapping failed (the GPU should be replaced). Ampere and newer.")
REMAPPED_ROWS = _gpu("infrapulse_gpu_remapped_rows_total", catalog.COUNTER,
                     "Memory rows remapped, by the kind of error that caused it (correctable, "
                     "uncorrectable).", ("type",))
RETIRED_PAGES = _gpu("infrapulse_gpu_retired_pages_total", catalog.COUNTER,
                     "Memory pages retired (GPUs before Ampere), by cause: single_bit_ecc, double_bit_ecc.",
                     ("cause",))
RETIRED_PAGES_PENDING = _gpu("infrapulse_gpu_retired_pages_pending", catalog.GAUGE,
                             "1 if pages are waiting to be retired at the next reset (GPUs before Ampere).")
PCIE_REPLAYS = _gpu("infrapulse_gpu_pcie_replays_total", catalog.COUNTER,
                    "PCIe link-level retransmissions (replays): a sign of a marginal link or riser.")
PCIE_THROUGHPUT = _gpu("infrapulse_gpu_pcie_throughput_bytes_per_second", catalog.GAUGE,
                       "PCIe throughput over NVML's last 20 ms sample, by direction (tx, rx).",
                       ("direction",), unit="bytes", source="nvml")
NVLINK_UP = _gpu("infrapulse_gpu_nvlink_up", catalog.GAUGE,
                 "1 if this NVLink link is active, 0 if it is down or disabled.", ("link",), source="nvml")
NVLINK_TX = _gpu("infrapulse_gpu_nvlink_transmitted_bytes_total", catalog.COUNTER,
                 "NVLink payload bytes transmitted on this link (data, without protocol overhead).",
                 ("link",), unit="bytes", source="nvml")
NVLINK_RX = _gpu("infrapulse_gpu_nvlink_received_bytes_total", catalog.COUNTER,
                 "NVLink payload bytes received on this link (data, without protocol overhead).",
                 ("link",), unit="bytes", source="nvml")
NVLINK_ERRORS = _gpu("infrapulse_gpu_nvlink_errors_total", catalog.COUNTER,
                     "NVLink data-link errors on this link since the driver loaded, by type: replay "
                     "(a flit resent), recovery (the link retrained), crc (CRC errors). NVML field "
                     "values NVLINK_ERROR_DL_REPLAY/RECOVERY/CRC (drivers 525+).",
                     ("link", "type"), source="nvml")
FABRIC_STATE = _gpu("infrapulse_gpu_fabric_state", catalog.GAUGE,
                    "1 for the GPU's NVSwitch fabric registration state (nvmlDeviceGetGpuFabricInfo): "
                    "not_started, in_progress, completed; status is the NVML return code of the "
                    "registration (0 = success). Only on NVSwitch systems (HGX/DGX); a GPU not "
                    "completed cannot run multi-GPU work over NVLink.",
                    ("state", "status", "clique"), source="nvml")
XID = _gpu("infrapulse_gpu_xid_errors_total", catalog.COUNTER,
           "XID errors the driver reported since infrapulse started watching, by XID code.", ("xid",),
           source="nvml")
LAST_XID = _gpu("infrapulse_gpu_last_xid", catalog.GAUGE,
                "Code of the last XID error (0: none seen). From NVML: since infrapulse started watching; "
                "from DCGM: DCGM_FI_DEV_XID_ERRORS, which never resets.")
XID_WATCH = _gpu("infrapulse_gpu_xid_watch_up", catalog.GAUGE,
                 "1 if infrapulse receives XID events for this GPU (registered with NVML), else 0.",
                 source="nvml")
MIG_ENABLED = _gpu("infrapulse_gpu_mig_enabled", catalog.GAUGE,
                   "1 if MIG mode is enabled on this physical GPU.", source="nvml")
VIOLATION = _gpu("infrapulse_gpu_clock_violation_seconds_total", catalog.COUNTER,
                 "Time the clocks were held below the requested level, by policy (power, thermal, "
                 "sync_boost, board_limit, low_util, reliability). From DCGM violation counters.",
                 ("policy",), unit="seconds", source="dcgm")

# Profiling (DCGM "DCP") fields: measured by DCGM's profiling module, not by plain NVML.
PROFILING_RATIOS = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("graphics_engine_active", "graphics or compute engine active"),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", "at least one warp active on an SM, averaged over SMs"),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy", "resident warps relative to the SM maximum"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_pipe_active", "tensor (HMMA) pipe active"),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", "device memory interface busy sending or receiving"),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": ("fp64_pipe_active", "FP64 pipe active"),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("fp32_pipe_active", "FP32 pipe active"),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("fp16_pipe_active", "FP16 pipe active"),
}
PROFILING = {
    field: _gpu(f"infrapulse_gpu_profiling_{short}_ratio", catalog.GAUGE,
                f"Share of cycles with the {what} (DCGM profiling field {field}).", unit="ratio",
                source="dcgm")
    for field, (short, what) in PROFILING_RATIOS.items()
}
PROFILING_PCIE = _gpu("infrapulse_gpu_profiling_pcie_bytes_per_second", catalog.GAUGE,
                      "PCIe traffic including headers, by direction (tx, rx) (DCGM_FI_PROF_PCIE_*_BYTES).",
                      ("direction",), unit="bytes", source="dcgm")
PROFILING_NVLINK = _gpu("infrapulse_gpu_profiling_nvlink_bytes_per_second", catalog.GAUGE,
                        "NVLink traffic including headers, all links, by direction "
                        "(DCGM_FI_PROF_NVLINK_*_BYTES).", ("direction",), unit="bytes", source="dcgm")

# Clock event (throttle) reason bits -> label, as nvmlClocksEventReason* and dcgm-exporter.
CLOCK_EVENT_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "clocks_setting"),
    (0x4, "power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)
ALL_CLOCK_EVENT_BITS = sum(bit for bit, _ in CLOCK_EVENT_REASONS)


def add_clock_events(snap: Snapshot, gpu: str, uuid: str, mask: int, supported: int,
                     optional: tuple[str, ...] = NO_OPTIONAL) -> None:
    """One 0/1 series per supported reason: a reason that ends goes to 0 rather than vanishing."""
    for bit, reason in CLOCK_EVENT_REASONS:
        if supported & bit:
            snap.add(CLOCK_EVENT, (gpu, uuid, reason) + optional, 1.0 if mask & bit else 0.0)


# XID codes, their meanings and classes (critical, application, other): xid.py.


# -- ownership ------------------------------------------------------------------------------

DEFAULT_DCGM_OWNS = ("infrapulse_gpu_profiling_*",)


class Ownership:
    """Which source exports which GPU family when nvml and dcgm run on the same node.

    dcgm claims family-name patterns from its config (`owns`); nvml claims everything while it
    runs. Claims are made in the sources' constructors, before either polls, so there is no
    start-up window in which both export a family. A family claimed by dcgm is never exported
    by nvml; dcgm exports its unclaimed families only when no nvml source is running (disabled,
    or no NVML library on the host).
    """

    def __init__(self) -> None:
        self.dcgm_patterns: tuple[str, ...] | None = None
        self.nvml_running = False

    def dcgm_owns(self, family: str) -> bool:
        return self.dcgm_patterns is not None and any(fnmatch.fnmatchcase(family, p)
                                                      for p in self.dcgm_patterns)

    def nvml_exports(self, family: str) -> bool:
        return not self.dcgm_owns(family)

    def dcgm_exports(self, family: str) -> bool:
        return not self.nvml_running or self.dcgm_owns(family)

    def filter(self, snap: Snapshot, keep: Callable[[str], bool]) -> Snapshot:
        for name in [n for n in snap.series if not keep(n)]:
            del snap.series[name]
        return snap


_OWNERSHIP: weakref.WeakKeyDictionary[Store, Ownership] = weakref.WeakKeyDictionary()


def ownership(store: Store) -> Ownership:
    """The ownership record of one daemon (keyed by its store, so tests can run several)."""
    record = _OWNERSHIP.get(store)
    if record is None:
        record = _OWNERSHIP[store] = Ownership()
    return record

