"""Hostile clients: connection limits, idle connections, basic auth from an exporter-toolkit web config."""

from __future__ import annotations

import asyncio
import base64
import logging

import aiohttp
import bcrypt

from conftest import running_daemon
from infrapulse.webconfig import WebSecurity


async def _http_get(port: int, path: str = "/healthz", auth: tuple[str, str] | None = None) -> int:
    headers = {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}{path}", headers=headers) as resp:
            await resp.read()
            return resp.status


async def _is_closed(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), within) == b""
    except asyncio.TimeoutError:
        return False
    except ConnectionError:
        return True


async def test_connections_beyond_the_limit_are_closed_and_service_goes_on():
    async with running_daemon("http: {max_connections: 3, idle_timeout: 30s}\n") as d:
        conns = [await asyncio.open_connection("127.0.0.1", d.bound_port) for _ in range(5)]
        closed = [await _is_closed(r, 0.3) for r, _ in conns]
        assert closed == [False, False, False, True, True]
        for _, w in conns:
            w.close()
        await asyncio.sleep(0.2)
        assert await _http_get(d.bound_port) == 200


async def test_idle_connections_are_closed():
    async with running_daemon("http: {max_connections: 2, idle_timeout: 500ms}\n") as d:
        idle = [await asyncio.open_connection("127.0.0.1", d.bound_port) for _ in range(2)]
        # A slow client trickles half a request line and then stalls.
        idle[1][1].write(b"GET /metr")
        assert all([await _is_closed(r, 5.0) for r, _ in idle])
        assert await _http_get(d.bound_port) == 200


def _web_config(tmp_path, users: dict[str, str]) -> WebSecurity:
    lines = ["basic_auth_users:"] + [
        f"  {u}: {bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=4)).decode()}" for u, p in users.items()]
    path = tmp_path / "web.yaml"
    path.write_text("\n".join(lines) + "\n")
    return WebSecurity(path)


async def test_basic_auth(tmp_path):
    security = _web_config(tmp_path, {"prometheus": "s3cret-pass"})
    async with running_daemon("interval: 1s\n", web_security=security) as d:
        port = d.bound_port
        assert await _http_get(port, "/metrics", ("prometheus", "s3cret-pass")) == 200
        assert await _http_get(port, "/metrics", ("prometheus", "s3cret-pass")) == 200  # cached path
        assert await _http_get(port, "/metrics", ("prometheus", "wrong")) == 401
        assert await _http_get(port, "/metrics", ("nobody", "s3cret-pass")) == 401
        assert await _http_get(port, "/metrics") == 401
        assert await _http_get(port, "/") == 401


async def test_web_config_is_reread_and_bad_edits_are_refused(tmp_path, caplog):
    security = _web_config(tmp_path, {"alice": "one"})
    path = security.config.path
    async with running_daemon("interval: 1s\n", web_security=security) as d:
        port = d.bound_port
        assert await _http_get(port, "/metrics", ("alice", "one")) == 200
        _web_config(tmp_path, {"bob": "two"})  # rewrites the same file
        assert security.reload_if_changed()
        assert await _http_get(port, "/metrics", ("alice", "one")) == 401
        assert await _http_get(port, "/metrics", ("bob", "two")) == 200
        path.write_text("basic_auth_users:\n  bob: not-a-hash\n")
        with caplog.at_level(logging.ERROR):
            assert not security.reload_if_changed()
        assert "expected a bcrypt hash" in caplog.records[-1].error
        assert await _http_get(port, "/metrics", ("bob", "two")) == 200


def _tls_security(tmp_path, client_auth: str = "NoClientCert", users: str = "") -> tuple[WebSecurity, object]:
    from infrapulse.simulate.certs import make_test_pki

    pki = make_test_pki(tmp_path / "pki")
    path = tmp_path / "web-tls.yaml"
    path.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_auth_type: {client_auth}\n  client_ca_file: {pki.ca_file}\n" + users)
    return WebSecurity(path), pki


