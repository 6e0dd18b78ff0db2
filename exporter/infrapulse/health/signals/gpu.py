"""GPU signals (nvml, dcgm): XIDs by class, uncorrectable ECC, row remapping, throttling, lost
GPUs, NVLink link errors and NVSwitch fabric registration, and GPUs idle while the node's
serving engines queue requests."""

from __future__ import annotations

import math
from collections.abc import Callable

from ...store import Histogram
from ...xid import APPLICATION_XIDS, CRITICAL_XIDS
from .base import (
    COUNT,
    FLAG,
    GPU,
    RATIO,
    Context,
    Measurement,
    Signal,
    gauges_by,
    gpu_name,
)

# Counter families whose series only exist once an event happened: absence means zero.
SPARSE_COUNTERS = frozenset({"infrapulse_gpu_xid_errors_total"})

# Clock-event reasons that mean the hardware is slowing itself down (dcgm-exporter spelling;
# NVML names are accepted too after normalisation).
THROTTLE_REASONS = frozenset({"hwslowdown", "hwthermal", "hwthermalslowdown", "hwpowerbrake",
                              "hwpowerbrakeslowdown", "swthermal", "swthermalslowdown"})


def _number(value: float | Histogram) -> float:
    """A gauge or counter value (GPU families are never histograms)."""
    return float(value) if not isinstance(value, Histogram) else math.nan


def known_gpus(ctx: Context) -> set[str]:
    gpus: set[str] = set()
    for family in ("infrapulse_gpu_info", "infrapulse_gpu_healthy", "infrapulse_gpu_utilization_ratio"):
        gpus.update(s.labels.get("gpu", "") for s in ctx.readings.series(family))
    gpus.discard("")
    return gpus


def _xid(labels: dict[str, str]) -> int | None:
    try:
        return int(labels.get("xid", ""))
    except ValueError:
        return None


def _measure_xids(ctx: Context, wanted: Callable[[int], bool]) -> list[Measurement]:
    counts: dict[str, float] = {gpu: 0.0 for gpu in known_gpus(ctx)}
    seen: dict[str, set[int]] = {}
    for series in ctx.readings.series("infrapulse_gpu_xid_errors_total"):
        xid = _xid(series.labels)
        if xid is None or not wanted(xid):
            continue
        rate = ctx.readings.increase(series, "event_window")
        gpu = series.labels.get("gpu", "")
        counts.setdefault(gpu, 0.0)
        if rate is not None and rate.increase > 0:
            counts[gpu] += rate.increase
            seen.setdefault(gpu, set()).add(xid)
    return [Measurement(gpu_name((gpu,)), n,
                        ("XID " + ", ".join(map(str, sorted(seen[gpu])))) if gpu in seen else "",
                        labels={"gpu": gpu}) for gpu, n in counts.items()]


def measure_xid_critical(ctx: Context) -> list[Measurement]:
    return _measure_xids(ctx, lambda x: x in CRITICAL_XIDS)


def measure_xid_other(ctx: Context) -> list[Measurement]:
    return _measure_xids(ctx, lambda x: x not in CRITICAL_XIDS and x not in APPLICATION_XIDS)


def measure_ecc(ctx: Context) -> list[Measurement]:
    """Uncorrectable ECC errors: the volatile count (since the last GPU reset) where reported,
    else the increase of the aggregate count over the event window."""
    volatile: dict[str, float] = {}
    aggregate: dict[str, float] = {}
    for series in ctx.readings.series("infrapulse_gpu_ecc_errors_total"):
        if "uncorr" not in series.labels.get("type", "").lower():
            continue
        gpu = series.labels.get("gpu", "")
        if series.labels.get("scope", "") == "volatile":
            volatile[gpu] = volatile.get(gpu, 0.0) + _number(series.value)
        else:
            rate = ctx.readings.increase(series, "event_window")
            if rate is not None:
                aggregate[gpu] = aggregate.get(gpu, 0.0) + rate.increase
    out = []
    for gpu in sorted(set(volatile) | set(aggregate)):
        if gpu in volatile:
            out.append(Measurement(gpu_name((gpu,)), volatile[gpu], "since the last GPU reset",
                                   labels={"gpu": gpu}))
        else:
            out.append(Measurement(gpu_name((gpu,)), aggregate[gpu], labels={"gpu": gpu}))
    return out


def _flag_gauge(family: str, note: str) -> Callable[[Context], list[Measurement]]:
    def measure(ctx: Context) -> list[Measurement]:
        return [Measurement(gpu_name(k), 1.0 if v > 0 else 0.0, note if v > 0 else "", labels={"gpu": k[0]})
                for k, v in gauges_by(ctx, family, GPU).items()]
    return measure


