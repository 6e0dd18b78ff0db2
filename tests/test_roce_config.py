"""The roce_config source: every sysfs layout (OFED with and without params/, empty-on-firmware-error,
VF without ecn/, debugfs unreadable), DCB decoding, hash stability, drift across a restart through
state_dir, the expected-config mismatch, and this machine's real netlink (no DCB on lo)."""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path

import pytest

from infrapulse.simulate.roce_cc import (
    NP_PARAMS,
    RP_DEFAULTS,
    RP_TUNED,
    platform_json,
    write_netdev,
    write_platform,
)
from infrapulse.simulate.sysfs_tree import DeviceSpec, PortSpec, write_tree
from infrapulse.sources.nic import dcb_netlink as D
from infrapulse.sources.nic import roce_families as F
from infrapulse.sources.nic.roce_config import Expected, FileReader, RoceConfigCollector

IF = "ens1f0np0"


def node(tmp_path: Path, **netdev: object) -> tuple[Path, Path]:
    root, sim = tmp_path / "sys", tmp_path / "sim"
    write_tree(root, [DeviceSpec("mlx5_0", ports=[PortSpec(link_layer="Ethernet", netdev=IF)])])
    write_netdev(root, IF, **netdev)  # type: ignore[arg-type]
    write_platform(sim, IF, platform_json())
    return root, sim


def collect(root: Path, sim: Path, state: Path | None = None, **kw: object) -> tuple[object, dict]:
    c = RoceConfigCollector(FileReader(sim), str(root), str(root / "debug"), state_dir=str(state or ""),
                            **kw)  # type: ignore[arg-type]
    (result,) = c.collect()
    assert result.snapshot is not None, result.message
    return result, result.snapshot.series


@pytest.mark.parametrize("params_subdir", [False, True], ids=["ofed-flat", "ofed-params"])
def test_ofed_layouts_read_every_flag_and_parameter(tmp_path: Path, params_subdir: bool) -> None:
    root, sim = node(tmp_path, params_subdir=params_subdir)
    result, s = collect(root, sim)
    assert result.partial_errors == []
    ecn = s[F.ECN_ENABLED.name]
    assert ecn[(IF, "roce_np", "3")] == 1.0 and ecn[(IF, "roce_rp", "3")] == 1.0
    assert sum(ecn.values()) == 2.0 and len(ecn) == 16
    params = s[F.CC_PARAMETER.name]
    assert params[(IF, "roce_rp", "rpg_ai_rate")] == RP_TUNED["rpg_ai_rate"] == 20
    assert params[(IF, "roce_rp", "rpg_time_reset")] == 100
    assert params[(IF, "roce_np", "min_time_between_cnps")] == NP_PARAMS["min_time_between_cnps"]
    assert len(params) == len(RP_TUNED) + len(NP_PARAMS)
    assert s[F.PFC_ENABLED.name][(IF, "3")] == 1.0 and s[F.PFC_ENABLED.name][(IF, "0")] == 0.0
    assert s[F.DSCP_PRIORITY.name] == {(IF, "26"): 3.0, (IF, "48"): 6.0}
    assert s[F.TRUST_INFO.name] == {(IF, "dscp", "inferred"): 1.0}
    assert s[F.PRIORITY_BUFFER.name][(IF, "3")] == 1.0 and s[F.TRAFFIC_CLASSES.name] == {(IF,): 8.0}
    assert s[F.BUFFER_SIZE.name][(IF, "1")] == 131072.0
    assert s[F.FIRMWARE_INFO.name] == {(IF, "mlx5_0", "mlx5_core", "24.10-1.1.4", "28.39.1002"): 1.0}


