"""gNMI config against served switches, the integration half of tests/test_gnmi_config.py: a user
profile file works without code changes, a targets_file is re-read when it changes."""

from __future__ import annotations

import textwrap

from gnmi_support import data_series, running_source, serving, status_value, target_entry, wait_for
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch


async def test_a_user_profile_file_works_without_code_changes(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "tiny-vendor.yaml").write_text(textwrap.dedent("""
        description: only received bytes and ECN marks, from OpenConfig paths
        encodings: [proto]
        origin: openconfig
        subscriptions:
          - /interfaces/interface[name=*]/state/counters/in-octets
          - /qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state/ecn-marked-pkts
        metrics:
          - {path: "/interfaces/interface[name={interface}]/state/counters/in-octets",
             family: infrapulse_switch_interface_received_bytes_total, scale: 8}
          - {path: "/qos/interfaces/interface[interface-id=sw{interface}]/output/queues/\\
                    queue[name={queue}]/state/ecn-marked-pkts",
             family: infrapulse_switch_queue_ecn_marked_packets_total}
    """))
    switch = SimSwitch("leaf01", "nvidia-cumulus", ports=1, frozen=True)  # swp1
    target = GnmiTarget(switch)
    async with serving(target), running_source({
        "profiles_dir": str(profiles), "defaults": {"insecure": True, "sample_interval": "1s"},
        "targets": [target_entry(target, profile="tiny-vendor")],
    }) as (_, store):
        await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0)
        got = data_series(store, "leaf01")
        assert got[("infrapulse_switch_interface_received_bytes_total", ("leaf01", "swp1"))] == 8_000_000.0
        # a capture inside a key value: "swp1" -> interface "p1"
        assert got[("infrapulse_switch_queue_ecn_marked_packets_total", ("leaf01", "p1", "3"))] == 30.0
        assert len(got) == 1 + 8


async def test_targets_file_is_reread_when_it_changes(tmp_path):
    one = GnmiTarget(SimSwitch("leaf01", "openconfig", ports=1, frozen=True))
    two = GnmiTarget(SimSwitch("leaf02", "sonic", ports=1, frozen=True))
    async with serving(one, two):
        path = tmp_path / "switches.yaml"
        path.write_text(f"- {{name: leaf01, address: '{one.address}'}}\n")
        async with running_source({"defaults": {"insecure": True, "sample_interval": "1s"},
                                   "targets_file": str(path)}) as (source, store):
            await wait_for(lambda: status_value(store, "leaf01", "infrapulse_switch_up") == 1.0)
            path.write_text(f"targets:\n  - {{name: leaf02, address: '{two.address}', profile: sonic}}\n")
            await wait_for(lambda: status_value(store, "leaf02", "infrapulse_switch_up") == 1.0,
                           what="new switch")
            await wait_for(lambda: store.snapshot("gnmi", "leaf01") is None, what="removed switch gone")
            assert set(source.sessions) == {"leaf02"}
            # a broken file keeps the running switches and says why
            path.write_text("- {name: [oops\n")
            await wait_for(lambda: ("gnmi", "targets_file") in store.status, what="file error recorded")
            assert store.status[("gnmi", "targets_file")].reason == "config"
            assert set(source.sessions) == {"leaf02"}
