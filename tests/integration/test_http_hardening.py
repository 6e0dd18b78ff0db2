"""Hostile clients: connection limits, idle connections, basic auth from an exporter-toolkit web config."""

from __future__ import annotations

import asyncio
import base64
import logging
import re

import aiohttp
import bcrypt

from conftest import running_daemon, scrape_until
from helpers import basic_auth_web_config, value
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


async def test_connections_beyond_the_limit_evict_the_oldest_silent_ones_and_service_goes_on():
    async with running_daemon("http: {max_connections: 3, idle_timeout: 30s}\n") as d:
        conns = [await asyncio.open_connection("127.0.0.1", d.bound_port) for _ in range(5)]
        closed = [await _is_closed(r, 0.3) for r, _ in conns]
        # None of them sent a request: each newcomer closes the oldest silent one.
        assert closed == [True, True, False, False, False]
        assert await _http_get(d.bound_port) == 200  # the scrape evicts a silent one too
        for _, w in conns:
            w.close()
        assert d.http_stats.closed["evicted"] == 3


async def test_idle_connections_are_closed():
    async with running_daemon("http: {max_connections: 2, idle_timeout: 500ms}\n") as d:
        idle = [await asyncio.open_connection("127.0.0.1", d.bound_port) for _ in range(2)]
        # A slow client trickles half a request line and then stalls.
        idle[1][1].write(b"GET /metr")
        assert all([await _is_closed(r, 5.0) for r, _ in idle])
        assert await _http_get(d.bound_port) == 200


async def test_basic_auth(tmp_path):
    security = basic_auth_web_config(tmp_path, {"prometheus": "s3cret-pass"})
    async with running_daemon("interval: 1s\n", web_security=security) as d:
        port = d.bound_port
        assert await _http_get(port, "/metrics", ("prometheus", "s3cret-pass")) == 200
        assert await _http_get(port, "/metrics", ("prometheus", "s3cret-pass")) == 200  # cached path
        assert await _http_get(port, "/metrics", ("prometheus", "wrong")) == 401
        assert await _http_get(port, "/metrics", ("nobody", "s3cret-pass")) == 401
        assert await _http_get(port, "/metrics") == 401
        assert await _http_get(port, "/") == 401


async def test_web_config_is_reread_and_bad_edits_are_refused(tmp_path, caplog):
    security = basic_auth_web_config(tmp_path, {"alice": "one"})
    path = security.config.path
    async with running_daemon("interval: 1s\n", web_security=security) as d:
        port = d.bound_port
        assert await _http_get(port, "/metrics", ("alice", "one")) == 200
        basic_auth_web_config(tmp_path, {"bob": "two"})  # rewrites the same file
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

    from infrapulse.simulate.certs import make_test_pki
    from infrapulse.webconfig import WebConfigError

    pki = make_test_pki(tmp_path / "pki")
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    missing = tmp_path / "missing.crt"
    cases = {
        "tls_server_config:\n  cert_file: a.crt\n": "key_file: required key is missing",
        "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n": "must be one of",
        "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n":
            "client_ca_file: required",
        # Each file problem names the key and the file (issue 19, item 6).
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n":
            f"tls_server_config.cert_file: {missing}: No such file or directory",
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: missing.key\n":
            f"tls_server_config.key_file: {tmp_path / 'missing.key'}: No such file or directory",
        f"tls_server_config:\n  cert_file: junk.pem\n  key_file: {pki.server_key}\n":
            f"tls_server_config.cert_file: {tmp_path / 'junk.pem'}: no PEM certificate in it",
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_cert}\n":
            f"tls_server_config.key_file: {pki.server_cert}: not an unencrypted PEM private key",
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.client_key}\n":
            f"key_file {pki.client_key} with cert_file {pki.server_cert}: "
            "the key does not match the certificate",
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: junk.pem\n":
            f"tls_server_config.client_ca_file: {tmp_path / 'junk.pem'}: no PEM certificate in it",
        "basic_auth_users:\n  u: plaintext\n": "basic_auth_users.u: expected a bcrypt hash",
        "basic_auth_users:\n  u: $2b$12$tooshort\n": "basic_auth_users.u: expected a bcrypt hash",
        "basic_auth_users:\n  u: $2b$99$" + "a" * 53 + "\n": "basic_auth_users.u: expected a bcrypt hash",
        "bogus: 1\n": "bogus: unknown key",
        "[" * 5000: "nested too deeply",
    }
    path = tmp_path / "web.yaml"
    for text, reason in cases.items():
        path.write_text(text)
        with pytest.raises(WebConfigError, match=re.escape(f"{path}: ") + ".*" + re.escape(reason)):
            WebSecurity(path)
    path.write_bytes(b"basic_auth_users:\n  u: \xff\n")
    with pytest.raises(WebConfigError, match="not UTF-8"):
        WebSecurity(path)


