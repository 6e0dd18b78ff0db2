"""Every health signal: what it reads, its formula, window, thresholds, weight and wording.

A signal measures one value per target (a switch queue, a NIC priority, an RDMA port, a GPU,
a serving endpoint). `scoring.py` turns each value into a 0-100 sub-score between the
signal's good and bad thresholds; the signal's score is that of its worst target.

A target with no data is simply absent (unknown), never reported as healthy. Signals that
read event counters whose series only appear once an event happened (XID counts) treat a
series that appears mid-life as having started from zero, so a first XID is not missed.

docs/health.md documents these definitions; tests/test_health_docs.py keeps them in sync.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ...rates import Rate
from ..quantiles import EndpointLatency
from ..readings import Readings

# -- families read (names and label order fixed by the source issues 2-5) ----------------------

EXPECTED_LABELS: dict[str, tuple[str, ...]] = {
    # switch (gNMI)
    "infrapulse_switch_up": ("switch",),
    "infrapulse_switch_queue_ecn_marked_packets_total": ("switch", "interface", "queue"),
    "infrapulse_switch_queue_transmitted_packets_total": ("switch", "interface", "queue"),
    "infrapulse_switch_queue_dropped_packets_total": ("switch", "interface", "queue"),
    "infrapulse_switch_pfc_pause_frames_total": ("switch", "interface", "priority", "direction"),
    "infrapulse_switch_pfc_pause_duration_seconds_total": ("switch", "interface", "priority", "direction"),
    "infrapulse_switch_interface_fcs_errors_total": ("switch", "interface"),
    "infrapulse_switch_interface_carrier_transitions_total": ("switch", "interface"),
    "infrapulse_switch_lldp_neighbor_info": ("switch", "interface", "neighbor_system", "neighbor_port"),
    # NIC (ethtool)
    "infrapulse_nic_pfc_pause_frames_total": ("interface", "priority", "direction"),
    "infrapulse_nic_pfc_pause_duration_seconds_total": ("interface", "priority", "direction"),
    "infrapulse_nic_ecn_marked_packets_total": ("interface", "priority"),
    "infrapulse_nic_phy_errors_total": ("interface", "kind"),
    "infrapulse_nic_pause_storm_events_total": ("interface", "level"),
    # RDMA (infiniband)
    "infrapulse_rdma_port_info": ("device", "port", "link_layer", "netdev"),
    "infrapulse_rdma_port_state": ("device", "port"),
    "infrapulse_rdma_port_received_packets_total": ("device", "port"),
    "infrapulse_rdma_port_transmitted_packets_total": ("device", "port"),
    "infrapulse_rdma_port_link_downed_total": ("device", "port"),
    "infrapulse_rdma_port_symbol_errors_total": ("device", "port"),
    "infrapulse_rdma_port_receive_errors_total": ("device", "port"),
    "infrapulse_rdma_port_transmit_discards_total": ("device", "port"),
    "infrapulse_rdma_ecn_marked_packets_total": ("device", "port"),
    "infrapulse_rdma_cnp_sent_total": ("device", "port"),
    "infrapulse_rdma_cnp_handled_total": ("device", "port"),
    "infrapulse_rdma_out_of_buffer_total": ("device", "port"),
    "infrapulse_rdma_retransmission_events_total": ("device", "port", "reason"),
    # GPU (nvml, dcgm)
    "infrapulse_gpu_info": ("gpu", "uuid", "name", "pci_bus_id", "driver_version", "cuda_version"),
    "infrapulse_gpu_healthy": ("gpu", "uuid"),
    "infrapulse_gpu_health_status_info": ("gpu", "uuid", "reason"),
    "infrapulse_gpu_utilization_ratio": ("gpu", "uuid"),
    "infrapulse_gpu_clock_event_active": ("gpu", "uuid", "reason"),
    "infrapulse_gpu_ecc_errors_total": ("gpu", "uuid", "type", "scope"),
    "infrapulse_gpu_xid_errors_total": ("gpu", "uuid", "xid"),
    "infrapulse_gpu_row_remap_pending": ("gpu", "uuid"),
    "infrapulse_gpu_row_remap_failure": ("gpu", "uuid"),
    # serving
    "infrapulse_llm_endpoint_up": ("endpoint", "engine"),
    "infrapulse_llm_requests_running": ("endpoint", "engine", "model"),
    "infrapulse_llm_requests_waiting": ("endpoint", "engine", "model"),
    "infrapulse_llm_kv_cache_usage_ratio": ("endpoint", "engine", "model"),
    "infrapulse_llm_requests_total": ("endpoint", "engine", "model", "outcome"),
    "infrapulse_llm_preemptions_total": ("endpoint", "engine", "model"),
    "infrapulse_llm_time_to_first_token_seconds": ("endpoint", "engine", "model"),
    "infrapulse_llm_inter_token_latency_seconds": ("endpoint", "engine", "model"),
}

# Counter families whose series only exist once an event happened: absence means zero.
SPARSE_COUNTERS = frozenset({"infrapulse_gpu_xid_errors_total"})

# XID classes. Critical: the GPU needs draining and a reset or node reboot (ECC double-bit /
# contained / uncontained errors, row remapping, NVLink error, fallen off the bus). Sources:
# NVIDIA "Xid Errors" documentation and its Xid catalog (docs.nvidia.com/deploy/xid-errors/,
# "Resolution Bucket (Immediate Action)" column), NVIDIA health-validation Xid checks, and
# Meta GCM's xid health check (critical vs non-critical classes). Application XIDs are errors
# of the program running on the GPU (bad kernel, user page fault, channel torn down), not of
# the GPU, so they do not count against the hardware.
CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95})
APPLICATION_XIDS = frozenset({13, 31, 43, 45})

# Clock-event reasons that mean the hardware is slowing itself down (dcgm-exporter spelling;
# NVML names are accepted too after normalisation).
THROTTLE_REASONS = frozenset({"hwslowdown", "hwthermal", "hwthermalslowdown", "hwpowerbrake",
                              "hwpowerbrakeslowdown", "swthermal", "swthermalslowdown"})
ERROR_OUTCOMES = frozenset({"error", "errors", "failed", "failure", "timeout"})
# Status entries of the gnmi source that are about its config, not a switch.
GNMI_NON_SWITCH_TARGETS = frozenset({"shard", "targets_file"})
IB_PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}


@dataclass(frozen=True)
class Measurement:
    """One target's value for one signal."""

    target: str  # human name: "leaf03 Ethernet12 queue 3", "mlx5_0 port 1", "GPU 3", "endpoint llama"
    value: float
    note: str = ""  # extra context for the sentence: "XID 79", "state DOWN", "SLO 1.5 s"
    labels: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass
