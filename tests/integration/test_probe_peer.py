"""perftest against a peer node: two daemons on loopback with the fake ib_write_lat/ib_write_bw.
Daemon B serves POST /api/v1/probes/perftest-server; daemon A's probe source asks it for a
server and runs its client against it. Authentication (token, web config basic auth), the lock
and idle rules shared with the scheduler, the rate limit, the strict body and the server's hard
timeout."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
import yaml

from conftest import running_daemon
from infrapulse.daemon import Daemon
from infrapulse.schema import SchemaError
from infrapulse.simulate.probe_fake import write_shims
from infrapulse.sources.probe import runner
from infrapulse.sources.probe.config import CONFIG
from infrapulse.sources.probe.peer_server import ROUTE, TOKEN_HEADER
from infrapulse.store import Snapshot
from infrapulse.webconfig import WebSecurity

TOKEN = "peer-token-0123456789abcdef"


def _port_block(count: int) -> int:
    """A base port whose next `count` ports were free a moment ago."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + count >= 65000:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("0.0.0.0", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port block")


class Node:
    """One node's files: sysfs with RDMA devices (their netdev is `lo`), fake tools, a token."""

    def __init__(self, tmp: Path, name: str, devices: tuple[str, ...] = ("mlx5_0", "mlx5_1")) -> None:
        self.dir = tmp / name
        self.sysfs = self.dir / "sys"
        for dev in devices:
            d = self.sysfs / "class" / "infiniband" / dev
            (d / "device" / "net" / "lo").mkdir(parents=True)
            (d / "fw_ver").write_text("28.39.1002\n")
            (d / "hca_type").write_text("MT4129\n")
        self.fake_state = self.dir / "fake.json"
        self.fake_state.write_text(json.dumps({}))
        self.bin = write_shims(self.dir / "bin", self.fake_state)
        self.token = self.dir / "token"
        self.token.write_text(TOKEN + "\n")
        self.state_dir = self.dir / "state"

    def probe(self, perftest: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "enabled": True, "interval": "1h", "jitter": "0s", "check_interval": "200ms",
            "change_delay": "0s",
            "timeout": "30s", "nice": 0, "io_idle": False,
            "idle": {"gpu_processes": False, "serving": True},
            "nccl": {"enabled": False},
            "perftest": {"latency_binary": str(self.bin["ib_write_lat"]),
                         "bandwidth_binary": str(self.bin["ib_write_bw"]), "latency_sizes": [8],
                         "bandwidth_sizes": [65536], "base_port": _port_block(4), **(perftest or {})},
            "versions": {"sysfs_root": str(self.sysfs)},
            **over,
        }
        return cfg

    def daemon_yaml(self, probe: dict[str, Any]) -> str:
        return yaml.safe_dump({"interval": "1s", "state_dir": str(self.state_dir),
                               "sources": {"probe": probe}})


def server_side(node: Node, **server: Any) -> dict[str, Any]:
    base = _port_block(8)
    cfg = {"enabled": True, "token_file": str(node.token), "port_min": base, "port_max": base + 7,
           "min_interval": "0s", "timeout": "20s", **server}
    return node.probe({"peer_server": cfg}, check_interval="1h", change_delay="1h")


def client_side(node: Node, server_port: int, **peer: Any) -> dict[str, Any]:
    """Node A probing node B. A busy peer is asked again for 20 s, as by default: on a loaded
    machine the second run can reach B before B has reaped the first run's server (409)."""
    entry = {"name": "nodeb", "url": f"http://127.0.0.1:{server_port}", "device": "mlx5_1",
             "token_file": str(node.token), "insecure_http": True, "retry_for": "20s", **peer}
    return node.probe({"peers": [entry]})


@pytest.fixture
def nodes(tmp_path: Path) -> tuple[Node, Node]:
    return Node(tmp_path, "a"), Node(tmp_path, "b")


@asynccontextmanager
async def daemon(node: Node, probe: dict[str, Any], web_security: WebSecurity | None = None
                 ) -> AsyncIterator[Daemon]:
    async with running_daemon(node.daemon_yaml(probe), web_security=web_security) as d:
        yield d