def measure_throttle(ctx: Context) -> list[Measurement]:
    active: dict[str, list[str]] = {gpu: [] for gpu in known_gpus(ctx)}
    for series in ctx.readings.series("infrapulse_gpu_clock_event_active"):
        gpu = series.labels.get("gpu", "")
        reason = series.labels.get("reason", "")
        active.setdefault(gpu, [])
        normalised = "".join(ch for ch in reason.lower() if ch.isalnum())
        if normalised in THROTTLE_REASONS and _number(series.value) > 0:
            active[gpu].append(reason)
    return [Measurement(gpu_name((gpu,)), 1.0 if reasons else 0.0, ", ".join(sorted(reasons)),
                        labels={"gpu": gpu})
            for gpu, reasons in active.items()]


def measure_gpu_lost(ctx: Context) -> list[Measurement]:
    # The nvml source says why in infrapulse_gpu_health_status_info{reason}.
    reasons = {s.labels.get("gpu", ""): s.labels.get("reason", "")
               for s in ctx.readings.series("infrapulse_gpu_health_status_info")
               if s.labels.get("reason", "ok") != "ok"}
    return [Measurement(gpu_name(k), 0.0 if v >= 1 else 1.0, "" if v >= 1 else reasons.get(k[0], ""),
                        labels={"gpu": k[0]})
            for k, v in gauges_by(ctx, "infrapulse_gpu_healthy", GPU, min).items()]


def measure_nvlink_errors(ctx: Context) -> list[Measurement]:
    """Recoveries (the link retrained) plus CRC errors per GPU link over the event window;
    replays alone are the protocol doing its job and are not counted."""
    per_link: dict[tuple[str, str], float] = {}
    for series in ctx.readings.series("infrapulse_gpu_nvlink_errors_total"):
        if series.labels.get("type") not in ("recovery", "crc"):
            continue
        key = (series.labels.get("gpu", ""), series.labels.get("link", ""))
        rate = ctx.readings.increase(series, "event_window")
        per_link[key] = per_link.get(key, 0.0) + (rate.increase if rate is not None else 0.0)
    return [Measurement(f"{gpu_name((gpu,))} NVLink {link}", n, labels={"gpu": gpu, "link": link})
            for (gpu, link), n in sorted(per_link.items())]


def measure_fabric(ctx: Context) -> list[Measurement]:
    """1 where a GPU's NVSwitch fabric registration is not completed (or failed). A known GPU
    without a fabric series has no NVSwitch fabric to register with: 0, not unknown."""
    out = []
    fabric_gpus = set()
    for series in ctx.readings.series("infrapulse_gpu_fabric_state"):
        fabric_gpus.add(series.labels.get("gpu", ""))
        if _number(series.value) <= 0:
            continue
        state, status = series.labels.get("state", ""), series.labels.get("status", "0")
        bad = state != "completed" or status != "0"
        note = f"fabric {state}" + (f", status {status}" if status != "0" else "") if bad else ""
        gpu = series.labels.get("gpu", "")
        out.append(Measurement(gpu_name((gpu,)), 1.0 if bad else 0.0, note, labels={"gpu": gpu}))
    out += [Measurement(gpu_name((gpu,)), 0.0, "no NVSwitch fabric", labels={"gpu": gpu})
            for gpu in sorted(known_gpus(ctx) - fabric_gpus)]
    return out


def measure_idle_while_queued(ctx: Context) -> list[Measurement]:
    """Idle share of each GPU while this node's serving engines have requests waiting."""
    waiting = gauges_by(ctx, "infrapulse_llm_requests_waiting", (), lambda a, b: a + b).get(())
    if waiting is None:
        return []
    out = []
    for (gpu,), util in gauges_by(ctx, "infrapulse_gpu_utilization_ratio", GPU).items():
        idle = max(0.0, 1.0 - util) if waiting >= 1 else 0.0
        out.append(Measurement(gpu_name((gpu,)), idle, f"{waiting:g} requests waiting", labels={"gpu": gpu}))
    return out



