"""Simulated mesh peers: the real responder (`sources.probe.mesh_wire`) on loopback addresses, with
induced loss.

Each `SimulatedPeer` binds one UDP socket on a 127.0.0.x address (all of 127.0.0.0/8 is local
on Linux; where only 127.0.0.1 is, as on macOS, every peer binds 127.0.0.1 on its own port) and
answers the mesh probes of its allowed addresses exactly as a node daemon does, except that it
drops every n-th request it would answer: deterministic loss, so tests can assert exact counts.

In the demo the daemon (gpu-node-01 on 127.0.0.1) probes the other demo nodes, each one such
peer. `mesh-loss` makes gpu-node-03 drop every 20th probe (5 %). `infrapulse simulate mesh`
runs peers in their own process (the tests run several).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..sources.probe import mesh_wire as wire
from ..sources.probe.mesh_peers import LocalAddress
from ..sources.probe.mesh_socket import ANCILLARY_SIZE, MeshSocket, rx_time_ns, send_reply

if TYPE_CHECKING:  # demo imports every simulator module, so only for the annotations
    from .demo import DemoContext, DemoPart

SCENARIOS = {
    "mesh-loss": "latency mesh: peer gpu-node-03 drops every 20th probe it should answer (5% loss)",
}
LOSSY_PEER = "gpu-node-03"
LOSS_EVERY = 20  # mesh-loss: one request in 20 goes unanswered = 5 %
# A switch name no demo node is cabled to: the demo's one other_switch peer hangs off it.
OTHER_POD_SWITCH = "leaf05"


class SimulatedPeer:
    """A mesh responder on one loopback address that drops every `drop_every()`-th request."""

    def __init__(self, address: str, allow: list[str], drop_every: Callable[[], int] = lambda: 0,
                 port: int = 0) -> None:
        self.responder = wire.Responder(rate=1000.0, burst=1000.0, clock=time.monotonic)
        self.responder.allow(allow)
        self.drop_every = drop_every
        self.requests = 0  # answerable requests seen
        self.dropped = 0
        self.msock = MeshSocket(LocalAddress(address), port, tos=0, bind_device=False)
        self.address, self.port = address, self.msock.port
        asyncio.get_running_loop().add_reader(self.msock.sock.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        sock = self.msock.sock
        while True:
            try:
                data, ancillary, _flags, addr = sock.recvmsg(wire.MAX_SIZE + 1, ANCILLARY_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            rx_ns = rx_time_ns(ancillary)
            reply = self.responder.answer(data, addr[0])
            if reply is None:
                continue
            self.requests += 1
            every = self.drop_every()
            if every and self.requests % every == 0:
                self.dropped += 1
                continue
            send_reply(sock, self.responder, reply, addr, rx_ns)

    def close(self) -> None:
        try:
            asyncio.get_running_loop().remove_reader(self.msock.sock.fileno())
        except RuntimeError:  # the loop is gone already
            pass
        self.msock.close()


def start_peer(address: str, allow: list[str], drop_every: Callable[[], int] = lambda: 0) -> SimulatedPeer:
    """A peer on `address`, or on 127.0.0.1 where that loopback address cannot be bound."""
    try:
        return SimulatedPeer(address, allow, drop_every)
    except OSError:
        return SimulatedPeer("127.0.0.1", allow, drop_every)


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart

    def lossy() -> int:
        return LOSS_EVERY if ctx.scenarios.active("mesh-loss") else 0

    others = list(ctx.nodes[1:]) + ["gpu-node-05"]
    peers: list[SimulatedPeer] = []
    entries = []
    try:
        for k, name in enumerate(others, start=2):
            peer = start_peer(f"127.0.0.{k}", ["127.0.0.1"], lossy if name == LOSSY_PEER else (lambda: 0))
            peers.append(peer)
            entry = {"name": name, "address": peer.address, "port": peer.port}
            if name not in ctx.nodes:  # not in the simulated fabric's LLDP table: say where it hangs
                entry["switch"] = OTHER_POD_SWITCH
            entries.append(entry)
    except BaseException:
        for peer in peers:
            peer.close()
        raise

    async def close() -> None:
        for peer in peers:
            peer.close()

    # The demo's gNMI switches put every demo node on every leaf (rail-optimised), so through the
    # LLDP table in the store the demo nodes are same_switch peers and gpu-node-05 other_switch.
    # p99 over 5 minutes (600 probes per peer at 500ms): every demo "node" shares this machine's
    # CPU, so a p99 over a few dozen probes would be the scheduler's worst hiccup, not the path's.
    sources = {"mesh": {
        "enabled": True, "local_addresses": ["127.0.0.1"], "port": 0, "peers": entries,
        "probe_interval": "500ms", "refresh": "5s", "p99_window": "5m", "min_samples": 20,
    }}
    where = ", ".join(f"{e['name']}={e['address']}:{e['port']}" for e in entries)
    return DemoPart("mesh", sources, close, description=f"{len(peers)} mesh responders ({where})")


async def serve(addresses: list[str], allow: list[str], drop_every: int, seconds: float) -> None:
    """`infrapulse simulate mesh`: peers until SIGINT/SIGTERM or `seconds`; prints where they listen."""
    import signal

    peers = [SimulatedPeer(address, allow, lambda: drop_every) for address in addresses]
    print(json.dumps({"responders": [{"address": p.address, "port": p.port} for p in peers]}), flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)
    try:
        await asyncio.wait_for(done.wait(), seconds)
    except asyncio.TimeoutError:
        pass
    finally:
        print(json.dumps({"requests": {p.address: p.requests for p in peers},
                          "dropped": {p.address: p.dropped for p in peers}}), flush=True)
        for peer in peers:
            peer.close()


def loopback_only(address: str) -> str:
    """The simulator binds loopback addresses only (127.0.0.0/8)."""
    if not socket.inet_aton(address)[0] == 127:
        raise ValueError(f"{address} is not a loopback address (127.0.0.0/8)")
    return address