def test_cli_reports_badbasic_auth_web_config(tmp_path):
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


# -- issue 19, item 2: any wrong credential is a 401, whatever its length or bytes ----------------

def _basic(user: bytes, password: bytes) -> str:
    return "Basic " + base64.b64encode(user + b":" + password).decode()


async def _status(port: int, authorization: str | None) -> int:
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/metrics", headers=headers) as resp:
            await resp.read()
            return resp.status


async def test_long_and_odd_passwords_get_401_never_500(tmp_path, caplog):
    password = "p" * 72  # bcrypt's whole input
    security = basic_auth_web_config(tmp_path, {"prom": password})
    cases = {
        "exactly 72 bytes (the real one)": (_basic(b"prom", password.encode()), 200),
        "73 bytes sharing the first 72 (bcrypt 4 alone would accept it)": (_basic(b"prom", b"p" * 73), 401),
        "200 bytes (bcrypt 5 alone raises ValueError: a 500)": (_basic(b"prom", b"p" * 200), 401),
        "80 bytes of UTF-8 in 40 characters": (_basic(b"prom", ("é" * 40).encode()), 401),
        "a NUL byte": (_basic(b"prom", b"p\x00" + b"p" * 70), 401),
        "not UTF-8": (_basic(b"prom", b"\xff\xfe" * 10), 401),
        "unknown user, long password": (_basic(b"nobody", b"x" * 300), 401),
        "no colon": ("Basic " + base64.b64encode(b"p" * 100).decode(), 401),
        "not base64": ("Basic %%%not-base64%%%", 401),
        "another scheme": ("Bearer " + "a" * 500, 401),
    }
    with caplog.at_level(logging.WARNING):
        async with running_daemon("interval: 1s\n", web_security=security) as d:
            got = {name: await _status(d.bound_port, header) for name, (header, _) in cases.items()}
    assert got == {name: status for name, (_, status) in cases.items()}, f"bcrypt {bcrypt.__version__}"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_password_length_guard_whatever_bcrypt_does(monkeypatch):
    """check_password() decides over 72 bytes itself: a bcrypt that truncates (4.x) or raises
    (5.x) is never asked, and a ValueError from bcrypt is a plain "no"."""
    from infrapulse import webconfig

    calls: list[bytes] = []

    class Truncating:  # bcrypt 4: compares the first 72 bytes only
        @staticmethod
        def checkpw(password: bytes, hashed: bytes) -> bool:
            calls.append(password)
            return password[:72] == b"p" * 72

    class Raising:  # bcrypt 5 on input it refuses
        @staticmethod
        def checkpw(password: bytes, hashed: bytes) -> bool:
            calls.append(password)
            raise ValueError("password cannot be longer than 72 bytes")

    hashed = b"$2b$04$" + b"a" * 53
    monkeypatch.setattr(webconfig, "bcrypt", Truncating)
    assert webconfig.check_password(b"p" * 72, hashed) is True
    assert webconfig.check_password(b"p" * 73, hashed) is False
    assert webconfig.check_password(b"p" * 10_000, hashed) is False
    assert calls == [b"p" * 72]
    monkeypatch.setattr(webconfig, "bcrypt", Raising)
    assert webconfig.check_password(b"q" * 10, hashed) is False
    assert calls == [b"p" * 72, b"q" * 10]


# -- issue 19, item 3: malformed requests: one counted, rate-limited line per kind ---------------

MALFORMED = {
    "tls_to_plain_port": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40,
    "bad_header": b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
    "line_too_long": b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
}


async def _send_raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(200), 5)
    finally:
        writer.close()


