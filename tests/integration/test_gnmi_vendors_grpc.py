"""Vendor depth over gRPC, the integration half of tests/test_gnmi_vendors.py: a simulated switch
served on loopback and read by the real source: OpenConfig fallbacks on the wire, EOS without its
eos_native provider, Cumulus's "System is busy" subscription set-up retried and reported."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from pygnmi.spec.v080 import gnmi_pb2 as pb

from gnmi_support import (
    data_series,
    expected_series,
    running_source,
    serving,
    status_value,
    target_entry,
    wait_for,
)
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch
from infrapulse.store import Store
from test_gnmi_vendors import DEPTH, FCS, FLAPS

# -- one leaf per series, by preference, over the wire ----------------------------------------


@pytest.mark.parametrize("absent,want", [
    ({"interface-transitions"}, 1), ({"interface-transitions", "carrier-transitions"}, 7), (set(), 3)])
@pytest.mark.parametrize("encoding", [pb.PROTO, pb.JSON_IETF])
async def test_openconfig_switch_fallbacks_over_the_wire(absent, want, encoding):
    """A device without the newer leaves (or without in-fcs-errors) feeds the same families from
    the fallbacks; expected_series follows the documented preference."""
    switch = SimSwitch("leaf01", "openconfig", ports=2, frozen=True)
    switch.absent = absent | {"in-fcs-errors"}
    target = GnmiTarget(switch, encodings=(encoding,))
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s"}, "targets": [target_entry(target)],
    }) as (_, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0)
        got = data_series(store, "leaf01")
        assert got == expected_series(switch)
        assert got[(FLAPS, ("leaf01", "Ethernet2"))] == want
        assert got[(FCS, ("leaf01", "Ethernet2"))] == 5 + 1000  # in-crc-errors


# -- Arista EOS ----------------------------------------------------------------------------------


async def test_eos_without_the_eos_native_provider_streams_on_without_lanz():
    switch = SimSwitch("leaf01", "arista-eos", ports=2, frozen=True)
    target = GnmiTarget(switch, encodings=(pb.PROTO,), refuse_origins=("eos_native",))
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s"}, "targets": [target_entry(target)],
    }) as (_, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0)
        status = store.status[("gnmi", "leaf01")]
        assert status.up and status.reason == "partial" and status.errors == 0
        assert "eos_native" in status.message and "INVALID_ARGUMENT" in status.message
        want = {k: v for k, v in expected_series(switch).items() if k[0] != DEPTH}
        assert data_series(store, "leaf01") == want


# -- NVIDIA Cumulus -------------------------------------------------------------------------------


# Three Subscribe RPCs against one switch, to provoke the concurrent set-up refusal.
SPLIT_CUMULUS = """
description: nvidia-cumulus split in three streams (test)
encodings: [proto]
streams:
  - origin: openconfig
    subscriptions: ["/interfaces/interface[name=*]/state/counters"]
  - origin: openconfig
    subscriptions: ["/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state"]
  - origin: openconfig
    subscriptions: ["/qos/interfaces/interface[interface-id=*]/switch-priority[priority=*]/state"]
metrics:
  - {path: "/interfaces/interface[name={interface}]/state/counters/in-octets",
     family: infrapulse_switch_interface_received_bytes_total}
  - {path: "/qos/interfaces/interface[interface-id={interface}]/output/queues/queue[name={queue}]/\\
            state/wred-dropped-pkts",
     family: infrapulse_switch_queue_wred_dropped_packets_total}
  - {path: "/qos/interfaces/interface[interface-id={interface}]/switch-priority[priority={priority}]/\\
            state/counters/in-discards",
     family: infrapulse_switch_priority_discards_total}
"""


async def test_cumulus_busy_subscription_setup_is_retried_promptly_and_is_no_failure(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "cumulus-split.yaml").write_text(SPLIT_CUMULUS)
    switch = SimSwitch("leaf01", "nvidia-cumulus", ports=2, frozen=True)
    target = GnmiTarget(switch, reject_concurrent_setup=True, setup_delay=0.3)
    async with serving(target), running_source({
        "profiles_dir": str(profiles), "defaults": {"insecure": True, "sample_interval": "1s"},
        "targets": [target_entry(target, profile="cumulus-split")],
    }) as (source, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0, timeout=10)
        status = store.status[("gnmi", "leaf01")]
        assert status.reason == "ok" and status.errors == 0  # never recorded as a failure
        session = source.sessions["leaf01"]
        assert target.busy_refusals >= 1 and session.busy_retries == target.busy_refusals
        assert (session.ever_synced
                and status_value(store, "leaf01", "infrapulse_switch_reconnects_total") == 0)
        got = data_series(store, "leaf01")
        assert got[("infrapulse_switch_queue_wred_dropped_packets_total",
                    ("leaf01", "swp2", "3"))] == 2 * 3 + 1 + 1
        assert got[("infrapulse_switch_priority_discards_total", ("leaf01", "swp2", "3"))] == 100 + 9
        assert len(got) == 2 + 2 * 8 + 2 * 8


@contextlib.asynccontextmanager
async def always_busy_switch() -> AsyncIterator[tuple[GnmiTarget, Store]]:
    """A Cumulus switch that refuses every subscription set-up as busy, under stall_timeout 1s."""
    target = GnmiTarget(SimSwitch("leaf01", "nvidia-cumulus", ports=1, frozen=True), busy_setups=10**6)
    async with serving(target), running_source({
        "defaults": {"insecure": True, "sample_interval": "1s", "stall_timeout": "1s"},
        "targets": [target_entry(target)],
    }) as (_, store):
        yield target, store


async def test_a_busy_pause_longer_than_the_stall_timeout_is_no_stall(monkeypatch: pytest.MonkeyPatch):
    """The back-off between busy refusals is the daemon's own wait: the watchdog must not read it
    as the switch's silence (CI: a 0.8-1.6 s pause under a 1 s stall_timeout became "stalled")."""
    from infrapulse.sources.gnmi import session
    monkeypatch.setattr(session, "BUSY_RETRY_INITIAL", 4.0)  # every pause 2-4 s, past stall_timeout 1s
    monkeypatch.setattr(session, "BUSY_RETRY_CAP", 4.0)
    async with always_busy_switch() as (target, store):
        await wait_for(lambda: ("gnmi", "leaf01") in store.status
                       and store.status[("gnmi", "leaf01")].errors >= 1, timeout=15)
        status = store.status[("gnmi", "leaf01")]
        assert (status.reason, status.errors) == ("busy", 1)
        assert target.busy_refusals == 2  # refused, paused, refused again past the 1 s: then busy


async def test_a_switch_that_stays_busy_gets_a_clear_reason():
    async with always_busy_switch() as (target, store):
        await wait_for(lambda: ("gnmi", "leaf01") in store.status
                       and store.status[("gnmi", "leaf01")].reason == "busy", timeout=10)
        assert "System is busy" in store.status[("gnmi", "leaf01")].message
        assert status_value(store, "leaf01", "infrapulse_switch_up") == 0.0
        assert target.busy_refusals >= 3  # it was retried, not given up on at the first answer