def test_both_layouts_hash_alike_and_the_hash_is_stable(tmp_path: Path) -> None:
    a = collect(*node(tmp_path / "a"))[1][F.CONFIG_INFO.name]
    b = collect(*node(tmp_path / "b", params_subdir=True))[1][F.CONFIG_INFO.name]
    c = collect(*node(tmp_path / "c", rp=RP_DEFAULTS))[1][F.CONFIG_INFO.name]
    assert a == b  # the same configuration, whichever layout the driver used
    assert a != c
    (digest,) = [k[1] for k in a]
    assert len(digest) == 12 and collect(*node(tmp_path / "a"))[1][F.CONFIG_INFO.name] == a


def test_empty_on_firmware_error_is_a_partial_reason_not_a_crash(tmp_path: Path) -> None:
    root, sim = node(tmp_path, empty=("ecn/roce_np/enable/3", "ecn/roce_rp/rpg_gd"))
    result, s = collect(root, sim)
    assert (IF, "roce_np", "3") not in s[F.ECN_ENABLED.name]
    assert (IF, "roce_rp", "rpg_gd") not in s[F.CC_PARAMETER.name]
    assert s[F.CC_PARAMETER.name][(IF, "roce_rp", "rpg_ai_rate")] == 20.0
    assert result.partial_errors == [
        f"{IF}: ecn/roce_rp/rpg_gd read empty (a firmware command error in the driver)",
        f"{IF}: ecn/roce_np/enable/3 read empty (a firmware command error in the driver)"]


def test_a_failing_read_is_a_partial_reason_with_the_error(tmp_path: Path) -> None:
    """Some OFED releases return the firmware query's error from the show function (en_ecn.c): the
    read fails instead of reading empty."""
    root, sim = node(tmp_path)
    victim = root / "class" / "net" / IF / "ecn" / "roce_np" / "cnp_dscp"
    victim.unlink()
    victim.mkdir()  # reading a directory fails with EISDIR: an OSError like the driver's -EIO
    result, s = collect(root, sim)
    assert result.partial_errors == [f"{IF}: ecn/roce_np/cnp_dscp: Is a directory"]
    assert (IF, "roce_np", "cnp_dscp") not in s[F.CC_PARAMETER.name]
    assert s[F.CC_PARAMETER.name][(IF, "roce_np", "cnp_802p_prio")] == 6.0


def test_a_setting_unreadable_for_a_cycle_is_not_a_change(tmp_path: Path) -> None:
    root, sim = node(tmp_path)
    c = RoceConfigCollector(FileReader(sim), str(root), state_dir=str(tmp_path / "state"))
    c.collect()
    (root / "class" / "net" / IF / "ecn" / "roce_rp" / "rpg_ai_rate").write_text("")
    (r,) = c.collect()
    assert r.snapshot is not None and r.snapshot.series[F.CONFIG_CHANGES.name] == {(IF,): 0.0}
    assert F.LAST_CHANGE_INFO.name not in r.snapshot.series
    skipped = f"{IF}: 1 setting(s) unreadable: configuration change tracking skipped this cycle"
    assert skipped in r.partial_errors
    (root / "class" / "net" / IF / "ecn" / "roce_rp" / "rpg_ai_rate").write_text("20\n")
    (r,) = c.collect()
    assert r.snapshot is not None and r.snapshot.series[F.CONFIG_CHANGES.name] == {(IF,): 0.0}


def test_vf_without_ecn_gives_a_clear_reason(tmp_path: Path) -> None:
    root, sim = node(tmp_path, with_ecn=False)
    result, s = collect(root, sim)
    assert F.ECN_ENABLED.name not in s and F.CC_PARAMETER.name not in s
    assert len(result.partial_errors) == 1
    assert result.partial_errors[0].startswith(
        f"{IF}: no ecn/ in sysfs (a VF, or a driver without the OFED ecn sysfs) and DCQCN parameters not "
        f"readable from debugfs: ")