class Context:
    readings: Readings
    hostname: str = ""
    latency: dict[str, EndpointLatency] = field(default_factory=dict)
    critical_xids: frozenset[int] = CRITICAL_XIDS
    application_xids: frozenset[int] = APPLICATION_XIDS
    window: float = 60.0
    slo: dict[str, float] = field(default_factory=lambda: {"ttft": 1.5, "itl": 0.05})
    # Measurements of signals already measured in this pass (topology reuses the network ones).
    results: dict[str, list[Measurement]] = field(default_factory=dict)


# Units decide how values and thresholds are written in sentences.
RATIO, PER_SECOND, COUNT, FLAG, SECONDS, FACTOR = "ratio", "per_second", "count", "flag", "seconds", "factor"


@dataclass(frozen=True)
class Signal:
    name: str
    component: str
    title: str
    formula: str  # for docs/health.md and the API
    unit: str
    window: str  # "window", "event_window" or "instant"
    good: float
    bad: float
    weight: float
    phrase: str  # "{value} of packets ECN-marked": what the sentence says about a target
    hint: str  # what a person can do about it
    measure: Callable[[Context], list[Measurement] | None]  # None: does not apply here
    families: tuple[str, ...]
    sources: tuple[str, ...]  # sources that provide it: the signal applies when one of them runs
    counters: tuple[str, ...] = ()  # families read as windowed increases
    critical: bool = False
    thresholds_from: str = ""  # reuse another signal's configured thresholds by default
    requires_all_sources: bool = False

    def applicable(self, present: set[str]) -> bool:
        if self.requires_all_sources:
            return all(any(s in present for s in group.split("|")) for group in self.sources)
        return any(s in present for s in self.sources)


# -- small helpers -----------------------------------------------------------------------------

def _sum(a: Rate | None, b: Rate) -> Rate:
    if a is None:
        return b
    return Rate(a.per_second + b.per_second, a.increase + b.increase, max(a.seconds, b.seconds),
                a.saturated or b.saturated, a.resets + b.resets)


def rates_by(ctx: Context, family: str, keys: tuple[str, ...], kind: str = "window",
             where: Callable[[dict[str, str]], bool] | None = None) -> dict[tuple[str, ...], Rate]:
    """Windowed increases of a counter family, summed per `keys` (e.g. over `reason`)."""
    if where is None:
        return ctx.readings.rates(family, keys, kind)
    out: dict[tuple[str, ...], Rate] = {}
    for series in ctx.readings.series(family):
        if where is not None and not where(series.labels):
            continue
        rate = ctx.readings.increase(series, kind)
        if rate is None:
            continue
        key = tuple(series.labels.get(k, "") for k in keys)
        out[key] = _sum(out.get(key), rate)
    return out


def gauges_by(ctx: Context, family: str, keys: tuple[str, ...],
              combine: Callable[[float, float], float] = max) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for series in ctx.readings.series(family):
        if not isinstance(series.value, int | float) or math.isnan(series.value):
            continue
        key = tuple(series.labels.get(k, "") for k in keys)
        out[key] = combine(out[key], float(series.value)) if key in out else float(series.value)
    return out


def present_keys(ctx: Context, family: str, keys: tuple[str, ...]) -> set[tuple[str, ...]]:
    store = ctx.readings.store
    if store is None:
        return set()
    names = ctx.readings.label_names(family)
    if tuple(names[:len(keys)]) == keys:  # the common case: keys are the leading labels
        n = len(keys)
        return {values[:n] for _, _, values, _ in store.iter_family(family)}
    return {tuple(s.labels.get(k, "") for k in keys) for s in ctx.readings.series(family)}


def ratio(part: float, whole: float) -> float:
    """part / whole, 0 when nothing happened; never above 1 even if counters disagree."""
    if whole <= 0:
        return 0.0 if part <= 0 else 1.0
    return min(part / whole, 1.0)


SWQ = ("switch", "interface", "queue")
SWP = ("switch", "interface", "priority", "direction")
SWI = ("switch", "interface")
NICP = ("interface", "priority", "direction")
PORT = ("device", "port")
GPU = ("gpu",)
EP = ("endpoint",)
DIRECTION_NOTE = {"rx": "pause frames received", "tx": "pause frames sent"}


def _queue(k) -> str:
    return f"{k[0]} {k[1]} queue {k[2]}"


def _switch_prio(k) -> str:
    return f"{k[0]} {k[1]} priority {k[2]} {k[3]}"


def _nic_prio(k) -> str:
    return f"{k[0]} priority {k[1]} {k[2]}"


def _port(k) -> str:
    return f"{k[0]} port {k[1]}"


def _gpu(k) -> str:
    return f"GPU {k[0]}"


def _endpoint(k) -> str:
    return f"endpoint {k[0]}"


# -- network -----------------------------------------------------------------------------------

def measure_switch_ecn(ctx: Context) -> list[Measurement]:
    marked = rates_by(ctx, "infrapulse_switch_queue_ecn_marked_packets_total", SWQ)
    sent = rates_by(ctx, "infrapulse_switch_queue_transmitted_packets_total", SWQ)
    out = []
    for k, m in marked.items():
        t = sent.get(k)
        if t is not None:
            out.append(Measurement(_queue(k), ratio(m.increase, max(t.increase, m.increase)),
                                   labels=dict(zip(SWQ, k))))
    return out


def _netdev_to_port(ctx: Context) -> dict[str, tuple[str, str]]:
    out = {}
    for s in ctx.readings.series("infrapulse_rdma_port_info"):
        if s.labels.get("netdev"):
            out[s.labels["netdev"]] = (s.labels.get("device", ""), s.labels.get("port", ""))
    return out


