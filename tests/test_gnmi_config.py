"""gNMI config: sharding, target settings, profile validation (via check-config), extended profiles.
A user profile and targets_file reloads against served switches:
tests/integration/test_gnmi_config_grpc.py."""

from __future__ import annotations

import collections
import textwrap

import pytest

from gnmi_support import running_source, wait_for
from infrapulse import cli
from infrapulse import config as config_mod
from infrapulse.sources.gnmi import shard
from infrapulse.sources.gnmi.config import (
    ShardSettings,
    SwitchSettings,
    TargetSettings,
    merge_target,
    read_targets_file,
)
from infrapulse.sources.gnmi.profile import load_profiles, validate_profiles

NAMES = [f"leaf{i:04d}" for i in range(1000)]

# -- sharding ---------------------------------------------------------------------------------


def test_shard_hash_is_prometheus_hashmod():
    # Prometheus relabel `hashmod`: md5 of the value, last 8 bytes big-endian, modulo N
    import hashlib

    assert shard.stable_hash("leaf01") == int.from_bytes(hashlib.md5(b"leaf01").digest()[8:], "big")
    # pinned: a change of hash function would silently reshuffle every fabric
    assert shard.stable_hash("leaf01") == 0xAC1C5273C1E0F872
    assert [shard.shard_of(n, 4) for n in ("leaf01", "leaf02", "spine01", "sw-a")] == [2, 3, 3, 0]


def test_shards_are_stable_and_balanced_over_1000_names():
    for count in (2, 3, 4, 8):
        first = [shard.shard_of(n, count) for n in NAMES]
        assert first == [shard.shard_of(n, count) for n in NAMES]  # deterministic
        sizes = collections.Counter(first)
        assert set(sizes) == set(range(count))
        expected = len(NAMES) / count
        assert all(abs(size - expected) < 0.25 * expected for size in sizes.values()), sizes


def test_two_instances_cover_every_switch_exactly_once():
    a, b = shard.Shard(0, 2), shard.Shard(1, 2)
    owned = [(a.owns(n), b.owns(n)) for n in NAMES]
    assert all(x != y for x, y in owned)
    assert 400 < sum(x for x, _ in owned) < 600


def test_adding_a_switch_moves_only_that_switch():
    before = {n: shard.shard_of(n, 4) for n in NAMES}
    after = {n: shard.shard_of(n, 4) for n in NAMES + ["leaf-new"]}
    assert {n: after[n] for n in NAMES} == before


def _shard(**section: int) -> ShardSettings:
    return ShardSettings.SCHEMA.validate(section, "sources.gnmi.shard")


def test_shard_resolution_order():
    assert shard.resolve(_shard(index=1, count=3), {"INFRAPULSE_SHARD_INDEX": "0"},
                         "x-2") == shard.Shard(1, 3)
    assert shard.resolve(_shard(), {"INFRAPULSE_SHARD_INDEX": "2", "INFRAPULSE_SHARD_COUNT": "4"},
                         "h") == shard.Shard(2, 4)
    # a StatefulSet pod: the ordinal is the hostname suffix, the count comes from the environment
    assert shard.resolve(_shard(), {"INFRAPULSE_SHARD_COUNT": "3"},
                         "infrapulse-fabric-2") == shard.Shard(2, 3)
    assert shard.resolve(_shard(), {}, "infrapulse-fabric-2") == shard.Shard(0, 1)
    assert shard.resolve(None, {}, "infrapulse-fabric-2") == shard.Shard(0, 1)
    with pytest.raises(shard.ShardError, match="no index"):
        shard.resolve(_shard(), {"INFRAPULSE_SHARD_COUNT": "3"}, "plainhost")
    with pytest.raises(shard.ShardError, match="0..2"):
        shard.resolve(_shard(), {"INFRAPULSE_SHARD_COUNT": "3"}, "fabric-7")


async def test_two_sources_with_count_2_split_a_fabric(tmp_path):
    targets = [{"name": n, "address": "127.0.0.1:9"} for n in NAMES[:200]]
    owned = []
    for index in (0, 1):
        async with running_source({"defaults": {"insecure": True, "connect_timeout": "1s"},
                                   "targets": targets, "shard": {"index": index, "count": 2}}) as (source, _):
            await wait_for(lambda s=source: bool(s.sessions))
            owned.append(set(source.sessions))
    assert owned[0].isdisjoint(owned[1])
    assert owned[0] | owned[1] == set(NAMES[:200])