async def test_malformed_requests_are_counted_and_logged_once_per_kind(caplog):
    repeats = 30
    with caplog.at_level(logging.INFO):
        async with running_daemon("interval: 1s\n") as d:
            for data in MALFORMED.values():
                for _ in range(repeats):
                    assert (await _send_raw(d.bound_port, data))[:12] in (b"HTTP/1.1 400", b"HTTP/1.0 400"), \
                        data[:20]
            values = await scrape_until(d, lambda v: True, attempts=1)
    lines = [r for r in caplog.records if r.getMessage() == "rejected a malformed request"]
    kinds = sorted(r.error for r in lines)
    assert len(lines) == len(set(kinds)) and len(kinds) >= 2, kinds  # one line per kind
    assert all(r.peer == "127.0.0.1" and r.exc_info is None for r in lines)
    assert not [r for r in caplog.records if r.exc_info or r.name.startswith("aiohttp")], caplog.text
    assert d.http_stats.rejected["malformed"] == repeats * len(MALFORMED)
    assert value(values, "infrapulse_http_requests_rejected_total",
                 reason="malformed") == repeats * len(MALFORMED)


def test_rate_limiter_holds_back_repeats_and_reports_them():
    from infrapulse.logs import RateLimiter

    now = [0.0]
    limiter = RateLimiter(every=10.0, clock=lambda: now[0])
    assert limiter.allow("a") == 0
    assert [limiter.allow("a") for _ in range(5)] == [None] * 5
    assert limiter.allow("b") == 0  # kinds are limited separately
    now[0] = 10.0
    assert limiter.allow("a") == 5  # the next line says how many were held back
    assert limiter.allow("a") is None


# -- issue 19, item 4: headers on every response -------------------------------------------------

EXPECTED_HEADERS = {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
                    "Referrer-Policy": "no-referrer"}
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")


async def test_every_response_carries_the_security_headers(tmp_path):
    security = basic_auth_web_config(tmp_path, {"prom": "pw"})
    auth = "Basic " + base64.b64encode(b"prom:pw").decode()
    config = "interval: 1s\nhttp: {csp_report_uri: 'http://127.0.0.1:9/csp'}\n"
    seen = {}
    async with running_daemon(config, web_security=security) as d:
        async with aiohttp.ClientSession() as session:
            for path, headers, status in (
                    ("/", {"Authorization": auth}, 200), ("/metrics", {"Authorization": auth}, 200),
                    ("/api/v1/health", {"Authorization": auth}, 200),
                    ("/api/v1/sources", {"Authorization": auth}, 200),
                    ("/healthz", {"Authorization": auth}, 200),
                    ("/static/health.css", {"Authorization": auth}, 200),
                    ("/static/infrapulse.css", {"Authorization": auth}, 200),
                    ("/nope", {"Authorization": auth}, 404),
                    ("/api/v1/sources?x=1", {"Authorization": auth}, 400),
                    ("/metrics", {}, 401)):
                async with session.get(f"http://127.0.0.1:{d.bound_port}{path}", headers=headers) as resp:
                    body = await resp.text()
                    assert resp.status == status, (path, body)
                    seen[(path, status)] = (resp.headers, body)
    for (path, _status), (headers, _) in seen.items():
        for name, expected in EXPECTED_HEADERS.items():
            assert headers.get(name) == expected, (path, name)
        assert headers["Content-Security-Policy"] == CSP + "; report-uri http://127.0.0.1:9/csp", path
    page = seen[("/", 200)][1]
    assert "<style" not in page and " style=" not in page and "<script" not in page
    assert '<link rel="stylesheet" href="/static/health.css">' in page
    assert seen[("/static/health.css", 200)][0]["Content-Type"].startswith("text/css")


async def test_landing_page_has_no_inline_style_and_csp_without_report_uri():
    async with running_daemon("health: {enabled: false}\n") as d:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{d.bound_port}/") as resp:
                page = await resp.text()
                assert resp.headers["Content-Security-Policy"] == CSP
    assert "<style" not in page and "style=" not in page and "<script" not in page
    assert '<link rel="stylesheet" href="/static/infrapulse.css">' in page


# -- issue 19, item 5: strict JSON APIs ----------------------------------------------------------

async def test_json_apis_refuse_unknown_query_parameters():
    async with running_daemon("interval: 1s\n") as d:
        async with aiohttp.ClientSession() as session:
            for path in ("/api/v1/sources?verbose=1", "/api/v1/health?x=&y=2"):
                async with session.get(f"http://127.0.0.1:{d.bound_port}{path}") as resp:
                    assert resp.status == 400 and resp.content_type == "application/json"
                    error = (await resp.json())["error"]
                    assert error.startswith("unknown query parameter '") and "takes none" in error
            async with session.get(f"http://127.0.0.1:{d.bound_port}/api/v1/sources") as resp:
                assert resp.status == 200
    assert d.http_stats.rejected["bad_request"] == 2
