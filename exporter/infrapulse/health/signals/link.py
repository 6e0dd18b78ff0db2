"""Link health of NIC (RoCE/Ethernet) and InfiniBand ports: flapping, half-dead and degraded links.

One definition per concept, over the `health.link.window` (10m by default):

- transitions: carrier transitions of a port. A NIC counts the larger of sysfs carrier_changes
  and 2 x its PHY link-down events (one down is a down and an up); an InfiniBand port counts 3 x
  link_downed (a failed error recovery: LinkErrorRecovery, down, retrain up), so one increase is
  flapping. `link_flaps` (network.py) measures it.
- retrains without carrier loss: mlx5 total_success_recovery_phy on a NIC, link_error_recovery
  on an InfiniBand port, counted only while the carrier did not move in the window.
- post-FEC BER: errors FEC could not correct / received bits. NIC: pcs_symbol PHY errors over
  rx_bits_phy, or where the driver has no such counter over link speed x seconds (the note and
  the `basis` label say "speed"); InfiniBand: symbol_error over the port rate x seconds.
- pre-FEC BER: FEC-corrected bits / the same bits; its rise is the window's BER over the port's
  own BER in the `baseline_window` before it (at least `pre_fec_ber_floor`).

A port's class, in order: flapping (link_flaps >= its bad threshold), half-dead (link_half_dead
>= bad, or phy_error_rate >= bad while the carrier stayed up: CRC bursts), degraded
(link_post_fec_ber or link_pre_fec_ber_rise >= bad), else healthy. The rules in
alerts/link.rules.yaml compute the same quantities for dashboards and alerts, with these bad
thresholds and windows (rendered by health/linkrules.py: alerts/generate_link_rules.py,
`infrapulse rules --config FILE`). Sentences name the switch port behind a NIC through LLDP.

On RoCE ports the PMA counters (link_downed, link_error_recovery, symbol_error) are not link
signals: the NIC's own counters of the port's netdev are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...rates import Rate
from .base import (
    COUNT,
    FACTOR,
    PORT,
    RATIO,
    Context,
    Measurement,
    Signal,
    gauges_by,
    port_name,
    rates_by,
    rdma_ports,
)
from .topology import served_ports

LINK = "link_window"
BASELINE = "link_baseline"
IFACE = ("interface",)
CARRIER = "infrapulse_nic_carrier_changes_total"
LINK_DOWN = "infrapulse_nic_link_down_events_total"
RECOVERIES = "infrapulse_nic_link_recoveries_total"
PHY_ERRORS = "infrapulse_nic_phy_errors_total"
FEC_CORRECTED = "infrapulse_nic_fec_corrected_bits_total"
RX_BITS = "infrapulse_nic_received_bits_total"
SPEED = "infrapulse_nic_link_speed_bytes_per_second"
IB_DOWNED = "infrapulse_rdma_port_link_downed_total"
IB_RECOVERY = "infrapulse_rdma_port_link_error_recovery_total"
IB_SYMBOL = "infrapulse_rdma_port_symbol_errors_total"
IB_RATE = "infrapulse_rdma_port_rate_bytes_per_second"
IB_DOWN_TRANSITIONS = 3  # a link_downed increase: error recovery, down, retrain up
# Families the pre-FEC baseline needs history for (the `link_baseline` window).
BASELINE_COUNTERS = (FEC_CORRECTED, RX_BITS)

HEALTHY, FLAPPING, HALF_DEAD, DEGRADED = "healthy", "flapping", "half-dead", "degraded"


# -- where a port is cabled --------------------------------------------------------------------

def switch_port_of(ctx: Context, interface: str) -> str:
    """'leaf01 Ethernet8' when an LLDP neighbour entry names this host and interface, else ''."""
    wanted = interface.lower()
    found = sorted(f"{sw} {intf}" for (sw, intf), nic in served_ports(ctx).items() if nic.lower() == wanted)
    return ", ".join(found)


def behind(ctx: Context, interface: str) -> str:
    port = switch_port_of(ctx, interface)
    return f"switch port {port} (LLDP)" if port else "no LLDP neighbour names this port"


def join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


# -- transitions (used by link_flaps in network.py) --------------------------------------------

@dataclass(frozen=True)
class Transitions:
    value: float
    evidence: str


def nic_transitions(ctx: Context) -> dict[str, Transitions]:
    """Carrier transitions per NIC interface over the link window (see the module docstring)."""
    carrier = rates_by(ctx, CARRIER, IFACE, LINK)
    downs = rates_by(ctx, LINK_DOWN, IFACE, LINK)
    out = {}
    for key in sorted(set(carrier) | set(downs)):
        c, d = carrier.get(key), downs.get(key)
        from_carrier = c.increase if c is not None else 0.0
        from_phy = 2 * d.increase if d is not None else 0.0
        parts = []
        if c is not None:
            parts.append(f"{from_carrier:g} carrier changes")
        if d is not None:
            parts.append(f"{d.increase:g} PHY link-down events")
        out[key[0]] = Transitions(max(from_carrier, from_phy), ", ".join(parts))
    return out


def ib_transitions(ctx: Context) -> dict[tuple[str, ...], Transitions]:
    ports = rdma_ports(ctx)
    out = {}
    for k, r in rates_by(ctx, IB_DOWNED, PORT, LINK).items():
        port = ports.get((k[0], k[1]))
        if port is not None and port.roce:
            continue  # a RoCE port counts through its netdev
        out[k] = Transitions(IB_DOWN_TRANSITIONS * r.increase, f"link_downed +{r.increase:g}")
    return out


# -- half-dead ---------------------------------------------------------------------------------

def measure_half_dead(ctx: Context) -> list[Measurement]:
    """Retrains without carrier loss per NIC interface and per InfiniBand port."""
    transitions = nic_transitions(ctx)
    out = []
    for (iface,), r in rates_by(ctx, RECOVERIES, IFACE, LINK).items():
        moved = transitions.get(iface)
        if moved is not None and moved.value > 0:
            value, note = 0.0, f"carrier moved ({moved.evidence}): counted as flapping"
        else:
            value, note = r.increase, f"{r.increase:g} PHY recoveries, carrier steady"
        out.append(Measurement(iface, value, join(note, behind(ctx, iface)), labels={"interface": iface}))
    ports = rdma_ports(ctx)
    downed = rates_by(ctx, IB_DOWNED, PORT, LINK)
    for k, r in rates_by(ctx, IB_RECOVERY, PORT, LINK).items():
        port = ports.get((k[0], k[1]))
        if port is not None and port.roce:
            continue
        down = downed.get(k)
        if down is not None and down.increase > 0:
            value, note = 0.0, f"link_downed +{down.increase:g}: counted as flapping"
        else:
            value, note = r.increase, f"{r.increase:g} link error recoveries, link stayed up"
        out.append(Measurement(port_name(k), value, note, labels=dict(zip(PORT, k))))
    return out


# -- bit error ratios ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Ber:
    ber: float
    bits: float
    basis: str  # "rx_bits" (the driver's received-bits counter) or "speed" (link speed x seconds)


def _bits(r: Rate, rx_bits: Rate | None, speed_bytes: float | None) -> tuple[float, str] | None:
    if rx_bits is not None and rx_bits.increase > 0:
        return rx_bits.increase, "rx_bits"
    if speed_bytes:
        return speed_bytes * 8 * r.seconds, "speed"
    return None


def nic_ber(ctx: Context, numerator: Mapping[tuple[str, ...], Rate], kind: str = LINK) -> dict[str, Ber]:
    """`numerator` (errors or corrected bits per interface) over the interface's received bits."""
    rx_bits = rates_by(ctx, RX_BITS, IFACE, kind)
    speed = gauges_by(ctx, SPEED, IFACE)
    out = {}
    for key, r in numerator.items():
        bits = _bits(r, rx_bits.get(key), speed.get(key))
        if bits is not None:
            out[key[0]] = Ber(r.increase / bits[0], bits[0], bits[1])
    return out


