"""The one XID vocabulary: every XID infrapulse names, what it means, and its class.

Shared by every reader of XIDs (the NVML watcher, the kernel log, the health score), so it lives
beside the store rather than in one source. The class decides how an XID counts: the health
score's `xid_critical` / `xid_other` signals, the `InfrapulseGpuCriticalXid` alert (its regex is
generated from this table by alerts/generate_xid_rules.py) and docs/gpu.md all read it here.

Classes follow the "Resolution Bucket (Immediate Action)" column of NVIDIA's XID catalogue
for Ampere and newer GPUs (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html; read
through the machine-readable copy in leptonai/gpud
components/accelerator/nvidia/xid/catalog_generated.go, commit 4a8de33a, generated from the
catalogue on 2025-10-29):

* critical: the GPU cannot be trusted until it is reset or the node/VM restarted
  (RESET_GPU, RESTART_BM, RESTART_VM, and the double-bit-ECC and NVLink workflows).
* application: the program running on the GPU is at fault (RESTART_APP with the CHECK_APP/CUDA
  or XID 13/31 follow-up, and the channel teardowns that follow such a fault); not scored.
* other: named because people ask about them, scored as any unlisted XID: events NVIDIA says
  need no immediate reset (a successful row remap, a high corrected-error rate, an ECC error the
  hardware contained by killing one application). Their memory consequences are scored by the
  ECC and row-remapping signals, not here.
"""

from __future__ import annotations

from dataclasses import dataclass

CRITICAL = "critical"
APPLICATION = "application"
OTHER = "other"


@dataclass(frozen=True)
class Xid:
    code: int
    mnemonic: str  # the driver's name for it (nverror.h / the catalogue)
    meaning: str
    xid_class: str
    action: str  # NVIDIA's immediate action (catalogue column)


XIDS: tuple[Xid, ...] = (
    # critical: reset the GPU (or reboot) before it runs work again
    Xid(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing (timeout)", CRITICAL, "RESET_GPU"),
    Xid(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit (uncorrectable) ECC error", CRITICAL,
        "WORKFLOW_XID_48"),
    Xid(62, "PMU_HALT_ERROR", "internal micro-controller halted", CRITICAL, "RESET_GPU"),
    Xid(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "memory row remapping / page retirement failed", CRITICAL,
        "RESET_GPU"),
    Xid(74, "NVLINK_ERROR", "NVLink error", CRITICAL, "WORKFLOW_NVLINK_ERR"),
    Xid(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", CRITICAL,
        "RESTART_BM"),
    Xid(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained memory (ECC) error", CRITICAL, "RESET_GPU"),
    Xid(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", CRITICAL, "RESET_GPU"),
    Xid(110, "SEC_FAULT_ERROR", "security fault", CRITICAL, "RESET_GPU"),
    Xid(119, "GSP_RPC_TIMEOUT", "GSP firmware RPC timeout", CRITICAL, "RESET_GPU"),
    Xid(120, "GSP_ERROR", "GSP firmware error", CRITICAL, "RESET_GPU"),
    Xid(136, "ALI_TRAINING_FAIL", "NVLink link training failed", CRITICAL, "RESET_GPU"),
    Xid(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ECC error", CRITICAL, "RESET_GPU"),
    Xid(143, "GPU_INIT_ERROR", "GPU initialisation error", CRITICAL, "RESET_GPU"),
    Xid(144, "NVLINK_SAW_ERROR", "NVLink SAW error", CRITICAL, "WORKFLOW_NVLINK5_ERR"),
    Xid(145, "NVLINK_RLW_ERROR", "NVLink RLW error", CRITICAL, "WORKFLOW_NVLINK5_ERR"),
    Xid(146, "NVLINK_TLW_ERROR", "NVLink TLW error", CRITICAL, "WORKFLOW_NVLINK5_ERR"),
    Xid(147, "NVLINK_TREX_ERROR", "NVLink TREX error", CRITICAL, "WORKFLOW_NVLINK5_ERR"),
    Xid(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW_CTRL error", CRITICAL, "WORKFLOW_NVLINK5_ERR"),
    Xid(149, "NVLINK_NETIR_ERROR", "NVLink NETIR error", CRITICAL, "WORKFLOW_NVLINK5_ERR"),
    Xid(150, "NVLINK_MSE_ERROR", "NVLink MSE error", CRITICAL, "WORKFLOW_NVLINK5_ERR"),
    Xid(151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "key rotation error (confidential computing)", CRITICAL,
        "RESTART_VM"),
    Xid(155, "NVLINK_SW_DEFINED_ERROR", "NVLink software-defined error", CRITICAL, "RESET_GPU"),
    Xid(156, "RESOURCE_RETIREMENT_EVENT", "resource retirement event", CRITICAL, "RESET_GPU"),
    Xid(158, "GPU_FATAL_TIMEOUT", "GPU fatal timeout", CRITICAL, "RESET_GPU"),
    # application: the program's fault, not the GPU's
    Xid(11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "invalid or corrupted push buffer stream", APPLICATION,
        "RESTART_APP"),
    Xid(13, "ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception (e.g. out-of-range access)",
        APPLICATION, "RESTART_APP"),
    Xid(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", APPLICATION, "RESTART_APP"),
    Xid(32, "ROBUST_CHANNEL_PBDMA_ERROR", "invalid or corrupted push buffer stream", APPLICATION,
        "RESTART_APP"),
    Xid(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing the faulting channel",
        APPLICATION, "IGNORE"),
    Xid(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup after an earlier error", APPLICATION,
        "WORKFLOW_XID_45"),
    Xid(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error", APPLICATION, "RESTART_APP"),
    Xid(80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "corrupted data sent to the GPU", APPLICATION, "RESTART_APP"),
    # other: no immediate reset; scored with every unlisted XID
    Xid(63, "INFOROM_DRAM_RETIREMENT_EVENT", "memory row remapped / page retired", OTHER, "IGNORE"),
    Xid(92, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit (corrected) ECC error rate", OTHER, "IGNORE"),
    Xid(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "contained memory (ECC) error: one application killed", OTHER,
        "RESTART_APP"),
    Xid(154, "GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed (refers to another XID)", OTHER,
        "XID_154"),
)

BY_CODE: dict[int, Xid] = {x.code: x for x in XIDS}
CRITICAL_XIDS: frozenset[int] = frozenset(x.code for x in XIDS if x.xid_class == CRITICAL)
APPLICATION_XIDS: frozenset[int] = frozenset(x.code for x in XIDS if x.xid_class == APPLICATION)


def xid_class(code: int) -> str:
    """critical, application or other (every XID not in the table is other)."""
    known = BY_CODE.get(code)
    return known.xid_class if known is not None else OTHER


def critical_regex() -> str:
    """The critical XIDs as a PromQL label regex (`xid=~"..."`), in numeric order."""
    return "|".join(str(code) for code in sorted(CRITICAL_XIDS))
