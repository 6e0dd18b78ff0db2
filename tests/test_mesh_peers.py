"""Who the mesh probes (sources/probe/mesh_peers.py): the peers file, merging the peer sources,
peer groups from configured switches and from the LLDP table in the store, the max_peers bound,
and which local address each peer is probed from."""

from __future__ import annotations

from pathlib import Path

import pytest

from infrapulse.sources.probe import mesh_peers as mp
from infrapulse.store import Snapshot, Store


def entry(host: str, name: str = "", source: str = "config", switch: str = "", port: int | None = None
          ) -> mp.PeerEntry:
    return mp.PeerEntry(host, name, port, switch, source)


def test_peers_file_takes_addresses_and_mappings(tmp_path: Path) -> None:
    path = tmp_path / "peers.yaml"
    path.write_text("peers:\n  - 10.0.1.12\n  - {address: 10.0.1.13, name: gpu-node-03, switch: leaf01}\n"
                    "  - {address: gpu-node-04-rdma, port: 9999}\n")
    assert mp.read_peers_file(str(path)) == [
        mp.PeerEntry("10.0.1.12", "", None, "", "file"),
        mp.PeerEntry("10.0.1.13", "gpu-node-03", None, "leaf01", "file"),
        mp.PeerEntry("gpu-node-04-rdma", "", 9999, "", "file")]
    path.write_text("- 10.0.2.1\n")  # a bare list works too
    assert [e.host for e in mp.read_peers_file(str(path))] == ["10.0.2.1"]
    path.write_text("")
    assert mp.read_peers_file(str(path)) == []


@pytest.mark.parametrize("text,message", [
    ("- {address: 10.0.0.1, port: 70000}\n", "peers[0].port: must be <= 65535, got 70000"),
    ("- 10.0.0.1\n- {adress: 10.0.0.2}\n", "peers[1].adress: unknown key"),
    ("- {name: x}\n", "peers[0].address: required key is missing"),
    ("peers: {a: 1}\n", "expected a list of peers"),
    ("- [unclosed\n", "invalid YAML: line 2"),
    ("- {address: 10.0.0.1, name: 'bad name'}\n", "peers[0].name: 'bad name' does not look right"),
])
def test_peers_file_errors_name_the_file_the_entry_and_the_reason(tmp_path: Path, text: str,
                                                                  message: str) -> None:
    path = tmp_path / "peers.yaml"
    path.write_text(text)
    with pytest.raises(mp.PeersFileError) as err:
        mp.read_peers_file(str(path))
    assert str(err.value).startswith(f"peers_file {path}: ")
    assert message in str(err.value)


def test_missing_peers_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(mp.PeersFileError, match=r"peers_file .*/nope.yaml: cannot read: No such file"):
        mp.read_peers_file(str(tmp_path / "nope.yaml"))


def lldp_store(rows: list[tuple[str, str, str]]) -> Store:
    """A store holding the fabric's LLDP table: (switch, interface, neighbor_system) rows."""
    store = Store()
    snap = Snapshot()
    for switch, interface, system in rows:
        snap.add(mp.LLDP_INFO, (switch, interface, system, "ens1f0np0"), 1.0)
    store.publish("gnmi", "leafs", snap, 60)
    return store


def test_lldp_table_gives_each_host_its_switches() -> None:
    store = lldp_store([("leaf01", "Ethernet0", "gpu-node-01.cluster.local"),
                        ("leaf01", "Ethernet4", "GPU-NODE-02"), ("leaf02", "Ethernet0", "gpu-node-01"),
                        ("leaf03", "Ethernet0", "gpu-node-03")])
    assert mp.lldp_switches(store) == {"gpu-node-01": {"leaf01", "leaf02"}, "gpu-node-02": {"leaf01"},
                                       "gpu-node-03": {"leaf03"}}


