"""DCB configuration of a netdev (PFC-enabled priorities, the APP table) over rtnetlink.

One request per interface: RTM_GETDCB with DCB_CMD_IEEE_GET and DCB_ATTR_IFNAME, answered by a
DCB_ATTR_IEEE nest holding DCB_ATTR_IEEE_PFC (struct ieee_pfc) and DCB_ATTR_IEEE_APP_TABLE
(struct dcb_app entries). The kernel's dcb_doit() asks CAP_NET_ADMIN only for RTM_SETDCB, so a
GET works unprivileged; a netdev without dcbnl_ops (lo, virtio, most virtual devices) answers
EOPNOTSUPP, which iproute2's `dcb` prints as "Operation not supported".

Why plain `struct` and not pyroute2: pyroute2 (0.9) has no DCB message class, so using it would
mean defining a dcbmsg with its nla_map on pyroute2's internal framing classes, which changed
between its releases, plus a runtime dependency and no type information for mypy --strict. The
whole protocol here is one 20-byte request and a walk over nested attributes: ~100 lines of
`struct` that tests can feed constructed replies to (`parse_ieee_reply`).

Constants: include/uapi/linux/dcbnl.h and include/uapi/linux/rtnetlink.h (torvalds/linux).
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

NETLINK_ROUTE = 0
RTM_GETDCB = 78
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 1
NLA_F_NESTED = 1 << 15
NLA_TYPE_MASK = ~((1 << 15) | (1 << 14)) & 0xFFFF

DCB_CMD_IEEE_GET = 21
DCB_ATTR_IFNAME = 1
DCB_ATTR_IEEE = 13
DCB_ATTR_IEEE_PFC = 2
DCB_ATTR_IEEE_APP_TABLE = 3
DCB_ATTR_IEEE_APP = 1  # an IEEE-selector entry (DSCP is IEEE selector 5)
DCB_ATTR_DCB_APP = 2  # a non-IEEE selector entry (kernels >= 6.2)
APP_SEL_DSCP = 5  # IEEE_8021QAZ_APP_SEL_DSCP

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_DCBMSG = struct.Struct("=BBH")  # dcb_family, cmd, pad
_NLATTR = struct.Struct("=HH")  # len, type
# struct ieee_pfc: pfc_cap, pfc_en, mbc (u8), delay (u16), requests[8], indications[8] (u64)
_IEEE_PFC = struct.Struct("=BBBH8Q8Q")
_DCB_APP = struct.Struct("=BBH")  # selector, priority, protocol


class DcbNotSupported(Exception):
    """The netdev has no DCB (EOPNOTSUPP): lo, virtual devices, drivers without dcbnl_ops."""


class DcbInterfaceGone(Exception):
    """No such netdev in this network namespace (ENODEV)."""


@dataclass
class DcbConfig:
    """What DCB_CMD_IEEE_GET says about one netdev."""

    pfc_enabled: dict[int, int] = field(default_factory=dict)  # priority 0..7 -> 0/1; {} = no PFC attr
    pfc_capable: int = 0  # how many priorities may have PFC at once
    dscp_to_priority: dict[int, int] = field(default_factory=dict)  # DSCP app entries
    other_apps: int = 0  # APP entries of other selectors (ethertype, port)

    def to_json(self) -> dict[str, object]:
        return {"pfc_enabled": {str(k): v for k, v in sorted(self.pfc_enabled.items())},
                "pfc_capable": self.pfc_capable,
                "dscp_to_priority": {str(k): v for k, v in sorted(self.dscp_to_priority.items())},
                "other_apps": self.other_apps}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> DcbConfig:
        """The file-backed provider's format (the simulator's): the same keys as to_json()."""
        def int_map(key: str) -> dict[int, int]:
            raw = data.get(key, {})
            if not isinstance(raw, dict):
                raise ValueError(f"{key}: expected an object of integer -> integer")
            return {int(k): int(v) for k, v in raw.items()}
        capable = data.get("pfc_capable", 8)
        other = data.get("other_apps", 0)
        return cls(int_map("pfc_enabled"), int(capable) if isinstance(capable, int) else 8,
                   int_map("dscp_to_priority"), int(other) if isinstance(other, int) else 0)


def _attrs(buf: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(type without flags, payload) of each netlink attribute in buf[start:end]."""
    pos = start
    while pos + _NLATTR.size <= end:
        length, kind = _NLATTR.unpack_from(buf, pos)
        if length < _NLATTR.size or pos + length > end:
            raise ValueError(f"malformed netlink attribute at offset {pos} (length {length})")
        yield kind & NLA_TYPE_MASK, buf[pos + _NLATTR.size:pos + length]
        pos += (length + 3) & ~3


