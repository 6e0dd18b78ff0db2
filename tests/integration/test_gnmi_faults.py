"""Faults: restarts, bad credentials, bad TLS, stalls, malformed values, dropped and refused streams."""

from __future__ import annotations

import json
import logging

import aiohttp

from conftest import running_daemon
from gnmi_support import (
    data_series,
    expected_series,
    running_source,
    serving,
    status_value,
    target_entry,
    wait_for,
)
from helpers import parse_exposition, value
from infrapulse.simulate.certs import make_test_pki
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch, pb

FAST = {"insecure": True, "sample_interval": "1s"}


def up(store, name):
    return status_value(store, name, "infrapulse_switch_up") == 1.0


def reason(store, name):
    st = store.status.get(("gnmi", name))
    return st.reason if st else None


async def test_target_restart_reconnects_and_resumes_without_garbage():
    switch = SimSwitch("leaf01", "openconfig", ports=3, neighbors={1: ("gpu-node-02", "ens1f0np0")},
                       frozen=True)
    target = GnmiTarget(switch)
    async with serving(target), running_source({"defaults": FAST, "targets": [target_entry(target)],
                                                "retry_max": "1s"}) as (_, store):
        await wait_for(lambda: up(store, "leaf01"))
        assert data_series(store, "leaf01") == expected_series(switch)
        await target.stop()
        await wait_for(lambda: not up(store, "leaf01"), what="down after stop")
        assert reason(store, "leaf01") in ("unavailable", "disconnected")
        # while it is down the switch is reconfigured: a port disappears, counters move on
        switch.ports.pop()
        switch.port("Ethernet1").in_octets = 5_000_000
        await target.start()
        await wait_for(lambda: up(store, "leaf01"), what="reconnect")
        want = expected_series(switch)
        want[("infrapulse_switch_interface_received_bytes_total", ("leaf01", "Ethernet1"))] = 5_000_000.0
        # exactly the new state: the vanished port left no series behind, nothing is duplicated
        assert data_series(store, "leaf01") == want
        assert status_value(store, "leaf01", "infrapulse_switch_reconnects_total") == 1.0
        assert reason(store, "leaf01") == "ok"


