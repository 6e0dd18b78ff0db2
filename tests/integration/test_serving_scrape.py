"""infrapulse.scrape against real aiohttp servers on loopback: every failure mode has its reason."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ipaddress
import ssl

import pytest
from aiohttp import web

from infrapulse.scrape import ScrapeError, Scraper, ScrapeTarget, parse_headers_text, redact_url

GOOD = ('# HELP vllm:num_requests_running r\n# TYPE vllm:num_requests_running gauge\n'
        'vllm:num_requests_running{model_name="m"} 3.0\n')
OM = "# TYPE x counter\nx_total 5.0\n# EOF\n"


class Misbehaving:
    """One server whose /metrics behaviour can be switched between scrapes."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.calls = 0
        self.seen_headers: list[dict] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        self.seen_headers.append(dict(request.headers))
        mode = self.mode
        if mode == "ok":
            return web.Response(text=GOOD, content_type="text/plain")
        if mode == "gzip":
            return web.Response(body=gzip.compress(GOOD.encode()), headers={
                "Content-Type": "text/plain; version=0.0.4", "Content-Encoding": "gzip"})
        if mode == "openmetrics":
            return web.Response(text=OM, content_type="application/openmetrics-text")
        if mode == "openmetrics-truncated":
            return web.Response(text=OM.replace("# EOF\n", ""), content_type="application/openmetrics-text")
        if mode == "html":
            return web.Response(text="<html><body>Login</body></html>", content_type="text/html")
        if mode == "html-as-text":
            return web.Response(text="<!doctype html><p>proxy error</p>", content_type="text/plain")
        if mode == "garbage":
            return web.Response(text="all systems nominal, nothing to see\n", content_type="text/plain")
        if mode == "500":
            return web.Response(status=500, text="boom")
        if mode == "auth":
            if request.headers.get("Authorization") != "Bearer s3cret-token":
                return web.Response(status=401, text="no")
            return web.Response(text=GOOD, content_type="text/plain")
        if mode == "huge-declared":
            return web.Response(body=b"x 1\n" * 100_000, content_type="text/plain")
        if mode == "endless":
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            try:
                while True:
                    await resp.write(b'vllm:num_requests_running{model_name="m"} 1\n' * 500)
            except (ConnectionError, asyncio.CancelledError):
                pass
            return resp
        if mode == "slow":
            await asyncio.sleep(5)
            return web.Response(text=GOOD, content_type="text/plain")
        if mode in ("reset", "reset-once"):
            if mode == "reset-once":
                self.mode = "ok"
            resp = web.StreamResponse(headers={"Content-Type": "text/plain", "Content-Length": "10000"})
            await resp.prepare(request)
            await resp.write(b"vllm:num_requests_running 1\n")
            request.transport.close()  # drop the connection mid-body
            return resp
        raise AssertionError(mode)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self.handle)
        self.runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self.runner.cleanup()


@pytest.fixture
async def server():
    srv = Misbehaving()
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def scraper():
    s = Scraper(backoff_initial=0.01, backoff_cap=0.02)
    yield s
    await s.close()


async def test_plain_text_and_gzip(server, scraper):
    for mode in ("ok", "gzip"):
        server.mode = mode
        result = await scraper.scrape(ScrapeTarget(server.url))
        fam = result.families["vllm:num_requests_running"]
        assert fam.type == "gauge"
        assert fam.samples[0].value == 3.0 and fam.samples[0].labels == {"model_name": "m"}
        assert result.openmetrics is False
    assert "text/plain;version=0.0.4" in server.seen_headers[0]["Accept"]


async def test_openmetrics(server, scraper):
    server.mode = "openmetrics"
    result = await scraper.scrape(ScrapeTarget(server.url))
    assert result.openmetrics and result.families["x"].samples[0].value == 5.0
    server.mode = "openmetrics-truncated"
    with pytest.raises(ScrapeError) as err:
        await scraper.scrape(ScrapeTarget(server.url))
    assert err.value.reason == "truncated"


