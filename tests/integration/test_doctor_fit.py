"""`infrapulse doctor` asks each gNMI switch for one Get per mapping of its profile (a Subscribe
ONCE where the switch has no Get) and names the profile that fits, against the simulated targets
over real gRPC: a SONiC switch configured as arista-eos fails naming the SONiC profiles with
their counts; the right profile passes with its count; Cumulus (no Get) is asked with ONCE."""

from __future__ import annotations

from pathlib import Path

import yaml

from infrapulse.cli import source_options
from infrapulse.doctor import fit
from infrapulse.doctor.cli import run_checks
from infrapulse.doctor.report import table
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch
from infrapulse.sources.gnmi.profile import load_profiles


def _config(tmp_path: Path, target: GnmiTarget, profile: str) -> Path:
    cfg = {"sources": {"infiniband": {"enabled": False}, "ethtool": {"enabled": False},
                       "nvml": {"enabled": False},
                       "gnmi": {"defaults": {"profile": profile, "insecure": True},
                                "targets": [{"name": "leaf01", "address": target.address}]}}}
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def _gnmi_row(tmp_path: Path, sim: str, profile: str, **options):
    target = GnmiTarget(SimSwitch("leaf01", sim, ports=4, frozen=True), **options)
    await target.start()
    try:
        code, checks = await run_checks(str(_config(tmp_path, target, profile)), source_options)
    finally:
        await target.stop()
    row = next(c for c in checks if c.area == "gnmi")
    return code, row, target, checks


def test_each_profile_probes_at_most_one_path_per_mapping():
    for profile in load_profiles().values():
        paths = fit.probe_paths(profile)
        assert 0 < len(paths) <= fit.mapping_count(profile), profile.name
    # SONiC's per-field paths: each field through its own subscription, not the first one's
    sonic = [path for _, path in fit.probe_paths(load_profiles()["sonic"])]
    assert "COUNTERS/Ethernet*/SAI_PORT_STAT_IF_OUT_OCTETS" in sonic
    assert "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_0_RX_PKTS" in sonic


async def test_a_sonic_switch_configured_as_arista_eos_fails_naming_sonic(tmp_path):
    code, row, target, checks = await _gnmi_row(tmp_path, "sonic", "arista-eos")
    assert code == 1 and row.result == "FAIL"
    assert row.detail == ("profile arista-eos: 0 of 24 mappings answered a Get; "
        "Capabilities announce none of "
                          "openconfig-interfaces, arista-intf-augments; sonic-202511 answers 24 of 28, "
                          "sonic 22 of 26")
    assert row.fix == "set profile: sonic-202511 for this target"
    assert f"{row.detail} — fix: {row.fix}" in table(checks)
    # bounded: one Get per probe path of each profile, nothing more
    assert target.get_calls == sum(len(fit.probe_paths(p)) for p in load_profiles().values())


async def test_the_right_profile_passes_with_its_count(tmp_path):
    code, row, _, _ = await _gnmi_row(tmp_path, "sonic", "sonic-202511")
    assert code == 0 and row.result == "ok"
    assert row.detail.endswith("; profile sonic-202511 will use json_ietf; 24 of 28 mappings answered a Get")
    code, row, _, _ = await _gnmi_row(tmp_path, "arista-eos", "arista-eos")
    assert code == 0 and row.result == "ok"
    assert row.detail.endswith("; profile arista-eos will use proto; 20 of 24 mappings answered a Get")


async def test_openconfig_on_an_openconfig_switch(tmp_path):
    code, row, target, _ = await _gnmi_row(tmp_path, "openconfig", "openconfig")
    assert code == 0 and row.result == "ok"
    assert row.detail.endswith("; profile openconfig will use proto; 16 of 20 mappings answered a Get")


async def test_a_switch_without_get_is_asked_with_subscribe_once(tmp_path):
    code, row, target, _ = await _gnmi_row(tmp_path, "nvidia-cumulus", "nvidia-cumulus")
    assert code == 0 and row.result == "ok"
    assert row.detail.endswith("; profile nvidia-cumulus will use proto; "
                               "25 of 27 mappings answered a Subscribe ONCE (the switch has no Get)")
    assert target.get_calls == 1  # the one that said UNIMPLEMENTED
    code, row, _, _ = await _gnmi_row(tmp_path, "nvidia-cumulus", "sonic")
    assert row.result == "FAIL" and row.detail.startswith(
        "profile sonic: 0 of 26 mappings answered a Subscribe ONCE (the switch has no Get); "
        "Capabilities announce none of sonic-db; nvidia-cumulus answers 25 of 27")
    assert row.fix == "set profile: nvidia-cumulus for this target"


async def test_get_switched_off_on_an_eos_target_falls_back_too(tmp_path):
    code, row, _, _ = await _gnmi_row(tmp_path, "arista-eos", "arista-eos", get=False)
    assert code == 0
    assert row.detail.endswith("20 of 24 mappings answered a Subscribe ONCE (the switch has no Get)")