async def test_wrong_password_is_unauthenticated_and_never_leaks(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    switch = SimSwitch("leaf01", "openconfig", ports=1, frozen=True)
    target = GnmiTarget(switch, username="admin", password="right-horse-battery")
    secret = tmp_path / "password"
    secret.write_text("Wr0ng-S3cret-Value\n")
    async with serving(target):
        config = f"""
sources:
  gnmi:
    retry_max: 1s
    defaults: {{insecure: true, sample_interval: 1s, username: admin, password_file: "{secret}"}}
    targets: [{{name: leaf01, address: "{target.address}", profile: openconfig}}]
"""
        async with running_daemon(config) as daemon:
            await wait_for(lambda: reason(daemon.store, "leaf01") == "unauthenticated")
            base = f"http://127.0.0.1:{daemon.bound_port}"
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{base}/metrics") as resp:
                    metrics_text = await resp.text()
                async with http.get(f"{base}/api/v1/sources") as resp:
                    api_text = await resp.text()
            metrics = parse_exposition(metrics_text)
            assert value(metrics, "infrapulse_switch_up", switch="leaf01") == 0.0
            assert value(metrics, "infrapulse_source_status_info", source="gnmi", target="leaf01",
                         reason="unauthenticated") == 1.0
            entry = next(s for s in json.loads(api_text)["sources"] if s["target"] == "leaf01")
            assert entry["reason"] == "unauthenticated" and entry["up"] is False
            # fix the secret: the next attempt reads the file again and succeeds
            secret.write_text("right-horse-battery\n")
            await wait_for(lambda: up(daemon.store, "leaf01"), what="login with the new password")
    for text in (metrics_text, api_text, caplog.text):
        assert "Wr0ng-S3cret-Value" not in text
        assert "right-horse-battery" not in text


async def test_tls_with_password_works_and_wrong_ca_is_a_clear_reason(tmp_path):
    good = make_test_pki(tmp_path / "good", ca_name="switch CA")
    other = make_test_pki(tmp_path / "other", ca_name="some other CA")
    (tmp_path / "pw").write_text("s3cret\n")
    switch = SimSwitch("leaf01", "openconfig", ports=1, frozen=True)
    target = GnmiTarget(switch, username="u", password="s3cret",
                        tls=(good.read("server_cert"), good.read("server_key")),
                        client_ca=good.ca_file.read_bytes())  # mutual TLS
    auth = {"sample_interval": "1s", "username": "u", "password_file": str(tmp_path / "pw")}
    async with serving(target), running_source({
        "defaults": auth,
        "targets": [
            target_entry(target, tls={"ca_file": str(good.ca_file), "server_name": "localhost",
                                      "cert_file": str(good.client_cert), "key_file": str(good.client_key)}),
            {**target_entry(target, tls={"ca_file": str(other.ca_file), "cert_file": str(good.client_cert),
                                         "key_file": str(good.client_key)}), "name": "leaf-wrong-ca"},
            {**target_entry(target, insecure=True), "name": "leaf-plaintext"},
        ],
    }) as (_, store):
        await wait_for(lambda: up(store, "leaf01"), what="TLS session")
        assert data_series(store, "leaf01") == expected_series(switch)
        await wait_for(lambda: reason(store, "leaf-wrong-ca") == "tls", what="tls reason")
        message = store.status[("gnmi", "leaf-wrong-ca")].message
        assert "TLS handshake failed" in message and "tls.ca_file" in message
        await wait_for(lambda: reason(store, "leaf-plaintext") == "unavailable")
        assert not up(store, "leaf-wrong-ca") and not up(store, "leaf-plaintext")


async def test_stalled_switch_delays_neither_scrapes_nor_other_switches():
    healthy = GnmiTarget(SimSwitch("leaf01", "openconfig", ports=2, frozen=True))
    stuck = GnmiTarget(SimSwitch("leaf02", "openconfig", ports=2, frozen=True))
    stuck.set_fault("stall")  # answers Capabilities, then never sends a byte on Subscribe
    async with serving(healthy, stuck):
        config = f"""
sources:
  gnmi:
    retry_max: 1s
    defaults: {{insecure: true, sample_interval: 1s, stall_timeout: 2s}}
    targets:
      - {{name: leaf01, address: "{healthy.address}", profile: openconfig}}
      - {{name: leaf02, address: "{stuck.address}", profile: openconfig}}
"""
        async with running_daemon(config) as daemon:
            store = daemon.store
            await wait_for(lambda: up(store, "leaf01"), what="healthy switch up")
            base = f"http://127.0.0.1:{daemon.bound_port}/metrics"
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
                async with http.get(base) as resp:  # answered while leaf02 hangs
                    metrics = parse_exposition(await resp.text())
            assert value(metrics, "infrapulse_switch_up", switch="leaf01") == 1.0
            assert value(metrics, "infrapulse_switch_up", switch="leaf02") == 0.0
            assert value(metrics, "infrapulse_switch_interface_received_bytes_total",
                         switch="leaf01", interface="Ethernet2") == 2_000_000.0
            await wait_for(lambda: reason(store, "leaf02") == "stalled", what="stall detected")
            assert "stall_timeout 2s" in store.status[("gnmi", "leaf02")].message
            # the healthy stream kept flowing the whole time
            before = status_value(store, "leaf01", "infrapulse_switch_updates_total")
            await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_updates_total") > before)
            stuck.set_fault(None)
            await wait_for(lambda: up(store, "leaf02"), what="recovery after the stall")


async def test_stall_mid_stream_is_detected():
    target = GnmiTarget(SimSwitch("leaf01", "sonic", ports=1, frozen=True))
    async with serving(target), running_source({
        "defaults": {**FAST, "stall_timeout": "2s"}, "targets": [target_entry(target)], "retry_max": "1s",
    }) as (_, store):
        await wait_for(lambda: up(store, "leaf01"))
        target.set_fault("stall")
        await wait_for(lambda: reason(store, "leaf01") == "stalled")
        assert status_value(store, "leaf01", "infrapulse_switch_up") == 0.0


async def test_malformed_values_are_counted_and_skipped():
    for profile, encoding in (("openconfig", pb.PROTO), ("sonic", pb.JSON_IETF),
                              ("arista-eos", pb.JSON_IETF)):
        switch = SimSwitch("leaf01", profile, ports=2, frozen=True)
        target = GnmiTarget(switch, encodings=(encoding,))
        target.set_fault("malformed")  # port 0's received-bytes counter arrives as text
        async with serving(target), \
                running_source({"defaults": FAST, "targets": [target_entry(target)]}) as (_, store):
            await wait_for(lambda st=store: up(st, "leaf01"))
            want = expected_series(switch)
            bad_key = ("infrapulse_switch_interface_received_bytes_total", ("leaf01", switch.ports[0].name))
            del want[bad_key]
            assert data_series(store, "leaf01") == want, profile
            assert status_value(store, "leaf01", "infrapulse_switch_malformed_updates_total") >= 1.0
            assert reason(store, "leaf01") == "ok"


async def test_dropped_and_refused_streams_reconnect_with_reasons():
    flaky = GnmiTarget(SimSwitch("leaf01", "openconfig", ports=1, frozen=True))
    refusing = GnmiTarget(SimSwitch("leaf02", "openconfig", ports=1, frozen=True))
    flaky.set_fault("drop")  # syncs, then the stream is aborted
    refusing.set_fault("refuse")
    async with serving(flaky, refusing), running_source({
        "defaults": FAST, "retry_max": "1s",
        "targets": [target_entry(flaky), target_entry(refusing)],
    }) as (_, store):
        await wait_for(lambda: (status_value(store, "leaf01", "infrapulse_switch_reconnects_total")
                                or 0) >= 1,
                       what="re-established after drops")
        assert reason(store, "leaf02") == "unavailable"
        assert "refuses" in store.status[("gnmi", "leaf02")].message
        flaky.set_fault(None)
        refusing.set_fault(None)
        await wait_for(lambda: up(store, "leaf01") and up(store, "leaf02"), what="both healthy")


async def test_unreachable_switch_reports_unavailable_and_keeps_retrying():
    from conftest import free_port

    async with running_source({
        "defaults": {**FAST, "connect_timeout": "1s"}, "retry_max": "1s",
        "targets": [{"name": "ghost", "address": f"127.0.0.1:{free_port()}"}],
    }) as (_, store):
        def errors():
            st = store.status.get(("gnmi", "ghost"))
            return st.errors if st else 0

        await wait_for(lambda: errors() >= 2, what="two failed attempts")
        assert reason(store, "ghost") in ("unavailable", "timeout")
        assert status_value(store, "ghost", "infrapulse_switch_up") == 0.0
