"""RDMA signals per port (infiniband): congestion notifications, retransmissions, receive
buffer exhaustion, port state and the port's error ratio."""

from __future__ import annotations

from ...rates import Rate
from .base import (
    FLAG,
    PER_SECOND,
    PORT,
    RATIO,
    Context,
    Measurement,
    Signal,
    add_rates,
    gauges_by,
    port_name,
    rates_by,
    ratio,
)

IB_PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}


def measure_cnp(ctx: Context) -> list[Measurement]:
    total: dict[tuple[str, ...], Rate] = {}
    for family in ("infrapulse_rdma_cnp_sent_total", "infrapulse_rdma_cnp_handled_total"):
        for k, r in rates_by(ctx, family, PORT).items():
            total[k] = add_rates(total.get(k), r)
    return [Measurement(port_name(k), r.per_second, labels=dict(zip(PORT, k))) for k, r in total.items()]


def measure_retransmissions(ctx: Context) -> list[Measurement]:
    return [Measurement(port_name(k), r.per_second, labels=dict(zip(PORT, k)))
            for k, r in rates_by(ctx, "infrapulse_rdma_retransmission_events_total", PORT).items()]


def measure_out_of_buffer(ctx: Context) -> list[Measurement]:
    return [Measurement(port_name(k), r.per_second, labels=dict(zip(PORT, k)))
            for k, r in rates_by(ctx, "infrapulse_rdma_out_of_buffer_total", PORT).items()]


def measure_port_state(ctx: Context) -> list[Measurement]:
    out = []
    for k, state in gauges_by(ctx, "infrapulse_rdma_port_state", PORT).items():
        name = IB_PORT_STATES.get(int(state), str(int(state)))
        out.append(Measurement(port_name(k), 0.0 if int(state) == 4 else 1.0, f"state {name}",
                               labels=dict(zip(PORT, k))))
    return out


def measure_rdma_errors(ctx: Context) -> list[Measurement]:
    errors: dict[tuple[str, ...], Rate] = {}
    for family in ("infrapulse_rdma_port_receive_errors_total",
                   "infrapulse_rdma_port_transmit_discards_total"):
        for k, r in rates_by(ctx, family, PORT).items():
            errors[k] = add_rates(errors.get(k), r)
    packets: dict[tuple[str, ...], Rate] = {}
    for family in ("infrapulse_rdma_port_received_packets_total",
                   "infrapulse_rdma_port_transmitted_packets_total"):
        for k, r in rates_by(ctx, family, PORT).items():
            packets[k] = add_rates(packets.get(k), r)
    out = []
    for k, e in errors.items():
        p = packets.get(k)
        if p is not None:
            out.append(Measurement(port_name(k), ratio(e.increase, p.increase + e.increase),
                                   labels=dict(zip(PORT, k))))
    return out



SIGNALS: list[Signal] = [
    Signal(
        name="cnp_rate",
        component="rdma",
        title="CNP rate",
        formula="rate(rdma_cnp_sent) + rate(rdma_cnp_handled) per RDMA port",
        unit=PER_SECOND,
        window="window",
        good=1000.0,
        bad=100000.0,
        weight=2.0,
        phrase="{value} congestion notification packets (CNP)",
        hint=("DCQCN is throttling senders: find the congested switch queue (ECN ratio, topology) or the "
              "incast"),
        measure=measure_cnp,
        families=("infrapulse_rdma_cnp_sent_total", "infrapulse_rdma_cnp_handled_total"),
        sources=("infiniband",),
        counters=("infrapulse_rdma_cnp_sent_total", "infrapulse_rdma_cnp_handled_total"),
    ),
    Signal(
        name="retransmission_rate",
        component="rdma",
        title="Retransmission events rate",
        formula="rate(rdma_retransmission_events) summed over reasons, per RDMA port",
        unit=PER_SECOND,
        window="window",
        good=1.0,
        bad=100.0,
        weight=3.0,
        phrase="{value} RDMA retransmission events",
        hint=("packets are lost or reordered on the path: check drops and PFC on the switch ports, and "
              "the peers' timeouts (local_ack_timeout_err)"),
        measure=measure_retransmissions,
        families=("infrapulse_rdma_retransmission_events_total",),
        sources=("infiniband",),
        counters=("infrapulse_rdma_retransmission_events_total",),
    ),
    Signal(
        name="out_of_buffer_rate",
        component="rdma",
        title="Out-of-buffer drops rate",
        formula="rate(rdma_out_of_buffer) per RDMA port",
        unit=PER_SECOND,
        window="window",
        good=0.0,
        bad=100.0,
        weight=2.0,
        phrase="{value} packets dropped for lack of receive WQEs (out_of_buffer)",
        hint=("the receiving application does not post receive buffers fast enough: check the consumer's "
              "CPU and its receive queue depth"),
        measure=measure_out_of_buffer,
        families=("infrapulse_rdma_out_of_buffer_total",),
        sources=("infiniband",),
        counters=("infrapulse_rdma_out_of_buffer_total",),
    ),
    Signal(
        name="port_not_active",
        component="rdma",
        title="RDMA port not ACTIVE",
        formula="1 when rdma_port_state != 4 (ACTIVE), per RDMA port",
        unit=FLAG,
        window="instant",
        good=0.0,
        bad=1.0,
        weight=3.0,
        phrase="RDMA port is not ACTIVE",
        hint="check the cable and the switch port; on InfiniBand check the subnet manager",
        measure=measure_port_state,
        families=("infrapulse_rdma_port_state",),
        sources=("infiniband",),
    ),
    Signal(
        name="rdma_error_ratio",
        component="rdma",
        title="RDMA port error ratio",
        formula=("(increase(receive_errors) + increase(transmit_discards)) / (increase(received_packets) "
                 "+ increase(transmitted_packets) + errors)"),
        unit=RATIO,
        window="window",
        good=1e-06,
        bad=0.001,
        weight=2.0,
        phrase="{value} of packets with errors or discards",
        hint="check the link (phy errors) and for transmit discards the congestion on the switch side",
        measure=measure_rdma_errors,
        families=(
            "infrapulse_rdma_port_receive_errors_total",
            "infrapulse_rdma_port_transmit_discards_total",
            "infrapulse_rdma_port_received_packets_total",
            "infrapulse_rdma_port_transmitted_packets_total",
        ),
        sources=("infiniband",),
        counters=(
            "infrapulse_rdma_port_receive_errors_total",
            "infrapulse_rdma_port_transmit_discards_total",
            "infrapulse_rdma_port_received_packets_total",
            "infrapulse_rdma_port_transmitted_packets_total",
        ),
    ),
]
