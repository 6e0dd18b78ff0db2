"""Who the mesh probes, from which local address, and in which peer group.

Peers come from four places, merged by address: the `peers` list of the config, a `peers_file`
(re-read when it changes), DNS names (every address they resolve to; a headless Service) and,
where the store holds the fabric's LLDP table (`infrapulse_switch_lldp_neighbor_info`, i.e. a
`role: both` instance), the hosts LLDP sees on this node's switches. Every candidate is
answered by the responder; at most `max_peers` are probed: the same-switch peers first, then
the others in a rendezvous-hash order seeded with this node's name, so each node probes a
different, stable subset and a peer joining or leaving moves only its own slot.

The peer group of a peer compares its switches with this node's: from the peer entry's
`switch` and the config's `switch`, else from the LLDP table (a host's switches are those whose
ports see it as LLDP neighbour). No switch known on either side means `unknown`.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import ipaddress
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...schema import Int, SchemaError, Settings, Str, setting, settings
from ...store import Store

PEER_NAME = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}"


@settings("One peer: where its mesh responder listens.")
@dataclass(kw_only=True, slots=True)
class MeshPeerSettings(Settings):
    address: str = setting(Str("IP address (or a host name resolved through DNS) of the peer's RDMA netdev.",
                               required=True))
    name: str = setting(Str("The `peer` label (default: the address), e.g. the peer's host name.", default="",
                            pattern=f"({PEER_NAME})?"))
    port: int | None = setting(Int("UDP port of the peer's responder (default: this node's `port`).", min=1,
                                   max=65535))
    switch: str = setting(Str("The switch (leaf) the peer's netdev is cabled to; groups the peer as "
                              "same_switch or other_switch.", default=""))


PEER = MeshPeerSettings.SCHEMA
# Other sources' families, read from the store by name (labels in the comments).
LLDP_INFO = "infrapulse_switch_lldp_neighbor_info"  # switch, interface, neighbor_system, neighbor_port
RDMA_PORT_INFO = "infrapulse_rdma_port_info"  # labels: device, port, link_layer, netdev
SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B  # include/uapi/linux/sockios.h


class PeersFileError(Exception):
    """The peers file cannot be used; the message names the file, the entry and the reason."""


@dataclass(frozen=True)
class PeerEntry:
    """A peer as configured or discovered, before its address is resolved."""

    host: str  # an IP address or a name to resolve
    name: str
    port: int | None
    switch: str
    source: str  # config, file, dns, lldp


@dataclass(frozen=True)
class Peer:
    label: str
    ip: str
    port: int
    switches: frozenset[str]
    sources: frozenset[str]
    group: str = "unknown"


@dataclass(frozen=True)
class LocalAddress:
    ip: str
    interface: str = ""  # the netdev, when the address came from one
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None

    @property
    def family(self) -> int:
        return socket.AF_INET6 if ":" in self.ip else socket.AF_INET


# -- configured peers --------------------------------------------------------------------------

def entries_from_config(items: Iterable[MeshPeerSettings], source: str) -> list[PeerEntry]:
    return [PeerEntry(item.address, item.name, item.port, item.switch, source) for item in items]


def read_peers_file(path: str) -> list[PeerEntry]:
    """A YAML list of peers (or a mapping with a `peers:` list); each item an address string or
    a mapping with the keys of `PEER`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PeersFileError(f"peers_file {path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PeersFileError(f"peers_file {path}: not UTF-8 text: {exc.reason}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise PeersFileError(f"peers_file {path}: invalid YAML: {where}"
                             f"{getattr(exc, 'problem', None) or exc}") from None
    if isinstance(data, dict) and set(data) == {"peers"}:
        data = data["peers"]
    if data is None:
        return []
    if not isinstance(data, list):
        raise PeersFileError(f"peers_file {path}: expected a list of peers (or `peers:` with a list), "
                             f"got {type(data).__name__}")
    out = []
    for i, item in enumerate(data):
        if isinstance(item, str):
            item = {"address": item}
        try:
            peer: MeshPeerSettings = PEER.validate(item, f"peers[{i}]")
        except SchemaError as exc:
            raise PeersFileError(f"peers_file {path}: {exc}") from None
        out.append(PeerEntry(peer.address, peer.name, peer.port, peer.switch, "file"))
    return out


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# -- LLDP from the store -----------------------------------------------------------------------

def host_key(name: str) -> str:
    """LLDP system names and host names compared case-blind and without the domain."""
    return name.strip().lower().split(".", 1)[0]


def lldp_switches(store: Store) -> dict[str, set[str]]:
    """Host (host_key) -> the switches whose ports see it as LLDP neighbour."""
    out: dict[str, set[str]] = {}
    for _src, _tgt, labels, _value in store.iter_family(LLDP_INFO):
        switch, system = labels[0], labels[2]
        if switch and system:
            out.setdefault(host_key(system), set()).add(switch)
    return out


# -- local addresses ---------------------------------------------------------------------------

def rdma_netdevs(store: Store) -> list[str]:
    """The netdevs behind RoCE ports, as the infiniband source publishes them."""
    return sorted({labels[3] for _s, _t, labels, _v in store.iter_family(RDMA_PORT_INFO) if labels[3]})


def interface_ipv4(ifname: str) -> LocalAddress:
    """The IPv4 address and subnet of a netdev (SIOCGIFADDR, SIOCGIFNETMASK); OSError if none."""
    request = struct.pack("256s", ifname.encode()[:15])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            addr = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)
            mask = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, request)
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise OSError(exc.errno, f"{ifname} has no IPv4 address") from None
            if exc.errno == errno.ENODEV:
                raise OSError(exc.errno, f"no netdev {ifname} in this network namespace") from None
            raise
    ip = socket.inet_ntoa(addr[20:24])
    netmask = socket.inet_ntoa(mask[20:24])
    return LocalAddress(ip, ifname, ipaddress.ip_network(f"{ip}/{netmask}", strict=False))