def measure_nic_ecn(ctx: Context) -> list[Measurement]:
    received = rates_by(ctx, "infrapulse_rdma_port_received_packets_total", PORT)
    out = []
    # Per NIC priority (ethtool rx_prioN_marked) against the packets its RDMA port received.
    netdevs = _netdev_to_port(ctx)
    for (iface, prio), m in rates_by(ctx, "infrapulse_nic_ecn_marked_packets_total", ("interface", "priority")).items():
        r = received.get(netdevs.get(iface, ("", "")))
        if r is not None:
            out.append(Measurement(f"{iface} priority {prio}", ratio(m.increase, max(r.increase, m.increase)),
                                   labels={"interface": iface, "priority": prio}))
    # Per RDMA port (np_ecn_marked_roce_packets).
    for k, m in rates_by(ctx, "infrapulse_rdma_ecn_marked_packets_total", PORT).items():
        r = received.get(k)
        if r is not None:
            out.append(Measurement(_port(k), ratio(m.increase, max(r.increase, m.increase)),
                                   labels=dict(zip(PORT, k))))
    return out


def measure_pfc_ratio(ctx: Context) -> list[Measurement]:
    out = []
    for k, r in rates_by(ctx, "infrapulse_switch_pfc_pause_duration_seconds_total", SWP).items():
        out.append(Measurement(_switch_prio(k), min(r.per_second, 1.0), DIRECTION_NOTE.get(k[3], ""),
                               labels=dict(zip(SWP, k))))
    for k, r in rates_by(ctx, "infrapulse_nic_pfc_pause_duration_seconds_total", NICP).items():
        out.append(Measurement(_nic_prio(k), min(r.per_second, 1.0), DIRECTION_NOTE.get(k[2], ""),
                               labels=dict(zip(NICP, k))))
    return out


def measure_pfc_frames(ctx: Context) -> list[Measurement] | None:
    """Pause frames per second, only where no pause duration is reported for the same port.

    None (not applicable) when every port with pause frames also reports a duration: then
    pfc_pause_ratio covers them and this signal must not count as missing data."""
    out = []
    untimed_ports = timed_ports = 0
    for frames, durations, keys, name in (
            ("infrapulse_switch_pfc_pause_frames_total", "infrapulse_switch_pfc_pause_duration_seconds_total",
             SWP, _switch_prio),
            ("infrapulse_nic_pfc_pause_frames_total", "infrapulse_nic_pfc_pause_duration_seconds_total",
             NICP, _nic_prio)):
        timed = present_keys(ctx, durations, keys)
        frame_keys = present_keys(ctx, frames, keys)
        untimed_ports += len(frame_keys - timed)
        timed_ports += len(frame_keys & timed)
        for k, r in rates_by(ctx, frames, keys).items():
            if k not in timed:
                out.append(Measurement(name(k), r.per_second, DIRECTION_NOTE.get(k[-1], ""),
                                       labels=dict(zip(keys, k))))
    if not untimed_ports and timed_ports:
        return None
    return out


def measure_pause_storms(ctx: Context) -> list[Measurement]:
    family = "infrapulse_nic_pause_storm_events_total"
    total = rates_by(ctx, family, ("interface",))
    by_level = rates_by(ctx, family, ("interface", "level"))
    out = []
    for (iface,), r in total.items():
        levels = sorted(lv for (i, lv), lr in by_level.items() if i == iface and lr.increase > 0)
        out.append(Measurement(iface, r.increase, ", ".join(levels), labels={"interface": iface}))
    return out


def measure_queue_drops(ctx: Context) -> list[Measurement]:
    dropped = rates_by(ctx, "infrapulse_switch_queue_dropped_packets_total", SWQ)
    sent = rates_by(ctx, "infrapulse_switch_queue_transmitted_packets_total", SWQ)
    out = []
    for k, d in dropped.items():
        t = sent.get(k)
        if t is not None:
            out.append(Measurement(_queue(k), ratio(d.increase, t.increase + d.increase), labels=dict(zip(SWQ, k))))
    return out


def measure_phy_errors(ctx: Context) -> list[Measurement]:
    out = []
    for k, r in rates_by(ctx, "infrapulse_switch_interface_fcs_errors_total", SWI).items():
        out.append(Measurement(f"{k[0]} {k[1]}", r.per_second, "FCS", labels=dict(zip(SWI, k))))
    for (iface,), r in rates_by(ctx, "infrapulse_nic_phy_errors_total", ("interface",)).items():
        out.append(Measurement(iface, r.per_second, "CRC/symbol", labels={"interface": iface}))
    for k, r in rates_by(ctx, "infrapulse_rdma_port_symbol_errors_total", PORT).items():
        note = "symbol; counter saturated, true rate may be higher" if r.saturated else "symbol"
        out.append(Measurement(_port(k), r.per_second, note, labels=dict(zip(PORT, k))))
    return out


def measure_link_flaps(ctx: Context) -> list[Measurement]:
    out = []
    # A flap is down + up: two carrier transitions. A link that just went down counts as one.
    for k, r in rates_by(ctx, "infrapulse_switch_interface_carrier_transitions_total", SWI, "event_window").items():
        out.append(Measurement(f"{k[0]} {k[1]}", float(math.ceil(r.increase / 2)), labels=dict(zip(SWI, k))))
    for k, r in rates_by(ctx, "infrapulse_rdma_port_link_downed_total", PORT, "event_window").items():
        out.append(Measurement(_port(k), r.increase, labels=dict(zip(PORT, k))))
    return out


def measure_gnmi_down(ctx: Context) -> list[Measurement]:
    out = {}
    for (switch,), up in gauges_by(ctx, "infrapulse_switch_up", ("switch",)).items():
        out[switch] = Measurement(switch, 0.0 if up >= 1 else 1.0, labels={"switch": switch})
    store = ctx.readings.store
    if store is not None:
        # A switch whose stream never came up has no infrapulse_switch_up yet, only a status.
        for (source, target), status in list(store.status.items()):
            if source != "gnmi" or target in GNMI_NON_SWITCH_TARGETS:
                continue
            if not status.up:
                out[target] = Measurement(target, 1.0, status.reason, labels={"switch": target})
            elif target not in out:
                out[target] = Measurement(target, 0.0, labels={"switch": target})
    return list(out.values())