async def post(port: int, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None,
               content_type: str = "application/json") -> tuple[int, dict[str, Any], dict[str, str]]:
    data = raw if raw is not None else json.dumps(body).encode()
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{port}{ROUTE}", data=data,
                                headers={"Content-Type": content_type, **(headers or {})}) as resp:
            text = await resp.text()
            try:
                doc = json.loads(text)
            except ValueError:
                doc = {"text": text}
            return resp.status, doc, dict(resp.headers)


async def until(predicate: Any, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


def status_of(d: Daemon, target: str) -> Any:
    return d.store.status.get(("probe", target))


def series(d: Daemon, family: str) -> dict[tuple[str, ...], float]:
    return {tuple(labels): float(v) for src, _t, labels, v in d.store.iter_family(family) if src == "probe"}


def _servers_of(node: Node, cfg: dict[str, Any]) -> list[int]:
    """perftest *server* processes the peer-server endpoint started (a `-p` within its port range),
    not the node's own scheduled local-pair runs of the same binary."""
    server = cfg["perftest"]["peer_server"]
    ports = range(server["port_min"], server["port_max"] + 1)
    return [pid for name in ("ib_write_lat", "ib_write_bw") for port in ports
            for pid in _processes_with(str(node.bin[name]), f"-p\0{port}\0")]


def _processes_with(*markers: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if all(m.encode() in cmdline for m in markers):
                found.append(int(entry.name))
    return found


GOOD = {"test": "ib_write_lat", "device": "mlx5_1", "size": 8, "iterations": 100}


# -- end to end ------------------------------------------------------------------------------------


async def test_a_run_against_the_peer_records_results_with_the_peer_scope(nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    async with daemon(b, server_side(b)) as db:
        assert status_of(db, "perftest_server").reason == "ready"
        async with daemon(a, client_side(a, db.bound_port)) as da:
            probes = ("ib_write_lat@nodeb", "ib_write_bw@nodeb")
            await until(lambda: all(status_of(da, p) is not None and status_of(da, p).last_success
                                    for p in probes))
            for probe in probes:
                st = status_of(da, probe)
                assert (st.up, st.reason) == (True, "ok"), st.message
            lat = series(da, "infrapulse_probe_rdma_latency_seconds")
            peer = {k: v for k, v in lat.items() if k[0] == "peer:nodeb"}
            # scope, path, test, device (the client's: A's first RDMA device), size, statistic
            assert ("peer:nodeb", "fabric", "ib_write_lat", "mlx5_0", "8", "p99") in peer
            assert 1.4e-6 < peer[("peer:nodeb", "fabric", "ib_write_lat", "mlx5_0", "8", "p99")] < 2.5e-6
            bw = series(da, "infrapulse_probe_rdma_bandwidth_bytes_per_second")
            value = bw[("peer:nodeb", "fabric", "ib_write_bw", "mlx5_0", "65536", "average")]
            assert 45000 * 2**20 < value < 46100 * 2**20
            # the local pair still runs beside the peer, with its own scope
            assert ("mlx5_0->mlx5_1", "fabric", "ib_write_lat", "mlx5_0", "8", "p99") in lat
            # the run is judged per (scope, test, size): a baseline entry of its own
            verdicts = series(da, "infrapulse_probe_verdict")
            assert verdicts[("peer:nodeb", "fabric", "ib_write_lat", "latency", "8", "no_baseline")] == 1.0
            runs = series(da, "infrapulse_probe_runs_total")
            assert runs[("ib_write_lat@nodeb", "ok")] == 1.0
        await until(lambda: status_of(db, "perftest_server").reason == "served")
        assert "ib_write_bw on mlx5_1" in status_of(db, "perftest_server").message
        # the server released the node's probe lock: a scheduled probe could run now
        with runner.probe_lock(b.state_dir / "probe" / "run.lock"):
            pass


async def test_the_answer_names_the_port_and_the_devices_netdev_address(nodes: tuple[Node, Node]) -> None:
    _a, b = nodes
    probe = server_side(b)
    async with daemon(b, probe) as db:
        status, doc, _ = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
        assert status == 200, doc
        server = probe["perftest"]["peer_server"]
        assert server["port_min"] <= doc["port"] <= server["port_max"]
        # mlx5_1's netdev in the fake sysfs is `lo`: its IPv4 address is what the client reaches
        assert doc["address"] == "127.0.0.1"
        assert (doc["test"], doc["device"]) == ("ib_write_lat", "mlx5_1")
        assert (doc["size"], doc["iterations"]) == (8, 100)
        assert _processes_with("ib_write_lat", "-p\0" + str(doc["port"]))
        # one at a time: a second request while that server waits is busy
        status, doc2, _ = await post(db.bound_port, {**GOOD, "test": "ib_write_bw"}, {TOKEN_HEADER: TOKEN})
        assert status == 409 and "already running" in doc2["error"]
        # the scheduler shares the lock: while the server runs, a probe on B would be busy
        with pytest.raises(runner.ProbeBusy):
            with runner.probe_lock(b.state_dir / "probe" / "run.lock"):
                pass


async def test_the_server_is_killed_at_its_timeout_when_no_client_comes(nodes: tuple[Node, Node]) -> None:
    _a, b = nodes
    async with daemon(b, server_side(b, timeout="1s")) as db:
        started = time.monotonic()
        status, doc, _ = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
        assert status == 200, doc
        marker = ("ib_write_lat", "-p\0" + str(doc["port"]))
        assert _processes_with(*marker)
        await until(lambda: status_of(db, "perftest_server").reason == "timeout", within=10)
        assert time.monotonic() - started < 6  # 1 s plus the 2 s SIGTERM grace at most
        assert "no test within 1s; killed" in status_of(db, "perftest_server").message
        await asyncio.sleep(0.2)
        assert _processes_with(*marker) == []
        with runner.probe_lock(b.state_dir / "probe" / "run.lock"):
            pass  # released
        # and the next request is served again
        status, _doc, _ = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
        assert status == 200


# -- authentication ----------------------------------------------------------------------------------


async def test_a_wrong_or_missing_token_is_401_and_the_client_records_peer_refused(
        nodes: tuple[Node, Node], caplog: pytest.LogCaptureFixture) -> None:
    a, b = nodes
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-token-but-long-enough-x"
    a.token.write_text(wrong)
    async with daemon(b, server_side(b)) as db:
        assert (await post(db.bound_port, GOOD))[0] == 401
        status, doc, headers = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN[:-1]})
        assert status == 401 and TOKEN_HEADER in doc["error"] and "WWW-Authenticate" in headers
        # auth comes before the body: an unauthenticated caller learns nothing about it
        assert (await post(db.bound_port, {"bogus": 1}))[0] == 401
        async with daemon(a, client_side(a, db.bound_port)) as da:
            await until(lambda: series(da, "infrapulse_probe_last_result").get(
                ("ib_write_bw@nodeb", "peer_refused")) == 1.0)
            st = status_of(da, "ib_write_lat@nodeb")
            assert st.up and "401" in st.message
            assert series(da, "infrapulse_probe_last_result")[("ib_write_lat@nodeb", "peer_refused")] == 1.0
            assert not any(k[0] == "peer:nodeb" for k in series(da, "infrapulse_probe_rdma_latency_seconds"))
        assert status_of(db, "perftest_server").reason == "refused"
    text = caplog.text + json.dumps([s.message for s in (status_of(db, "perftest_server"),)])
    assert TOKEN not in text and wrong not in text


async def test_the_endpoint_is_absent_or_refused_unless_enabled_with_authentication(
        nodes: tuple[Node, Node], tmp_path: Path) -> None:
    _a, b = nodes
    off = b.probe()  # peer_server.enabled defaults to false
    async with daemon(b, off) as db:
        status, doc, _ = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
        assert status == 404 and "not enabled" in doc["error"]
        assert status_of(db, "perftest_server") is None
    async with running_daemon("interval: 1s\n") as plain:  # no probe source at all
        status, doc, _ = await post(plain.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
        assert status == 404 and "not running" in doc["error"]
    no_auth = server_side(b, token_file="")
    async with daemon(b, no_auth) as db:
        status, doc, _ = await post(db.bound_port, GOOD)
        assert status == 403 and "no authentication is configured" in doc["error"]
        assert _servers_of(b, no_auth) == []
    b.token.write_text("short\n")
    async with daemon(b, server_side(b)) as db:
        st = status_of(db, "perftest_server")
        assert not st.up and st.reason == "token_file" and "fewer than 16 bytes" in st.message
        assert (await post(db.bound_port, GOOD, {TOKEN_HEADER: "short"}))[0] == 503


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def test_web_config_basic_auth_admits_allowed_users_only(nodes: tuple[Node, Node],
                                                              tmp_path: Path) -> None:
    a, b = nodes
    web = tmp_path / "web.yaml"
    users = {"peer": "peer-password-1", "prometheus": "scrape-password"}
    web.write_text("basic_auth_users:\n" + "".join(
        f"  {u}: {bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=4)).decode()}\n" for u, p in users.items()))
    (a.dir / "password").write_text("peer-password-1\n")
    probe = server_side(b, token_file="", allowed_users=["peer"])
    async with daemon(b, probe, WebSecurity(web)) as db:
        assert (await post(db.bound_port, GOOD))[0] == 401  # the web config's own 401
        status, doc, _ = await post(db.bound_port, GOOD, _basic("prometheus", "scrape-password"))
        assert status == 403 and "'prometheus' may not start" in doc["error"]
        client = client_side(a, db.bound_port, token_file="", user="peer",
                             password_file=str(a.dir / "password"))
        async with daemon(a, client) as da:
            # Both runs admitted by the allowed user (a run that met the peer still busy with the
            # other asks again: retry_for).
            def admitted(target: str) -> bool:
                status = status_of(da, target)
                return status is not None and status.reason == "ok" and bool(status.last_success)

            await until(lambda: admitted("ib_write_bw@nodeb") and admitted("ib_write_lat@nodeb"), within=60.0)


# -- busy, rate limit, strict body ------------------------------------------------------------------


async def test_a_busy_peer_is_409_and_the_client_records_peer_busy(nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    async with daemon(b, server_side(b)) as db:
        with runner.probe_lock(b.state_dir / "probe" / "run.lock"):  # a scheduled probe runs on B
            status, doc, _ = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
            assert status == 409 and doc["error"].startswith("busy: another probe holds")
            async with daemon(a, client_side(a, db.bound_port, retry_for="0s")) as da:
                await until(lambda: status_of(da, "ib_write_bw@nodeb") is not None
                            and status_of(da, "ib_write_bw@nodeb").reason == "peer_busy")
                st = status_of(da, "ib_write_lat@nodeb")
                assert st.up and st.reason == "peer_busy" and "409" in st.message
        # the idle rules: requests running on B's serving endpoint
        snap = Snapshot(time.time())
        snap.add("infrapulse_llm_requests_running", ("vllm", "m"), 3.0)
        db.store.publish("serving", "http://127.0.0.1:8000", snap, 60.0)
        status, doc, _ = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
        assert status == 409 and "requests running or waiting on http://127.0.0.1:8000" in doc["error"]


async def test_min_interval_is_429_with_retry_after(nodes: tuple[Node, Node]) -> None:
    _a, b = nodes
    async with daemon(b, server_side(b, min_interval="1h", timeout="1s")) as db:
        assert (await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN}))[0] == 200
        await until(lambda: status_of(db, "perftest_server").reason == "timeout", within=10)
        status, doc, headers = await post(db.bound_port, GOOD, {TOKEN_HEADER: TOKEN})
        assert status == 429 and "at most one perftest server every 3600s" in doc["error"]
        assert 3500 < int(headers["Retry-After"]) <= 3601


@pytest.mark.parametrize(("body", "why"), [
    ({**GOOD, "extra_args": ["-x", "3"]}, "unknown field 'extra_args'"),
    ({**GOOD, "size": "8"}, "field 'size' must be a number"),
    ({**GOOD, "size": True}, "field 'size' must be a number"),
    ({**GOOD, "size": 8.0}, "field 'size' must be a number"),
    ({**GOOD, "test": "ib_read_lat"}, "field 'test' must be one of"),
    ({**GOOD, "device": "../../etc"}, "field 'device' is not an RDMA device name"),
    ({**GOOD, "device": "mlx5_9"}, "device 'mlx5_9' is not one this node serves"),
    ({**GOOD, "iterations": 10**9}, "field 'iterations' must be within"),
    ({**GOOD, "port": 80}, "field 'port' must be within"),
    ({"device": "mlx5_1"}, "missing field 'test'"),
    ([GOOD], "expected a JSON object"),
])
async def test_the_body_is_strict(nodes: tuple[Node, Node], body: Any, why: str) -> None:
    _a, b = nodes
    cfg = server_side(b)
    async with daemon(b, cfg) as db:
        status, doc, _ = await post(db.bound_port, body, {TOKEN_HEADER: TOKEN})
        assert status == 400 and why in doc["error"], doc
        assert _servers_of(b, cfg) == []


async def test_only_json_is_taken(nodes: tuple[Node, Node]) -> None:
    _a, b = nodes
    async with daemon(b, server_side(b)) as db:
        status, doc, _ = await post(db.bound_port, None, {TOKEN_HEADER: TOKEN}, raw=b"test=ib_write_lat",
                                    content_type="application/x-www-form-urlencoded")
        assert status == 415 and "application/json" in doc["error"]
        status, doc, _ = await post(db.bound_port, None, {TOKEN_HEADER: TOKEN}, raw=b"{\"test\": NaN}")
        assert status == 400 and "invalid JSON" in doc["error"]


async def test_an_unreachable_peer_is_a_skip_reason(nodes: tuple[Node, Node]) -> None:
    a, _b = nodes
    closed = _port_block(1)
    async with daemon(a, client_side(a, closed)) as da:
        await until(lambda: series(da, "infrapulse_probe_runs_total").get(
            ("ib_write_bw@nodeb", "peer_unreachable")) == 1.0)
        st = status_of(da, "ib_write_lat@nodeb")
        assert st.up and st.reason == "peer_unreachable" and f"127.0.0.1:{closed}" in st.message
        runs = series(da, "infrapulse_probe_runs_total")
        assert runs[("ib_write_lat@nodeb", "peer_unreachable")] == 1.0  # once per scheduled run


# -- config --------------------------------------------------------------------------------------------


def _validate(peer: dict[str, Any], **server: Any) -> None:
    base = {"name": "n2", "url": "https://n2:9477", "device": "mlx5_0", "token_file": "/t"}
    CONFIG.validate({"enabled": True, "perftest": {"peers": [{**base, **peer}],
                                                   "peer_server": server}}, "sources.probe")


@pytest.mark.parametrize(("peer", "server", "why"), [
    ({"url": "http://n2:9477"}, {}, "plain http sends the credentials in the clear"),
    ({"token_file": ""}, {}, "set token_file or user + password_file"),
    ({"user": "u"}, {}, "user and password_file go together"),
    ({"name": "a b"}, {}, "does not look right"),
    ({"device": "mlx5_0; rm"}, {}, "does not look right"),
    ({}, {"port_min": 19000, "port_max": 18000}, "must be <= port_max"),
    ({}, {"extra": 1}, "extra"),
])
def test_config_errors_name_the_key(peer: dict[str, Any], server: dict[str, Any], why: str) -> None:
    with pytest.raises(SchemaError) as info:
        _validate(peer, **server)
    assert why in str(info.value)


def test_a_valid_peer_config() -> None:
    _validate({}, enabled=True)
    cfg = CONFIG.validate({"enabled": True}, "sources.probe")
    assert cfg.perftest.peer_server.enabled is False and cfg.perftest.peers == []
