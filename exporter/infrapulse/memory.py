"""Keeping the daemon's resident memory flat under glibc malloc.

A fabric instance renders multi-megabyte /metrics bodies and rebuilds whole switch states when
streams resync. Under glibc's defaults that makes RSS creep although nothing leaks:

  - the mmap threshold is dynamic: once a 20 MB response buffer (an mmap of its own) is freed,
    the threshold rises to 20 MB and every later buffer below that comes from the heap, where
    freed space is only reused, never returned. A fixed threshold keeps large buffers in their
    own mappings, which go back to the kernel on free;
  - freed pages in the middle of the heap stay resident until `malloc_trim` hands them back;
    `trim_periodically` does that once a minute (a few milliseconds);
  - every thread that allocates (gRPC's event engine has several) may get its own arena that
    grows and fragments on its own; two arenas are plenty for one event loop plus gRPC.

On anything but glibc (musl, macOS) these are no-ops.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging

log = logging.getLogger("infrapulse.memory")

# mallopt(3) parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value, now fixed
TRIM_THRESHOLD = 1024 * 1024  # free memory above the heap top beyond this goes back at once
ARENA_MAX = 2
TRIM_PERIOD_SECONDS = 60.0


def _glibc() -> ctypes.CDLL | None:
    """The C library this process already runs on, when it is glibc. Through the process's own
    symbols (dlopen(NULL)), not find_library: that forks `ldconfig -p` on every import."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def tune() -> bool:
    """Fix the allocator settings above; call before threads start. False when not glibc."""
    if _LIBC is None:
        return False
    ok = all(_LIBC.mallopt(param, value) == 1 for param, value in (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_ARENA_MAX, ARENA_MAX)))
    if not ok:
        log.warning("glibc refused a malloc setting; RSS may creep under churn")
    return ok


def trim() -> bool:
    """Give free heap pages back to the kernel. True when glibc released something."""
    return bool(_LIBC is not None and _LIBC.malloc_trim(0))


async def trim_periodically(period: float = TRIM_PERIOD_SECONDS) -> None:
    if _LIBC is None:
        return
    while True:
        await asyncio.sleep(period)
        trim()


__all__ = ["trim", "trim_periodically", "tune"]
