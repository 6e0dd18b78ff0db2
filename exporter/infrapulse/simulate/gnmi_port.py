"""One simulated switch port's counters (the gNMI simulators' shared model): its initial values
are a known function of the port index, so tests know what every profile must export."""

from __future__ import annotations

from dataclasses import dataclass, field

PRIORITIES = 8


@dataclass
class SimPort:
    """Counters of one switch port; initial values are a known function of the port index."""

    index: int
    name: str
    neighbor: tuple[str, str] | None = None  # (system name, port id) seen over LLDP
    oper_up: bool = True
    in_octets: int = 0
    out_octets: int = 0
    in_pkts: int = 0
    out_pkts: int = 0
    in_errors: int = 0
    out_errors: int = 0
    in_discards: int = 0
    out_discards: int = 0
    fcs_errors: int = 0
    crc_errors: int = 0
    carrier_transitions: int = 0
    mac_pause_rx: int = 0
    mac_pause_tx: int = 0
    fec_uncorrectable: int = 0
    pfc_rx: list[int] = field(default_factory=list)
    pfc_tx: list[int] = field(default_factory=list)
    pfc_rx_us: list[int] = field(default_factory=list)
    pfc_tx_us: list[int] = field(default_factory=list)
    q_tx_pkts: list[int] = field(default_factory=list)
    q_tx_bytes: list[int] = field(default_factory=list)
    q_dropped: list[int] = field(default_factory=list)
    q_ecn: list[int] = field(default_factory=list)
    q_depth: list[int] = field(default_factory=list)
    q_watermark: list[int] = field(default_factory=list)
    q_wred: list[int] = field(default_factory=list)
    prio_discards: list[int] = field(default_factory=list)
    pg_shared: list[int] = field(default_factory=list)  # priority-group occupancy, bytes
    pg_headroom: list[int] = field(default_factory=list)
    wd_stuck: list[int] = field(default_factory=list)  # PFC watchdog, per unicast queue
    wd_recovered: list[int] = field(default_factory=list)

    # Derived transition counters: interface-transitions counts oper-status flaps like carrier-
    # transitions (+2 here, so that a sum of leaves shows); link-transitions counts more (below
    # hold-time and dampening). Cumulus splits carrier-transitions into up and down.
    @property
    def interface_transitions(self) -> int:
        return self.carrier_transitions + 2

    @property
    def link_transitions(self) -> int:
        return self.carrier_transitions + 6

    @property
    def carrier_up(self) -> int:
        return (self.carrier_transitions + 1) // 2

    @property
    def carrier_down(self) -> int:
        return self.carrier_transitions // 2

    # only the SONiC dialect shows these (simulate/gnmi_sonic.py)
    pfc_on2off: list[int] = field(default_factory=list)
    q_wred_dropped: list[int] = field(default_factory=list)
    q_storms_detected: list[int] = field(default_factory=list)
    q_storms_restored: list[int] = field(default_factory=list)
    pg_shared_wm: list[int] = field(default_factory=list)
    pg_headroom_wm: list[int] = field(default_factory=list)
    last_down: float = 0.0  # Unix time the port last went down

    @classmethod
    def initial(cls, index: int, name: str, neighbor: tuple[str, str] | None) -> SimPort:
        i = index
        return cls(
            index=i, name=name, neighbor=neighbor, in_octets=1_000_000 * (i + 1),
            out_octets=2_000_000 * (i + 1),
            in_pkts=1000 * (i + 1), out_pkts=2000 * (i + 1), in_errors=i, out_errors=2 * i, in_discards=3 * i,
            out_discards=4 * i, fcs_errors=5 * i, crc_errors=5 * i + 1000, carrier_transitions=1,
            mac_pause_rx=7 * i + 3, mac_pause_tx=11 * i + 5, fec_uncorrectable=13 * i + 2,
            pfc_rx=[10 * i + p for p in range(PRIORITIES)], pfc_tx=[20 * i + p for p in range(PRIORITIES)],
            pfc_rx_us=[1000 * (10 * i + p) for p in range(PRIORITIES)],
            pfc_tx_us=[1000 * (20 * i + p) for p in range(PRIORITIES)],
            q_tx_pkts=[1000 * i + q for q in range(PRIORITIES)],
            q_tx_bytes=[4096 * (1000 * i + q) for q in range(PRIORITIES)],
            q_dropped=[q for q in range(PRIORITIES)], q_ecn=[10 * q + i for q in range(PRIORITIES)],
            q_depth=[100 * q for q in range(PRIORITIES)],
            q_watermark=[1000 * q + i for q in range(PRIORITIES)],
            q_wred=[2 * q + i + 1 for q in range(PRIORITIES)],
            prio_discards=[100 * i + 3 * p for p in range(PRIORITIES)],
            pg_shared=[4096 * (g + 1) + i for g in range(PRIORITIES)],
            pg_headroom=[512 * g + i for g in range(PRIORITIES)],
            # a healthy watchdog: every storm it detected it also restored (detected - restored = 0)
            wd_stuck=[3 * q + i for q in range(PRIORITIES)],
            wd_recovered=[3 * q + i for q in range(PRIORITIES)],
            pfc_on2off=[(10 * i + p) // 2 for p in range(PRIORITIES)],
            q_wred_dropped=[q // 2 for q in range(PRIORITIES)],
            q_storms_detected=[i + q for q in range(PRIORITIES)],
            q_storms_restored=[i + q for q in range(PRIORITIES)],
            pg_shared_wm=[2000 * pg + i for pg in range(PRIORITIES)],
            pg_headroom_wm=[300 * pg + i for pg in range(PRIORITIES)],
            last_down=1_764_583_200.0 + 60 * i)  # 2025-12-01 10:00 UTC + i minutes
