"""The connection guard (infrapulse.httpguard): per-client cap, eviction order, handshake and
header deadlines, 401 closing its connection. The flood itself is tests/test_slow_clients.py."""

from __future__ import annotations

import asyncio
import base64
import logging

import aiohttp

from conftest import running_daemon
from helpers import basic_auth_web_config
from infrapulse.httpguard import ConnectionGuard, GuardedConnection, GuardLimits, HttpStats, client_key
from infrapulse.webconfig import WebSecurity


def test_client_key_groups_an_ipv6_64_and_unmaps_ipv4():
    assert client_key(("127.0.0.2", 5000)) == "127.0.0.2"
    assert client_key(("::ffff:10.1.2.3", 5000, 0, 0)) == "10.1.2.3"
    assert client_key(("2001:db8:1:2::1", 1, 0, 0)) == client_key(("2001:db8:1:2:ffff::9", 1, 0, 0)) \
        == "2001:db8:1:2::/64"
    assert client_key(("2001:db8:1:3::1", 1, 0, 0)) != client_key(("2001:db8:1:2::1", 1, 0, 0))
    assert client_key(("::1", 1, 0, 0)) == "::1"
    assert client_key(("fe80::1%eth0", 1, 0, 0)) == "fe80::/64"
    assert client_key("not-an-address") == "not-an-address"


def _conn(guard: ConnectionGuard, client: str) -> GuardedConnection:
    conn = GuardedConnection(guard)
    conn.client, conn.peer = client, (client, 1)
    return conn


def test_eviction_takes_the_busiest_clients_oldest_silent_connection_then_idle_never_active():
    stats = HttpStats()
    guard = ConnectionGuard(GuardLimits(max_connections=4, max_per_client=3), stats)
    scraper = _conn(guard, "scraper")      # oldest, still in its handshake
    flood = [_conn(guard, "flood") for _ in range(2)]
    keepalive = _conn(guard, "keepalive")
    for conn in (scraper, *flood, keepalive):
        assert guard.admit(conn)
    keepalive._set_state("idle")
    newcomer = _conn(guard, "other")
    assert guard.admit(newcomer)
    # The flooder holds the most silent connections: its oldest goes, not the older scraper's.
    assert flood[0]._lost and not scraper._lost and not keepalive._lost
    for conn in (scraper, flood[1], newcomer):
        conn._set_state("active")
    assert guard.admit(late := _conn(guard, "late"))  # no silent one left: the idle one goes
    assert keepalive._lost
    late._set_state("active")
    assert not guard.admit(_conn(guard, "refused"))  # every connection is serving a request
    assert (stats.closed["evicted"], stats.closed["connection_limit"]) == (2, 1)
    assert guard.state_counts()["active"] == 4 and guard.open == 4
    for conn in (scraper, flood[1], newcomer, late):
        conn.close(None)
    assert guard.open == 0 and not guard._per_client
    third = [_conn(guard, "same") for _ in range(4)]
    assert [guard.admit(c) for c in third] == [True, True, True, False]
    assert stats.closed["client_limit"] == 1


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        while True:
            if not await asyncio.wait_for(reader.read(4096), seconds):
                return True
    except asyncio.TimeoutError:
        return False
    except ConnectionError:
        return True


async def test_per_client_cap_refuses_one_address_not_the_others():
    async with running_daemon("http: {max_connections_per_client: 2, idle_timeout: 30s, "
                              "header_timeout: 30s}\n") as d:
        flood = [await asyncio.open_connection("127.0.0.1", d.bound_port, local_addr=("127.0.0.2", 0))
                 for _ in range(3)]
        assert [await _closed_within(r, 0.3) for r, _ in flood] == [False, False, True]
        other, _ = await asyncio.open_connection("127.0.0.1", d.bound_port, local_addr=("127.0.0.3", 0))
        assert not await _closed_within(other, 0.3)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{d.bound_port}/healthz") as resp:
                assert resp.status == 200
        assert d.http_stats.closed["client_limit"] == 1
        assert d.http_stats.states()["headers"] == 3


