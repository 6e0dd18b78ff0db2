"""Driver statistics (what `ethtool -S` prints) through the SIOCETHTOOL ioctl.

Three commands, all allowed without CAP_NET_ADMIN (net/ethtool/ioctl.c lets anyone run them):
ETHTOOL_GSSET_INFO (how many stats), ETHTOOL_GSTRINGS (their names), ETHTOOL_GSTATS (their
u64 values). No ethtool binary, no subprocess; the ioctl acts on the network namespace of the
socket, so run in the host namespace (hostNetwork in Kubernetes).

The stat set is dynamic (mlx5 adds and removes per-priority pause stats with the PFC
configuration), so the count can change between the three calls. We always pass the count
we expect, check the count the kernel wrote back, re-check GSSET_INFO afterwards, and retry.
Kernels since the fix "ethtool: Avoid overflowing userspace buffer on stats query" answer a
mismatch with a count of 0 and no data; older ones write the new count of entries regardless,
so the buffers carry generous slack.
"""

from __future__ import annotations

import array
import errno
import fcntl
import socket
import struct
from collections.abc import Callable

# include/uapi/linux/sockios.h and include/uapi/linux/ethtool.h
SIOCETHTOOL = 0x8946
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSTATS = 0x1D
ETHTOOL_GSSET_INFO = 0x37
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32
IFNAMSIZ = 16
# sizeof(struct ifreq): the 16-byte name plus a union whose largest member (struct ifmap) is
# 24 bytes on 64-bit and 16 bytes on 32-bit targets.
IFREQ_SIZE = 40 if struct.calcsize("P") == 8 else 32

_SSET_INFO = struct.Struct("=IIQI")  # cmd, reserved, sset_mask, data[0]
_GSTRINGS_HEAD = struct.Struct("=III")  # cmd, string_set, len
_GSTATS_HEAD = struct.Struct("=II")  # cmd, n_stats
_IFREQ = struct.Struct("16sP")
_MODINFO = struct.Struct("=III32x")  # cmd, type, eeprom_len, reserved[8]
_EEPROM_HEAD = struct.Struct("=IIII")  # cmd, magic, offset, len
ETHTOOL_GMODULEINFO = 0x42
ETHTOOL_GMODULEEEPROM = 0x43


class StatsNotSupported(Exception):
    """The interface's driver exposes no statistics (lo, many virtual devices)."""


class InterfaceGone(Exception):
    """No such interface (ENODEV): renamed, removed, or in another network namespace."""


class StatSetChanged(Exception):
    """The stat count kept changing between the calls, even after the retries."""


Ioctl = Callable[[int, int, bytes], object]


