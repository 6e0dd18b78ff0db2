"""Where a mesh source's candidate peers come from at each refresh, merged into one peer list.

The four peer sources of mesh_peers, read with their state: the `peers` of the config, the
`peers_file` (re-read only when its stamp changes; a broken file keeps the peers read before),
the `peers_dns` names and the peers' host names resolved concurrently with a timeout, and the
hosts LLDP sees on this node's switches (`lldp_peers`). What fails is a problem for the source's
partial errors, never an exception.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable

from ...deadline import within
from ...store import Store
from . import mesh_peers as mp
from . import mesh_wire as wire
from .mesh_config import MeshSettings

DNS_TIMEOUT = 5.0

Resolver = Callable[[str], Awaitable[list[str]]]


class PeerDiscovery:
    """The peer sources of one mesh source, and what it keeps of them between two refreshes."""

    def __init__(self, config: MeshSettings, hostname: str, resolve: Resolver | None,
                 log: logging.Logger) -> None:
        self.config = config
        self.hostname = hostname
        self.resolve: Resolver = resolve or _resolve
        self.log = log
        self._file_entries: list[mp.PeerEntry] = []
        self._file_stamp: tuple[int, int, int] | None = None
        self._file_problem = ""

    def configured_sources(self) -> list[str]:
        config = self.config
        return [s for s, on in (("config", bool(config.peers)), ("file", bool(config.peers_file)),
                                ("dns", bool(config.peers_dns)), ("lldp", config.lldp_peers)) if on]

    def file_changed(self) -> bool:
        path = self.config.peers_file
        return bool(path) and _stamp(path) != self._file_stamp

    def forget_file(self) -> None:
        """Re-read the peers file at the next refresh even if its stamp did not change."""
        self._file_stamp = None

    async def discover(self, store: Store, own: set[tuple[str, int]],
                       problems: list[str]) -> tuple[list[mp.Peer], dict[str, int]]:
        """Every candidate peer (this node's own (ip, port) pairs left out) and the count per peer source."""
        if self.config.peers_file:
            self._read_file()
            if self._file_problem:
                problems.append(self._file_problem)
        lldp = mp.lldp_switches(store)
        own_switches = self._own_switches(lldp)
        resolved = await self._resolve_entries(self._entries(lldp, own_switches), problems)
        if not self.config.port:
            for entry, ip in resolved:
                if entry.port is None:
                    problems.append(f"{entry.source} peer {entry.host} ({ip}): no port "
                                    "(sources.mesh.port is 0)")
        peers, by_source = mp.merge(resolved, own, own_switches, lldp, self.config.port)
        return mp.dedupe_labels(peers), by_source

    def _read_file(self) -> None:
        path = self.config.peers_file
        stamp = _stamp(path)
        if stamp == self._file_stamp and self._file_stamp is not None:
            return
        self._file_stamp = stamp
        try:
            self._file_entries = mp.read_peers_file(path)
            self._file_problem = ""
        except mp.PeersFileError as exc:
            # keep the peers we had rather than dropping the mesh on a typo
            self._file_problem = f"{exc}; keeping the {len(self._file_entries)} peers read before"
            self.log.error("peers_file unusable", extra={"error": str(exc)})

    def _entries(self, lldp: dict[str, set[str]], own_switches: frozenset[str]) -> list[mp.PeerEntry]:
        entries = mp.entries_from_config(self.config.peers, "config")
        if self.config.peers_file:
            entries += self._file_entries
        entries += [mp.PeerEntry(name, "", None, "", "dns") for name in self.config.peers_dns]
        if self.config.lldp_peers:
            me = mp.host_key(self.hostname)
            for host, switches in sorted(lldp.items()):
                name = self.config.lldp_peer_name.replace("{system}", host)
                # one entry per switch the host shares with this node (merge unites them)
                entries += [mp.PeerEntry(name, host, None, switch, "lldp")
                            for switch in sorted(switches & own_switches) if host != me]
        return entries

    def _own_switches(self, lldp: dict[str, set[str]]) -> frozenset[str]:
        if self.config.switch:
            return frozenset({self.config.switch})
        return frozenset(lldp.get(mp.host_key(self.hostname), set()))

    async def _resolve_entries(self, entries: list[mp.PeerEntry],
                               problems: list[str]) -> list[tuple[mp.PeerEntry, str]]:
        out: list[tuple[mp.PeerEntry, str]] = []
        names = sorted({e.host for e in entries if not mp.is_ip(e.host)})
        answers = await asyncio.gather(*(self._lookup(name) for name in names))
        found = dict(zip(names, answers))
        for entry in entries:
            if mp.is_ip(entry.host):
                out.append((entry, wire.normalize_ip(entry.host)))
                continue
            ips, error = found[entry.host]
            if error:
                problems.append(f"{entry.source} peer {entry.host}: {error}")
            # a DNS name stands for all its addresses; a peer's host name for its first one
            for ip in ips if entry.source == "dns" else ips[:1]:
                out.append((entry, ip))
        return out

    async def _lookup(self, name: str) -> tuple[list[str], str]:
        try:
            ips = await within(self.resolve(name), DNS_TIMEOUT)
        except asyncio.TimeoutError:
            return [], f"DNS lookup timed out after {DNS_TIMEOUT:g}s"
        except OSError as exc:
            return [], f"does not resolve ({exc.strerror or exc})"
        ips = sorted({wire.normalize_ip(ip) for ip in ips})
        return ips, "" if ips else "resolves to no address"


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


async def _resolve(name: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_DGRAM)
    return [str(info[4][0]) for info in infos]