# -- rdma --------------------------------------------------------------------------------------

def measure_cnp(ctx: Context) -> list[Measurement]:
    total: dict[tuple[str, ...], Rate] = {}
    for family in ("infrapulse_rdma_cnp_sent_total", "infrapulse_rdma_cnp_handled_total"):
        for k, r in rates_by(ctx, family, PORT).items():
            total[k] = _sum(total.get(k), r)
    return [Measurement(_port(k), r.per_second, labels=dict(zip(PORT, k))) for k, r in total.items()]


def measure_retransmissions(ctx: Context) -> list[Measurement]:
    return [Measurement(_port(k), r.per_second, labels=dict(zip(PORT, k)))
            for k, r in rates_by(ctx, "infrapulse_rdma_retransmission_events_total", PORT).items()]


def measure_out_of_buffer(ctx: Context) -> list[Measurement]:
    return [Measurement(_port(k), r.per_second, labels=dict(zip(PORT, k)))
            for k, r in rates_by(ctx, "infrapulse_rdma_out_of_buffer_total", PORT).items()]


def measure_port_state(ctx: Context) -> list[Measurement]:
    out = []
    for k, state in gauges_by(ctx, "infrapulse_rdma_port_state", PORT).items():
        name = IB_PORT_STATES.get(int(state), str(int(state)))
        out.append(Measurement(_port(k), 0.0 if int(state) == 4 else 1.0, f"state {name}",
                               labels=dict(zip(PORT, k))))
    return out


def measure_rdma_errors(ctx: Context) -> list[Measurement]:
    errors: dict[tuple[str, ...], Rate] = {}
    for family in ("infrapulse_rdma_port_receive_errors_total", "infrapulse_rdma_port_transmit_discards_total"):
        for k, r in rates_by(ctx, family, PORT).items():
            errors[k] = _sum(errors.get(k), r)
    packets: dict[tuple[str, ...], Rate] = {}
    for family in ("infrapulse_rdma_port_received_packets_total", "infrapulse_rdma_port_transmitted_packets_total"):
        for k, r in rates_by(ctx, family, PORT).items():
            packets[k] = _sum(packets.get(k), r)
    out = []
    for k, e in errors.items():
        p = packets.get(k)
        if p is not None:
            out.append(Measurement(_port(k), ratio(e.increase, p.increase + e.increase), labels=dict(zip(PORT, k))))
    return out


# -- gpu ---------------------------------------------------------------------------------------

def known_gpus(ctx: Context) -> set[str]:
    gpus = set()
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
    return [Measurement(_gpu((gpu,)), n, ("XID " + ", ".join(map(str, sorted(seen[gpu])))) if gpu in seen else "",
                        labels={"gpu": gpu}) for gpu, n in counts.items()]


def measure_xid_critical(ctx: Context) -> list[Measurement]:
    return _measure_xids(ctx, lambda x: x in ctx.critical_xids)


def measure_xid_other(ctx: Context) -> list[Measurement]:
    return _measure_xids(ctx, lambda x: x not in ctx.critical_xids and x not in ctx.application_xids)


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
            volatile[gpu] = volatile.get(gpu, 0.0) + float(series.value)
        else:
            rate = ctx.readings.increase(series, "event_window")
            if rate is not None:
                aggregate[gpu] = aggregate.get(gpu, 0.0) + rate.increase
    out = []
    for gpu in sorted(set(volatile) | set(aggregate)):
        if gpu in volatile:
            out.append(Measurement(_gpu((gpu,)), volatile[gpu], "since the last GPU reset", labels={"gpu": gpu}))
        else:
            out.append(Measurement(_gpu((gpu,)), aggregate[gpu], labels={"gpu": gpu}))
    return out


def _flag_gauge(family: str, note: str) -> Callable[[Context], list[Measurement]]:
    def measure(ctx: Context) -> list[Measurement]:
        return [Measurement(_gpu(k), 1.0 if v > 0 else 0.0, note if v > 0 else "", labels={"gpu": k[0]})
                for k, v in gauges_by(ctx, family, GPU).items()]
    return measure


def measure_throttle(ctx: Context) -> list[Measurement]:
    active: dict[str, list[str]] = {gpu: [] for gpu in known_gpus(ctx)}
    for series in ctx.readings.series("infrapulse_gpu_clock_event_active"):
        gpu = series.labels.get("gpu", "")
        reason = series.labels.get("reason", "")
        active.setdefault(gpu, [])
        normalised = "".join(ch for ch in reason.lower() if ch.isalnum())
        if normalised in THROTTLE_REASONS and float(series.value) > 0:
            active[gpu].append(reason)
    return [Measurement(_gpu((gpu,)), 1.0 if reasons else 0.0, ", ".join(sorted(reasons)), labels={"gpu": gpu})
            for gpu, reasons in active.items()]


def measure_gpu_lost(ctx: Context) -> list[Measurement]:
    # The nvml source says why in infrapulse_gpu_health_status_info{reason}.
    reasons = {s.labels.get("gpu", ""): s.labels.get("reason", "")
               for s in ctx.readings.series("infrapulse_gpu_health_status_info")
               if s.labels.get("reason", "ok") != "ok"}
    return [Measurement(_gpu(k), 0.0 if v >= 1 else 1.0, "" if v >= 1 else reasons.get(k[0], ""),
                        labels={"gpu": k[0]})
            for k, v in gauges_by(ctx, "infrapulse_gpu_healthy", GPU, min).items()]


def measure_idle_while_queued(ctx: Context) -> list[Measurement]:
    """Idle share of each GPU while this node's serving engines have requests waiting."""
    waiting = gauges_by(ctx, "infrapulse_llm_requests_waiting", (), lambda a, b: a + b).get(())
    if waiting is None:
        return []
    out = []
    for (gpu,), util in gauges_by(ctx, "infrapulse_gpu_utilization_ratio", GPU).items():
        idle = max(0.0, 1.0 - util) if waiting >= 1 else 0.0
        out.append(Measurement(_gpu((gpu,)), idle, f"{waiting:g} requests waiting", labels={"gpu": gpu}))
    return out