def test_upstream_debugfs_read_rarely_and_unreadable_is_a_reason(tmp_path: Path) -> None:
    root, sim = node(tmp_path, with_ecn=False)
    pci = "0000:17:00.0"
    (root / "devices" / pci).mkdir(parents=True)
    link = root / "class" / "net" / IF / "device"
    os.symlink(root / "devices" / pci, link)
    now = [0.0]
    c = RoceConfigCollector(FileReader(sim), str(root), str(root / "debug"), debugfs_interval=300,
                            clock=lambda: now[0])
    (r,) = c.collect()
    assert "does not exist (debugfs not mounted" in r.partial_errors[-1]
    cc = root / "debug" / "mlx5" / pci / "cc_params"
    cc.mkdir(parents=True)
    (cc / "rp_ai_rate").write_text("5\n")
    (cc / "np_cnp_prio").write_text("6\n")
    now[0] = 100.0  # within debugfs_interval: the cached answer, no new read
    (r,) = c.collect()
    assert r.snapshot is not None and F.CC_PARAMETER.name not in r.snapshot.series
    now[0] = 301.0
    (r,) = c.collect()
    assert r.snapshot is not None
    assert r.snapshot.series[F.CC_PARAMETER.name] == {(IF, "roce_rp", "rpg_ai_rate"): 5.0,
                                                      (IF, "roce_np", "cnp_802p_prio"): 6.0}
    if os.geteuid() != 0:  # root reads anything: the permission case needs a normal user
        cc.chmod(0)
        now[0] = 700.0
        (r,) = c.collect()
        cc.chmod(0o755)
        assert "is not readable (debugfs needs root)" in r.partial_errors[-1]


def test_drift_survives_a_restart_through_state_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root, sim = node(tmp_path)
    state = tmp_path / "state"
    _, s = collect(root, sim, state)
    assert s[F.CONFIG_CHANGES.name] == {(IF,): 0.0} and F.LAST_CHANGE_INFO.name not in s
    # "reboot" into new firmware that reset the CC configuration
    write_netdev(root, IF, ecn={"roce_np": set(), "roce_rp": {3}}, rp=RP_DEFAULTS)
    (root / "class" / "infiniband" / "mlx5_0" / "fw_ver").write_text("28.41.1000\n")
    c = RoceConfigCollector(FileReader(sim), str(root), state_dir=str(state))
    (first,) = c.collect()
    assert first.snapshot is not None
    series = first.snapshot.series
    # the first read after a start publishes the persisted count; the change counts one cycle later
    assert series[F.CONFIG_CHANGES.name] == {(IF,): 0.0}
    (info,) = series[F.LAST_CHANGE_INFO.name]
    assert info == (IF, "roce_np/enable/3 1->0, roce_rp/rate_reduce_monitor_period 2->4, roce_rp/rpg_ai_rate "
                        "20->5, roce_rp/rpg_hai_rate 200->50, roce_rp/rpg_min_dec_fac 80->50, "
                        "roce_rp/rpg_time_reset 100->300", "true")
    assert "firmware 28.39.1002 -> 28.41.1000" in caplog.text
    (second,) = c.collect()
    assert second.snapshot is not None and second.snapshot.series[F.CONFIG_CHANGES.name] == {(IF,): 1.0}
    saved = json.loads((state / "roce_config" / "state.json").read_text())["interfaces"][IF]
    assert saved["changes"] == 1 and saved["firmware"] == "28.41.1000"
    assert saved["last_change"]["old_firmware"] == "28.39.1002"
    # and once more across a restart with nothing changed: the count stays, nothing new is logged
    caplog.clear()
    (third,) = RoceConfigCollector(FileReader(sim), str(root), state_dir=str(state)).collect()
    assert third.snapshot is not None and third.snapshot.series[F.CONFIG_CHANGES.name] == {(IF,): 1.0}
    assert "changed" not in caplog.text