class EthtoolIoctl:
    """Reads driver stats of many interfaces over one socket, reusing buffers.

    `ioctl` is injectable (default fcntl.ioctl) so that tests can stand in for the kernel.
    """

    def __init__(self, ioctl: Ioctl = fcntl.ioctl, retries: int = 4) -> None:
        self._ioctl = ioctl
        self.retries = retries
        self._sock: socket.socket | None = None
        self._buffers: dict[tuple[str, int], array.array[int]] = {}
        # interface -> (raw name table, decoded names): unchanged tables reuse the same tuple,
        # so callers can cache per-name work by identity.
        self._names: dict[str, tuple[bytes, tuple[str, ...]]] = {}

    # -- plumbing --------------------------------------------------------------------------------

    def _fileno(self) -> int:
        if self._sock is None:
            try:
                self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            except OSError:  # no IPv4 in this namespace: any socket family reaches dev_ioctl
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        return self._sock.fileno()

    def _buffer(self, interface: str, kind: int, size: int) -> array.array[int]:
        """A zeroed byte buffer of at least `size` bytes, reused across calls."""
        key = (interface, kind)
        buf = self._buffers.get(key)
        if buf is None or len(buf) < size:
            buf = self._buffers[key] = array.array("B", bytes(size))
        return buf

    def _call(self, interface: str, buf: array.array[int]) -> None:
        name = interface.encode()
        if not name or len(name) >= IFNAMSIZ:
            raise ValueError(f"invalid interface name {interface!r}")
        address = buf.buffer_info()[0]
        ifreq = _IFREQ.pack(name, address).ljust(IFREQ_SIZE, b"\0")
        try:
            self._ioctl(self._fileno(), SIOCETHTOOL, ifreq)
        except OSError as exc:
            if exc.errno in (errno.ENODEV, errno.ENXIO):
                raise InterfaceGone(interface) from None
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOTSUP):
                raise StatsNotSupported(f"{interface}: the driver has no ethtool statistics") from None
            raise

    # -- the three commands ----------------------------------------------------------------------

    def stat_count(self, interface: str) -> int:
        buf = self._buffer(interface, 0, _SSET_INFO.size)
        _SSET_INFO.pack_into(buf, 0, ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0)
        self._call(interface, buf)
        _, _, mask, count = _SSET_INFO.unpack_from(buf, 0)
        if not mask & (1 << ETH_SS_STATS):
            raise StatsNotSupported(f"{interface}: the driver has no ethtool statistics")
        return int(count)

    def stat_names(self, interface: str, count: int) -> tuple[str, ...]:
        head = _GSTRINGS_HEAD.size
        buf = self._buffer(interface, 1, head + _slack(count) * ETH_GSTRING_LEN)
        _GSTRINGS_HEAD.pack_into(buf, 0, ETHTOOL_GSTRINGS, ETH_SS_STATS, count)
        self._call(interface, buf)
        if _GSTRINGS_HEAD.unpack_from(buf, 0)[2] != count:
            raise StatSetChanged(interface)
        raw = bytes(memoryview(buf)[head:head + count * ETH_GSTRING_LEN])
        cached = self._names.get(interface)
        if cached is not None and cached[0] == raw:
            return cached[1]
        # Names are NUL-padded; at least one mlx5 name carried a trailing space.
        names = tuple(raw[i:i + ETH_GSTRING_LEN].split(b"\0", 1)[0].decode("ascii", "replace").strip()
                      for i in range(0, len(raw), ETH_GSTRING_LEN))
        self._names[interface] = (raw, names)
        return names

    def stat_values(self, interface: str, count: int) -> tuple[int, ...]:
        head = _GSTATS_HEAD.size
        buf = self._buffer(interface, 2, head + _slack(count) * 8)
        _GSTATS_HEAD.pack_into(buf, 0, ETHTOOL_GSTATS, count)
        self._call(interface, buf)
        if _GSTATS_HEAD.unpack_from(buf, 0)[1] != count:
            raise StatSetChanged(interface)
        return struct.unpack_from(f"={count}Q", buf, head)

    def read(self, interface: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """(names, values) of one interface; retries while the stat set is changing."""
        for _ in range(self.retries):
            count = self.stat_count(interface)
            if count == 0:
                return (), ()
            try:
                names = self.stat_names(interface, count)
                values = self.stat_values(interface, count)
            except StatSetChanged:
                continue
            if self.stat_count(interface) == count:  # nothing changed between the calls
                return names, values
        raise StatSetChanged(f"{interface}: the stat set kept changing over {self.retries} attempts")

    def module_eeprom(self, interface: str) -> tuple[int, bytes]:
        """(ETH_MODULE_* type, EEPROM bytes) of the interface's plugged module. Needs
        CAP_NET_ADMIN (EPERM without); EOPNOTSUPP (no module, or a driver without it) raises
        StatsNotSupported."""
        info = self._buffer(interface, 3, _MODINFO.size)
        _MODINFO.pack_into(info, 0, ETHTOOL_GMODULEINFO, 0, 0)
        self._call(interface, info)
        _, module_type, length = _MODINFO.unpack_from(info, 0)
        length = min(int(length), 640)
        buf = self._buffer(interface, 4, _EEPROM_HEAD.size + length)
        _EEPROM_HEAD.pack_into(buf, 0, ETHTOOL_GMODULEEEPROM, 0, 0, length)
        self._call(interface, buf)
        got = min(_EEPROM_HEAD.unpack_from(buf, 0)[3], length)
        return int(module_type), bytes(memoryview(buf)[_EEPROM_HEAD.size:_EEPROM_HEAD.size + got])

    def forget(self, interface: str) -> None:
        for key in [k for k in self._buffers if k[0] == interface]:
            del self._buffers[key]
        self._names.pop(interface, None)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buffers.clear()
        self._names.clear()


def _slack(count: int) -> int:
    """Entries to allocate for `count` stats: room for the set to double before we notice."""
    return 2 * count + 256
