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