def test_merge_groups_dedupes_and_counts_each_source() -> None:
    lldp = {"gpu-node-02": {"leaf01"}, "gpu-node-03": {"leaf03"}}
    own_switches = frozenset({"leaf01", "leaf02"})
    resolved = [
        (entry("10.0.1.12", "gpu-node-02"), "10.0.1.12"),  # switch from LLDP: same_switch
        (entry("10.0.1.13", "gpu-node-03"), "10.0.1.13"),  # LLDP: other_switch
        (entry("10.0.1.14", "gpu-node-04", switch="leaf02"), "10.0.1.14"),  # configured: same_switch
        (entry("10.0.1.15"), "10.0.1.15"),  # nothing known: unknown
        (entry("peers.svc", source="dns"), "10.0.1.12"),  # named twice: config's name wins, both count
        (entry("peers.svc", source="dns"), "10.0.1.11"),  # this node itself: left out
        (entry("10.0.1.16", "alt", port=7000, source="file"), "10.0.1.16"),
    ]
    peers, by_source = mp.merge(resolved, {("10.0.1.11", 9478)}, own_switches, lldp, 9478)
    assert [(p.label, p.ip, p.port, p.group, sorted(p.sources)) for p in peers] == [
        ("10.0.1.15", "10.0.1.15", 9478, "unknown", ["config"]),
        ("alt", "10.0.1.16", 7000, "unknown", ["file"]),
        ("gpu-node-02", "10.0.1.12", 9478, "same_switch", ["config", "dns"]),
        ("gpu-node-03", "10.0.1.13", 9478, "other_switch", ["config"]),
        ("gpu-node-04", "10.0.1.14", 9478, "same_switch", ["config"]),
    ]
    assert by_source == {"config": 4, "dns": 1, "file": 1}
    # without this node's own switch nothing can be grouped
    peers, _ = mp.merge(resolved, set(), frozenset(), lldp, 9478)
    assert {p.group for p in peers} == {"unknown"}


def test_same_name_twice_gets_the_address_appended() -> None:
    peers, _ = mp.merge([(entry("10.0.1.12", "gpu-node-02"), "10.0.1.12"),
                         (entry("10.0.2.12", "gpu-node-02"), "10.0.2.12")], set(), frozenset(), {}, 9478)
    assert [p.label for p in mp.dedupe_labels(peers)] == ["gpu-node-02/10.0.1.12", "gpu-node-02/10.0.2.12"]


def peer(i: int, group: str = "other_switch") -> mp.Peer:
    address = f"10.0.{i // 250}.{i % 250 + 1}"
    return mp.Peer(f"n{i:03d}", address, 9478, frozenset(), frozenset({"dns"}), group)


def test_selection_is_bounded_same_switch_first_and_stable() -> None:
    peers = [peer(i, "same_switch" if i % 50 == 0 else "other_switch") for i in range(1000)]
    chosen = mp.select(peers, "gpu-node-01", 64)
    assert len(chosen) == 64
    assert [p.group for p in chosen[:20]] == ["same_switch"] * 20 and chosen[20].group == "other_switch"
    assert mp.select(list(reversed(peers)), "gpu-node-01", 64) == chosen  # order of discovery does not matter
    other_node = mp.select(peers, "gpu-node-02", 64)
    assert {p.label for p in other_node[20:]} != {p.label for p in chosen[20:]}  # each node its own subset
    # a peer leaving moves only its own slot: the others stay, one newcomer fills the gap
    gone = chosen[30]
    again = mp.select([p for p in peers if p != gone], "gpu-node-01", 64)
    assert len(set(again) - set(chosen)) == 1 and set(chosen) - set(again) == {gone}


def test_pick_local_prefers_the_subnet_then_the_longest_prefix() -> None:
    rails = [mp.parse_local("10.1.0.5/24"), mp.parse_local("10.2.0.5/24")]
    assert mp.pick_local("10.2.0.77", rails) == (rails[1], True)
    assert mp.pick_local("10.2.9.77", rails) == (rails[1], False)  # outside both: nearest prefix, flagged
    bare = [mp.parse_local("127.0.0.1"), mp.parse_local("127.1.0.1")]
    assert mp.pick_local("127.1.0.9", bare) == (bare[1], True)  # no subnet known: not flagged
    assert mp.pick_local("fd00::1", rails) == (None, False)
    assert mp.parse_local("fd00::5/64").network is not None and mp.parse_local("fd00::5").family == 10
    with pytest.raises(ValueError):
        mp.parse_local("10.1.0.500")


def test_rdma_netdevs_come_from_the_infiniband_source() -> None:
    store = Store()
    snap = Snapshot()
    snap.add(mp.RDMA_PORT_INFO, ("mlx5_0", "1", "Ethernet", "ens1f0np0"), 1.0)
    snap.add(mp.RDMA_PORT_INFO, ("mlx5_1", "1", "InfiniBand", ""), 1.0)
    snap.add(mp.RDMA_PORT_INFO, ("mlx5_2", "1", "Ethernet", "ens2f0np0"), 1.0)
    store.publish("infiniband", "mlx5_0", snap, 60)
    assert mp.rdma_netdevs(store) == ["ens1f0np0", "ens2f0np0"]


def test_interface_address_of_loopback_and_of_a_missing_netdev() -> None:
    lo = mp.interface_ipv4("lo")
    assert (lo.ip, lo.interface, str(lo.network)) == ("127.0.0.1", "lo", "127.0.0.0/8")
    with pytest.raises(OSError, match="no netdev nosuch0 in this network namespace"):
        mp.interface_ipv4("nosuch0")