def parse_local(text: str) -> LocalAddress:
    """'10.0.1.5' or '10.0.1.5/24' (the subnet tells which peers it reaches directly)."""
    ip, _, prefix = text.partition("/")
    ip = str(ipaddress.ip_address(ip))
    network = ipaddress.ip_network(f"{ip}/{prefix}", strict=False) if prefix else None
    return LocalAddress(ip, "", network)


def pick_local(peer_ip: str, locals_: list[LocalAddress]) -> tuple[LocalAddress | None, bool]:
    """The local address a peer is probed from, and whether the peer is inside its subnet.

    The one whose subnet holds the peer; else (subnet unknown or no match) the one sharing the
    longest address prefix with it, which picks the rail in a rail-numbered plan."""
    ip = ipaddress.ip_address(peer_ip)
    same_family = [loc for loc in locals_ if ipaddress.ip_address(loc.ip).version == ip.version]
    for loc in same_family:
        if loc.network is not None and ip in loc.network:
            return loc, True
    if not same_family:
        return None, False
    bits = ip.max_prefixlen

    def common_prefix(loc: LocalAddress) -> int:
        diff = int(ipaddress.ip_address(loc.ip)) ^ int(ip)
        return bits - diff.bit_length()

    best = max(same_family, key=common_prefix)
    return best, best.network is None


# -- grouping and selection --------------------------------------------------------------------

def group_of(peer_switches: frozenset[str], own_switches: frozenset[str]) -> str:
    if not peer_switches or not own_switches:
        return "unknown"
    return "same_switch" if peer_switches & own_switches else "other_switch"


def _rendezvous(own_id: str, peer: Peer) -> bytes:
    return hashlib.sha256(f"{own_id}|{peer.ip}|{peer.port}".encode()).digest()


def select(peers: Iterable[Peer], own_id: str, max_peers: int) -> list[Peer]:
    """At most `max_peers`: same-switch peers first, then by rendezvous hash (stable per node)."""
    ranked = sorted(peers, key=lambda p: (p.group != "same_switch", _rendezvous(own_id, p)))
    return ranked[:max_peers]


@dataclass
class PeerSet:
    """The result of one resolution: every candidate, the probed subset, and what went wrong."""

    candidates: list[Peer] = field(default_factory=list)
    probed: list[Peer] = field(default_factory=list)
    by_source: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def merge(resolved: list[tuple[PeerEntry, str]], own: set[tuple[str, int]], own_switches: frozenset[str],
          lldp: dict[str, set[str]], default_port: int) -> tuple[list[Peer], dict[str, int]]:
    """(entry, resolved ip) pairs -> one Peer per (ip, port); this node's own (ip, port)
    endpoints are left out.

    An address named twice keeps the first name given (config, then file, dns, lldp: the order
    of `resolved`), unites the switches given, and counts for each source that named it."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    by_source: dict[str, set[tuple[str, int]]] = {}
    for entry, ip in resolved:
        port = entry.port or default_port
        key = (ip, port)
        if (ip, port) in own or not port:
            continue
        by_source.setdefault(entry.source, set()).add(key)
        slot = merged.setdefault(key, {"name": "", "switch": set(), "sources": set()})
        if not slot["name"] and entry.name:
            slot["name"] = entry.name
        if entry.switch:
            slot["switch"].add(entry.switch)
        slot["sources"].add(entry.source)
    peers = []
    for (ip, port), slot in merged.items():
        switches = set(slot["switch"])
        if not switches and slot["name"]:
            switches = lldp.get(host_key(slot["name"]), set())
        label = slot["name"] or (ip if port == default_port else f"{ip}:{port}")
        frozen = frozenset(switches)
        group = group_of(frozen, own_switches)
        peers.append(Peer(label, ip, port, frozen, frozenset(slot["sources"]), group))
    peers.sort(key=lambda p: p.label)
    return peers, {source: len(keys) for source, keys in by_source.items()}


def dedupe_labels(peers: list[Peer]) -> list[Peer]:
    """Two peers with one name (a host's two rails named alike) get the address appended."""
    seen: dict[str, int] = {}
    for p in peers:
        seen[p.label] = seen.get(p.label, 0) + 1
    return [p if seen[p.label] == 1 else
            Peer(f"{p.label}/{p.ip}", p.ip, p.port, p.switches, p.sources, p.group) for p in peers]
