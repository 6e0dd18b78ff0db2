"""The node simulator: tree layout, counter semantics, traffic and the five scenarios. Feeding
the daemon: tests/integration/test_node_simulator_daemon.py."""

from __future__ import annotations

import json
import random

from infrapulse.simulate import node
from infrapulse.simulate.node import VICTIM_DEVICE, VICTIM_NETDEV, NodeSimulator, Traffic
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.simulate.sysfs_tree import NO_PMA, write_tree
from infrapulse.sources.nic.ethtool import EthtoolCollector, FileStatsProvider
from infrapulse.sources.nic.infiniband import InfinibandReader


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_sim(tmp_path, active=()):
    clock = FakeClock()
    board = ScenarioBoard(set(active), clock=clock)
    sim = NodeSimulator.create(tmp_path / "sys", tmp_path / "stats", board, Traffic(), random.Random(1))
    return sim, board, clock


def run(sim: NodeSimulator, clock: FakeClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.now += 1
        sim.step(1.0)


def read_rdma(sim: NodeSimulator) -> dict:
    reader = InfinibandReader(sim.tree.root)
    try:
        return {r.target: r for r in reader.collect()}
    finally:
        reader.close()


def read_nics(sim: NodeSimulator) -> dict:
    return json.loads((sim.stats_dir / f"{VICTIM_NETDEV}.json").read_text())


def test_bench_tree_layout(tmp_path):
    tree = write_tree(tmp_path, 8)
    ib = tmp_path / "class" / "infiniband"
    assert sorted(p.name for p in ib.iterdir()) == [f"mlx5_{i}" for i in range(8)]
    port = ib / "mlx5_3" / "ports" / "1"
    assert (port / "state").read_text() == "4: ACTIVE\n"
    assert (port / "phys_state").read_text() == "5: LinkUp\n"
    assert (port / "link_layer").read_text() == "InfiniBand\n"
    assert len(list((port / "counters").iterdir())) == 21
    assert len(list((port / "hw_counters").iterdir())) == 32  # 31 counters + lifespan
    assert (port / "hw_counters" / "lifespan").read_text() == "10\n"
    written = tree.values["mlx5_3/ports/1/counters/port_xmit_data"]
    assert int((port / "counters" / "port_xmit_data").read_text()) == written


def test_demo_tree_has_the_awkward_devices(tmp_path):
    sim, _, _ = make_sim(tmp_path)
    ib = sim.tree.class_dir
    assert (ib / "i40iw0/ports/1/counters/port_rcv_data").read_text() == NO_PMA + "\n"
    assert not (ib / "irdma0/ports/1/counters").exists()
    assert (ib / "irdma0/ports/1/hw_counters/tcpRetransSegs").exists()
    assert (ib / "mlx5_6/hw_counters/np_cnp_sent").exists()  # switchdev: device-level counters
    assert (ib / "mlx5_0/ports/1/gid_attrs/ndevs/0").read_text() == "ens1f0np0\n"
    assert (ib / "mlx5_4/ports/1/link_layer").read_text() == "InfiniBand\n"
    results = read_rdma(sim)
    assert all(r.snapshot is not None for r in results.values())
    assert not (ib / "bnxt_re0/ports/1/counters").exists()  # Broadcom RoCE: no PMA counters/
    assert sorted(p.name[:-5] for p in sim.stats_dir.iterdir()) == [
        "eno1", "ens10f0np0", "ens1f0np0", "ens2f0np0", "ens3f0np0", "ens4f0np0", "ens7f0np0", "ens9f0"]


def test_counter_semantics(tmp_path):
    tree = write_tree(tmp_path, 1)
    q = "mlx5_0/ports/1/hw_counters/packet_seq_err"
    tree.set(q, 2**32 - 3)
    tree.add(q, 5, bits=32)  # mlx5 Q counters wrap
    assert tree.values[q] == 2
    pma = "mlx5_0/ports/1/counters/link_downed"
    tree.set(pma, 250)
    tree.add(pma, 10, bits=8, saturate=True)  # PMA error counters saturate
    assert tree.values[pma] == 255
    assert (tree.class_dir / pma).read_text() == "255\n"


def test_traffic_advances_counters_consistently(tmp_path):
    sim, _, clock = make_sim(tmp_path)
    before = read_rdma(sim)["mlx5_4"].snapshot
    run(sim, clock, 5)
    after = read_rdma(sim)["mlx5_4"].snapshot
    labels = ("mlx5_4", "1")
    rx = (after.get("infrapulse_rdma_port_received_bytes_total", labels)
          - before.get("infrapulse_rdma_port_received_bytes_total", labels))
    # 20 GB/s +-15 % for 5 s, counted in 4-octet words and multiplied back.
    assert 5 * 20e9 * 0.85 <= rx <= 5 * 20e9 * 1.15
    packets = (after.get("infrapulse_rdma_port_received_packets_total", labels)
               - before.get("infrapulse_rdma_port_received_packets_total", labels))
    assert abs(packets - rx / 4096) < 10


def test_quiet_node_has_no_incidents(tmp_path):
    sim, _, clock = make_sim(tmp_path)
    start = dict(sim.tree.values)
    nic_start = read_nics(sim)
    run(sim, clock, 10)
    v = sim.tree.values
    link_downed = f"{VICTIM_DEVICE}/ports/1/counters/link_downed"
    assert v[link_downed] == start[link_downed]
    assert v[f"{VICTIM_DEVICE}/ports/1/hw_counters/packet_seq_err"] == start[
        f"{VICTIM_DEVICE}/ports/1/hw_counters/packet_seq_err"]
    nics = read_nics(sim)
    assert nics["rx_prio3_pause"] - nic_start["rx_prio3_pause"] < 100
    assert nics["tx_pause_storm_warning_events"] == 0


def test_pfc_storm(tmp_path):
    sim, _, clock = make_sim(tmp_path, active={"pfc-storm"})
    start = read_nics(sim)
    other_start = json.loads((sim.stats_dir / "ens2f0np0.json").read_text())
    run(sim, clock, 30)
    nics = read_nics(sim)
    other = json.loads((sim.stats_dir / "ens2f0np0.json").read_text())
    assert nics["rx_prio3_pause"] - start["rx_prio3_pause"] > 500_000
    assert nics["tx_prio3_pause"] - start["tx_prio3_pause"] > 200_000
    paused = (nics["rx_prio3_pause_duration"] - start["rx_prio3_pause_duration"]) / 1e6
    assert 10 < paused < 30  # seconds of pause in 30 s: a large share of the time
    assert nics["tx_pause_storm_warning_events"] >= 3
    assert nics["tx_pause_storm_error_events"] >= 1  # after 20 s of storm
    assert other["rx_prio3_pause"] - other_start["rx_prio3_pause"] < 1000  # only the victim storms
    # The storm is visible through the ethtool source too.
    collector = EthtoolCollector(FileStatsProvider(sim.stats_dir), interfaces=[VICTIM_NETDEV])
    [result] = collector.collect()
    assert result.snapshot.get("infrapulse_nic_pfc_pause_frames_total", (VICTIM_NETDEV, "3", "rx")) == nics[
        "rx_prio3_pause"]
    assert result.snapshot.get("infrapulse_nic_pause_storm_events_total", (VICTIM_NETDEV, "warning")) >= 3


def test_ecn_spike(tmp_path):
    sim, _, clock = make_sim(tmp_path)
    key = f"{VICTIM_DEVICE}/ports/1/hw_counters/np_ecn_marked_roce_packets"
    run(sim, clock, 5)
    quiet = sim.tree.values[key]
    run(sim, clock, 5)
    quiet_rate = (sim.tree.values[key] - quiet) / 5
    sim.scenarios.activate("ecn-spike")
    nic_start = read_nics(sim)
    start = dict(sim.tree.values)
    run(sim, clock, 10)
    spike_rate = (sim.tree.values[key] - start[key]) / 10
    assert spike_rate > 1000 * max(quiet_rate, 1)
    cnp = f"{VICTIM_DEVICE}/ports/1/hw_counters/np_cnp_sent"
    assert sim.tree.values[cnp] - start[cnp] > 0.5 * (sim.tree.values[key] - start[key])
    assert read_nics(sim)["rx_prio3_marked"] - nic_start["rx_prio3_marked"] > 100_000
    # IB ports have no congestion counters and see nothing.
    assert "mlx5_4/ports/1/hw_counters/np_ecn_marked_roce_packets" in sim.tree.values
    ib = "mlx5_4/ports/1/hw_counters/np_ecn_marked_roce_packets"
    assert sim.tree.values[ib] == start[ib]


def test_rdma_retrans(tmp_path):
    sim, _, clock = make_sim(tmp_path, active={"rdma-retrans"})
    before = read_rdma(sim)[VICTIM_DEVICE].snapshot
    run(sim, clock, 10)
    after = read_rdma(sim)[VICTIM_DEVICE].snapshot
    fam = "infrapulse_rdma_retransmission_events_total"
    for reason, at_least in (("packet_seq_err", 1000), ("local_ack_timeout_err", 100),
                             ("out_of_sequence", 2000), ("roce_adp_retrans", 1000)):
        labels = (VICTIM_DEVICE, "1", reason)
        assert after.get(fam, labels) - before.get(fam, labels) >= at_least, reason
    # Only the victim: another port's sequence errors never moved from their initial value.
    other = read_rdma(sim)["mlx5_1"].snapshot
    assert other.get(fam, ("mlx5_1", "1", "packet_seq_err")) == sim.tree.values[
        "mlx5_1/ports/1/hw_counters/packet_seq_err"]


def test_link_flap(tmp_path):
    sim, board, clock = make_sim(tmp_path)
    downed = f"{VICTIM_DEVICE}/ports/1/counters/link_downed"
    start = sim.tree.values[downed]
    nic_start = read_nics(sim)["link_down_events_phy"]
    board.activate("link-flap")
    states = []
    for _ in range(25):
        sim.step(1.0)
        snap = read_rdma(sim)[VICTIM_DEVICE].snapshot
        states.append(snap.get("infrapulse_rdma_port_state", (VICTIM_DEVICE, "1")))
        clock.now += 1
    # Down for 2 s out of every 10 s, starting at once: 3 down periods in 25 s.
    assert states[:3] == [1, 1, 4] and states[10:13] == [1, 1, 4] and states[20:23] == [1, 1, 4]
    assert sim.tree.values[downed] - start == 3
    assert read_nics(sim)["link_down_events_phy"] - nic_start == 3
    board.deactivate("link-flap")
    sim.step(1.0)
    assert read_rdma(sim)[VICTIM_DEVICE].snapshot.get("infrapulse_rdma_port_state", (VICTIM_DEVICE, "1")) == 4
    assert (sim.tree.class_dir / VICTIM_DEVICE / "ports/1/phys_state").read_text() == "5: LinkUp\n"


def test_scenarios_registered():
    assert set(node.SCENARIOS) == {"pfc-storm", "ecn-spike", "rdma-retrans", "link-flap", "half-dead-link"}
