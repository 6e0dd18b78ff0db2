"""Probe signals: how far the active probes' tracked metrics are from their baselines, runs
that failed or returned wrong results, and the always-on latency mesh's loss and RTT p99.

The baseline ratio, the verdicts and the version changes come from the probe source
(sources/probe/families.py); loss and RTT p99 per peer from the mesh source
(sources/probe/mesh_families.py). On a node without the mesh (it is off by default) the mesh
signals have no data and the rest of this component works alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...changes import describe_change
from .base import FLAG, RATIO, SECONDS, Context, Measurement, Signal, gauges_by

KEY = ("scope", "test", "metric", "size")
# The families read, by name (declared by the probe and mesh sources; health reads the store).
BASELINE_RATIO = "infrapulse_probe_baseline_ratio"
CHANGE_RATIO = "infrapulse_probe_change_ratio"
LAST_RESULT = "infrapulse_probe_last_result"
NCCL_WRONG = "infrapulse_probe_nccl_wrong_elements"
MESH_SENT, MESH_LOST = "infrapulse_probe_mesh_sent_total", "infrapulse_probe_mesh_lost_total"
MESH_RTT_P99 = "infrapulse_probe_mesh_rtt_p99_seconds"
METRIC_WORDS = {"latency": "latency", "latency_p99": "p99 latency", "latency_p99_9": "p99.9 latency",
                "busbw": "bus bandwidth", "bandwidth": "bandwidth"}
LATENCY = ("latency", "latency_p99", "latency_p99_9")
BANDWIDTH = ("busbw", "bandwidth")
FAILED_RESULTS = ("failed", "timeout")


def size_text(size: str) -> str:
    """"8" -> "8 B", "1048576" -> "1 MiB"."""
    try:
        n = int(size)
    except ValueError:
        return size
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def target_name(labels: dict[str, str]) -> str:
    """"all_reduce 8 B latency"; the scope is named unless it is this node's own ("local")."""
    scope = labels.get("scope", "")
    where = f" {scope}" if scope and scope != "local" else ""
    metric = labels.get("metric", "")
    size = size_text(labels.get("size", ""))
    return f"{labels.get('test', '')}{where} {size} {METRIC_WORDS.get(metric, metric)}"


def _changes(ctx: Context) -> dict[tuple[str, ...], str]:
    """Per tracked metric: "since fw 28.39.1002 → 28.41.1000" for its last version change."""
    by_key: dict[tuple[str, ...], dict[str, tuple[str, str]]] = {}
    for s in ctx.readings.series(CHANGE_RATIO):
        key = tuple(s.labels.get(k, "") for k in KEY)
        by_key.setdefault(key, {})[s.labels.get("component", "")] = (s.labels.get("before", ""),
                                                                     s.labels.get("after", ""))
    return {k: "since " + describe_change(v) for k, v in by_key.items()}


def _regression(metrics: tuple[str, ...],
                higher_is_better: bool) -> Callable[[Context], list[Measurement] | None]:
    """No ratio at all (no baseline yet, or no such probe configured) does not apply: there is
    nothing to compare with; InfrapulseProbeLastGoodRunTooOld covers "never measured"."""
    def measure(ctx: Context) -> list[Measurement] | None:
        notes = _changes(ctx)
        out = []
        for s in ctx.readings.series(BASELINE_RATIO):
            if s.labels.get("metric") not in metrics or not isinstance(s.value, float | int):
                continue
            ratio = float(s.value)
            if math.isnan(ratio):
                continue
            worse = max(1.0 - ratio, 0.0) if higher_is_better else max(ratio - 1.0, 0.0)
            key = tuple(s.labels.get(k, "") for k in KEY)
            out.append(Measurement(target_name(s.labels), worse, notes.get(key, ""), labels=dict(s.labels)))
        return out or None
    return measure


def measure_failed(ctx: Context) -> list[Measurement]:
    out = []
    for s in ctx.readings.series(LAST_RESULT):
        result = s.labels.get("result", "")
        if result in FAILED_RESULTS and s.value == 1.0:
            out.append(Measurement(f"probe {s.labels.get('probe', '')}", 1.0, result, labels=dict(s.labels)))
        elif result == "ok" and s.value == 1.0:
            out.append(Measurement(f"probe {s.labels.get('probe', '')}", 0.0, labels=dict(s.labels)))
    return out


def measure_wrong(ctx: Context) -> list[Measurement]:
    wrong = gauges_by(ctx, NCCL_WRONG, ("scope", "collective"), combine=lambda a, b: a + b)
    return [Measurement(f"{k[1]} {k[0]}", 1.0 if v > 0 else 0.0, f"{v:,.0f} wrong elements" if v > 0 else "",
                        labels={"scope": k[0], "collective": k[1]}) for k, v in wrong.items()]


