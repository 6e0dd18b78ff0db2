"""The mesh's local side: which addresses it binds, one socket each, and which socket probes which peer.

A refresh re-reads the local addresses (`local_addresses`, else `interfaces`, else the RDMA
netdevs the infiniband source reports) and rebinds only what changed, so a socket and the probes
in flight on it survive a refresh that keeps its address.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ...store import Store
from . import mesh_peers as mp
from .mesh_config import MeshSettings
from .mesh_socket import MeshSocket


class LocalSockets:
    """The bound sockets of one mesh source, local ip -> socket (`by_ip`, updated in place)."""

    def __init__(self, config: MeshSettings, tos: int, on_readable: Callable[[MeshSocket], None]) -> None:
        self.config = config
        self.tos = tos
        # Called by the event loop per datagram on sockets without kernel timestamps (the prober's
        # reader, held directly: no hop through this object per packet).
        self.on_readable = on_readable
        self.by_ip: dict[str, MeshSocket] = {}

    def addresses(self, store: Store, problems: list[str]) -> list[mp.LocalAddress]:
        if self.config.local_addresses:
            return [mp.parse_local(text) for text in self.config.local_addresses]
        netdevs = self.config.interfaces or mp.rdma_netdevs(store)
        out = []
        for ifname in netdevs:
            try:
                out.append(mp.interface_ipv4(ifname))
            except OSError as exc:
                problems.append(f"interface {ifname}: {exc.strerror or exc}")
        return out

    def rebind(self, locals_: list[mp.LocalAddress], problems: list[str]) -> None:
        loop = asyncio.get_running_loop()
        sockets = self.by_ip
        wanted = {loc.ip: loc for loc in locals_}
        for ip in [ip for ip, s in sockets.items() if wanted.get(ip) != s.local]:
            self._close_socket(sockets.pop(ip))
        for ip, loc in wanted.items():
            if ip in sockets:
                problems.extend(sockets[ip].problems)
                continue
            try:
                msock = MeshSocket(loc, self.config.port, self.tos, self.config.bind_to_device)
            except OSError as exc:
                problems.append(f"cannot bind {ip} port {self.config.port}: {exc.strerror or exc}")
                continue
            problems.extend(msock.problems)
            sockets[ip] = msock
            if not msock.kernel_timestamps:  # arrival time read on arrival: wake per datagram
                loop.add_reader(msock.sock.fileno(), self.on_readable, msock)

    def plan(self, peers: list[mp.Peer], own_id: str,
             problems: list[str]) -> tuple[list[mp.Peer], dict[str, MeshSocket]]:
        """The probed peers (at most max_peers) and the socket each is probed from."""
        probed, via = [], {}
        for peer in mp.select(peers, own_id, self.config.max_peers):
            local, inside = mp.pick_local(peer.ip, [s.local for s in self.by_ip.values()])
            if local is None:
                if self.by_ip:
                    problems.append(f"peer {peer.label} ({peer.ip}): no local address of its family")
                continue
            if not inside and local.network is not None:
                problems.append(f"peer {peer.label} ({peer.ip}) is outside every local RDMA subnet; "
                                f"probed from {local.ip}, the route may not cross the RDMA fabric")
            probed.append(peer)
            via[peer.label] = self.by_ip[local.ip]
        return probed, via

    def own(self) -> set[tuple[str, int]]:
        """This node's own (ip, port) pairs: a peer source listing them is not a peer."""
        return {(s.local.ip, s.port) for s in self.by_ip.values()}

    def close(self) -> None:
        for msock in self.by_ip.values():
            self._close_socket(msock)
        self.by_ip.clear()

    def _close_socket(self, msock: MeshSocket) -> None:
        if not msock.kernel_timestamps:
            asyncio.get_running_loop().remove_reader(msock.sock.fileno())
        msock.close()