def test_merge_target_gives_a_switch_its_own_settings_over_the_defaults(tmp_path):
    targets = tmp_path / "switches.yaml"
    targets.write_text("- {name: leaf02, address: '10.0.0.2:6030', tls: {ca_file: /b/ca.pem}}\n")
    cfg = config_mod.load_text(textwrap.dedent(f"""
        sources:
          gnmi:
            defaults: {{port: 57400, insecure: false, username_env: GNMI_USER,
                       tls: {{ca_file: /a/ca.pem, server_name: fabric}}}}
            targets: [{{name: leaf01, profile: sonic, sample_interval: 30s}}]
            targets_file: {targets}
    """))
    gnmi = cfg.sources["gnmi"]
    [from_file] = read_targets_file(gnmi.targets_file)
    assert isinstance(from_file, TargetSettings) and from_file.port is None and from_file.profile is None
    one, two = (merge_target(gnmi.defaults, t) for t in (*gnmi.targets, from_file))
    assert isinstance(one, SwitchSettings)
    assert (one.name, one.address, one.profile, one.sample_interval) == (
        "leaf01", "leaf01:57400", "sonic", 30.0)
    assert (two.address, two.profile, two.sample_interval) == ("10.0.0.2:6030", "openconfig", 10.0)
    assert one.username_env == two.username_env == "GNMI_USER" and not one.insecure
    # tls key by key: a target's own key over the defaults', the rest inherited
    assert (one.tls.ca_file, one.tls.server_name) == ("/a/ca.pem", "fabric")
    assert (two.tls.ca_file, two.tls.server_name) == ("/b/ca.pem", "fabric")
    assert gnmi.defaults.tls.ca_file == "/a/ca.pem"  # the defaults are left as they were
    # a reload compares the switches it reads again with the running ones: unchanged is equal
    assert merge_target(gnmi.defaults, read_targets_file(gnmi.targets_file)[0]) == two != one


# -- profiles ---------------------------------------------------------------------------------


def test_builtin_profiles_are_valid():
    assert validate_profiles() == []
    assert set(load_profiles()) >= {"openconfig", "sonic", "nvidia-cumulus", "arista-eos"}


BAD_PROFILES = [
    ("metrics:\n  - {path: /a/b, family: infrapulse_switch_nope_total}\nsubscriptions: [/a]\n",
     "metrics[0].family", "unknown family"),
    ("subscriptions: [/a]\nmetrics:\n"
     "  - {path: '/a/b[name={interface}]/x', family: infrapulse_switch_queue_depth_bytes}\n",
     "metrics[0]", "missing label(s) queue"),
    ("subscriptions: [/a]\nmetrics:\n"
     "  - {path: '/a/b[name={interface}', family: infrapulse_switch_interface_oper_up}\n",
     "metrics[0].path", "unclosed"),
    ("subscriptions: [/zzz]\nmetrics:\n"
     "  - {path: '/a/b[name={interface}]', family: infrapulse_switch_interface_oper_up}\n",
     "metrics[0].path", "not under any subscribed path"),
    ("subscriptions: [{path: /a, mode: sometimes}]\nmetrics: []\n", "subscriptions[0].mode",
     "must be one of"),
    ("subscriptions: [{path: /a, sample_interval: 100ms}]\nmetrics: []\n", "subscriptions[0].sample_interval",
     "at least 1s"),
    ("encodings: [protobuf]\nsubscriptions: [/a]\nmetrics: []\n", "encodings[0]", "must be one of"),
    ("subscriptions: [/a]\nmetrics:\n"
     "  - {path: '/a/b[name={interface}]', family: infrapulse_switch_lldp_neighbor_info}\n",
     "metrics[0].value_labels", "_info family"),
    ("subscriptions: [/a]\nsurprise: 1\nmetrics: []\n", "surprise", "unknown key"),
    ("subscriptions: [/a]\nmetrics:\n"
     "  - {path: '/a/b[name={interface}]', family: infrapulse_switch_interface_oper_up, "
     "rank: -1}\n", "metrics[0].rank", "whole number >= 0"),
    ("subscriptions: [/a]\nmetrics:\n"
     "  - {path: '/a/b[name={interface}]', family: infrapulse_switch_lldp_neighbor_info, "
     "value_labels: {neighbor_system: s, neighbor_port: p}, rank: 1}\n", "metrics[0].rank",
     "_info families take no rank"),
    ("subscriptions: [{path: /a, expire: sometimes}]\nmetrics: []\n", "subscriptions[0].expire",
     "true or false"),
    ("optional: true\nsubscriptions: [/a]\nmetrics: []\n", "optional", "unknown key"),  # streams[] only
]