def basis_note(basis: str) -> str:
    return "bits = rx_bits_phy" if basis == "rx_bits" else "bits = link speed x time (no rx_bits counter)"


def measure_post_fec_ber(ctx: Context) -> list[Measurement]:
    errors = rates_by(ctx, PHY_ERRORS, IFACE, LINK, where=lambda labels: labels.get("kind") == "pcs_symbol")
    out = []
    for iface, ber in sorted(nic_ber(ctx, errors).items()):
        out.append(Measurement(iface, ber.ber, join(basis_note(ber.basis), behind(ctx, iface)),
                               labels={"interface": iface, "basis": ber.basis}))
    ports = rdma_ports(ctx)
    rate = gauges_by(ctx, IB_RATE, PORT)
    for k, r in rates_by(ctx, IB_SYMBOL, PORT, LINK).items():
        port = ports.get((k[0], k[1]))
        if (port is not None and port.roce) or not rate.get(k):
            continue
        bits = rate[k] * 8 * r.seconds
        note = "symbol errors over port rate x time" + ("; counter saturated" if r.saturated else "")
        out.append(Measurement(port_name(k), r.increase / bits, note,
                               labels={**dict(zip(PORT, k)), "basis": "speed"}))
    return out


def measure_pre_fec_rise(ctx: Context) -> list[Measurement]:
    """Pre-FEC BER in the window over the port's own BER in the baseline span before it."""
    corrected = rates_by(ctx, FEC_CORRECTED, IFACE, LINK)
    now = nic_ber(ctx, corrected)
    corrected_long = rates_by(ctx, FEC_CORRECTED, IFACE, BASELINE)
    bits_long = rates_by(ctx, RX_BITS, IFACE, BASELINE)
    speed = gauges_by(ctx, SPEED, IFACE)
    floor = ctx.pre_fec_ber_floor
    out = []
    for iface, current in sorted(now.items()):
        long = corrected_long.get((iface,))
        if long is None:
            continue
        short = corrected[(iface,)]
        span = long.seconds - short.seconds
        if span <= short.seconds / 2:
            continue  # no baseline before the window yet: unknown, not healthy
        long_bits = _bits(long, bits_long.get((iface,)), speed.get((iface,)))
        if long_bits is None:
            continue
        before_bits = long_bits[0] - current.bits
        baseline = (long.increase - short.increase) / before_bits if before_bits > 0 else 0.0
        factor = current.ber / max(baseline, floor) if floor > 0 or baseline > 0 else 0.0
        note = f"pre-FEC BER {current.ber:.3g}, baseline {baseline:.3g}; {basis_note(current.basis)}"
        out.append(Measurement(iface, factor, join(note, behind(ctx, iface)),
                               labels={"interface": iface, "basis": current.basis}))
    return out


