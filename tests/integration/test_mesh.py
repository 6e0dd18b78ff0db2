"""The `mesh` source on loopback addresses (127.0.0.0/8 only; every test bounded in probes and time).

The daemon's own responder: an unlisted address gets no answer, the reply is as long as the
request. The RTT excludes the time a busy peer held the request. Broken set-ups report source_up 0
with a reason; peer sources that yield nothing are reported. Against responder processes, one with
induced loss: test_mesh_processes.py. Every test here binds UDP sockets on loopback (the
responder serves): the config checks, which bind nothing, are tests/test_mesh_config.py.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from infrapulse.config import load_text
from infrapulse.simulate import mesh as simulate_mesh
from infrapulse.simulate.demo import DemoContext
from infrapulse.simulate.mesh import LOSSY_PEER, SimulatedPeer, demo_part
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources.base import SourceContext
from infrapulse.sources.probe import mesh_prober, mesh_socket
from infrapulse.sources.probe import mesh_wire as wire
from infrapulse.sources.probe.mesh import RESOLVE_KEY, TARGET, MeshSource
from infrapulse.sources.probe.mesh_config import MeshSettings
from infrapulse.store import Histogram, Store

NODE = "127.0.0.1"


def mesh_config(**section: Any) -> MeshSettings:
    base = {"enabled": True, "local_addresses": [NODE], "port": 0, "probe_interval": "20ms",
            "timeout": "150ms", "min_samples": 3}
    return load_text(yaml.safe_dump({"sources": {"mesh": {**base, **section}}})).sources["mesh"]


def series(source: MeshSource, family: str) -> dict[tuple[str, ...], Any]:
    snap = source.store.snapshot("mesh", TARGET)
    assert snap is not None, "nothing published"
    return dict(snap.series.get(family, {}))


@asynccontextmanager
async def running(config: MeshSettings, options: dict[str, Any] | None = None,
                  hostname: str = "gpu-node-01") -> AsyncIterator[MeshSource]:
    ctx = SourceContext(store=Store(), interval=0.1, hostname=hostname, options=options or {})
    source = MeshSource(config, ctx)
    task = asyncio.create_task(source.run())
    try:
        yield source
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def settle(source: MeshSource) -> None:
    """Stop new probes and wait until every probe in flight is answered or timed out, and every
    RTT counted (a reply's RTT waits a round for a late notice)."""
    prober = source.prober
    prober.sending = False
    deadline = time.monotonic() + 5
    while (prober.outstanding or prober.answered or prober._answered_before) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not prober.outstanding and not prober.answered and not prober._answered_before
    await asyncio.sleep(0.25)  # one more publication of the settled counters


async def sent_at_least(source: MeshSource, count: int, timeout: float = 30.0) -> None:
    """Wait until every peer has been sent `count` probes (a loaded machine sends fewer per second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snap = source.store.snapshot("mesh", TARGET)
        sent = snap.series.get("infrapulse_probe_mesh_sent_total", {}) if snap else {}
        if sent and len(sent) == len(source.prober.probed) and all(
                not isinstance(n, Histogram) and n >= count for n in sent.values()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} probes sent to some peer in {timeout}s")


def request_from(address: str, port: int, size: int = 64, data: bytes | None = None) -> bytes | None:
    """Send one probe request from `address` to the node's responder; its reply or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((address, 0))
        sock.settimeout(0.6)
        sock.sendto(data if data is not None else wire.encode_request(77, 5, size), (NODE, port))
        try:
            return sock.recv(4096)
        except TimeoutError:
            return None


async def test_the_responder_answers_only_listed_peers_with_replies_no_larger() -> None:
    config = mesh_config(peers=[{"name": "listed", "address": "127.0.0.5", "port": 9}])
    async with running(config) as source:
        await asyncio.sleep(0.3)
        port = source.local.by_ip[NODE].port
        unlisted = await asyncio.to_thread(request_from, "127.0.0.9", port)
        replies = [await asyncio.to_thread(request_from, "127.0.0.5", port, size) for size in (28, 64, 1472)]
        reply_to_reply = await asyncio.to_thread(request_from, "127.0.0.5", port, 64,
                                                 bytes(wire.make_reply(wire.encode_request(1, 1, 64))))
        await asyncio.sleep(0.3)
        outcomes = series(source, "infrapulse_probe_mesh_responder_requests_total")
    assert unlisted is None, "an unlisted address got an answer"
    assert [len(r) if r else None for r in replies] == [28, 64, 1472]
    for reply in replies:
        assert reply is not None
        probe = wire.decode(reply)
        assert probe is not None and (probe.kind, probe.token, probe.seq) == (wire.REPLY, 77, 5)
        assert 0 <= probe.dwell_ns < 1_000_000_000
    assert reply_to_reply is None
    # answered_late: a reply this busy test machine held up after its dwell stamp (a late notice)
    assert outcomes[("answered",)] + outcomes[("answered_late",)] == 3 and outcomes[("unlisted",)] == 1
    assert outcomes[("rate_limited",)] == 0 and outcomes[("send_failed",)] == 0


def held_responder(hold: float, report_dwell: bool, stop: threading.Event
                   ) -> tuple[socket.socket, threading.Thread]:
    """A peer on 127.0.0.6 that holds each request `hold` seconds before replying, reporting the
    hold as dwell (as the real responder does) or not."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.6", 0))
    sock.settimeout(0.1)

    def serve() -> None:
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(2048)
            except TimeoutError:
                continue
            arrived = time.time_ns()
            time.sleep(hold)
            sock.sendto(wire.make_reply(data, time.time_ns() - arrived if report_dwell else 0), addr)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return sock, thread


@pytest.mark.parametrize("report_dwell", [True, False])
async def test_rtt_excludes_the_time_the_peer_held_the_request(report_dwell: bool) -> None:
    stop = threading.Event()
    sock, thread = held_responder(0.2, report_dwell, stop)
    try:
        config = mesh_config(probe_interval="400ms", timeout="1s", min_samples=2,
                             peers=[{"name": "slow", "address": "127.0.0.6", "port": sock.getsockname()[1]}])
        async with running(config) as source:
            await sent_at_least(source, 4)
            await settle(source)
            p99 = series(source, "infrapulse_probe_mesh_rtt_p99_seconds")[("slow",)]
            assert series(source, "infrapulse_probe_mesh_lost_total")[("slow",)] == 0
    finally:
        stop.set()
        thread.join(5)
        sock.close()
    if report_dwell:
        assert p99 < 0.05, "the held 200 ms counted as network time"
    else:
        assert p99 >= 0.2, "control: without the dwell the hold shows"


async def test_without_kernel_timestamps_each_datagram_is_read_on_arrival(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mesh_socket, "enable_timestamps", lambda sock: False)
    peer = SimulatedPeer("127.0.0.7", [NODE])
    config = mesh_config(peers=[{"name": "p", "address": "127.0.0.7", "port": peer.port}])
    try:
        async with running(config) as source:
            await asyncio.sleep(0.6)
            await settle(source)
            assert not source.local.by_ip[NODE].kernel_timestamps
            sent = series(source, "infrapulse_probe_mesh_sent_total")[("p",)]
            lost = series(source, "infrapulse_probe_mesh_lost_total")[("p",)]
            assert 0 < series(source, "infrapulse_probe_mesh_rtt_p99_seconds")[("p",)] < 0.05
    finally:
        peer.close()
    assert sent == peer.requests > 10 and lost == 0


def stalling_responder(mode: str, stop: threading.Event
                       ) -> tuple[socket.socket, wire.Responder, threading.Thread]:
    """A peer on 127.0.0.10 that answers through the real reply path (mesh_socket.send_reply).

    held: its thread is held 10 ms between the dwell's stamp and the socket, as a scheduler
    running something else would; the late notice follows. held_no_notice: the same, with the
    notice turned off (the control). notice_first: a notice, then the reply, held by no one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.10", 0))
    sock.settimeout(0.1)
    assert mesh_socket.enable_timestamps(sock)
    responder = wire.Responder(rate=1000.0, burst=1000.0, clock=time.monotonic)
    responder.allow([NODE])
    stamps = [0]

    def held_after_the_stamp() -> int:
        now = time.time_ns()
        stamps[0] += 1
        if stamps[0] % 2:  # send_reply's first reading is the dwell's stamp
            time.sleep(0.01)
        return now

    def serve() -> None:
        while not stop.is_set():
            try:
                data, ancillary, _flags, addr = sock.recvmsg(2048, mesh_socket.ANCILLARY_SIZE)
            except TimeoutError:
                continue
            rx_ns = mesh_socket.rx_time_ns(ancillary)
            reply = responder.answer(data, addr[0])
            if reply is None:
                continue
            if mode == "notice_first":
                sock.sendto(wire.late_notice(reply), addr)
                mesh_socket.send_reply(sock, responder, reply, addr, rx_ns)
            else:
                stall_ns = 10**15 if mode == "held_no_notice" else mesh_socket.SEND_STALL_NS
                mesh_socket.send_reply(sock, responder, reply, addr, rx_ns, clock=held_after_the_stamp,
                                       stall_ns=stall_ns)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return sock, responder, thread


@pytest.mark.parametrize("mode", ["held", "held_no_notice", "notice_first"])
async def test_a_reply_held_up_after_its_dwell_stamp_is_answered_but_not_timed(mode: str) -> None:
    stop = threading.Event()
    sock, responder, thread = stalling_responder(mode, stop)
    try:
        config = mesh_config(probe_interval="60ms", timeout="500ms", min_samples=1,
                             peers=[{"name": "p", "address": "127.0.0.10", "port": sock.getsockname()[1]}])
        async with running(config) as source:
            await asyncio.sleep(0.8)
            await settle(source)
            sent = series(source, "infrapulse_probe_mesh_sent_total")[("p",)]
            lost = series(source, "infrapulse_probe_mesh_lost_total")[("p",)]
            untimed = series(source, "infrapulse_probe_mesh_untimed_total")[("p",)]
            p99 = series(source, "infrapulse_probe_mesh_rtt_p99_seconds").get(("p",))
            timed = source.prober.histograms[source.prober.probed["p"].group].value().count
    finally:
        stop.set()
        thread.join(5)
        sock.close()
    outcomes = responder.outcomes
    assert sent >= 5 and lost == 0
    if mode == "held_no_notice":
        assert p99 is not None and p99 >= 0.01, "control: without the notice the held send shows as RTT"
        assert timed + untimed == sent and outcomes.get("answered_late", 0) == 0
        return
    assert p99 is None and timed == 0, "a reply that left late was timed"
    assert untimed == sent
    if mode == "held":
        assert outcomes == {"answered_late": sent}


class _HeldSends:
    """time.time_ns as seen by the prober, 1 ms later at every call: as if every send were held
    up between its stamp and the socket (the GIL taken by another thread)."""

    def __init__(self) -> None:
        self.calls = 0

    def time_ns(self) -> int:
        self.calls += 1
        return time.time_ns() + self.calls * 1_000_000

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


async def test_a_probe_whose_send_was_held_up_is_answered_but_not_timed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    peer = SimulatedPeer("127.0.0.8", [NODE])
    config = mesh_config(min_samples=1, peers=[{"name": "p", "address": "127.0.0.8", "port": peer.port}])
    monkeypatch.setattr(mesh_prober, "time", _HeldSends())
    try:
        async with running(config) as source:
            await asyncio.sleep(0.6)
            await settle(source)
            sent = series(source, "infrapulse_probe_mesh_sent_total")[("p",)]
            lost = series(source, "infrapulse_probe_mesh_lost_total")[("p",)]
            assert ("p",) not in series(source, "infrapulse_probe_mesh_rtt_p99_seconds")
            assert source.prober.histograms[source.prober.probed["p"].group].value().count == 0
            assert source.prober.stats["p"].untimed == sent
    finally:
        peer.close()
    assert sent == peer.requests > 5 and lost == 0


async def test_dscp_and_ecn_are_set_on_the_socket() -> None:
    async with running(mesh_config(dscp=26, ecn=True, peers=[{"address": "127.0.0.5", "port": 9}])) as source:
        await asyncio.sleep(0.2)
        sock = source.local.by_ip[NODE].sock
        assert sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == 26 << 2 | 0b10
        info = series(source, "infrapulse_probe_mesh_local_address_info")
    assert info == {("", NODE, "26"): 1.0}


async def test_peers_from_dns_file_and_config_are_counted_and_deduplicated(tmp_path: Path) -> None:
    peers_file = tmp_path / "peers.yaml"
    peers_file.write_text(yaml.safe_dump([{"address": "127.0.0.21", "name": "from-file"}, "127.0.0.22"]))

    async def resolve(name: str) -> list[str]:
        if name == "mesh.infrapulse.svc":
            return ["127.0.0.22", "127.0.0.23", NODE]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    config = mesh_config(port=19478, peers=[{"address": "127.0.0.24", "name": "from-config"}],
                         peers_file=str(peers_file), peers_dns=["mesh.infrapulse.svc", "gone.example"])
    async with running(config, {RESOLVE_KEY: resolve}) as source:
        await asyncio.sleep(0.3)
        peers = series(source, "infrapulse_probe_mesh_peers")
        labels = {label for (label,) in series(source, "infrapulse_probe_mesh_sent_total")}
        status = source.store.status[("mesh", TARGET)]
        up, reason, partial = status.up, status.reason, list(status.partial_errors)
        coverage = {m: c.series for m, c in status.coverage.items()}
        allowed = source.responder.allowed
        # the file changes: re-read without a restart
        peers_file.write_text(yaml.safe_dump(["127.0.0.25"]))
        await asyncio.sleep(0.4)
        labels_after = {label for (label,) in series(source, "infrapulse_probe_mesh_sent_total")}
    assert peers == {("config",): 1.0, ("file",): 2.0, ("dns",): 2.0}  # 127.0.0.22 counts for both
    assert labels == {"from-config", "from-file", "127.0.0.22", "127.0.0.23"}  # this node left out
    assert allowed == {"127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24"}
    assert up and reason == "partial"
    assert partial == ["dns peer gone.example: does not resolve (Name or service not known)"]
    assert coverage == {"peers_config": 1, "peers_file": 2, "peers_dns": 2}
    assert labels_after == {"from-config", "127.0.0.22", "127.0.0.23", "127.0.0.25"}


async def test_a_broken_peers_file_keeps_the_peers_and_says_why(tmp_path: Path) -> None:
    peers_file = tmp_path / "peers.yaml"
    peers_file.write_text("- 127.0.0.31\n")
    async with running(mesh_config(port=19479, peers_file=str(peers_file))) as source:
        await asyncio.sleep(0.3)
        peers_file.write_text("- {address: 127.0.0.32, port: -1}\n")
        await asyncio.sleep(0.4)
        labels = {label for (label,) in series(source, "infrapulse_probe_mesh_sent_total")}
        status = source.store.status[("mesh", TARGET)]
    assert labels == {"127.0.0.31"}
    assert status.up and status.partial_errors == [
        f"peers_file {peers_file}: peers[0].port: must be >= 1, got -1; keeping the 1 peers read before"]


async def test_lldp_in_the_store_groups_peers_and_adds_same_switch_hosts() -> None:
    async def resolve(name: str) -> list[str]:
        return {"gpu-node-02": ["127.0.0.42"], "gpu-node-03": ["127.0.0.43"]}[name]

    config = mesh_config(port=19480, lldp_peers=True,
                         peers=[{"name": "gpu-node-04", "address": "127.0.0.44"}])
    ctx_store_rows = [("leaf01", "Ethernet0", "gpu-node-01"), ("leaf01", "Ethernet4", "gpu-node-02"),
                      ("leaf01", "Ethernet8", "gpu-node-03"), ("leaf02", "Ethernet0", "gpu-node-04")]
    async with running(config, {RESOLVE_KEY: resolve}) as source:
        from infrapulse.store import Snapshot

        snap = Snapshot()
        for switch, interface, system in ctx_store_rows:
            snap.add("infrapulse_switch_lldp_neighbor_info", (switch, interface, system, "ens1f0np0"), 1.0)
        source.store.publish("gnmi", "fabric", snap, 60)
        await source.on_reload()
        await asyncio.sleep(0.4)
        groups = {p.label: p.group for p in source.prober.probed.values()}
        peers = series(source, "infrapulse_probe_mesh_peers")
    assert groups == {"gpu-node-02": "same_switch", "gpu-node-03": "same_switch",
                      "gpu-node-04": "other_switch"}
    assert peers == {("config",): 1.0, ("lldp",): 2.0}


@pytest.mark.parametrize("section,reason,message", [
    ({"local_addresses": ["192.0.2.1"]}, "bind_failed",
     "cannot bind 192.0.2.1 port 0: Cannot assign requested"),
    ({"local_addresses": [], "interfaces": ["nosuch0"]}, "no_local_address",
     "no local address to bind from interfaces nosuch0: interface nosuch0: no netdev nosuch0 in this"),
    ({"local_addresses": []}, "no_local_address",
     "no local address to bind from the RDMA netdevs of the infiniband source (none reported)"),
    ({"peers": []}, "no_peers", "no peer to probe (peer sources: none configured)"),
])
async def test_broken_setups_report_source_down_with_a_reason(section: dict[str, Any], reason: str,
                                                               message: str) -> None:
    async with running(mesh_config(**{"peers": [{"address": "127.0.0.5", "port": 9}], **section})) as source:
        await asyncio.sleep(0.3)
        status = source.store.status[("mesh", TARGET)]
    assert not status.up and status.reason == reason
    assert status.message.startswith(message), status.message


@pytest.mark.parametrize("loaded", [False, True], ids=["idle", "every-reply-late"])
async def test_mesh_loss_scenario_drops_every_20th_probe_at_one_peer(tmp_path: Path, loaded: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if loaded:  # a machine so busy that every reply leaves late: each one is followed by a late notice
        late = functools.partial(mesh_socket.send_reply, stall_ns=-1)
        monkeypatch.setattr(simulate_mesh, "send_reply", late)
    board = ScenarioBoard({"mesh-loss"})
    part = await demo_part(DemoContext(workdir=tmp_path, scenarios=board))
    try:
        peers = {p["name"]: p for p in part.sources["mesh"]["peers"]}
        assert set(peers) == {"gpu-node-02", "gpu-node-03", "gpu-node-04", "gpu-node-05"}
        lossy = peers[LOSSY_PEER]
        target = (lossy["address"], lossy["port"])
        # the simulated peers answer on this event loop: the blocking client runs in a thread
        assert await asyncio.to_thread(answered_of, 40, target) == 38  # requests 20 and 40: 5 %
        board.deactivate("mesh-loss")
        assert await asyncio.to_thread(answered_of, 20, target) == 20  # none lost once it ends
    finally:
        await part.close()


def answered_of(count: int, target: tuple[str, int], timeout: float = 0.5) -> int:
    """How many of `count` requests got their reply, read as a prober does: a datagram counts only
    if it is the REPLY to the request just sent, so late notices and late replies do not."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((NODE, 0))
        answered = 0
        for seq in range(count):
            sock.sendto(wire.encode_request(1, seq, 64), target)
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                sock.settimeout(left)
                try:
                    data, source = sock.recvfrom(wire.MAX_SIZE)
                except TimeoutError:
                    break
                probe = wire.decode(data)
                if source == target and probe is not None and (probe.kind, probe.seq) == (wire.REPLY, seq):
                    answered += 1
                    break
        return answered
