"""The daemon as a real process: signals, reload, logs, HTTP endpoints."""

from __future__ import annotations

import asyncio
import gzip
import json
import signal
import time

import aiohttp

from daemon_proc import DaemonProcess
from helpers import parse_exposition, value


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_sigterm_exits_zero_quickly(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("interval: 1s\n")
    with DaemonProcess(["run", "--config", str(cfg)]) as d:
        d.wait_ready()
        started = time.monotonic()
        d.signal(signal.SIGTERM)
        assert d.proc.wait(5) == 0
        assert time.monotonic() - started < 2.0


def test_sigint_exits_zero(tmp_path):
    with DaemonProcess(["run"]) as d:
        d.wait_ready()
        d.signal(signal.SIGINT)
        assert d.proc.wait(5) == 0


def test_sighup_reload_good_then_bad(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("interval: 1s\nrole: node\n")
    with DaemonProcess(["run", "--config", str(cfg), "--log-format", "json"]) as d:
        d.wait_ready()
        values = parse_exposition(d.metrics())
        assert value(values, "infrapulse_node_info", hostname=_hostname(values), role="node") == 1
        first_reload = value(values, "infrapulse_config_last_reload_success_timestamp_seconds")

        # A good new config takes effect.
        cfg.write_text("interval: 1s\nrole: fabric\n")
        d.signal(signal.SIGHUP)
        values = _wait_for(lambda: _if_role(parse_exposition(d.metrics()), "fabric"))
        assert value(values, "infrapulse_config_last_reload_successful") == 1
        assert value(values, "infrapulse_config_last_reload_success_timestamp_seconds") > first_reload

        # A bad one is refused; the old config keeps running and the gauge drops to 0.
        cfg.write_text("interval: 5x\nrole: node\n")
        d.signal(signal.SIGHUP)
        values = _wait_for(lambda: _if_reload(parse_exposition(d.metrics()), 0))
        assert _role(values) == "fabric"
        logs = d.stop()
    records = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    failures = [r for r in records if r["msg"].startswith("config reload failed")]
    assert failures and "interval" in failures[0]["error"] and "5x" in failures[0]["error"]
    assert any(r["msg"] == "config reloaded" for r in records)


def _hostname(values):
    return next(dict(labels)["hostname"] for (name, labels) in values if name == "infrapulse_node_info")


def _role(values):
    return next(dict(labels)["role"] for (name, labels) in values if name == "infrapulse_node_info")


def _if_role(values, role):
    return values if _role(values) == role else None


def _if_reload(values, ok):
    return values if value(values, "infrapulse_config_last_reload_successful") == ok else None


def test_http_endpoints_and_negotiation():
    with DaemonProcess(["run"]) as d:
        d.wait_ready()
        body, headers = d.get("/metrics")
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert b"infrapulse_build_info{version=" in body

        body, headers = d.get("/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
        assert headers["Content-Type"].startswith("application/openmetrics-text")
        assert body.rstrip().endswith(b"# EOF")

        body, headers = d.get("/metrics", {"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip"
        assert b"infrapulse_node_info" in gzip.decompress(body)

        assert d.get("/healthz")[0] == b"ok\n"
        page, headers = d.get("/")
        assert headers["Content-Type"].startswith("text/html")
        assert b"infrapulse" in page and b"/metrics" in page
        sources = json.loads(d.get("/api/v1/sources")[0])
        assert isinstance(sources["sources"], list)


def test_concurrent_scrapes_are_consistent():
    with DaemonProcess(["run"]) as d:
        d.wait_ready()

        async def scrape_many():
            async with aiohttp.ClientSession() as session:
                async def one():
                    async with session.get(d.url + "/metrics") as resp:
                        assert resp.status == 200
                        return await resp.text()
                return await asyncio.gather(*(one() for _ in range(40)))

        bodies = asyncio.run(scrape_many())
        families = [sorted({n for n, _ in parse_exposition(b)}) for b in bodies]
        assert all(f == families[0] for f in families)
        assert "infrapulse_build_info" in families[0]


def test_port_in_use_is_a_clear_error():
    with DaemonProcess(["run"]) as first:
        first.wait_ready()
        second = DaemonProcess(["run"], port=first.port)
        assert second.proc.wait(30) == 1
        out = second.proc.stdout.read()
        assert "cannot listen on" in out and str(first.port) in out