def test_a_reset_stays_drift_until_restored_or_accepted_across_restarts(tmp_path: Path) -> None:
    """The change counter moves once; the drift from the baseline stays until the settings come
    back or an operator accepts them (`accept-baseline`), and survives a restart either way."""
    root, sim = node(tmp_path)
    state = tmp_path / "state"
    _, s = collect(root, sim, state)
    assert s[F.BASELINE_DRIFT.name] == {(IF,): 0.0} and F.BASELINE_DRIFT_INFO.name not in s
    write_netdev(root, IF, ecn={"roce_np": set(), "roce_rp": {3}}, rp=RP_DEFAULTS)
    (root / "class" / "infiniband" / "mlx5_0" / "fw_ver").write_text("28.41.1000\n")
    c = RoceConfigCollector(FileReader(sim), str(root), state_dir=str(state))
    for _ in range(3):  # a restart and two more cycles: still six settings away from the baseline
        (r,) = c.collect()
        assert r.snapshot is not None
        assert r.snapshot.series[F.BASELINE_DRIFT.name] == {(IF,): 6.0}
    (info,) = r.snapshot.series[F.BASELINE_DRIFT_INFO.name]
    assert info[0] == IF
    assert info[1].startswith("roce_np/enable/3 1->0, roce_rp/rate_reduce_monitor_period 2->4")
    assert info[2:] == ("28.39.1002", "28.41.1000")
    # a restart does not forget it
    _, s = collect(root, sim, state)
    assert s[F.BASELINE_DRIFT.name] == {(IF,): 6.0}
    # accepted: the current configuration is the baseline, the request file is consumed
    flag = state / "roce_config" / "accept-baseline"
    flag.touch()
    _, s = collect(root, sim, state)
    assert s[F.BASELINE_DRIFT.name] == {(IF,): 0.0} and F.BASELINE_DRIFT_INFO.name not in s
    assert not flag.exists()
    saved = json.loads((state / "roce_config" / "state.json").read_text())["interfaces"][IF]
    assert saved["baseline"]["roce_np/enable/3"] == "0" and saved["baseline_firmware"] == "28.41.1000"
    # the old tuning re-applied is now the drift (from the accepted baseline), and restoring clears it
    write_netdev(root, IF)
    _, s = collect(root, sim, state)
    assert s[F.BASELINE_DRIFT.name] == {(IF,): 6.0}
    write_netdev(root, IF, ecn={"roce_np": set(), "roce_rp": {3}}, rp=RP_DEFAULTS)
    _, s = collect(root, sim, state)
    assert s[F.BASELINE_DRIFT.name] == {(IF,): 0.0}


def test_a_state_file_from_before_baselines_takes_its_last_known_configuration_as_the_baseline(
        tmp_path: Path) -> None:
    root, sim = node(tmp_path)
    state = tmp_path / "state"
    collect(root, sim, state)
    path = state / "roce_config" / "state.json"
    data = json.loads(path.read_text())
    for item in data["interfaces"].values():
        del item["baseline"], item["baseline_firmware"]
    path.write_text(json.dumps(data))
    _, s = collect(root, sim, state)
    assert s[F.BASELINE_DRIFT.name] == {(IF,): 0.0}


