"""The DCB netlink reader against iproute2's `dcb` on this machine's real kernel: on interfaces
without DCB (lo, a virtio eth0) both must agree that DCB is not supported."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest

from infrapulse.sources.nic.dcb_netlink import DcbNotSupported, NetlinkDcb

DCB = shutil.which("dcb") or "/usr/sbin/dcb"


def _interfaces() -> list[str]:
    return [name for _, name in socket.if_nameindex() if name in ("lo", "eth0")]


@pytest.mark.parametrize("interface", _interfaces())
@pytest.mark.parametrize("what", ["app", "pfc"])
def test_dcb_and_infrapulse_agree_dcb_is_unsupported(interface: str, what: str) -> None:
    result = subprocess.run([DCB, "-j", what, "show", "dev", interface], capture_output=True, text=True,
                            timeout=10)
    assert result.returncode != 0 and "Operation not supported" in result.stderr, result
    reader = NetlinkDcb()
    try:
        with pytest.raises(DcbNotSupported):
            reader.read(interface)
    finally:
        reader.close()
