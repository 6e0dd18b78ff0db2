"""Driver name, driver version, firmware version and bus address of a netdev: ETHTOOL_GDRVINFO.

Unprivileged (net/ethtool/ioctl.c lists GDRVINFO among the commands anyone may run); the same
SIOCETHTOOL plumbing as ethtool_ioctl.py. `struct ethtool_drvinfo` (include/uapi/linux/ethtool.h):
cmd u32, driver[32], version[32], fw_version[32], bus_info[32], erom_version[32], reserved2[12],
then five u32 counts: 196 bytes.
"""

from __future__ import annotations

import array
import errno
import fcntl
import socket
import struct
from dataclasses import dataclass

from .ethtool_ioctl import IFNAMSIZ, IFREQ_SIZE, SIOCETHTOOL, Ioctl

ETHTOOL_GDRVINFO = 0x3
_DRVINFO = struct.Struct("=I32s32s32s32s32s12s5I")
_IFREQ = struct.Struct("16sP")


@dataclass(frozen=True)
class DriverInfo:
    driver: str
    version: str
    firmware: str
    bus_info: str


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("ascii", "replace").strip()


class DrvinfoIoctl:
    def __init__(self, ioctl: Ioctl = fcntl.ioctl) -> None:
        self._ioctl = ioctl
        self._sock: socket.socket | None = None

    def read(self, interface: str) -> DriverInfo:
        """Raises OSError (ENODEV: no such netdev here; EOPNOTSUPP: the driver has no drvinfo)."""
        name = interface.encode()
        if not name or len(name) >= IFNAMSIZ:
            raise ValueError(f"invalid interface name {interface!r}")
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        buf = array.array("B", bytes(_DRVINFO.size))
        struct.pack_into("=I", buf, 0, ETHTOOL_GDRVINFO)
        ifreq = _IFREQ.pack(name, buf.buffer_info()[0]).ljust(IFREQ_SIZE, b"\0")
        self._ioctl(self._sock.fileno(), SIOCETHTOOL, ifreq)
        fields = _DRVINFO.unpack_from(buf, 0)
        return DriverInfo(_text(fields[1]), _text(fields[2]), _text(fields[3]), _text(fields[4]))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def gone(exc: OSError) -> bool:
    return exc.errno in (errno.ENODEV, errno.ENXIO)
