"""Secrets never leak: a daemon run with known secrets in every place a secret can go
(gNMI password from a file and from an env var, bearer tokens from a file and an env var,
extra headers from an env var, a basic-auth password) — good ones and rejected ones, so
error paths run too — and every output is searched for them: logs at debug level,
/metrics, /api/v1/health, /api/v1/sources, the status page, and check-config's output.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
from pathlib import Path

import aiohttp
import bcrypt
from aiohttp import web

from conftest import ROOT, free_port
from infrapulse.simulate.gnmi_target import SimFabric

GNMI_PASSWORD = "gnmiPw-7f3a9Kq"
GNMI_WRONG_PASSWORD = "wrongPw-Q8z1xR"
TOKEN_GOOD = "tokGood-B3arer55aa"
TOKEN_REJECTED = "tokBad-Reject99zz"
HEADER_SECRET = "hdrSecret-42Xyz"
WEB_PASSWORD = "webPw-zz1Ab"
SECRETS = [GNMI_PASSWORD, GNMI_WRONG_PASSWORD, TOKEN_GOOD, TOKEN_REJECTED, HEADER_SECRET, WEB_PASSWORD]

FIXTURE = (ROOT / "tests/fixtures/serving/vllm-0.33.prom")


async def _engine(port: int) -> web.AppRunner:
    """A vLLM-format endpoint that accepts only TOKEN_GOOD and the secret header."""
    body = FIXTURE.read_text()

    async def metrics(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN_GOOD}":
            return web.Response(status=401, text=f"bad token {request.headers.get('Authorization')}")
        if request.headers.get("X-Api-Key") != HEADER_SECRET:
            return web.Response(status=403, text="missing key")
        return web.Response(text=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def test_no_secret_in_any_output(tmp_path: Path):
    assert FIXTURE.exists()
    fabric = SimFabric.rails(["node-a"], ["openconfig", "openconfig"], ports=2, username="admin",
                             password=GNMI_PASSWORD)
    await fabric.start()
    engine_port = free_port()
    engine = await _engine(engine_port)
    (tmp_path / "gnmi-pw").write_text(GNMI_PASSWORD + "\n")
    (tmp_path / "token").write_text(TOKEN_GOOD + "\n")
    web_cfg = tmp_path / "web.yaml"
    hashed = bcrypt.hashpw(WEB_PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web_cfg.write_text(f"basic_auth_users:\n  prom: {hashed}\n")
    good, bad = fabric.targets
    config = tmp_path / "config.yaml"
    config.write_text(f"""
interval: 500ms
sources:
  gnmi:
    defaults: {{insecure: true, username: admin, sample_interval: 1s, connect_timeout: 2s}}
    retry_max: 1s
    targets:
      - {{name: good-switch, address: "{good.address}", password_file: "{tmp_path / 'gnmi-pw'}"}}
      - {{name: bad-switch, address: "{bad.address}", password_env: WRONG_GNMI_PW}}
  serving:
    endpoints:
      - {{name: good-ep, url: "http://127.0.0.1:{engine_port}/metrics",
          bearer_token_file: "{tmp_path / 'token'}", headers_env: ENGINE_HEADERS}}
      - {{name: bad-ep, url: "http://127.0.0.1:{engine_port}/metrics", bearer_token_env: REJECTED_TOKEN,
          headers_env: ENGINE_HEADERS}}
""")
    port = free_port()
    env = {**os.environ, "WRONG_GNMI_PW": GNMI_WRONG_PASSWORD, "REJECTED_TOKEN": TOKEN_REJECTED,
           "ENGINE_HEADERS": json.dumps({"X-Api-Key": HEADER_SECRET})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infrapulse", "run", "--config", str(config), "--listen", f"127.0.0.1:{port}",
        "--log-level", "debug", "--log-format", "json", "--web.config.file", str(web_cfg),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env)
    outputs: dict[str, str] = {}
    try:
        headers = {"Authorization": "Basic " + base64.b64encode(f"prom:{WEB_PASSWORD}".encode()).decode()}
        async with aiohttp.ClientSession(headers=headers) as session:
            async def get(path: str) -> str:
                async with session.get(f"http://127.0.0.1:{port}{path}") as resp:
                    return await resp.text()

            sources: dict = {}
            for _ in range(150):
                await asyncio.sleep(0.2)
                try:
                    sources = {(s["source"], s["target"]): s
                               for s in json.loads(await get("/api/v1/sources"))["sources"]}
                except (aiohttp.ClientError, ValueError):
                    continue
                wanted = [sources.get(("gnmi", "good-switch"), {}).get("up"),
                          sources.get(("gnmi", "bad-switch"), {}).get("reason") == "unauthenticated",
                          sources.get(("serving", "good-ep"), {}).get("up"),
                          sources.get(("serving", "bad-ep"), {}).get("reason") == "http_401"]
                if all(wanted):
                    break
            # The good credentials worked and the bad ones failed: both paths ran.
            assert ("gnmi", "bad-switch") in sources, sources
            assert sources[("gnmi", "good-switch")]["up"] is True
            assert sources[("gnmi", "bad-switch")]["reason"] == "unauthenticated"
            assert sources[("serving", "good-ep")]["up"] is True
            assert sources[("serving", "bad-ep")]["reason"] == "http_401"
            for path in ("/metrics", "/api/v1/sources", "/api/v1/health", "/"):
                outputs[path] = await get(path)
        # An invalid reload logs its error too.
        config.write_text(config.read_text().replace("interval: 500ms", "interval: 5x"))
        proc.send_signal(signal.SIGHUP)
        await asyncio.sleep(1.0)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        logs, _ = await asyncio.wait_for(proc.communicate(), 10)
        await engine.cleanup()
        await fabric.close()
    outputs["logs"] = logs.decode()
    check = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infrapulse", "check-config", str(config), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    outputs["check-config"] = (await check.communicate())[0].decode()

    assert "unauthenticated" in outputs["logs"] or "unauthenticated" in outputs["/api/v1/sources"]
    assert "config reload failed" in outputs["logs"]
    assert 'infrapulse_switch_up{switch="good-switch"} 1.0' in outputs["/metrics"]
    for name, text in outputs.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked into {name}"
            assert base64.b64encode(secret.encode()).decode() not in text, \
                f"{secret!r} (base64) leaked into {name}"
