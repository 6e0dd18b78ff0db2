"""`infrapulse score` against a real daemon served the documented way (docs/security.md): TLS from
a web config, basic auth, client certificates; and a bearer token through a proxy. The CLI runs as
a subprocess, as a person on call runs it, and no credential ever appears in what it prints."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import aiohttp
import bcrypt
from aiohttp import web

from conftest import free_port, running_daemon
from health_fixtures import GPU_LABELS, Feed
from infrapulse.simulate.certs import make_test_pki
from infrapulse.webconfig import WebSecurity

PASSWORD = "sc0re-pa55word"
TOKEN = "t0ken-for-the-proxy"
REFUSED = "the daemon refused"


async def _score(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infrapulse", "score", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def _secured_daemon(tmp_path, client_auth: str = "NoClientCert"):
    pki = make_test_pki(tmp_path / "pki")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web_yaml = tmp_path / "web.yaml"
    web_yaml.write_text(f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
                        f"  client_auth_type: {client_auth}\n  client_ca_file: {pki.ca_file}\n"
                        f"basic_auth_users:\n  oncall: {hashed}\n")
    (tmp_path / "password").write_text(PASSWORD + "\n")
    security = WebSecurity(web_yaml)
    async with running_daemon("interval: 5s\nhealth: {window: 1m}\nsources: {nvml: {enabled: false}}\n",
                              web_security=security) as d:
        Feed(d.store).gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 1).publish(d.health)
        yield d, pki


async def test_score_reads_a_daemon_behind_tls_and_basic_auth(tmp_path):
    async with _secured_daemon(tmp_path) as (d, pki):
        port = d.bound_port
        auth = ("--username", "oncall", "--password-file", str(tmp_path / "password"))
        ca = ("--ca-file", str(pki.ca_file))
        code, out, err = await _score("--url", f"https://localhost:{port}", *ca, *auth)
        assert code == 0, err
        lines = out.splitlines()
        # coverage: the GPU signals that have data, of all that apply
        assert lines[0] == f"testhost (https://localhost:{port}): score 100 HEALTHY, coverage 58%"
        header = next(line for line in lines if line.startswith("signal"))
        assert header.split()[-1] == "critical"  # the last column has a name
        gpu_lost = next(line for line in lines if line.startswith("gpu_lost"))
        assert gpu_lost.split()[-1] == "yes"

        # No scheme: https:// because a TLS option is given.
        code, out, err = await _score("--url", f"localhost:{port}", "--ca-file", str(pki.ca_file), *auth)
        assert code == 0 and out.startswith(f"testhost (https://localhost:{port}): score 100"), (out, err)
        # Credentials in the URL work and are never printed.
        code, out, err = await _score("--url", f"https://oncall:{PASSWORD}@localhost:{port}",
                                      "--ca-file", str(pki.ca_file))
        assert code == 0 and PASSWORD not in out + err and out.startswith(f"testhost (https://localhost:{port})")
        code, out, err = await _score("--url", f"https://localhost:{port}", "--insecure-skip-verify", *auth)
        assert code == 0, err


async def test_score_failures_say_what_to_add_and_never_echo_credentials(tmp_path):
    async with _secured_daemon(tmp_path) as (d, pki):
        port = d.bound_port
        base = f"https://localhost:{port}"
        code, out, err = await _score("--url", f"https://oncall:wrong-{PASSWORD}@localhost:{port}",
                                      "--ca-file", str(pki.ca_file))
        assert (code, out) == (3, "")
        assert err == f"cannot read {base}/api/v1/health: 401 Unauthorized: {REFUSED} these credentials\n"
        assert PASSWORD not in err
        code, out, err = await _score("--url", base, "--ca-file", str(pki.ca_file))
        assert err == (f"cannot read {base}/api/v1/health: 401 Unauthorized: {REFUSED} a request without "
                       "credentials (give --username and --password-file)\n")
        code, out, err = await _score("--url", base, "--username", "oncall",
                                      "--password-file", str(tmp_path / "password"))
        assert code == 3 and err.startswith(f"cannot read {base}/api/v1/health: TLS: ")
        assert err.endswith("(give the daemon's CA with --ca-file)\n")
        code, out, err = await _score("--url", base, "--username", "oncall")
        assert code == 3 and "--username needs --password-file" in err


async def test_score_with_a_client_certificate(tmp_path):
    async with _secured_daemon(tmp_path, "RequireAndVerifyClientCert") as (d, pki):
        url = f"https://localhost:{d.bound_port}"
        auth = ("--username", "oncall", "--password-file", str(tmp_path / "password"),
                "--ca-file", str(pki.ca_file))
        code, out, err = await _score("--url", url, *auth, "--cert-file", str(pki.client_cert),
                                      "--key-file", str(pki.client_key))
        assert code == 0 and out.startswith(f"testhost ({url}): score 100 HEALTHY"), err
        code, out, err = await _score("--url", url, *auth)
        assert code == 3 and out == "" and err.startswith(f"cannot read {url}/api/v1/health: "), err
        assert err.endswith("(does the daemon require a client certificate? --cert-file and --key-file)\n")


async def test_score_sends_a_bearer_token_to_a_proxy(tmp_path):
    """A proxy in front of a plain daemon that wants `Authorization: Bearer`."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    async with running_daemon("interval: 5s\n") as d:
        Feed(d.store).gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 0).publish(d.health)
        seen: list[str] = []

        async def proxy(request: web.Request) -> web.Response:
            seen.append(request.headers.get("Authorization", ""))
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                return web.Response(status=401)
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{d.bound_port}{request.path}") as resp:
                    return web.Response(body=await resp.read(), content_type="application/json")

        app = web.Application()
        app.router.add_get("/api/v1/health", proxy)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            token = ("--bearer-token-file", str(tmp_path / "token"))
            code, out, err = await _score("--url", f"127.0.0.1:{port}", *token)
            code_without, _, err_without = await _score("--url", f"127.0.0.1:{port}")
        finally:
            await runner.cleanup()
    assert code == 2, err  # the lost GPU caps the score: critical
    assert out.startswith(f"testhost (http://127.0.0.1:{port}): score") and "CRITICAL" in out.splitlines()[0]
    assert seen == [f"Bearer {TOKEN}", ""] and TOKEN not in out + err
    assert code_without == 3 and "401 Unauthorized" in err_without
