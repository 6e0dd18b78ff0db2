"""What probes run under: NIC firmware, NIC and GPU drivers, kernel, NCCL, and hashes of
configured files (e.g. the RoCE congestion-control settings). A change of any of them triggers
a probe run soon after, and the run records before -> after.

Everything is read from files (sysfs, the NCCL library's file name), a few dozen small reads
per check, so it can run every check interval.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from pathlib import Path

_LIB_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)+)$")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def nic_firmware(sysfs_root: str) -> str:
    """The distinct firmware versions of the RDMA devices, sorted and comma-separated (a node with
    one NIC model has one)."""
    found = {_read(fw) for fw in Path(sysfs_root, "class", "infiniband").glob("*/fw_ver")}
    return ",".join(sorted(v for v in found if v))


def nccl_library(path: str) -> str:
    """"2.21.5" from the file a libnccl.so.2 symlink resolves to (libnccl.so.2.21.5)."""
    if not path:
        return ""
    m = _LIB_VERSION.search(os.path.realpath(path))
    return m.group(1) if m else ""


def file_hash(pattern: str) -> str:
    """A short hash of the contents of every file matching `pattern` (sorted by name)."""
    digest = hashlib.sha256()
    found = False
    for name in sorted(glob.glob(pattern)):
        try:
            data = Path(name).read_bytes()
        except OSError:
            continue
        found = True
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:12] if found else ""


def read_versions(sysfs_root: str, nccl_path: str = "", files: dict[str, str] | None = None) -> dict[str,
                                                                                                     str]:
    """Component -> version, leaving out what this host does not have."""
    out = {
        "nic_firmware": nic_firmware(sysfs_root),
        "nic_driver": _read(Path(sysfs_root, "module", "mlx5_core", "version")),
        "gpu_driver": _read(Path(sysfs_root, "module", "nvidia", "version")),
        "kernel": os.uname().release,
        "nccl": nccl_library(nccl_path),
    }
    for name, pattern in (files or {}).items():
        out[name] = file_hash(pattern)
    return {k: v for k, v in out.items() if v}


def changed(before: dict[str, str], after: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Components whose version differs ("" for one that appeared or went away). A list of
    versions (nic_firmware on a node with several NIC models) is reduced to what changed:
    "0.2,28.39.1002" -> "0.2,28.41.1000" is 28.39.1002 -> 28.41.1000. Where the devices that
    changed went to (or came from) a version others already ran, the side has no version of its
    own: it names that side's versions, never nothing ("28.39.1002,28.41.1000" -> "28.41.1000" is
    28.39.1002 -> 28.41.1000: the one NIC left on the old firmware joined the upgraded one)."""
    out = {}
    for k in sorted(set(before) | set(after)):
        old, new = before.get(k, ""), after.get(k, "")
        if old == new:
            continue
        if "," in old or "," in new:
            old_set, new_set = set(old.split(",")) - {""}, set(new.split(",")) - {""}
            gone, came = old_set - new_set, new_set - old_set
            old, new = ",".join(sorted(gone or old_set)), ",".join(sorted(came or new_set))
        out[k] = (old, new)
    return out