@pytest.mark.parametrize("mode, reason", [
    ("html", "not_prometheus"), ("html-as-text", "not_prometheus"), ("garbage", "not_prometheus"),
    ("500", "http_500"), ("endless", "too_large"), ("huge-declared", "too_large"), ("slow", "timeout"),
    ("reset", "reset"),
])
async def test_failure_reasons(server, scraper, mode, reason):
    server.mode = mode
    with pytest.raises(ScrapeError) as err:
        await scraper.scrape(ScrapeTarget(server.url, timeout=0.5, max_bytes=64 * 1024, retries=0))
    assert err.value.reason == reason
    assert str(server.port) in err.value.message
    # The same scraper recovers as soon as the endpoint does.
    server.mode = "ok"
    result = await scraper.scrape(ScrapeTarget(server.url, timeout=2))
    assert result.families["vllm:num_requests_running"].samples[0].value == 3.0


async def test_connection_refused(scraper):
    from conftest import free_port

    with pytest.raises(ScrapeError) as err:
        await scraper.scrape(ScrapeTarget(f"http://127.0.0.1:{free_port()}/metrics", timeout=1))
    assert err.value.reason == "connection_refused"


async def test_reset_is_retried_with_backoff(server, scraper):
    server.mode = "reset-once"
    result = await scraper.scrape(ScrapeTarget(server.url, retries=1))
    assert result.attempts == 2 and server.calls == 2
    server.mode = "reset-once"
    with pytest.raises(ScrapeError):  # no retries allowed
        await scraper.scrape(ScrapeTarget(server.url, retries=0))


async def test_retry_respects_the_deadline(server, scraper):
    server.mode = "reset"
    loop = asyncio.get_running_loop()
    with pytest.raises(ScrapeError) as err:
        await scraper.scrape(ScrapeTarget(server.url, retries=3, timeout=1.0), deadline=loop.time() + 0.5)
    assert err.value.reason == "reset" and server.calls == 1


async def test_bearer_token_file_is_reread(server, scraper, tmp_path):
    server.mode = "auth"
    token = tmp_path / "token"
    token.write_text("wrong\n")
    target = ScrapeTarget(server.url, bearer_token_file=str(token))
    with pytest.raises(ScrapeError) as err:
        await scraper.scrape(target)
    assert err.value.reason == "http_401"
    token.write_text("s3cret-token\n")
    import os
    os.utime(token, (1, 1))  # a rotated token gets a new mtime
    assert (await scraper.scrape(target)).families
    with pytest.raises(ScrapeError) as err:
        await scraper.scrape(ScrapeTarget(server.url, bearer_token_file=str(tmp_path / "missing")))
    assert err.value.reason == "credentials" and "s3cret" not in err.value.message


async def test_headers_and_token_from_env(server, scraper, monkeypatch):
    server.mode = "auth"
    monkeypatch.setenv("IP_TEST_TOKEN", "s3cret-token")
    monkeypatch.setenv("IP_TEST_HEADERS", '{"X-Api-Key": "k1", "X-Tenant": "ml"}')
    await scraper.scrape(ScrapeTarget(server.url, bearer_token_env="IP_TEST_TOKEN",
                                      headers_env="IP_TEST_HEADERS"))
    sent = server.seen_headers[-1]
    assert sent["X-Api-Key"] == "k1" and sent["X-Tenant"] == "ml"
    monkeypatch.setenv("IP_TEST_HEADERS", "not a header line")
    with pytest.raises(ScrapeError) as err:
        await scraper.scrape(ScrapeTarget(server.url, headers_env="IP_TEST_HEADERS"))
    assert err.value.reason == "credentials"
    assert parse_headers_text("X-A: 1\n\nX-B:  two words \n") == {"X-A": "1", "X-B": "two words"}


def test_redact_url():
    assert redact_url("https://user:pw@host:8443/metrics?token=abc#x") == "https://host:8443/metrics"


def _make_cert(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


async def test_tls_is_verified(tmp_path, scraper):
    cert_file, key_file = _make_cert(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    app = web.Application()
    async def ok(request):
        return web.Response(text=GOOD, content_type="text/plain")

    app.router.add_get("/metrics", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/metrics"
    try:
        with pytest.raises(ScrapeError) as err:  # self-signed: not trusted by default
            await scraper.scrape(ScrapeTarget(url, timeout=2))
        assert err.value.reason == "tls"
        result = await scraper.scrape(ScrapeTarget(url, timeout=2, ca_file=str(cert_file)))
        assert result.families["vllm:num_requests_running"].samples[0].value == 3.0
        assert (await scraper.scrape(ScrapeTarget(url, tls_insecure_skip_verify=True))).families
    finally:
        await runner.cleanup()
