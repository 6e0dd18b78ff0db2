"""Inspections over loopback: the HTTP API of an in-process daemon (basic auth and JSON on POST,
the report's page, metrics and status-page link), the switch side read from a fake Prometheus
(the facing port named, a failing query a note without secrets), and the `infrapulse inspect`
CLI as a subprocess. The integration half of tests/test_inspect.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import aiohttp
import bcrypt
from aiohttp import web

from conftest import running_daemon
from infrapulse.inspect.config import SwitchPrometheusSettings
from infrapulse.inspect.verdict import decide
from infrapulse.webconfig import WebSecurity
from test_inspect import T0

# -- HTTP ----------------------------------------------------------------------------------------

def _web_config(tmp_path: Path) -> WebSecurity:
    path = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    path.write_text(f"basic_auth_users:\n  ops: {hashed}\n")
    return WebSecurity(path)


async def test_post_needs_basic_auth_and_json(tmp_path: Path) -> None:
    config = f"state_dir: {tmp_path}\ninspect: {{on_demand_min_interval: 0s}}\n"
    async with running_daemon(config) as daemon:
        base = f"http://127.0.0.1:{daemon.bound_port}"
        async with aiohttp.ClientSession() as session:
            async with session.post(base + "/api/v1/inspections", json={}) as resp:
                assert resp.status == 403  # no basic auth configured and not allowed unauthenticated
                assert "basic auth" in (await resp.json())["error"]
            async with session.get(base + "/api/v1/inspections/latest") as resp:
                assert resp.status == 404
    async with running_daemon(config, web_security=_web_config(tmp_path)) as daemon:
        base = f"http://127.0.0.1:{daemon.bound_port}"
        auth = {"Authorization": "Basic " + base64.b64encode(b"ops:s3cret").decode()}
        async with aiohttp.ClientSession() as session:
            async with session.post(base + "/api/v1/inspections", json={}) as resp:
                assert resp.status == 401
            plain = {**auth, "Content-Type": "text/plain"}
            async with session.post(base + "/api/v1/inspections", data="{}", headers=plain) as resp:
                assert resp.status == 415  # a cross-site form cannot post it
            async with session.post(base + "/api/v1/inspections", json={"x": 1}, headers=auth) as resp:
                assert resp.status == 400
            async with session.post(base + "/api/v1/inspections", json={}, headers=auth) as resp:
                assert resp.status == 200
                report = await resp.json()
            async with session.get(base + "/api/v1/inspections", headers=auth) as resp:
                listing = await resp.json()
            async with session.get(base + "/inspections/latest", headers=auth) as resp:
                page = await resp.text()
                csp = resp.headers["Content-Security-Policy"]
            async with session.get(base + "/metrics", headers=auth) as resp:
                metrics = await resp.text()
            async with session.get(base + "/", headers=auth) as resp:
                status_page = await resp.text()
    assert report["trigger"]["kind"] == "on_demand" and report["verdict"]["layer"] == "none"
    assert [i["id"] for i in listing["inspections"]] == [report["id"]]
    assert f"Inspection {report['id']}" in page and "<script" not in page and "style=" not in page
    assert "script-src" not in csp and "default-src 'none'" in csp
    assert 'infrapulse_inspections_total{trigger="on_demand",verdict_layer="none"} 1.0' in metrics
    (info,) = [line for line in metrics.splitlines() if line.startswith("infrapulse_inspection_last_info{")]
    assert f'id="{report["id"]}"' in info and 'verdict_layer="none"' in info and info.endswith(" 1.0")
    assert '<a href="/inspections/latest">latest inspection</a>' in status_page
    assert "s3cret" not in json.dumps(report) and "Authorization" not in json.dumps(report)


# -- the switch side from Prometheus -------------------------------------------------------------

class FakePrometheus:
    """/api/v1/query answering the facing port's PFC pause ratio: calm before `storm_from`,
    80% since; every other query an empty vector. Records the queries and their headers."""

    def __init__(self, storm_from: float, status: int = 200) -> None:
        self.storm_from = storm_from
        self.status = status
        self.seen: list[tuple[str, str | None]] = []

    async def query(self, request: web.Request) -> web.Response:
        promql, at = request.query["query"], float(request.query["time"])
        self.seen.append((promql, request.headers.get("Authorization")))
        if self.status != 200:
            return web.Response(status=self.status, text="boom")
        result = []
        if "pfc_pause_duration" in promql:
            value = 0.8 if at > self.storm_from else 0.0001
            result = [{"metric": {"switch": "leaf07", "interface": "Ethernet4", "priority": "3",
                                  "neighbor_port": "eth2"}, "value": [at, str(value)]}]
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})


async def _with_prometheus(fake: FakePrometheus, tmp_path: Path, url_userinfo: str = "", token: bool = True):
    from infrapulse.inspect.compare import Windows
    from infrapulse.inspect.switchside import SwitchSide

    app = web.Application()
    app.router.add_get("/api/v1/query", fake.query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    token_file = tmp_path / "token"
    token_file.write_text("tok-123\n")
    cfg = SwitchPrometheusSettings.SCHEMA.validate(
        {"url": f"http://{url_userinfo}127.0.0.1:{port}", "timeout": "5s",
         "bearer_token_file": str(token_file) if token else ""}, "inspect.switch_prometheus")
    win = Windows((T0 - 30, T0), (T0 + 5, T0 + 15), T0 + 5, T0)
    try:
        return await SwitchSide(cfg, "gpu-node-09").findings(win)
    finally:
        await runner.cleanup()


async def test_the_switch_side_from_prometheus_names_the_facing_port(tmp_path: Path) -> None:
    fake = FakePrometheus(storm_from=T0 + 1)
    found, notes = await _with_prometheus(fake, tmp_path)
    assert notes == []
    top = found[0]
    assert top.meta.target == "leaf07 Ethernet4 priority 3 rx (facing gpu-node-09 eth2)"
    assert (top.before, top.since, top.moved) == (0.0001, 0.8, True)
    decided = decide([], [], found)
    assert (decided.layer, decided.target) == ("network", top.meta.target)
    # Two windows x five values, each joined to the LLDP neighbours of this host, with the token.
    assert len(fake.seen) == 10
    assert all('neighbor_system="gpu-node-09"' in q and auth == "Bearer tok-123" for q, auth in fake.seen)
    assert any("[30s]" in q for q, _ in fake.seen) and any("[10s]" in q for q, _ in fake.seen)


async def test_a_failing_switch_side_is_a_note_without_secrets(tmp_path: Path) -> None:
    fake = FakePrometheus(T0, status=500)
    found, notes = await _with_prometheus(fake, tmp_path, "admin:pw-secret@", token=False)
    assert found == [] and notes == ["switch side from switch_prometheus: query failed (HTTP 500)"]
    assert fake.seen[0][1] == "Basic " + base64.b64encode(b"admin:pw-secret").decode()
    found, notes = await _with_prometheus(fake, tmp_path, "admin:pw-secret@", token=True)
    assert notes == ["switch side from switch_prometheus: query failed (switch_prometheus: credentials in "
                     "the URL and a bearer_token_file; give one)"]
    assert not any("pw-secret" in n or "tok-123" in n or "127.0.0.1" in n for n in notes)


# -- the CLI -------------------------------------------------------------------------------------

async def _inspect_cli(*args: str) -> tuple[int, str, str]:
    import asyncio
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infrapulse", "inspect", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_cli_starts_and_shows_inspections_with_the_score_options(tmp_path: Path) -> None:
    password = tmp_path / "pw"
    password.write_text("s3cret\n")
    config = f"state_dir: {tmp_path}\ninspect: {{on_demand_min_interval: 0s}}\n"
    async with running_daemon(config, web_security=_web_config(tmp_path)) as daemon:
        url = f"http://127.0.0.1:{daemon.bound_port}"
        refused = await _inspect_cli("--url", url)
        made = await _inspect_cli("--url", url, "--username", "ops", "--password-file", str(password))
        latest = await _inspect_cli("--url", url, "--username", "ops", "--password-file", str(password),
                                    "--latest", "--json")
        listed = await _inspect_cli("--url", f"http://ops:s3cret@127.0.0.1:{daemon.bound_port}", "--list")
    assert refused[0] == 3 and "401 Unauthorized" in refused[2]
    code, out, err = made
    assert code == 0 and err == ""  # nothing moved: verdict none, exit 0
    report_id = out.split()[1]
    assert out.startswith(f"inspection {report_id} on testhost (on_demand)\nverdict: none\n")
    assert "queue: normal" in out and "network: normal" in out
    assert latest[0] == 0 and json.loads(latest[1])["id"] == report_id
    assert listed[0] == 0 and listed[1].split() == [report_id, "on_demand", "none"]
    assert not any("s3cret" in text for result in (refused, made, latest, listed) for text in result[1:])