def build_request(interface: str, seq: int = 1) -> bytes:
    """RTM_GETDCB / DCB_CMD_IEEE_GET for one interface (what `dcb pfc show dev X` sends)."""
    name = interface.encode() + b"\0"
    attr_len = _NLATTR.size + len(name)
    attr = _NLATTR.pack(attr_len, DCB_ATTR_IFNAME) + name + b"\0" * ((-attr_len) % 4)
    body = _DCBMSG.pack(socket.AF_UNSPEC, DCB_CMD_IEEE_GET, 0) + attr
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), RTM_GETDCB, NLM_F_REQUEST, seq, 0) + body


def parse_ieee_reply(payload: bytes) -> DcbConfig:
    """Decode the body of an RTM_GETDCB reply (after the nlmsghdr): dcbmsg + attributes."""
    if len(payload) < _DCBMSG.size:
        raise ValueError("short RTM_GETDCB reply")
    config = DcbConfig()
    for kind, value in _attrs(payload, _DCBMSG.size, len(payload)):
        if kind != DCB_ATTR_IEEE:
            continue
        for ieee_kind, ieee_value in _attrs(value, 0, len(value)):
            if ieee_kind == DCB_ATTR_IEEE_PFC:
                if len(ieee_value) < _IEEE_PFC.size:
                    raise ValueError(f"DCB_ATTR_IEEE_PFC: {len(ieee_value)} bytes, expected {_IEEE_PFC.size}")
                cap, enabled = _IEEE_PFC.unpack_from(ieee_value, 0)[:2]
                config.pfc_capable = cap
                config.pfc_enabled = {p: (enabled >> p) & 1 for p in range(8)}
            elif ieee_kind == DCB_ATTR_IEEE_APP_TABLE:
                for app_kind, app in _attrs(ieee_value, 0, len(ieee_value)):
                    if app_kind not in (DCB_ATTR_IEEE_APP, DCB_ATTR_DCB_APP) or len(app) < _DCB_APP.size:
                        continue
                    selector, priority, protocol = _DCB_APP.unpack_from(app, 0)
                    if selector == APP_SEL_DSCP and app_kind == DCB_ATTR_IEEE_APP:
                        config.dscp_to_priority[protocol] = priority
                    else:
                        config.other_apps += 1
    return config


class NetlinkDcb:
    """Reads DCB configuration over one NETLINK_ROUTE socket (opened on first use)."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._seq = 0

    def read(self, interface: str) -> DcbConfig:
        if self._sock is None:
            self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
            self._sock.settimeout(2.0)
        self._seq += 1
        self._sock.send(build_request(interface, self._seq))
        while True:
            data = self._sock.recv(65536)
            pos = 0
            while pos + _NLMSGHDR.size <= len(data):
                length, kind, _, seq, _ = _NLMSGHDR.unpack_from(data, pos)
                if length < _NLMSGHDR.size:
                    raise ValueError("malformed netlink message")
                body = data[pos + _NLMSGHDR.size:pos + length]
                pos += (length + 3) & ~3
                if seq != self._seq:
                    continue  # a late answer to an earlier, timed-out request
                if kind == NLMSG_ERROR:
                    code = -struct.unpack_from("=i", body, 0)[0]
                    if code == 0:
                        continue  # an ACK
                    if code in (errno.EOPNOTSUPP, errno.ENOTSUP):
                        raise DcbNotSupported(f"{interface}: no DCB support (EOPNOTSUPP)")
                    if code == errno.ENODEV:
                        raise DcbInterfaceGone(interface)
                    raise OSError(code, os.strerror(code))
                if kind == RTM_GETDCB:
                    return parse_ieee_reply(body)
                if kind == NLMSG_DONE:
                    raise DcbNotSupported(f"{interface}: empty DCB reply")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