# -- serving -----------------------------------------------------------------------------------

def format_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    return f"{seconds:.3g} s"


def _latency(which: str) -> Callable[[Context], list[Measurement]]:
    def measure(ctx: Context) -> list[Measurement]:
        out = []
        slo = ctx.slo.get(which)
        note = f"SLO {format_seconds(slo)}" if slo else ""
        for endpoint, lat in ctx.latency.items():
            p95 = (lat.ttft if which == "ttft" else lat.itl).get(0.95)
            if p95 is not None:
                out.append(Measurement(_endpoint((endpoint,)), p95, note, labels={"endpoint": endpoint}))
        return out
    return measure


def measure_queue_ratio(ctx: Context) -> list[Measurement]:
    add = lambda a, b: a + b  # noqa: E731
    waiting = gauges_by(ctx, "infrapulse_llm_requests_waiting", EP, add)
    running = gauges_by(ctx, "infrapulse_llm_requests_running", EP, add)
    out = []
    for k, w in waiting.items():
        r = running.get(k, 0.0)
        out.append(Measurement(_endpoint(k), w / max(r, 1.0), f"{w:g} waiting, {r:g} running",
                               labels={"endpoint": k[0]}))
    return out


def measure_kv_cache(ctx: Context) -> list[Measurement]:
    return [Measurement(_endpoint(k), v, labels={"endpoint": k[0]})
            for k, v in gauges_by(ctx, "infrapulse_llm_kv_cache_usage_ratio", EP).items()]


def measure_request_errors(ctx: Context) -> list[Measurement]:
    family = "infrapulse_llm_requests_total"
    total = rates_by(ctx, family, EP)
    failed = rates_by(ctx, family, EP, where=lambda lb: lb.get("outcome", "").lower() in ERROR_OUTCOMES)
    out = []
    for k, t in total.items():
        f = failed.get(k)
        out.append(Measurement(_endpoint(k), ratio(f.increase if f else 0.0, t.increase), labels={"endpoint": k[0]}))
    return out


def measure_preemptions(ctx: Context) -> list[Measurement]:
    return [Measurement(_endpoint(k), r.per_second, labels={"endpoint": k[0]})
            for k, r in rates_by(ctx, "infrapulse_llm_preemptions_total", EP).items()]


def measure_endpoint_down(ctx: Context) -> list[Measurement]:
    return [Measurement(_endpoint(k), 0.0 if v >= 1 else 1.0, labels={"endpoint": k[0]})
            for k, v in gauges_by(ctx, "infrapulse_llm_endpoint_up", EP, min).items()]


# -- topology ----------------------------------------------------------------------------------

def _same_host(a: str, b: str) -> bool:
    """LLDP system names may be FQDNs; compare the first label, case-insensitively."""
    a, b = a.strip().lower(), b.strip().lower()
    return bool(a) and (a == b or a.split(".")[0] == b.split(".")[0])


def served_ports(ctx: Context) -> dict[tuple[str, str], str]:
    """(switch, interface) of every switch port whose LLDP neighbour is this host -> NIC port."""
    out = {}
    for s in ctx.readings.series("infrapulse_switch_lldp_neighbor_info"):
        if _same_host(s.labels.get("neighbor_system", ""), ctx.hostname):
            out[(s.labels.get("switch", ""), s.labels.get("interface", ""))] = s.labels.get("neighbor_port", "")
    return out


def _uplink(base: str) -> Callable[[Context], list[Measurement] | None]:
    def measure(ctx: Context) -> list[Measurement] | None:
        ports = served_ports(ctx)
        if ctx.results.get(base) is None and base in ctx.results:
            return None  # the base signal does not apply (e.g. no frame-only ports)
        out = []
        for m in ctx.results.get(base) or []:
            key = (m.labels.get("switch", ""), m.labels.get("interface", ""))
            if "switch" in m.labels and key in ports:
                note = f"serves {ctx.hostname} {ports[key]}".rstrip()
                out.append(Measurement(m.target, m.value, "; ".join(x for x in (m.note, note) if x), m.labels))
        return out
    return measure


# -- the catalogue of signals --------------------------------------------------------------------

def _families(*names: str) -> tuple[str, ...]:
    return names


NET = ("gnmi", "ethtool", "infiniband")
NODE_SOURCES = "infiniband|ethtool|nvml|dcgm|serving"