def test_a_reset_read_a_cycle_after_the_new_firmware_still_counts_as_with_the_firmware(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An upgrade writes fw_ver and resets DCQCN, but no read of many files is atomic: one cycle
    can see the new firmware with the old configuration and the next the reset (the CI failure
    where fw-upgrade-cc-reset paged nobody: firmware_changed="false")."""
    root, sim = node(tmp_path)
    wall = [1000.0]
    c = RoceConfigCollector(FileReader(sim), str(root), wall=lambda: wall[0])
    c.collect()
    (root / "class" / "infiniband" / "mlx5_0" / "fw_ver").write_text("28.41.1000\n")
    wall[0] += 2
    (fw_only,) = c.collect()
    assert fw_only.snapshot is not None and F.LAST_CHANGE_INFO.name not in fw_only.snapshot.series
    write_netdev(root, IF, ecn={"roce_np": set(), "roce_rp": {3}}, rp=RP_DEFAULTS)
    wall[0] += 2
    (reset,) = c.collect()
    assert reset.snapshot is not None
    (info,) = reset.snapshot.series[F.LAST_CHANGE_INFO.name]
    assert info[2] == "true"
    assert reset.snapshot.series[F.CONFIG_CHANGES.name] == {(IF,): 1.0}
    assert "firmware 28.39.1002 -> 28.41.1000" in caplog.text
    assert c.known[IF].last_change["old_firmware"] == "28.39.1002"
    # half the reset read with the firmware, the rest a cycle later: both halves are with it
    write_netdev(root, IF)
    c.collect()
    (root / "class" / "infiniband" / "mlx5_0" / "fw_ver").write_text("28.41.1001\n")
    write_netdev(root, IF, ecn={"roce_np": set(), "roce_rp": {3}})
    wall[0] += 2
    (half,) = c.collect()
    assert half.snapshot is not None and half.snapshot.series[F.LAST_CHANGE_INFO.name] == {
        (IF, "roce_np/enable/3 1->0", "true"): 1.0}
    write_netdev(root, IF, ecn={"roce_np": set(), "roce_rp": {3}}, rp=RP_DEFAULTS)
    wall[0] += 2
    (rest,) = c.collect()
    assert rest.snapshot is not None
    ((_, _, fw_flag),) = rest.snapshot.series[F.LAST_CHANGE_INFO.name]
    assert fw_flag == "true" and c.known[IF].last_change["old_firmware"] == "28.41.1000"
    # a tuning re-applied by hand long after the upgrade is an ordinary change again
    write_netdev(root, IF)
    wall[0] += 2
    c.collect()
    (root / "class" / "infiniband" / "mlx5_0" / "fw_ver").write_text("28.42.1000\n")
    c.collect()
    write_netdev(root, IF, rp={**RP_TUNED, "rpg_ai_rate": 7})
    wall[0] += 301
    (late,) = c.collect()
    assert late.snapshot is not None
    (info,) = late.snapshot.series[F.LAST_CHANGE_INFO.name]
    assert info == (IF, "roce_rp/rpg_ai_rate 20->7", "false")


def test_unwritable_state_dir_is_reported(tmp_path: Path) -> None:
    root, sim = node(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    result, _ = collect(root, sim, blocker)
    assert any("cannot persist the configuration" in e for e in result.partial_errors)


def test_expected_mismatch(tmp_path: Path) -> None:
    root, sim = node(tmp_path, ecn={"roce_np": set(), "roce_rp": {3}})
    expected = Expected([3, 4], [3], {"rpg_ai_rate": 5, "roce_np/cnp_dscp": 48}, "dscp")
    _, s = collect(root, sim, expected=expected)
    assert s[F.EXPECTED_MISMATCHES.name] == {(IF,): 3.0}
    assert set(s[F.EXPECTED_MISMATCH.name]) == {(IF, "pfc", "3,4", "3"), (IF, "roce_np/enable/3", "1", "0"),
                                                (IF, "rpg_ai_rate", "5", "20")}
    _, s = collect(*node(tmp_path / "ok"), expected=Expected([3], [3], {"rpg_ai_rate": 20}, "dscp"))
    assert s[F.EXPECTED_MISMATCHES.name] == {(IF,): 0.0} and F.EXPECTED_MISMATCH.name not in s
    _, s = collect(*node(tmp_path / "none"))
    assert F.EXPECTED_MISMATCHES.name not in s  # no expected: section, no family


# -- DCB netlink --------------------------------------------------------------------------------

def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((-length) % 4)


def ieee_reply(pfc_en: int, apps: list[tuple[int, int, int]]) -> bytes:
    """An RTM_GETDCB reply body as the kernel's dcbnl_ieee_fill() builds it."""
    pfc = struct.pack("=BBBH8Q8Q", 8, pfc_en, 0, 0, *([0] * 16))
    table = b"".join(_attr(D.DCB_ATTR_IEEE_APP, struct.pack("=BBH", sel, prio, proto))
                     for sel, prio, proto in apps)
    ieee = _attr(D.DCB_ATTR_IEEE_PFC, pfc) + _attr(D.DCB_ATTR_IEEE_APP_TABLE, table)
    return (struct.pack("=BBH", socket.AF_UNSPEC, D.DCB_CMD_IEEE_GET, 0) + _attr(D.DCB_ATTR_IFNAME, b"eth9\0")
            + _attr(D.DCB_ATTR_IEEE | D.NLA_F_NESTED, ieee))


def test_dcb_reply_decodes_like_dcb_json() -> None:
    # `dcb -j pfc show dev X` prints "prio-pfc" as {"0":false,...,"3":true,...} from the pfc_en bitmap,
    # and `dcb -j app show dev X` prints "dscp-prio" as [[26,3],[48,6]] from the DSCP selector entries
    # (iproute2 dcb/dcb_pfc.c, dcb/dcb_app.c): the same facts this decoder yields.
    config = D.parse_ieee_reply(ieee_reply(0b0000_1000, [(5, 3, 26), (5, 6, 48), (1, 4, 0x8906)]))
    assert config.pfc_enabled == {0: 0, 1: 0, 2: 0, 3: 1, 4: 0, 5: 0, 6: 0, 7: 0}
    assert config.pfc_capable == 8
    assert config.dscp_to_priority == {26: 3, 48: 6}
    assert config.other_apps == 1
    assert D.DcbConfig.from_json(config.to_json()) == config


def test_dcb_request_is_what_dcb_sends() -> None:
    msg = D.build_request("eth0", seq=7)
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", msg)
    assert (length, kind, flags, seq) == (len(msg), 78, 1, 7) and len(msg) % 4 == 0
    assert msg[16:20] == bytes([socket.AF_UNSPEC, 21, 0, 0])
    assert msg[20:24] == struct.pack("=HH", 9, 1) and msg[24:29] == b"eth0\0"


def test_dcb_malformed_attribute_is_an_error() -> None:
    with pytest.raises(ValueError, match="malformed netlink attribute"):
        D.parse_ieee_reply(struct.pack("=BBH", 0, 21, 0) + struct.pack("=HH", 200, 13))


def test_real_netlink_lo_has_no_dcb() -> None:
    """This machine's kernel: lo has no dcbnl_ops, so the GET answers EOPNOTSUPP; a missing
    interface answers ENODEV."""
    reader = D.NetlinkDcb()
    try:
        with pytest.raises(D.DcbNotSupported, match="lo: no DCB support"):
            reader.read("lo")
        with pytest.raises(D.DcbInterfaceGone):
            reader.read("nosuchif0")
    finally:
        reader.close()


def test_dcb_not_supported_is_a_partial_reason_and_trust_stays_unknown(tmp_path: Path) -> None:
    root, sim = node(tmp_path)
    write_platform(sim, IF, {"drvinfo": {"driver": "mlx5_core", "version": "6.8"}})
    result, s = collect(root, sim)
    assert f"{IF}: DCB not supported (no PFC or DSCP map to read)" in result.partial_errors
    assert F.PFC_ENABLED.name not in s and F.TRUST_INFO.name not in s


def test_ofed_trust_file_wins_over_inference(tmp_path: Path) -> None:
    root, sim = node(tmp_path)
    (root / "class" / "net" / IF / "qos" / "trust").write_text("Priority trust state: pcp\n")
    _, s = collect(root, sim)
    assert s[F.TRUST_INFO.name] == {(IF, "pcp", "qos/trust"): 1.0}


def test_health_sentence_names_netdev_changes_and_firmware(tmp_path: Path) -> None:
    """The change reaches /api/v1/health: the roce_config_changed reason names the netdev, each setting
    old->new and the firmware change."""
    from health_fixtures import Feed, service_for, signal
    from infrapulse.health.reasons import sentence

    root, sim = node(tmp_path)
    c = RoceConfigCollector(FileReader(sim), str(root), state_dir=str(tmp_path / "state"))
    (before,) = c.collect()
    write_netdev(root, IF, ecn={"roce_np": set(), "roce_rp": {3}}, rp={**RP_TUNED, "rpg_ai_rate": 5})
    (root / "class" / "infiniband" / "mlx5_0" / "fw_ver").write_text("28.41.1000\n")
    (after,) = c.collect()
    assert before.snapshot is not None and after.snapshot is not None
    feed = Feed()
    for family in (F.CONFIG_CHANGES.name, F.LAST_CHANGE_INFO.name):
        feed.series("roce_config", family, next(iter(after.snapshot.series[family])),
                    [before.snapshot.series.get(family, {}).get((IF,)), after.snapshot.series[family][
                        next(iter(after.snapshot.series[family]))]], IF)
    service = service_for(feed.store)
    feed.publish(service)
    result = signal(service.report, "roce_config_changed")
    worst = result.worst
    assert worst.measurement.value == 1.0 and result.score == 0.0
    text = sentence(result.signal, worst.measurement, result.signal.bad, 300)
    assert text == ("ens1f0np0: 1 RoCE congestion-control/QoS configuration change(s) over the last 5m "
                    "(roce_np/enable/3 1->0, roce_rp/rpg_ai_rate 20->5; firmware changed with it; bad at 1)")


def test_source_reports_coverage_per_netdev(tmp_path: Path) -> None:
    """Through the source class and the store: a VF without ecn/ shows 0 ECN flags and parameters."""
    import asyncio

    from infrapulse.config import load_text
    from infrapulse.sources.base import SourceContext
    from infrapulse.sources.nic.roce_config import RoceConfigSource
    from infrapulse.store import Store

    root, sim = node(tmp_path, with_ecn=False)
    config = load_text(f"sources:\n  roce_config:\n    sysfs_root: {root}\n    sim_dir: {sim}\n")
    store = Store()
    source = RoceConfigSource(config.sources["roce_config"], SourceContext(store, 5.0, state_dir=""))
    asyncio.run(source.poll_once())
    status = store.status[("roce_config", IF)]
    assert status.up and status.reason == "partial"
    assert {m: c.series for m, c in status.coverage.items()} == {
        F.ECN_ENABLED.name: 0, F.CC_PARAMETER.name: 0, F.PFC_ENABLED.name: 8, F.DSCP_PRIORITY.name: 2,
        F.TRUST_INFO.name: 1}


def test_this_machines_lo_through_the_kernel_readers() -> None:
    """The real thing on this machine: /sys, rtnetlink and the ioctl on lo, which has no ecn/, no PCI
    device, no drvinfo and no DCB: up, with one clear reason for each, and a hash all the same."""
    from infrapulse.sources.nic.roce_config import KernelReader

    collector = RoceConfigCollector(KernelReader(), "/sys", "/nonexistent-debugfs", interfaces=["lo"])
    try:
        (result,) = collector.collect()
    finally:
        collector.close()
    assert result.target == "lo" and result.snapshot is not None
    assert result.partial_errors == [
        "lo: ETHTOOL_GDRVINFO: Operation not supported",
        "lo: no ecn/ in sysfs (a VF, or a driver without the OFED ecn sysfs) and DCQCN parameters not "
        "readable from debugfs: no PCI device behind the netdev (a VF or a virtual device has no cc_params)",
        "lo: DCB not supported (no PFC or DSCP map to read)",
    ]
    assert F.PFC_ENABLED.name not in result.snapshot.series
    assert len(result.snapshot.series[F.CONFIG_INFO.name]) == 1