# -- classification ----------------------------------------------------------------------------

@dataclass(frozen=True)
class PortClass:
    port: str
    state: str  # healthy, flapping, half-dead, degraded
    evidence: str


LINK_SIGNALS = ("link_flaps", "link_half_dead", "link_post_fec_ber", "link_pre_fec_ber_rise")


def classify(measured: Mapping[str, list[Measurement] | None],
             bad: Mapping[str, float]) -> dict[str, PortClass]:
    """Each NIC/InfiniBand port's class from the link signals' measurements and bad thresholds.

    Switch ports (link_flaps also measures them) are not classified here."""
    def hits(signal: str) -> dict[str, Measurement]:
        limit = bad.get(signal)
        return {m.target: m for m in measured.get(signal) or [] if "switch" not in m.labels
                and limit is not None and m.value >= limit}

    seen = {m.target for name in LINK_SIGNALS for m in measured.get(name) or [] if "switch" not in m.labels}
    flapping, half_dead = hits("link_flaps"), hits("link_half_dead")
    crc = hits("phy_error_rate")
    post, pre = hits("link_post_fec_ber"), hits("link_pre_fec_ber_rise")
    steady = {m.target for m in measured.get("link_flaps") or [] if m.value == 0}
    out = {}
    for port in sorted(seen | set(crc)):
        if port in flapping:
            out[port] = PortClass(port, FLAPPING, f"{flapping[port].value:g} transitions")
        elif port in half_dead:
            evidence = f"{half_dead[port].value:g} retrains without carrier loss"
            out[port] = PortClass(port, HALF_DEAD, evidence)
        elif port in crc and port in steady:
            evidence = f"{crc[port].value:.3g} {crc[port].note}/s, carrier steady"
            out[port] = PortClass(port, HALF_DEAD, evidence)
        elif port in post:
            out[port] = PortClass(port, DEGRADED, f"post-FEC BER {post[port].value:.3g}")
        elif port in pre:
            out[port] = PortClass(port, DEGRADED, f"pre-FEC BER x{pre[port].value:.3g} its baseline")
        elif port in seen:
            out[port] = PortClass(port, HEALTHY, "")
    return out


