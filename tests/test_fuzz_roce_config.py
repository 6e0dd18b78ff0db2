"""Bounded property tests of the roce_config parsers (issue 34 §4; fuzz/fuzz_roce_config.py runs
the same contracts for as long as you let it): the DCB netlink reply decoder and the sysfs
ecn/, qos/ and debugfs cc_params readers take any input to a documented outcome."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from infrapulse.sources.nic import dcb_netlink as dcb
from infrapulse.sources.nic.roce_config_read import (
    DEBUGFS_NAMES,
    PARAMS,
    ROLES,
    NetdevConfig,
    read_debugfs,
    read_ecn,
    read_qos,
)

_ATTR = struct.Struct("=HH")


def _attr(kind: int, value: bytes) -> bytes:
    length = _ATTR.size + len(value)
    return _ATTR.pack(length, kind) + value + b"\0" * ((-length) % 4)


def _reply(pfc_cap: int, pfc_en: int, apps: list[tuple[int, int, int]]) -> bytes:
    pfc = struct.pack("=BBBH8Q8Q", pfc_cap, pfc_en, 0, 0, *([0] * 16))
    table = b"".join(_attr(dcb.DCB_ATTR_IEEE_APP, struct.pack("=BBH", sel, prio, proto))
                     for sel, prio, proto in apps)
    ieee = _attr(dcb.DCB_ATTR_IEEE_PFC, pfc) + _attr(dcb.DCB_ATTR_IEEE_APP_TABLE | dcb.NLA_F_NESTED, table)
    return struct.pack("=BBH", 0, dcb.DCB_CMD_IEEE_GET, 0) + _attr(dcb.DCB_ATTR_IEEE | dcb.NLA_F_NESTED, ieee)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
@example(b"")
@example(b"\0\x15\0\0" + b"\x04\0\x0d\x80")  # an empty IEEE nest
@example(b"\0\x15\0\0" + b"\xff\xff\x0d\x80")  # an attribute longer than the reply
def test_any_dcb_reply_decodes_or_raises_value_error(payload):
    try:
        config = dcb.parse_ieee_reply(payload)
    except ValueError:
        return
    assert set(config.pfc_enabled) <= set(range(8))
    assert all(v in (0, 1) for v in config.pfc_enabled.values())
    assert all(0 <= d <= 0xFFFF for d in config.dscp_to_priority)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 255), st.integers(0, 255),
       st.lists(st.tuples(st.sampled_from([dcb.APP_SEL_DSCP, 1, 2, 3, 4]), st.integers(0, 7),
                          st.integers(0, 63)), max_size=64))
def test_a_built_reply_decodes_to_what_was_built(cap, enabled, apps):
    config = dcb.parse_ieee_reply(_reply(cap, enabled, apps))
    assert config.pfc_capable == cap
    assert config.pfc_enabled == {p: (enabled >> p) & 1 for p in range(8)}
    dscp = {}
    for sel, prio, proto in apps:
        if sel == dcb.APP_SEL_DSCP:
            dscp[proto] = prio  # a repeated DSCP value: the last entry wins, as in the kernel's list
    assert config.dscp_to_priority == dscp
    assert config.other_apps == sum(1 for sel, _, _ in apps if sel != dcb.APP_SEL_DSCP)


# What a sysfs or debugfs file of these readers may hold: numbers, junk, nothing, huge text.
contents = st.one_of(st.integers(-(2**40), 2**40).map(lambda n: f"{n}\n".encode()),
                     st.binary(max_size=64), st.just(b""), st.just(b"\n"), st.just(b"9" * 9000),
                     st.text(max_size=40).map(str.encode))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from([f"ecn/{role}/enable/{p}" for role in ROLES for p in range(8)]
                                       + [f"ecn/{role}/{name}" for role in ROLES for name in PARAMS[role]]
                                       + ["qos/tc_num", "qos/prio2buffer", "qos/buffer_size", "qos/trust"]
                                       + [f"cc/{name}" for name in DEBUGFS_NAMES]),
                       contents, max_size=24))
@example({"ecn/roce_np/enable/3": b"", "qos/trust": b"   \n",
          "qos/prio2buffer": b"Priority\tBuffer\n3\t\t1\n"})
def test_the_sysfs_and_debugfs_readers_take_any_file_to_a_value_or_a_problem(files):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, data in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        cfg = NetdevConfig("ens1f0np0")
        (root / "ecn").mkdir(exist_ok=True)
        assert read_ecn(cfg, root) is True
        read_qos(cfg, root)
        why = read_debugfs(cfg, root / "cc")
        assert isinstance(why, str)
        # every file is either read into a value or named in one problem; none is lost quietly
        read = len(cfg.ecn) + len(cfg.params) + (cfg.tc_num is not None) + (cfg.trust != "")
        assert cfg.unreadable == len(cfg.problems)
        assert all(v in (0, 1) for v in cfg.ecn.values())
        assert read + cfg.unreadable >= sum(1 for rel in files if rel.startswith(("ecn/", "qos/tc_num",
                                                                                    "qos/trust")))