@pytest.mark.parametrize("text,key,reason", BAD_PROFILES, ids=[k for _, k, _ in BAD_PROFILES])
def test_profile_errors_name_file_and_key_through_check_config(tmp_path, capsys, text, key, reason):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "mine.yaml").write_text(text)
    cfg = tmp_path / "fabric.yaml"
    cfg.write_text(f"sources:\n  gnmi:\n    profiles_dir: {profiles}\n"
                   "    targets: [{name: s1, profile: mine}]\n")
    assert cli.main(["check-config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert str(profiles / "mine.yaml") in err
    assert f"{key}:" in err and reason in err
    errors = validate_profiles(profiles)
    assert len(errors) == 1 and errors[0].key == key


def test_check_config_rejects_unknown_profile_and_duplicate_names(tmp_path):
    cfg = textwrap.dedent("""
        sources:
          gnmi:
            targets: [{name: s1, profile: junos}]
    """)
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load_text(cfg, "f.yaml")
    assert (err.value.key == "sources.gnmi.targets[0].profile"
            and "unknown profile 'junos'" in err.value.reason)
    cfg = "sources:\n  gnmi:\n    targets: [{name: s1}, {name: s1}]\n"
    with pytest.raises(config_mod.ConfigError, match="duplicate switch name"):
        config_mod.load_text(cfg, "f.yaml")
    cfg = "sources:\n  gnmi:\n    targets: [{name: s1, tls: {cert_file: /x}}]\n"
    with pytest.raises(config_mod.ConfigError, match="cert_file and key_file go together"):
        config_mod.load_text(cfg, "f.yaml")
    cfg = "sources:\n  gnmi:\n    defaults: {sample_interval: 500ms}\n"
    with pytest.raises(config_mod.ConfigError, match="sources.gnmi.defaults.sample_interval"):
        config_mod.load_text(cfg, "f.yaml")
    cfg = "sources:\n  gnmi:\n    shard: {index: 2, count: 2}\n"
    with pytest.raises(config_mod.ConfigError, match="sources.gnmi.shard.index"):
        config_mod.load_text(cfg, "f.yaml")


def test_a_profile_extends_another_stream_by_stream(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "sonic-plus.yaml").write_text(textwrap.dedent("""
        extends: sonic
        description: sonic with one more path
        streams:
          - target: COUNTERS_DB
            subscriptions: [COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_UCAST_PKTS]
        metrics:
          - {path: "COUNTERS/Ethernet*/*/{interface}/SAI_PORT_STAT_IF_IN_UCAST_PKTS",
             family: infrapulse_switch_interface_received_bytes_total}
        """))
    base, plus = load_profiles(profiles)["sonic"], load_profiles(profiles)["sonic-plus"]
    assert plus.description == "sonic with one more path"
    assert [s.target for s in plus.streams] == ["COUNTERS_DB", "APPL_DB"]
    assert [s.path for s in plus.streams[0].subscriptions] == (
        [s.path for s in base.streams[0].subscriptions]
        + ["COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_UCAST_PKTS"])
    assert plus.streams[0].alias_keys  # the base stream's flags stay
    assert len(plus.rules) == len(base.rules) + 1 and plus.rules[-1].alias_keys
    assert len(plus.ignore) == len(base.ignore)


@pytest.mark.parametrize("files,reason", [
    ({"a.yaml": "extends: nope\n"}, "unknown profile 'nope'"),
    ({"a.yaml": "extends: b\n", "b.yaml": "extends: a\n"}, "loop"),
])
def test_extends_errors_name_the_file(tmp_path, files, reason):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    errors = validate_profiles(tmp_path)
    assert errors and all(e.key == "extends" and reason in e.reason for e in errors)
    assert str(tmp_path / "a.yaml") in {e.file for e in errors}