SIGNALS: list[Signal] = [
    Signal(
        name="link_half_dead",
        component="network",
        title="Link retrains without carrier loss (half-dead link)",
        formula=("increase(nic_link_recoveries) per NIC, increase(rdma_port_link_error_recovery) per "
                 "InfiniBand port, over link.window, counted only while the carrier did not move "
                 "(carrier_changes and link-down events flat; link_downed flat on InfiniBand)"),
        unit=COUNT,
        window=LINK,
        good=0.0,
        bad=2.0,
        weight=3.0,
        phrase="half-dead: retrained {value} time(s) without losing carrier",
        hint=("the PHY keeps retraining under traffic (firmware or a marginal cable/optic): every retrain "
              "stalls the collective; check the NIC firmware, reseat or replace the cable/optic, drain the "
              "node if it goes on"),
        measure=measure_half_dead,
        families=(RECOVERIES, CARRIER, LINK_DOWN, IB_RECOVERY, IB_DOWNED, "infrapulse_rdma_port_info",
                  "infrapulse_switch_lldp_neighbor_info"),
        sources=("ethtool", "infiniband"),
        counters=(RECOVERIES, CARRIER, LINK_DOWN, IB_RECOVERY, IB_DOWNED),
        critical=True,
    ),
    Signal(
        name="link_post_fec_ber",
        component="network",
        title="Post-FEC bit error ratio",
        formula=("increase(nic_phy_errors{kind=pcs_symbol}) / increase(nic_received_bits) per NIC (where "
                 "there is no received-bits counter: / (link_speed_bytes_per_second x 8 x seconds), "
                 "basis=speed); increase(rdma_port_symbol_errors) / (port rate x 8 x seconds) per "
                 "InfiniBand port; over link.window"),
        unit=RATIO,
        window=LINK,
        good=1e-13,
        bad=1e-12,
        weight=2.0,
        phrase="post-FEC BER {value}",
        hint=("errors are getting past FEC: a dirty connector, a failing optic or cable; check the module "
              "temperature and DOM readings and replace the weakest part"),
        measure=measure_post_fec_ber,
        families=(PHY_ERRORS, RX_BITS, SPEED, IB_SYMBOL, IB_RATE, "infrapulse_rdma_port_info",
                  "infrapulse_switch_lldp_neighbor_info"),
        sources=("ethtool", "infiniband"),
        counters=(PHY_ERRORS, RX_BITS, IB_SYMBOL),
    ),
    Signal(
        name="link_pre_fec_ber_rise",
        component="network",
        title="Pre-FEC bit error ratio against the port's own baseline",
        formula=("(increase(nic_fec_corrected_bits) / bits) over link.window divided by the same ratio "
                 "over the link.baseline_window before it (at least link.pre_fec_ber_floor), per NIC"),
        unit=FACTOR,
        window=LINK,
        good=2.0,
        bad=10.0,
        weight=1.0,
        phrase="pre-FEC BER {value} its own baseline",
        hint=("FEC is working much harder than this link used to: the optic, cable or connector is "
              "degrading (or the module runs hot); plan a replacement before errors pass FEC"),
        measure=measure_pre_fec_rise,
        families=(FEC_CORRECTED, RX_BITS, SPEED, "infrapulse_switch_lldp_neighbor_info"),
        sources=("ethtool",),
        counters=(FEC_CORRECTED, RX_BITS),
    ),
]
