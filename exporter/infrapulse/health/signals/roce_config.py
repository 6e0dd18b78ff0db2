"""RoCE configuration signals (source `roce_config`, plus the infiniband congestion counters):
a configuration change, a configuration still away from its accepted baseline, ECN
notification point off on a lossless priority, a configuration
that differs from `expected:`, and the behavioural cross-check (ECN-marked packets arriving
while no CNP is sent: the notification point is off, whatever the configuration files say)."""

from __future__ import annotations

from .base import (
    COUNT,
    FLAG,
    PORT,
    Context,
    Measurement,
    Signal,
    gauges_by,
    port_name,
    rates_by,
)

IF = ("interface",)
CHANGES = "infrapulse_nic_roce_config_changes_total"
LAST_CHANGE = "infrapulse_nic_roce_config_last_change_info"
BASELINE_DRIFT = "infrapulse_nic_roce_config_baseline_drift"
BASELINE_DRIFT_INFO = "infrapulse_nic_roce_config_baseline_drift_info"
MIN_MARKED = 10.0  # ECN-marked packets in the window before "no CNP" means something


def _last_changes(ctx: Context) -> dict[str, str]:
    out = {}
    for s in ctx.readings.series(LAST_CHANGE):
        changed = s.labels.get("firmware_changed") == "true"
        fw = "firmware changed with it" if changed else "firmware unchanged"
        out[s.labels.get("interface", "")] = f"{s.labels.get('changes', '')}; {fw}"
    return out


def measure_changed(ctx: Context) -> list[Measurement]:
    notes = _last_changes(ctx)
    return [Measurement(k[0], r.increase, notes.get(k[0], "") if r.increase > 0 else "",
                        labels={"interface": k[0]})
            for k, r in rates_by(ctx, CHANGES, IF, "event_window").items()]


def measure_np_off(ctx: Context) -> list[Measurement]:
    """1 per (interface, priority) with PFC on (lossless = the RDMA priority) and ECN NP off."""
    pfc = gauges_by(ctx, "infrapulse_nic_pfc_enabled", ("interface", "priority"))
    out = []
    for s in ctx.readings.series("infrapulse_nic_roce_ecn_enabled"):
        if s.labels.get("role") != "roce_np":
            continue
        key = (s.labels.get("interface", ""), s.labels.get("priority", ""))
        if pfc.get(key) != 1.0 or not isinstance(s.value, int | float):
            continue
        out.append(Measurement(f"{key[0]} priority {key[1]}", 0.0 if s.value else 1.0,
                               "PFC on, ECN notification point off" if not s.value else "",
                               labels={"interface": key[0], "priority": key[1]}))
    return out


def measure_baseline_drift(ctx: Context) -> list[Measurement]:
    notes = {}
    for s in ctx.readings.series(BASELINE_DRIFT_INFO):
        fw_before, fw_now = s.labels.get("baseline_firmware", ""), s.labels.get("firmware", "")
        fw = f"; firmware {fw_before} -> {fw_now}" if fw_before != fw_now else ""
        notes[s.labels.get("interface", "")] = f"{s.labels.get('changes', '')}{fw}"
    return [Measurement(k[0], v, notes.get(k[0], "") if v > 0 else "", labels={"interface": k[0]})
            for k, v in gauges_by(ctx, BASELINE_DRIFT, IF).items()]


def measure_unexpected(ctx: Context) -> list[Measurement]:
    settings: dict[str, list[str]] = {}
    for s in ctx.readings.series("infrapulse_nic_roce_config_expected_mismatch"):
        settings.setdefault(s.labels.get("interface", ""), []).append(
            f"{s.labels.get('setting', '')} {s.labels.get('actual', '')} "
            f"(expected {s.labels.get('expected', '')})")
    return [Measurement(k[0], v, ", ".join(sorted(settings.get(k[0], []))), labels={"interface": k[0]})
            for k, v in gauges_by(ctx, "infrapulse_nic_roce_config_expected_mismatches", IF).items()]


