"""One mesh UDP socket per local address, with the kernel's receive timestamps.

SO_TIMESTAMPNS puts the kernel's receive time of each datagram, a struct timespec on
CLOCK_REALTIME, in the ancillary data: arrival times then do not include the time the datagram
waited for the event loop. Python has no constant for it; 35 is SO_TIMESTAMPNS_OLD of
include/uapi/asm-generic/socket.h, whose timespec is two native longs. The number differs on
alpha, mips, parisc and sparc, so only the architectures using the generic value turn it on;
elsewhere the arrival time is read from the clock when the datagram is read (and includes that
wait, so those sockets are woken per datagram instead of polled).
"""

from __future__ import annotations

import platform
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from . import mesh_peers as mp
from . import mesh_wire as wire

SO_TIMESTAMPNS = 35
GENERIC_SOCKET_ARCHES = {"x86_64", "i686", "i386", "aarch64", "arm64", "armv7l", "armv8l", "riscv64",
                         "ppc64le", "ppc64", "s390x", "loongarch64"}
TIMESPEC = struct.Struct("@ll")
RCVBUF = 1 << 20
# A send held up longer than this between its time stamp and the socket is not timed: the
# prober's own (mesh_prober.Prober._send) and a responder's reply (send_reply, a late notice).
SEND_STALL_NS = 200_000


class MeshSocket:
    """One bound UDP socket: the responder and the probes of one local address."""

    def __init__(self, local: mp.LocalAddress, port: int, tos: int, bind_device: bool) -> None:
        self.local = local
        self.problems: list[str] = []
        self.sock = socket.socket(local.family, socket.SOCK_DGRAM)
        try:
            self.sock.setblocking(False)
            if local.family == socket.AF_INET6:
                self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
            else:
                self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            self.kernel_timestamps = enable_timestamps(self.sock)
            try:  # room for a round's worth of datagrams between two reads (capped by rmem_max)
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            except OSError:
                pass
            if bind_device and local.interface:
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, local.interface.encode())
                except OSError as exc:
                    self.problems.append(f"{local.interface}: SO_BINDTODEVICE refused ({exc.strerror}); "
                                         f"probes are bound to {local.ip} only and follow the routing table")
            self.sock.bind((local.ip, port))
        except BaseException:
            self.sock.close()
            raise
        self.port: int = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def enable_timestamps(sock: socket.socket) -> bool:
    if not sys.platform.startswith("linux") or platform.machine() not in GENERIC_SOCKET_ARCHES:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


ANCILLARY_SIZE = socket.CMSG_SPACE(TIMESPEC.size)


def rx_time_ns(ancillary: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(data)
            return int(sec) * 1_000_000_000 + int(nsec)
    return time.time_ns()


def send_reply(sock: socket.socket, responder: wire.Responder, reply: bytearray, addr: tuple[Any, ...],
               rx_ns: int, clock: Callable[[], int] = time.time_ns, stall_ns: int = SEND_STALL_NS) -> None:
    """Send `reply` to `addr` with its dwell stamped just before the socket, and count the outcome.

    A reply whose send was held up more than `stall_ns` after the stamp left with too short a
    dwell: a late notice follows it so that the prober does not time it (mesh_wire)."""
    stamp = clock()
    wire.stamp_dwell(reply, stamp - rx_ns)
    try:
        sock.sendto(reply, addr)
    except OSError:
        responder.count("send_failed")
        return
    if clock() - stamp <= stall_ns:
        responder.count("answered")
        return
    responder.count("answered_late")
    try:
        sock.sendto(wire.late_notice(reply), addr)
    except OSError:  # the prober then times a reply that left late: nothing more to do
        pass