async def test_header_deadline_closes_silent_and_trickling_clients_not_idle_keepalive(caplog):
    config = "http: {header_timeout: 300ms, idle_timeout: 30s}\n"
    with caplog.at_level(logging.WARNING):
        async with running_daemon(config) as d:
            silent = await asyncio.open_connection("127.0.0.1", d.bound_port)
            trickle = await asyncio.open_connection("127.0.0.1", d.bound_port)
            keep = await asyncio.open_connection("127.0.0.1", d.bound_port)
            keep[1].write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await asyncio.wait_for(keep[0].read(200), 5)).startswith(b"HTTP/1.1 200")
            trickle[1].write(b"GET /metrics HTTP/1.1\r\n")
            for byte in b"X-Slow":  # a header byte every 0.1 s: the headers never complete
                trickle[1].write(bytes([byte]))
                await asyncio.sleep(0.1)
            assert await _closed_within(silent[0], 2.0) and await _closed_within(trickle[0], 2.0)
            assert not await _closed_within(keep[0], 1.0)  # idle after a response: idle_timeout rules
            assert d.http_stats.states()["idle"] == 1
            keep[1].write(b"GET /hea")  # a second request's headers have the same deadline
            assert await _closed_within(keep[0], 2.0)
            assert d.http_stats.closed["header_timeout"] == 3
    lines = [r for r in caplog.records if r.getMessage().startswith("closed a connection that did not send")]
    assert len(lines) == 1 and lines[0].peer.startswith("127.0.0.1:")  # rate-limited to one line


async def test_handshake_deadline_and_failed_handshakes_on_a_tls_port(tmp_path, caplog):
    from infrapulse.simulate.certs import make_test_pki

    pki = make_test_pki(tmp_path / "pki")
    path = tmp_path / "web.yaml"
    path.write_text(f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n")
    security = WebSecurity(path)
    with caplog.at_level(logging.WARNING):
        async with running_daemon("http: {handshake_timeout: 300ms}\n", web_security=security) as d:
            silent = await asyncio.open_connection("127.0.0.1", d.bound_port)
            assert await _closed_within(silent[0], 2.0)
            plain = await asyncio.open_connection("127.0.0.1", d.bound_port)
            plain[1].write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert await _closed_within(plain[0], 2.0)
            import ssl

            ctx = ssl.create_default_context(cafile=str(pki.ca_file))
            async with aiohttp.ClientSession() as session:
                async with session.get(f"https://localhost:{d.bound_port}/healthz", ssl=ctx) as resp:
                    assert resp.status == 200
            assert d.http_stats.closed["handshake_timeout"] == 1
            assert d.http_stats.closed["handshake_failed"] == 1
    messages = [r.getMessage() for r in caplog.records if "handshake" in r.getMessage()]
    assert sorted(messages) == ["TLS handshake failed",
                                "closed a connection that did not finish its TLS handshake in time"]


async def test_a_401_closes_its_connection(tmp_path):
    security = basic_auth_web_config(tmp_path, {"prom": "pw"})
    async with running_daemon("http: {idle_timeout: 30s}\n", web_security=security) as d:
        reader, writer = await asyncio.open_connection("127.0.0.1", d.bound_port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.read(300), 5)
        assert head.startswith(b"HTTP/1.1 401") and b"Connection: close" in head
        assert await _closed_within(reader, 2.0)
        good = "Basic " + base64.b64encode(b"prom:pw").decode()
        reader, writer = await asyncio.open_connection("127.0.0.1", d.bound_port)
        writer.write(f"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: {good}\r\n\r\n".encode())
        assert (await asyncio.wait_for(reader.read(300), 5)).startswith(b"HTTP/1.1 200")
        assert not await _closed_within(reader, 0.5)  # an accepted client keeps its connection
        writer.close()
        assert d.http_stats.rejected["unauthorized"] == 1