async def _https_get(port: int, pki, client_cert: bool = False, auth: tuple[str, str] | None = None) -> int:
    import ssl

    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    if client_cert:
        ctx.load_cert_chain(pki.client_cert, pki.client_key)
    headers = {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    async with aiohttp.ClientSession() as session:
        async with session.get(f"https://localhost:{port}/metrics", ssl=ctx, headers=headers) as resp:
            body = await resp.read()
            assert resp.status != 200 or b"infrapulse_build_info" in body
            return resp.status


async def test_tls_with_basic_auth_and_plain_http_refused(tmp_path):
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    security, pki = _tls_security(tmp_path, users=f"basic_auth_users:\n  prom: {hashed}\n")
    async with running_daemon("interval: 1s\n", web_security=security) as d:
        assert await _https_get(d.bound_port, pki, auth=("prom", "pw")) == 200
        assert await _https_get(d.bound_port, pki, auth=("prom", "nope")) == 401
        assert await _https_get(d.bound_port, pki) == 401
        # Plain HTTP to the TLS port gets no HTTP answer.
        try:
            status = await _http_get(d.bound_port)
        except aiohttp.ClientError:
            status = None
        assert status is None
        # A client that does not trust the server's CA refuses the connection.
        try:
            async with aiohttp.ClientSession() as session:
                await session.get(f"https://localhost:{d.bound_port}/healthz")
            verified = True
        except aiohttp.ClientConnectorCertificateError:
            verified = False
        assert verified is False


async def test_client_certificates_enforced(tmp_path):
    security, pki = _tls_security(tmp_path, client_auth="RequireAndVerifyClientCert")
    async with running_daemon("interval: 1s\n", web_security=security) as d:
        assert await _https_get(d.bound_port, pki, client_cert=True) == 200
        try:
            status = await _https_get(d.bound_port, pki, client_cert=False)
        except (aiohttp.ClientError, ConnectionError):
            status = None
        assert status is None


def test_web_config_errors(tmp_path):
    import pytest

    from infrapulse.webconfig import WebConfigError

    cases = {
        "tls_server_config:\n  cert_file: a.crt\n": "key_file: required key is missing",
        "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n": "must be one of",
        "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n":
            "client_ca_file: required",
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n": "cannot load certificates",
        "basic_auth_users:\n  u: plaintext\n": "expected a bcrypt hash",
        "bogus: 1\n": "bogus: unknown key",
    }
    for text, reason in cases.items():
        path = tmp_path / "web.yaml"
        path.write_text(text)
        with pytest.raises(WebConfigError, match=reason):
            WebSecurity(path)


def test_cli_reports_bad_web_config(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "web.yaml"
    path.write_text("basic_auth_users:\n  u: plaintext\n")
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "run", "--web.config.file", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "bcrypt" in proc.stderr


async def _metrics_text(port: int) -> str:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
            return await resp.text()


async def test_render_cache_shares_a_render_within_its_ttl():
    from infrapulse.store import Snapshot

    async with running_daemon("http: {render_cache: 1h}\n") as d:
        snap = Snapshot()
        snap.add("infrapulse_source_up", ("x", "y"), 1.0)
        d.store.publish("probe", "t", snap, stale_after=60)
        first = await _metrics_text(d.bound_port)
        snap.add("infrapulse_source_up", ("x", "y"), 0.0)  # an in-place update, as gNMI makes
        assert await _metrics_text(d.bound_port) == first  # served from the cache
        d.store.publish("probe", "t", snap, stale_after=60)  # a publish shows at once
        assert 'infrapulse_source_up{source="x",target="y"} 0.0' in await _metrics_text(d.bound_port)
    async with running_daemon("http: {render_cache: 0s}\n") as d:
        await _metrics_text(d.bound_port)
        snap = Snapshot()
        snap.add("infrapulse_source_up", ("x", "y"), 1.0)
        d.store.publish("probe", "t", snap, stale_after=60)
        assert 'infrapulse_source_up{source="x",target="y"} 1.0' in await _metrics_text(d.bound_port)
