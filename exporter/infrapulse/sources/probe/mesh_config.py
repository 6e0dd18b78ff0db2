"""The `sources.mesh` config section, `MeshSettings` (docs/configuration.md is generated from it)."""

from __future__ import annotations

from dataclasses import dataclass

from ...schema import Bool, Duration, Float, Int, ListOf, SchemaError, Str, setting, settings
from ..base import PollingSettings
from . import mesh_peers as mp
from . import mesh_wire as wire

DEFAULT_PORT = 9478


def _check(section: MeshSettings, path: str) -> None:
    """Cross-field rules on the validated `sources.mesh` section."""
    for i, text in enumerate(section.local_addresses):
        try:
            mp.parse_local(text)
        except ValueError as exc:
            raise SchemaError(f"{path}.local_addresses[{i}]", f"expected an IP address or IP/prefix: {exc}") \
                from None
    if section.port == 0:
        for i, peer in enumerate(section.peers):
            if peer.port is None:
                raise SchemaError(f"{path}.peers[{i}].port", "required when sources.mesh.port is 0")


@settings("The always-on latency mesh (Pingmesh-style): a UDP responder on this node's RDMA addresses "
          "and probes to a bounded set of peers. Off by default. See docs/probes-mesh.md.", check=_check)
@dataclass(kw_only=True, slots=True)
class MeshSettings(PollingSettings):
    enabled: bool = setting(Bool("Run the mesh (responder and prober).", default=False))
    interval: float | None = setting(Duration(
        "How often the mesh's series are published (default: the global interval).", min=0.05))
    port: int = setting(Int("UDP port of the responder on every local address; peers are probed on it "
                            "unless their entry names another. 0 picks a free port (tests).",
                            default=DEFAULT_PORT, min=0, max=65535))
    local_addresses: list[str] = setting(ListOf(
        "Local addresses to bind, `IP` or `IP/prefix` (the prefix tells which peers each reaches directly). "
        "Empty: the IPv4 addresses of `interfaces`, else of the RDMA netdevs the infiniband source reports "
        "(infrapulse_rdma_port_info{netdev}).", default=[]))
    interfaces: list[str] = setting(ListOf(
        "Netdevs whose IPv4 address (and subnet) to bind, e.g. the RoCE netdevs ens1f0np0. Empty: the RDMA "
        "netdevs from the infiniband source.", default=[]))
    bind_to_device: bool = setting(Bool(
        "Also bind each socket to its netdev (SO_BINDTODEVICE; Linux >= 5.7 allows it without CAP_NET_RAW), "
        "so probes leave through the RDMA netdev even without source-based routing. Only for addresses "
        "found through a netdev.", default=True))
    dscp: int = setting(Int("DSCP of the probes (IP_TOS / IPV6_TCLASS). Set the RDMA traffic class's DSCP "
                            "(often 26, as NCCL_IB_TC=106) to measure the path RDMA takes.", default=0, min=0,
                            max=63))
    ecn: bool = setting(Bool(
        "Mark probes ECN-capable (ECT(0)) like RoCEv2 packets, so a congested queue marks them instead of "
        "dropping them.", default=False))
    size: int = setting(Int("Bytes per probe datagram (header included); the reply has the same size.",
                            default=64, min=wire.HEADER_SIZE, max=wire.MAX_SIZE))
    probe_interval: float = setting(Duration(
        "Time between two probes to one peer. Probes per second = probed peers / probe_interval (64 peers at "
        "5s: 12.8/s).", default="5s", min=0.01))
    timeout: float = setting(Duration("A probe with no reply after this long is lost.", default="1s",
                                      min=0.01, max=10))
    max_peers: int = setting(Int("At most this many peers are probed (same-switch ones first, then a "
                                 "per-node rendezvous-hash subset); every candidate is still answered.",
                                 default=64, min=1, max=1024))
    peers: list[mp.MeshPeerSettings] = setting(ListOf("Peers given in the config.", item=mp.PEER, default=[]))
    peers_file: str = setting(Str("YAML file of peers (a list of addresses or of {address, name, port, "
                                  "switch}); re-read when it changes and on SIGHUP.", default=""))
    peers_dns: list[str] = setting(ListOf("DNS names whose every address is a peer (e.g. a headless Service "
                                          "whose endpoints are the nodes' RDMA addresses), re-resolved every "
                                          "`refresh`.", default=[]))
    lldp_peers: bool = setting(Bool("Also probe the hosts that the fabric's LLDP table (on a role: both "
                                    "instance) shows on this node's switches, resolving `lldp_peer_name`.",
                                    default=False))
    lldp_peer_name: str = setting(Str(
        "DNS name of an LLDP-discovered host's RDMA address; {system} is its LLDP system name (e.g. "
        "{system}-rdma.example.net).", default="{system}"))
    switch: str = setting(Str("The switch (leaf) this node is cabled to; default: from the LLDP table when "
                              "the store has it. Peers on it are same_switch.", default=""))
    refresh: float = setting(Duration("How often DNS names, the LLDP table and the local addresses are "
                                      "re-read.", default="30s", min=1))
    p99_window: float = setting(Duration("Window of the per-peer RTT p99.", default="5m", min=1))
    min_samples: int = setting(Int("Answered probes a peer needs in the window before its p99 is exported.",
                                   default=10, min=1))
    responder_rate: float = setting(Float(
        "Requests per second answered per peer address (token bucket); more are dropped and counted "
        "rate_limited.", default=10.0, min=0.1))
    responder_burst: int = setting(Int("Burst of the per-peer token bucket.", default=20, min=1))
    responder_total_rate: float = setting(Float("Requests per second answered from all peers together.",
                                                default=2000.0, min=1.0))


CONFIG = MeshSettings.SCHEMA