def measure_cnp_missing(ctx: Context) -> list[Measurement]:
    marked = rates_by(ctx, "infrapulse_rdma_ecn_marked_packets_total", PORT)
    sent = rates_by(ctx, "infrapulse_rdma_cnp_sent_total", PORT)
    out = []
    for k, m in marked.items():
        s = sent.get(k)
        if s is None:
            continue
        off = m.increase >= MIN_MARKED and s.increase == 0
        note = f"{m.increase:.0f} ECN-marked packets, 0 CNPs sent" if off else ""
        out.append(Measurement(port_name(k), 1.0 if off else 0.0, note, labels=dict(zip(PORT, k))))
    return out


SIGNALS: list[Signal] = [
    Signal(
        name="roce_config_changed",
        component="rdma",
        title="RoCE CC/QoS configuration changed",
        formula="increase(nic_roce_config_changes_total) over the event window, per netdev",
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=1.0,
        weight=1.0,
        phrase="{value} RoCE congestion-control/QoS configuration change(s)",
        hint=("compare the changed settings with the intended ones: a firmware upgrade resets DCQCN and ECN "
              "to defaults; re-apply the tuning (mlnx_qos, the ecn/ sysfs) or roll back"),
        measure=measure_changed,
        families=(CHANGES, LAST_CHANGE),
        sources=("roce_config",),
        counters=(CHANGES,),
    ),
    Signal(
        name="roce_config_drift",
        component="rdma",
        title="RoCE CC/QoS configuration differs from its baseline",
        formula="nic_roce_config_baseline_drift per netdev (settings differing from the accepted baseline)",
        unit=COUNT,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=1.0,
        phrase="{value} RoCE congestion-control/QoS setting(s) differ from the accepted baseline",
        hint=("re-apply the intended DCQCN/ECN/PFC/trust tuning (a firmware upgrade resets them), or accept "
              "the new configuration as the baseline: touch <state_dir>/roce_config/accept-baseline"),
        measure=measure_baseline_drift,
        families=(BASELINE_DRIFT, BASELINE_DRIFT_INFO),
        sources=("roce_config",),
    ),
    Signal(
        name="roce_ecn_np_off",
        component="rdma",
        title="ECN notification point off on a lossless priority",
        formula="1 when nic_pfc_enabled{priority} == 1 and nic_roce_ecn_enabled{role=roce_np,priority} == 0",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=2.0,
        phrase="ECN notification point is off on the RDMA priority",
        hint=("without CNPs the senders never slow down and congestion turns into PFC pauses: "
              "echo 1 > /sys/class/net/<if>/ecn/roce_np/enable/<priority>"),
        measure=measure_np_off,
        families=("infrapulse_nic_pfc_enabled", "infrapulse_nic_roce_ecn_enabled"),
        sources=("roce_config",),
    ),
    Signal(
        name="roce_config_unexpected",
        component="rdma",
        title="RoCE configuration differs from expected",
        formula="nic_roce_config_expected_mismatches per netdev (settings differing from `expected:`)",
        unit=COUNT,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=1.0,
        phrase="{value} setting(s) differ from the expected RoCE configuration",
        hint="re-apply the intended PFC/ECN/DCQCN configuration, or update sources.roce_config.expected",
        measure=measure_unexpected,
        families=("infrapulse_nic_roce_config_expected_mismatches",
                  "infrapulse_nic_roce_config_expected_mismatch"),
        sources=("roce_config",),
    ),
    Signal(
        name="ecn_marked_without_cnp",
        component="rdma",
        title="ECN-marked packets arrive but no CNP is sent",
        formula=(f"1 when increase(rdma_ecn_marked_packets) >= {MIN_MARKED:g} and "
                 "increase(rdma_cnp_sent) == 0 "
                 "over the window, per RDMA port"),
        unit=FLAG,
        window="window",
        good=0.0,
        bad=1.0,
        weight=2.0,
        phrase="ECN-marked packets arrive but no CNP is sent (notification point off)",
        hint=("the NIC's ECN notification point is disabled or broken (often after a firmware upgrade): "
              "check /sys/class/net/<if>/ecn/roce_np/enable/<priority>"),
        measure=measure_cnp_missing,
        families=("infrapulse_rdma_ecn_marked_packets_total", "infrapulse_rdma_cnp_sent_total"),
        sources=("infiniband",),
        counters=("infrapulse_rdma_ecn_marked_packets_total", "infrapulse_rdma_cnp_sent_total"),
    ),
]
