"""The simulated GPU node: RDMA sysfs tree + NIC driver stats whose counters move.

`NodeSimulator.step(dt)` advances every counter by `dt` seconds of traffic (configurable
through `Traffic`) plus whatever anomaly the scenario board has switched on; `run()` does that
in the background for the demo. All anomalies hit the *victim* port (mlx5_0 / ens1f0np0, the
first RoCE port), so the demo, the dashboards and the alerts agree on where to look;
`ecn-spike` also marks the other RoCE ports, more mildly, as an incast would.

Scenario names are shared with the switch simulators, which implement the switch side.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..sources.nic.infiniband import PMA_COUNTER_BITS
from .net_sysfs import NetLink, write_links
from .nic_stats import NicStats, write_stats
from .scenarios import PAUSE_FRAMES_PER_EPISODE, PAUSE_US_PER_FRAME, ScenarioBoard
from .sysfs_tree import SysfsTree, demo_devices, write_tree

if TYPE_CHECKING:  # demo imports every simulator module, so only for the annotations
    from .demo import DemoContext, DemoPart

log = logging.getLogger("infrapulse.simulate.node")

SCENARIOS = {
    "pfc-storm": "NIC ens1f0np0: rx/tx priority-3 PFC pause frames and pause time climb fast, pause storm "
                 "events; RDMA port mlx5_0 transmit wait rises and throughput drops",
    "ecn-spike": "RoCE ports: ECN-marked RoCE packets, CNPs sent/handled and rx_prio3_marked climb "
                 "(hardest on mlx5_0)",
    "rdma-retrans": "mlx5_0: packet_seq_err, local_ack_timeout_err, out_of_sequence and adaptive "
                    "retransmissions climb",
    "link-flap": "mlx5_0 / ens1f0np0: the link goes down for 2 s every 10 s (state DOWN, link_downed, "
                 "link_down_events_phy and the netdev's carrier_changes/carrier_down_count increase)",
    "half-dead-link": "ens1f0np0: the PHY retrains every 4 s without losing carrier "
                      "(total_success_recovery_phy), each retrain a burst of CRC/PCS symbol errors and "
                      "FEC-corrected bits; carrier_changes stay put",
}
HALF_DEAD_RETRAIN_SECONDS = 4.0
VICTIM_DEVICE = "mlx5_0"
VICTIM_NETDEV = "ens1f0np0"
ROCE_PRIORITY = 3
Q_COUNTER_BITS = 32  # mlx5 Q counters wrap at 2^32


@dataclass
class Traffic:
    """Baseline load of every port; the scenarios add on top."""

    gbytes_per_second: float = 20.0  # RDMA payload per direction per port
    packet_bytes: int = 4096
    ecn_marked_fraction: float = 2e-6  # of received RoCE packets, without incidents
    # Priority-3 PFC pauses received without incidents: a few thousand an hour, as a healthy
    # lossless port shows (a real ConnectX-4 Lx with PFC: 12,667 with no drops), each holding the
    # priority PAUSE_US_PER_FRAME: paused ~0.01% of the time, far below the 1%-of-an-hour
    # InfrapulseNicPfcPausesWithoutDrops and the health signal's good level (0.5%).
    pause_frames_per_second: float = 1.0
    ethernet_fraction: float = 0.02  # non-RoCE traffic on priority 0 of RoCE netdevs
    jitter: float = 0.15


@dataclass
class _Port:
    device: str
    port: int
    base: str  # path relative to class/infiniband
    roce: bool
    netdev: str
    hw: frozenset[str]


class NodeSimulator:
    def __init__(self, tree: SysfsTree, nics: dict[str, NicStats], stats_dir: Path,
                 scenarios: ScenarioBoard | None = None, traffic: Traffic | None = None,
                 rng: random.Random | None = None, links: dict[str, NetLink] | None = None) -> None:
        self.tree = tree
        self.links = links or {}  # netdev -> its class/net link state (carrier counters, hwmon)
        self._retrain_phase = 0
        self.nics = nics
        self.stats_dir = Path(stats_dir)
        self.scenarios = scenarios or ScenarioBoard()
        self.traffic = traffic or Traffic()
        self.rng = rng or random.Random(7)
        self.clock = 0.0  # simulated seconds since start
        self._link_down = False
        self.ports = [_Port(d.name, p.number, f"{d.name}/ports/{p.number}", p.link_layer == "Ethernet",
                            p.netdev, frozenset(p.hw_counters))
                      for d in tree.devices for p in d.ports]
        self._device_hw = {d.name: frozenset(d.device_hw_counters) for d in tree.devices}

    @classmethod
    def create(cls, sysfs_root: str | Path, stats_dir: str | Path, scenarios: ScenarioBoard | None = None,
               traffic: Traffic | None = None, rng: random.Random | None = None) -> NodeSimulator:
        tree = write_tree(sysfs_root, demo_devices())
        netdevs = {p.netdev: netdev_driver(d.name) for d in tree.devices for p in d.ports if p.netdev}
        nics = write_stats(stats_dir, netdevs)
        rates = {p.netdev: p.rate for d in tree.devices for p in d.ports if p.netdev}
        links = write_links(sysfs_root, {n: (rates[n], driver == "mlx5") for n, driver in netdevs.items()})
        return cls(tree, nics, Path(stats_dir), scenarios, traffic, rng, links)

    # -- helpers ---------------------------------------------------------------------------------

    def _count(self, expected: float) -> int:
        """An integer with the given mean: whole part plus a random rounding of the rest."""
        if expected <= 0:
            return 0
        whole = int(expected)
        return whole + (self.rng.random() < expected - whole)

    def _pma(self, port: _Port, name: str, delta: int) -> None:
        bits = PMA_COUNTER_BITS[name]
        self.tree.add(f"{port.base}/counters/{name}", delta, bits=bits, saturate=bits < 64)

    def _hw(self, port: _Port, name: str, delta: int) -> None:
        if not delta:
            return
        if name in port.hw:
            bits = None if name.startswith(("np_", "rp_", "rx_icrc")) else Q_COUNTER_BITS
            self.tree.add(f"{port.base}/hw_counters/{name}", delta, bits=bits)
        elif name in self._device_hw.get(port.device, ()):  # switchdev: congestion counters per device
            self.tree.add(f"{port.device}/hw_counters/{name}", delta)

    # -- one step --------------------------------------------------------------------------------

    def step(self, dt: float) -> None:
        self.clock += dt
        flap = self._update_link_state()
        for port in self.ports:
            self._step_port(port, dt)
        for nic in self.nics.values():
            self._step_nic(nic, dt, flap)
            nic.write(self.stats_dir)

    def _update_link_state(self) -> bool:
        """link-flap: down for 2 s out of every 10 s. Returns True on a down transition."""
        want_down = self.scenarios.active("link-flap") and self.scenarios.elapsed("link-flap") % 10 < 2
        victim = next(p for p in self.ports if p.device == VICTIM_DEVICE)
        went_down = want_down and not self._link_down
        if want_down != self._link_down:
            self._link_down = want_down
            link = self.links.get(VICTIM_NETDEV)
            if link is not None:  # the node side of a flap: the netdev loses and regains carrier
                link.set_carrier(not want_down)
                link.write(self.tree.root)
            self.tree.write_text(f"{victim.base}/state", "1: DOWN" if want_down else "4: ACTIVE")
            self.tree.write_text(f"{victim.base}/phys_state", "2: Polling" if want_down else "5: LinkUp")
            if went_down:
                self._pma(victim, "link_downed", 1)
                self._pma(victim, "link_error_recovery", self.rng.randint(1, 3))
                self._pma(victim, "symbol_error", self.rng.randint(5, 40))
        return went_down

    def _step_port(self, port: _Port, dt: float) -> None:
        t = self.traffic
        victim = port.device == VICTIM_DEVICE
        load = 1.0 + self.rng.uniform(-t.jitter, t.jitter)
        if victim and self._link_down:
            load = 0.0
        elif victim and self.scenarios.active("pfc-storm"):
            load *= 0.3  # paused most of the time
        payload = t.gbytes_per_second * 1e9 * dt * load
        packets = payload / t.packet_bytes
        for direction in ("xmit", "rcv"):
            self._pma(port, f"port_{direction}_data", int(payload / 4))  # 4-octet words
            self._pma(port, f"port_{direction}_packets", int(packets))
            self._pma(port, f"unicast_{direction}_packets", int(packets))
        self._hw(port, "rx_write_requests", int(packets * 0.3))
        self._hw(port, "rx_read_requests", int(packets * 0.05))
        self._hw(port, "out_of_sequence", self._count(0.02 * dt))
        if victim and self.scenarios.active("pfc-storm"):
            self._pma(port, "port_xmit_wait", int(2e6 * dt))
        else:
            self._pma(port, "port_xmit_wait", self._count(50 * dt))
        if port.roce:
            marked = packets * t.ecn_marked_fraction
            if self.scenarios.active("ecn-spike"):
                ramp = min(1.0, 0.2 + self.scenarios.elapsed("ecn-spike") / 30)
                marked += packets * (0.08 if victim else 0.01) * ramp
            # fw-upgrade-cc-reset (simulate/roce_cc.py): the NP is off, so marked packets keep
            # arriving (the switch still marks) but no CNP answers them.
            np_off = victim and self.scenarios.active("fw-upgrade-cc-reset")
            if np_off:
                marked += packets * 0.002
            marked_n = self._count(marked)
            self._hw(port, "np_ecn_marked_roce_packets", marked_n)
            self._hw(port, "np_cnp_sent", 0 if np_off else self._count(marked_n * 0.9))
            self._hw(port, "rp_cnp_handled", self._count(marked_n * 0.85))
        if victim and self.scenarios.active("rdma-retrans"):
            # Past the bad line (100/s) at full rate, so the signal costs its whole weight (not 1.9 of 3).
            rate = min(1.0, 0.3 + self.scenarios.elapsed("rdma-retrans") / 20)
            self._hw(port, "packet_seq_err", self._count(800 * dt * rate))
            self._hw(port, "local_ack_timeout_err", self._count(80 * dt * rate))
            self._hw(port, "out_of_sequence", self._count(1800 * dt * rate))
            self._hw(port, "duplicate_request", self._count(240 * dt * rate))
            self._hw(port, "roce_adp_retrans", self._count(600 * dt * rate))
            self._hw(port, "implied_nak_seq_err", self._count(40 * dt * rate))

    def _step_nic(self, nic: NicStats, dt: float, went_down: bool) -> None:
        """One step of driver statistics, counted under each driver's own names (nic.count)."""
        t = self.traffic
        victim = nic.interface == VICTIM_NETDEV
        down = victim and self._link_down
        load = 0.0 if down else 1.0 + self.rng.uniform(-t.jitter, t.jitter)
        storm = victim and self.scenarios.active("pfc-storm")
        if storm:
            load *= 0.3
        roce_bytes = t.gbytes_per_second * 1e9 * dt * load
        eth_bytes = roce_bytes * t.ethernet_fraction
        p = ROCE_PRIORITY
        for d in ("rx", "tx"):
            nic.count("prio_bytes", int(roce_bytes), d, p)
            nic.count("prio_packets", int(roce_bytes / t.packet_bytes), d, p)
            nic.count("prio_bytes", int(eth_bytes), d, 0)
            nic.count("prio_packets", int(eth_bytes / 1500), d, 0)
            nic.count("wire_bytes", int(roce_bytes + eth_bytes), d)
            nic.count("wire_packets", int(roce_bytes / t.packet_bytes + eth_bytes / 1500), d)
            nic.count("eth_bytes", int(eth_bytes), d)
            nic.count("eth_packets", int(eth_bytes / 1500), d)
        wire_bits = (roce_bytes + eth_bytes) * 8
        nic.count("rx_bits", int(wire_bits))
        # Raw per-lane errors before FEC; FEC corrects them all (the OFED capture's lanes sum to
        # its rx_corrected_bits_phy).
        lane_errors = [self._count(wire_bits / 4 * 1e-9) for _ in range(4)]
        for lane, errors in enumerate(lane_errors):
            nic.count("lane_errors", errors, priority=lane)
        nic.count("fec_corrected_bits", sum(lane_errors))
        if victim and self.scenarios.active("half-dead-link"):
            self._half_dead(nic, wire_bits)
        elif victim:
            self._retrain_phase = 0
        if went_down and victim:
            nic.count("link_down", 1)
            nic.count("crc_errors", self.rng.randint(1, 20))
            nic.count("symbol_errors", self.rng.randint(10, 200))
        # PFC on the RoCE priority: a trickle normally, a flood in a storm.
        if storm:
            ramp = min(1.0, 0.3 + self.scenarios.elapsed("pfc-storm") / 20)
            rx_pauses, tx_pauses = self._count(60000 * dt * ramp), self._count(25000 * dt * ramp)
            rx_paused_us, tx_paused_us = int(0.8e6 * dt * ramp), int(0.4e6 * dt * ramp)
            nic.count("storm_warning", self._count(dt / 5))
            if self.scenarios.elapsed("pfc-storm") > 20:
                nic.count("storm_error", self._count(dt / 15))
            nic.count("prio_discards", self._count(200 * dt), priority=p)
            nic.count("buffer_threshold", self._count(50 * dt))
        else:
            rx_pauses = self._count(t.pause_frames_per_second * dt)
            tx_pauses = self._count(t.pause_frames_per_second * dt / 3)
            rx_paused_us, tx_paused_us = rx_pauses * PAUSE_US_PER_FRAME, tx_pauses * PAUSE_US_PER_FRAME
        for d, frames, paused in (("rx", rx_pauses, rx_paused_us), ("tx", tx_pauses, tx_paused_us)):
            episodes = self._count(frames / PAUSE_FRAMES_PER_EPISODE)
            nic.count("pfc_frames", frames, d, p)
            nic.count("pfc_resume_frames", episodes, d, p)  # one XON ends each episode
            nic.count("pfc_us", paused, d, p)
            nic.count("link_pause_frames", frames, d)
            nic.count("pfc_transitions", episodes, d, p)
        if self.scenarios.active("ecn-spike"):
            ramp = min(1.0, 0.2 + self.scenarios.elapsed("ecn-spike") / 30)
            marked = roce_bytes / t.packet_bytes * (0.08 if victim else 0.01) * ramp
            nic.count("ecn_marked", self._count(marked), priority=p)

    def _half_dead(self, nic: NicStats, wire_bits: float) -> None:
        """half-dead-link: a retrain every few seconds that the carrier never shows; each one is a
        successful PHY recovery with a burst of errors FEC could not correct and a jump in the bits
        it did correct (pre-FEC BER up 1000x)."""
        phase = int(self.scenarios.elapsed("half-dead-link") // HALF_DEAD_RETRAIN_SECONDS) + 1
        if phase != self._retrain_phase:
            self._retrain_phase = phase
            nic.count("link_recovery", 1)
            crc = self.rng.randint(200, 800)
            nic.count("crc_errors", crc)
            nic.count("pcs_symbol_errors", crc)
            nic.count("symbol_errors", crc)
        nic.count("fec_corrected_bits", self._count(wire_bits * 1e-6))

    async def run(self, period: float = 1.0) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            try:
                # A few hundred small file writes: off the loop, so the daemon's scrapes stay snappy.
                await asyncio.to_thread(self.step, now - last)
            except OSError:
                log.exception("node simulator step failed")
            last = now


def netdev_driver(device: str) -> str:
    """The NIC driver behind an RDMA device's netdev, by the RDMA driver's device name."""
    for prefix, driver in (("mlx5_", "mlx5"), ("bnxt_re", "bnxt_en"), ("irdma", "ice"), ("i40iw", "i40e")):
        if device.startswith(prefix):
            return driver
    raise ValueError(f"{device}: no simulated NIC driver for this RDMA device")


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart

    sysfs_root = ctx.workdir / "node-sysfs"
    stats_dir = ctx.workdir / "node-ethtool"
    sim = await asyncio.to_thread(NodeSimulator.create, sysfs_root, stats_dir, ctx.scenarios, None, ctx.rng)
    for name in SCENARIOS:  # every anomaly hits the victim port of the demo host (fault_coupling.py)
        ctx.scenarios.place(name, ctx.hostname, VICTIM_NETDEV)
    task = asyncio.create_task(sim.run(1.0), name="simulate:node")

    async def close() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    sources = {
        "infiniband": {"enabled": True, "sysfs_root": str(sysfs_root)},
        "ethtool": {"enabled": True, "sysfs_root": str(sysfs_root), "stats_dir": str(stats_dir)},
    }
    devices = ", ".join(d.name for d in sim.tree.devices)
    return DemoPart("node", sources, close, description=f"sysfs tree at {sysfs_root} ({devices}); "
                                                        f"NIC stats in {stats_dir}")