def measure_mesh_loss(ctx: Context) -> list[Measurement] | None:
    sent = ctx.readings.rates(MESH_SENT, ("peer",))
    lost = ctx.readings.rates(MESH_LOST, ("peer",))
    if not sent and not any(True for _ in ctx.readings.series(MESH_SENT)):
        return None  # no mesh on this node
    out = []
    for key, s in sent.items():
        lost_rate = lost.get(key)
        if s.increase <= 0 or lost_rate is None:
            continue
        out.append(Measurement(f"peer {key[0]}", min(lost_rate.increase / s.increase, 1.0),
                               labels={"peer": key[0]}))
    return out


def measure_mesh_rtt(ctx: Context) -> list[Measurement] | None:
    p99 = gauges_by(ctx, MESH_RTT_P99, ("peer",))
    if not p99:
        return None
    return [Measurement(f"peer {k[0]}", v, labels={"peer": k[0]}) for k, v in p99.items()]


SIGNALS: list[Signal] = [
    Signal(
        name="probe_latency_regression",
        component="probe",
        title="Probe latency above baseline",
        formula="probe_baseline_ratio - 1 for latency, latency_p99, latency_p99_9, per scope, test and size",
        unit=RATIO,
        window="instant",
        good=0.1,
        bad=0.4,
        weight=3.0,
        phrase="+{value} vs baseline",
        hint=("small-message latency rose against this node's own history: check what changed (firmware, "
              "driver, NCCL, congestion-control settings) and the Baselines dashboard's before/after table"),
        measure=_regression(LATENCY, higher_is_better=False),
        families=(BASELINE_RATIO, CHANGE_RATIO),
        sources=("probe",),
        group_by=("size",),
        group_noun="message sizes",
        member_text=lambda labels: size_text(labels.get("size", "")),
    ),
    Signal(
        name="probe_bandwidth_regression",
        component="probe",
        title="Probe bandwidth below baseline",
        formula="1 - probe_baseline_ratio for busbw and bandwidth, per scope, test and size",
        unit=RATIO,
        window="instant",
        good=0.05,
        bad=0.3,
        weight=2.0,
        phrase="-{value} vs baseline",
        hint=("bus or RDMA bandwidth fell against this node's own history: check link rates, PCIe and "
              "NVLink state, and what changed"),
        measure=_regression(BANDWIDTH, higher_is_better=True),
        families=(BASELINE_RATIO, CHANGE_RATIO),
        sources=("probe",),
        group_by=("size",),
        group_noun="message sizes",
        member_text=lambda labels: size_text(labels.get("size", "")),
    ),
    Signal(
        name="probe_failed",
        component="probe",
        title="Probe run failed",
        formula="1 when a probe's last attempt ended failed or timeout",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=1.0,
        phrase="last probe run failed",
        hint="read the probe's output in <state_dir>/probe/<probe>.last-output.txt and its source status",
        measure=measure_failed,
        families=(LAST_RESULT,),
        sources=("probe",),
    ),
    Signal(
        name="probe_wrong_results",
        component="probe",
        title="Probe returned wrong results",
        formula="1 when nccl-tests counted wrong elements (#wrong > 0) in the last run of a scope",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=3.0,
        phrase="collective returned wrong results",
        hint=("silent data corruption: drain the node, then check GPU ECC/XIDs, NVLink and the NICs before "
              "it serves again"),
        measure=measure_wrong,
        families=(NCCL_WRONG,),
        sources=("probe",),
        critical=True,
    ),
    Signal(
        name="mesh_loss",
        component="probe",
        title="Latency mesh loss",
        formula="increase(probe_mesh_lost) / increase(probe_mesh_sent) per peer",
        unit=RATIO,
        window="window",
        good=0.001,
        bad=0.05,
        weight=2.0,
        phrase="{value} of mesh probes lost",
        hint="packets to this peer are dropped on the RDMA fabric: check the path's switch ports and PFC/ECN",
        measure=measure_mesh_loss,
        families=(MESH_SENT, MESH_LOST),
        sources=("mesh",),
        counters=(MESH_SENT, MESH_LOST),
    ),
    Signal(
        name="mesh_rtt_p99",
        component="probe",
        title="Latency mesh RTT p99",
        formula="probe_mesh_rtt_p99_seconds per peer",
        unit=SECONDS,
        window="instant",
        good=200e-6,
        bad=2e-3,
        weight=2.0,
        phrase="mesh RTT p99 {value}",
        hint="queueing on the path to this peer: check the switch queues' ECN marking and PFC pauses",
        measure=measure_mesh_rtt,
        families=(MESH_RTT_P99,),
        sources=("mesh",),
    ),
]