SIGNALS: list[Signal] = [
    Signal(
        name="xid_critical",
        component="gpu",
        title="Critical XID errors",
        formula=("increase(gpu_xid_errors{xid in the critical class}) per GPU over the event window "
                 "(classes: xid.py, listed below the table)"),
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=1.0,
        weight=4.0,
        phrase="{value} critical XID error(s)",
        hint="drain the node and reset the GPU; look the XID up in NVIDIA's Xid catalog for the follow-up",
        measure=measure_xid_critical,
        families=("infrapulse_gpu_xid_errors_total", "infrapulse_gpu_info"),
        sources=("nvml", "dcgm"),
        counters=("infrapulse_gpu_xid_errors_total",),
        critical=True,
    ),
    Signal(
        name="xid_other",
        component="gpu",
        title="Other XID errors",
        formula=("increase(gpu_xid_errors) per GPU over the event window, for XIDs neither critical nor "
                 "application errors"),
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=5.0,
        weight=1.0,
        phrase="{value} XID error(s)",
        hint="look the XID up in NVIDIA's Xid catalog; repeated driver/firmware XIDs call for a GPU reset",
        measure=measure_xid_other,
        families=("infrapulse_gpu_xid_errors_total", "infrapulse_gpu_info"),
        sources=("nvml", "dcgm"),
        counters=("infrapulse_gpu_xid_errors_total",),
    ),
    Signal(
        name="ecc_uncorrectable",
        component="gpu",
        title="Uncorrectable ECC errors",
        formula=("gpu_ecc_errors{type=uncorrected,scope=volatile} (since the last GPU reset), else "
                 "increase of the aggregate count over the event window"),
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=1.0,
        weight=3.0,
        phrase="{value} uncorrectable ECC error(s)",
        hint="drain the node and reset the GPU so the faulty rows are remapped; replace it if it repeats",
        measure=measure_ecc,
        families=("infrapulse_gpu_ecc_errors_total",),
        sources=("nvml", "dcgm"),
        counters=("infrapulse_gpu_ecc_errors_total",),
        critical=True,
    ),
    Signal(
        name="row_remap_pending",
        component="gpu",
        title="Row remapping pending",
        formula="1 when gpu_row_remap_pending > 0",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=2.0,
        phrase="row remapping pending",
        hint="reset the GPU (after draining it) to apply the pending row remap",
        measure=_flag_gauge("infrapulse_gpu_row_remap_pending", "reset the GPU to apply it"),
        families=("infrapulse_gpu_row_remap_pending",),
        sources=("nvml", "dcgm"),
    ),
    Signal(
        name="row_remap_failure",
        component="gpu",
        title="Row remapping failure",
        formula="1 when gpu_row_remap_failure > 0",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=3.0,
        phrase="row remapping failed",
        hint="the GPU has run out of spare rows: drain the node and RMA the GPU",
        measure=_flag_gauge("infrapulse_gpu_row_remap_failure", "no spare rows left"),
        families=("infrapulse_gpu_row_remap_failure",),
        sources=("nvml", "dcgm"),
        critical=True,
    ),
    Signal(
        name="throttle_active",
        component="gpu",
        title="Hardware / thermal / power-brake throttling",
        formula="1 when any of hw_slowdown, hw_thermal, sw_thermal, hw_power_brake clock events is active",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=2.0,
        phrase="clocks throttled",
        hint="check cooling (inlet temperature, fans), power supply and the board's power-brake signal",
        measure=measure_throttle,
        families=("infrapulse_gpu_clock_event_active", "infrapulse_gpu_info"),
        sources=("nvml", "dcgm"),
    ),
    Signal(
        name="nvlink_errors",
        component="gpu",
        title="NVLink recoveries and CRC errors",
        formula="increase of gpu_nvlink_errors{type=recovery|crc} per GPU link over the event window",
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=10.0,
        weight=2.0,
        phrase="{value} NVLink recovery/CRC error(s)",
        hint=("a marginal NVLink: collectives over it slow down or fail; reseat or RMA the GPU/baseboard if "
              "it keeps retraining"),
        measure=measure_nvlink_errors,
        families=("infrapulse_gpu_nvlink_errors_total",),
        sources=("nvml",),
        counters=("infrapulse_gpu_nvlink_errors_total",),
    ),
    Signal(
        name="fabric_incomplete",
        component="gpu",
        title="NVSwitch fabric registration not completed",
        formula=("1 when gpu_fabric_state has state != completed or a non-zero status (0 for a GPU without "
                 "an NVSwitch fabric)"),
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=3.0,
        phrase="not registered with the NVSwitch fabric",
        hint=("the GPU cannot run multi-GPU work over NVLink: check nvidia-fabricmanager and the NVSwitch "
              "SXids in the kernel log, then reset the GPUs or reboot"),
        measure=measure_fabric,
        families=("infrapulse_gpu_fabric_state", "infrapulse_gpu_info"),
        sources=("nvml",),
        critical=True,
    ),
    Signal(
        name="gpu_lost",
        component="gpu",
        title="GPU lost",
        formula="1 when gpu_healthy == 0 (GPU fallen off the bus or needing a reset)",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=4.0,
        phrase="GPU is lost or needs a reset",
        hint="drain the node; reset the GPU or reboot, and check the PCIe slot and power if it repeats",
        measure=measure_gpu_lost,
        families=("infrapulse_gpu_healthy",),
        sources=("nvml", "dcgm"),
        critical=True,
    ),
    Signal(
        name="gpu_idle_while_queued",
        component="gpu",
        title="GPU idle while requests wait",
        formula=("1 - gpu_utilization_ratio per GPU while the node's serving engines have waiting "
                 "requests (sum of llm_requests_waiting >= 1), else 0"),
        unit=RATIO,
        window="instant",
        good=0.5,
        bad=0.9,
        weight=1.0,
        phrase="{value} idle",
        hint=("requests are queued but the GPU is idle: the engine may be stuck, CPU-bound or waiting on "
              "the network (KV transfer); check its logs and the topology signals"),
        measure=measure_idle_while_queued,
        families=("infrapulse_gpu_utilization_ratio", "infrapulse_llm_requests_waiting"),
        sources=("nvml|dcgm", "serving"),
        requires_all_sources=True,
    ),
]