_SIGNALS = [
    # network
    Signal("ecn_marked_ratio", "network", "ECN-marked ratio (switch queues)",
           "increase(queue_ecn_marked_packets) / increase(queue_transmitted_packets) per switch queue",
           RATIO, "window", 0.001, 0.05, 3.0, "{value} of packets ECN-marked",
           "congestion on this queue: look at the flows behind it, the ECN/WRED thresholds and DCQCN tuning",
           measure_switch_ecn,
           _families("infrapulse_switch_queue_ecn_marked_packets_total",
                     "infrapulse_switch_queue_transmitted_packets_total"), ("gnmi",),
           counters=("infrapulse_switch_queue_ecn_marked_packets_total",
                     "infrapulse_switch_queue_transmitted_packets_total")),
    Signal("nic_ecn_marked_ratio", "network", "ECN-marked ratio (NIC priorities and RDMA ports)",
           "increase(nic_ecn_marked_packets{priority}) or increase(rdma_ecn_marked_packets) / "
           "increase(rdma_port_received_packets) of the port behind the NIC",
           RATIO, "window", 0.001, 0.05, 2.0, "{value} of received packets ECN-marked",
           "the path into this NIC is congested: check the switch port that serves it (topology) "
           "and the senders' DCQCN settings",
           measure_nic_ecn,
           _families("infrapulse_nic_ecn_marked_packets_total", "infrapulse_rdma_ecn_marked_packets_total",
                     "infrapulse_rdma_port_received_packets_total", "infrapulse_rdma_port_info"),
           ("ethtool", "infiniband"),
           counters=("infrapulse_nic_ecn_marked_packets_total", "infrapulse_rdma_ecn_marked_packets_total",
                     "infrapulse_rdma_port_received_packets_total")),
    Signal("pfc_pause_ratio", "network", "PFC pause time ratio",
           "increase(pfc_pause_duration_seconds) / window, per port, priority and direction "
           "(switch and NIC)",
           RATIO, "window", 0.005, 0.2, 3.0, "paused by PFC {value} of the time",
           "a lossless priority is being paused: find the congested receiver (PFC storm or a slow "
           "host), check the PFC watchdog and buffer headroom",
           measure_pfc_ratio,
           _families("infrapulse_switch_pfc_pause_duration_seconds_total",
                     "infrapulse_nic_pfc_pause_duration_seconds_total"), ("gnmi", "ethtool"),
           counters=("infrapulse_switch_pfc_pause_duration_seconds_total",
                     "infrapulse_nic_pfc_pause_duration_seconds_total"), critical=True),
    Signal("pfc_pause_frames_rate", "network", "PFC pause frames per second",
           "rate(pfc_pause_frames) per port, priority and direction, where no pause duration is reported",
           PER_SECOND, "window", 50.0, 1000.0, 2.0, "{value} PFC pause frames",
           "a lossless priority is being paused: find the congested receiver (PFC storm or a slow "
           "host), check the PFC watchdog and buffer headroom",
           measure_pfc_frames,
           _families("infrapulse_switch_pfc_pause_frames_total", "infrapulse_nic_pfc_pause_frames_total",
                     "infrapulse_switch_pfc_pause_duration_seconds_total",
                     "infrapulse_nic_pfc_pause_duration_seconds_total"), ("gnmi", "ethtool"),
           counters=("infrapulse_switch_pfc_pause_frames_total", "infrapulse_nic_pfc_pause_frames_total")),
    Signal("pfc_storm_events", "network", "PFC pause storm events",
           "increase(nic_pause_storm_events) summed over levels (warning, error), per NIC, over the window",
           COUNT, "window", 0.0, 1.0, 2.0, "{value} PFC pause storm event(s)",
           "the NIC's storm guard tripped: this host stopped draining its receive queue (hung driver "
           "or application, PCIe backpressure); check the host and drain it if the storm goes on",
           measure_pause_storms, _families("infrapulse_nic_pause_storm_events_total"), ("ethtool",),
           counters=("infrapulse_nic_pause_storm_events_total",), critical=True),
    Signal("queue_drop_ratio", "network", "Queue drop ratio",
           "increase(queue_dropped_packets) / (increase(queue_transmitted_packets) + increase(queue_dropped_packets))",
           RATIO, "window", 0.00001, 0.001, 2.0, "{value} of packets dropped",
           "packets are lost on this queue: on a lossless (RoCE) priority check PFC is enabled end to "
           "end; otherwise check buffer profiles and oversubscription",
           measure_queue_drops,
           _families("infrapulse_switch_queue_dropped_packets_total",
                     "infrapulse_switch_queue_transmitted_packets_total"), ("gnmi",),
           counters=("infrapulse_switch_queue_dropped_packets_total",
                     "infrapulse_switch_queue_transmitted_packets_total")),
    Signal("phy_error_rate", "network", "FCS / symbol error rate",
           "rate(switch_interface_fcs_errors) + rate(nic_phy_errors) summed over kinds + "
           "rate(rdma_port_symbol_errors), per interface",
           PER_SECOND, "window", 0.01, 1.0, 2.0, "{value} FCS/symbol errors",
           "a bad cable, optic or connector: reseat or replace it and check the optic's DOM readings",
           measure_phy_errors,
           _families("infrapulse_switch_interface_fcs_errors_total", "infrapulse_nic_phy_errors_total",
                     "infrapulse_rdma_port_symbol_errors_total"), NET,
           counters=("infrapulse_switch_interface_fcs_errors_total", "infrapulse_nic_phy_errors_total",
                     "infrapulse_rdma_port_symbol_errors_total")),
    Signal("link_flaps", "network", "Link flaps",
           "ceil(increase(switch_interface_carrier_transitions) / 2) per switch port, "
           "increase(rdma_port_link_downed) per RDMA port, over the event window",
           COUNT, "event_window", 0.0, 2.0, 3.0, "link flapped {value} time(s)",
           "an unstable link: check the cable/optic and both ends' logs; drain the node if it keeps flapping",
           measure_link_flaps,
           _families("infrapulse_switch_interface_carrier_transitions_total",
                     "infrapulse_rdma_port_link_downed_total"), ("gnmi", "infiniband"),
           counters=("infrapulse_switch_interface_carrier_transitions_total",
                     "infrapulse_rdma_port_link_downed_total"), critical=True),
    Signal("gnmi_stream_down", "network", "gNMI stream down",
           "1 - switch_up per switch (or the gnmi source's status when the stream never came up)",
           FLAG, "instant", 0.0, 1.0, 1.0, "gNMI telemetry stream is down",
           "the switch's telemetry is blind: check its gNMI server, credentials, TLS and reachability",
           measure_gnmi_down, _families("infrapulse_switch_up"), ("gnmi",)),
    # rdma
    Signal("cnp_rate", "rdma", "CNP rate",
           "rate(rdma_cnp_sent) + rate(rdma_cnp_handled) per RDMA port",
           PER_SECOND, "window", 1000.0, 100000.0, 2.0, "{value} congestion notification packets (CNP)",
           "DCQCN is throttling senders: find the congested switch queue (ECN ratio, topology) or the incast",
           measure_cnp, _families("infrapulse_rdma_cnp_sent_total", "infrapulse_rdma_cnp_handled_total"),
           ("infiniband",), counters=("infrapulse_rdma_cnp_sent_total", "infrapulse_rdma_cnp_handled_total")),
    Signal("retransmission_rate", "rdma", "Retransmission events rate",
           "rate(rdma_retransmission_events) summed over reasons, per RDMA port",
           PER_SECOND, "window", 1.0, 100.0, 3.0, "{value} RDMA retransmission events",
           "packets are lost or reordered on the path: check drops and PFC on the switch ports, and "
           "the peers' timeouts (local_ack_timeout_err)",
           measure_retransmissions, _families("infrapulse_rdma_retransmission_events_total"), ("infiniband",),
           counters=("infrapulse_rdma_retransmission_events_total",)),
    Signal("out_of_buffer_rate", "rdma", "Out-of-buffer drops rate",
           "rate(rdma_out_of_buffer) per RDMA port",
           PER_SECOND, "window", 0.0, 100.0, 2.0,
           "{value} packets dropped for lack of receive WQEs (out_of_buffer)",
           "the receiving application does not post receive buffers fast enough: check the "
           "consumer's CPU and its receive queue depth",
           measure_out_of_buffer, _families("infrapulse_rdma_out_of_buffer_total"), ("infiniband",),
           counters=("infrapulse_rdma_out_of_buffer_total",)),
    Signal("port_not_active", "rdma", "RDMA port not ACTIVE",
           "1 when rdma_port_state != 4 (ACTIVE), per RDMA port",
           FLAG, "instant", 0.0, 1.0, 3.0, "RDMA port is not ACTIVE",
           "check the cable and the switch port; on InfiniBand check the subnet manager",
           measure_port_state, _families("infrapulse_rdma_port_state"), ("infiniband",)),
    Signal("rdma_error_ratio", "rdma", "RDMA port error ratio",
           "(increase(receive_errors) + increase(transmit_discards)) / "
           "(increase(received_packets) + increase(transmitted_packets) + errors)",
           RATIO, "window", 0.000001, 0.001, 2.0, "{value} of packets with errors or discards",
           "check the link (phy errors) and for transmit discards the congestion on the switch side",
           measure_rdma_errors,
           _families("infrapulse_rdma_port_receive_errors_total", "infrapulse_rdma_port_transmit_discards_total",
                     "infrapulse_rdma_port_received_packets_total", "infrapulse_rdma_port_transmitted_packets_total"),
           ("infiniband",),
           counters=("infrapulse_rdma_port_receive_errors_total", "infrapulse_rdma_port_transmit_discards_total",
                     "infrapulse_rdma_port_received_packets_total",
                     "infrapulse_rdma_port_transmitted_packets_total")),
    # gpu
    Signal("xid_critical", "gpu", "Critical XID errors",
           "increase(gpu_xid_errors{xid in critical class}) per GPU over the event window "
           "(critical class: 48, 63, 64, 74, 79, 92, 94, 95 by default)",
           COUNT, "event_window", 0.0, 1.0, 4.0, "{value} critical XID error(s)",
           "drain the node and reset the GPU; look the XID up in NVIDIA's Xid catalog for the follow-up",
           measure_xid_critical, _families("infrapulse_gpu_xid_errors_total", "infrapulse_gpu_info"),
           ("nvml", "dcgm"), counters=("infrapulse_gpu_xid_errors_total",), critical=True),
    Signal("xid_other", "gpu", "Other XID errors",
           "increase(gpu_xid_errors) per GPU over the event window, for XIDs neither critical nor "
           "application errors (13, 31, 43, 45)",
           COUNT, "event_window", 0.0, 5.0, 1.0, "{value} XID error(s)",
           "look the XID up in NVIDIA's Xid catalog; repeated driver/firmware XIDs call for a GPU reset",
           measure_xid_other, _families("infrapulse_gpu_xid_errors_total", "infrapulse_gpu_info"),
           ("nvml", "dcgm"), counters=("infrapulse_gpu_xid_errors_total",)),
    Signal("ecc_uncorrectable", "gpu", "Uncorrectable ECC errors",
           "gpu_ecc_errors{type=uncorrected,scope=volatile} (since the last GPU reset), else "
           "increase of the aggregate count over the event window",
           COUNT, "event_window", 0.0, 1.0, 3.0, "{value} uncorrectable ECC error(s)",
           "drain the node and reset the GPU so the faulty rows are remapped; replace it if it repeats",
           measure_ecc, _families("infrapulse_gpu_ecc_errors_total"), ("nvml", "dcgm"),
           counters=("infrapulse_gpu_ecc_errors_total",), critical=True),
    Signal("row_remap_pending", "gpu", "Row remapping pending",
           "1 when gpu_row_remap_pending > 0",
           FLAG, "instant", 0.0, 1.0, 2.0, "row remapping pending",
           "reset the GPU (after draining it) to apply the pending row remap",
           _flag_gauge("infrapulse_gpu_row_remap_pending", "reset the GPU to apply it"),
           _families("infrapulse_gpu_row_remap_pending"), ("nvml", "dcgm")),
    Signal("row_remap_failure", "gpu", "Row remapping failure",
           "1 when gpu_row_remap_failure > 0",
           FLAG, "instant", 0.0, 1.0, 3.0, "row remapping failed",
           "the GPU has run out of spare rows: drain the node and RMA the GPU",
           _flag_gauge("infrapulse_gpu_row_remap_failure", "no spare rows left"),
           _families("infrapulse_gpu_row_remap_failure"), ("nvml", "dcgm"), critical=True),
    Signal("throttle_active", "gpu", "Hardware / thermal / power-brake throttling",
           "1 when any of hw_slowdown, hw_thermal, sw_thermal, hw_power_brake clock events is active",
           FLAG, "instant", 0.0, 1.0, 2.0, "clocks throttled",
           "check cooling (inlet temperature, fans), power supply and the board's power-brake signal",
           measure_throttle, _families("infrapulse_gpu_clock_event_active", "infrapulse_gpu_info"),
           ("nvml", "dcgm")),
    Signal("gpu_lost", "gpu", "GPU lost",
           "1 when gpu_healthy == 0 (GPU fallen off the bus or needing a reset)",
           FLAG, "instant", 0.0, 1.0, 4.0, "GPU is lost or needs a reset",
           "drain the node; reset the GPU or reboot, and check the PCIe slot and power if it repeats",
           measure_gpu_lost, _families("infrapulse_gpu_healthy"), ("nvml", "dcgm"), critical=True),
    Signal("gpu_idle_while_queued", "gpu", "GPU idle while requests wait",
           "1 - gpu_utilization_ratio per GPU while the node's serving engines have waiting requests "
           "(sum of llm_requests_waiting >= 1), else 0",
           RATIO, "instant", 0.5, 0.9, 1.0, "{value} idle",
           "requests are queued but the GPU is idle: the engine may be stuck, CPU-bound or waiting on "
           "the network (KV transfer); check its logs and the topology signals",
           measure_idle_while_queued,
           _families("infrapulse_gpu_utilization_ratio", "infrapulse_llm_requests_waiting"),
           ("nvml|dcgm", "serving"), requires_all_sources=True),
    # serving
    Signal("ttft_p95", "serving", "TTFT p95 against its SLO",
           "p95 of increase(llm_time_to_first_token_seconds buckets) over the window, per endpoint "
           "(good = health.slo.ttft_p95_seconds, bad = twice that)",
           SECONDS, "window", 1.5, 3.0, 5.0, "TTFT p95 {value}",
           "prefill is slow or queued: check queueing (waiting requests, KV cache), the GPUs and, for "
           "disaggregated serving, the KV-transfer path",
           _latency("ttft"), _families("infrapulse_llm_time_to_first_token_seconds"), ("serving",)),
    Signal("itl_p95", "serving", "ITL p95 against its SLO",
           "p95 of increase(llm_inter_token_latency_seconds buckets) over the window, per endpoint "
           "(good = health.slo.itl_p95_seconds, bad = twice that)",
           SECONDS, "window", 0.05, 0.1, 4.0, "ITL p95 {value}",
           "decoding is slow: batches may be too large, the GPUs throttled, or tensor-parallel "
           "traffic congested (check NVLink and the network component)",
           _latency("itl"), _families("infrapulse_llm_inter_token_latency_seconds"), ("serving",)),
    Signal("queue_ratio", "serving", "Waiting vs running requests",
           "llm_requests_waiting / max(llm_requests_running, 1) per endpoint",
           FACTOR, "instant", 0.5, 5.0, 2.0, "{value} waiting requests per running request",
           "the endpoint is saturated: add replicas or lower the load; check KV cache usage and preemptions",
           measure_queue_ratio,
           _families("infrapulse_llm_requests_waiting", "infrapulse_llm_requests_running"), ("serving",)),
    Signal("kv_cache_usage", "serving", "KV cache usage",
           "llm_kv_cache_usage_ratio per endpoint (highest over models)",
           RATIO, "instant", 0.85, 0.98, 1.0, "KV cache {value} full",
           "the KV cache is nearly full, so requests will queue or be preempted: add memory/replicas "
           "or shorten contexts",
           measure_kv_cache, _families("infrapulse_llm_kv_cache_usage_ratio"), ("serving",)),
    Signal("request_error_ratio", "serving", "Request error ratio",
           "increase(llm_requests{outcome=error|failed|timeout}) / increase(llm_requests) per endpoint",
           RATIO, "window", 0.001, 0.05, 3.0, "{value} of requests failed",
           "read the engine's logs for the failing requests",
           measure_request_errors, _families("infrapulse_llm_requests_total"), ("serving",),
           counters=("infrapulse_llm_requests_total",)),
    Signal("preemption_rate", "serving", "Preemption rate",
           "rate(llm_preemptions) per endpoint",
           PER_SECOND, "window", 0.0, 1.0, 1.0, "{value} preemptions",
           "the KV cache is oversubscribed: lower max concurrency or add capacity",
           measure_preemptions, _families("infrapulse_llm_preemptions_total"), ("serving",),
           counters=("infrapulse_llm_preemptions_total",)),
    Signal("endpoint_down", "serving", "Endpoint down",
           "1 - llm_endpoint_up per endpoint",
           FLAG, "instant", 0.0, 1.0, 4.0, "serving endpoint is down",
           "the engine does not answer its /metrics: check the process, its health endpoint and logs",
           measure_endpoint_down, _families("infrapulse_llm_endpoint_up"), ("serving",), critical=True),
    # topology: the switch ports whose LLDP neighbour is this host
    Signal("uplink_ecn_marked_ratio", "topology", "ECN-marked ratio on this host's switch ports",
           "ecn_marked_ratio of the switch queues on ports whose lldp_neighbor_info{neighbor_system} "
           "is this host",
           RATIO, "window", 0.001, 0.05, 1.0, "{value} of packets ECN-marked",
           "the switch port serving this host is congested: traffic to this node (incast) or a slow "
           "NIC; compare with the node's CNP rate",
           _uplink("ecn_marked_ratio"),
           _families("infrapulse_switch_lldp_neighbor_info", "infrapulse_switch_queue_ecn_marked_packets_total"),
           ("gnmi", NODE_SOURCES), thresholds_from="ecn_marked_ratio", requires_all_sources=True),
    Signal("uplink_pfc_pause_ratio", "topology", "PFC pause time on this host's switch ports",
           "pfc_pause_ratio of the switch ports whose LLDP neighbour is this host",
           RATIO, "window", 0.005, 0.2, 1.0, "paused by PFC {value} of the time",
           "the switch port serving this host is paused: this node (or its peer) cannot drain; check "
           "for a PFC storm from the NIC",
           _uplink("pfc_pause_ratio"),
           _families("infrapulse_switch_lldp_neighbor_info", "infrapulse_switch_pfc_pause_duration_seconds_total"),
           ("gnmi", NODE_SOURCES), thresholds_from="pfc_pause_ratio", requires_all_sources=True),
    Signal("uplink_pfc_pause_frames_rate", "topology", "PFC pause frames on this host's switch ports",
           "pfc_pause_frames_rate of the switch ports whose LLDP neighbour is this host",
           PER_SECOND, "window", 50.0, 1000.0, 1.0, "{value} PFC pause frames",
           "the switch port serving this host is paused: this node (or its peer) cannot drain; check "
           "for a PFC storm from the NIC",
           _uplink("pfc_pause_frames_rate"),
           _families("infrapulse_switch_lldp_neighbor_info", "infrapulse_switch_pfc_pause_frames_total"),
           ("gnmi", NODE_SOURCES), thresholds_from="pfc_pause_frames_rate", requires_all_sources=True),
]

SIGNALS: dict[str, Signal] = {s.name: s for s in _SIGNALS}


def counters_by_window(signals=None) -> dict[str, set[str]]:
    """{window kind: counter families} the readings must keep history for."""
    out: dict[str, set[str]] = {"window": set(), "event_window": set()}
    for s in (signals or SIGNALS.values()):
        kind = s.window if s.window in out else "window"
        out[kind].update(s.counters)
    return out
