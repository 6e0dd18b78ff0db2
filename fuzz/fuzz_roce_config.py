"""atheris harness: the roce_config parsers — DCB netlink replies and the sysfs ecn/, qos/ and
debugfs cc_params files.

    python fuzz/fuzz_roce_config.py -max_total_time=600 [CORPUS_DIR ...]

The first byte picks the target: an RTM_GETDCB reply body for `parse_ieee_reply`, or the
contents of a netdev's ecn/, qos/ and cc_params files (a tree made once in a temporary
directory, rewritten per input). Contract: a DcbConfig (8 PFC priorities of 0/1, DSCP values
that fit 16 bits) or ValueError; the file readers never raise, and every unreadable file is
one named problem. tests/test_fuzz_roce_config.py checks the same contracts in CI.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["infrapulse"]):
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

FILES = ([f"ecn/{role}/enable/{p}" for role in ROLES for p in (0, 3)]
         + [f"ecn/{role}/{name}" for role in ROLES for name in PARAMS[role][:3]]
         + ["qos/tc_num", "qos/prio2buffer", "qos/buffer_size", "qos/trust"]
         + [f"cc/{name}" for name in list(DEBUGFS_NAMES)[:4]])


def _make_tree() -> Path:
    root = Path(tempfile.mkdtemp(prefix="infrapulse-fuzz-roce-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
    return root


ROOT = _make_tree()


def _dcb(data: bytes) -> None:
    try:
        config = dcb.parse_ieee_reply(data)
    except ValueError:
        return
    assert set(config.pfc_enabled) <= set(range(8)), config
    assert all(v in (0, 1) for v in config.pfc_enabled.values()), config
    assert all(0 <= d <= 0xFFFF for d in config.dscp_to_priority), config


def _files(fdp: atheris.FuzzedDataProvider) -> None:
    for rel in FILES:
        (ROOT / rel).write_bytes(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 96)))
    cfg = NetdevConfig("ens1f0np0")
    assert read_ecn(cfg, ROOT) is True
    read_qos(cfg, ROOT)
    assert isinstance(read_debugfs(cfg, ROOT / "cc"), str)
    assert cfg.unreadable == len(cfg.problems), cfg
    assert all(v in (0, 1) for v in cfg.ecn.values()), cfg


def test_one_input(data: bytes) -> None:
    if not data:
        return
    if data[0] & 1:
        _dcb(data[1:])
    else:
        _files(atheris.FuzzedDataProvider(data[1:]))


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
