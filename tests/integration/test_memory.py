"""The allocator settings that keep a long-running daemon's RSS flat (infrapulse.memory).

Each case runs in a fresh interpreter: mallopt settings are per process and permanent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from infrapulse import memory

SCENARIO = textwrap.dedent("""
    import gc, sys
    from infrapulse import memory

    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024

    if sys.argv[1] == "tune":
        assert memory.tune()
    base = rss_mb()
    body = bytearray(30 << 20)  # a large /metrics body, freed: glibc raises its mmap threshold
    del body
    buffers = [bytearray(1 << 20) for _ in range(100)]  # 100 MiB of 1 MiB buffers
    pin = bytearray(1 << 20)  # allocated last: keeps the heap top from shrinking
    del buffers
    gc.collect()
    after_free = rss_mb() - base
    memory.trim()
    print(after_free, rss_mb() - base)
""")


def run_scenario(mode: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", SCENARIO, mode], capture_output=True, text=True, timeout=60,
                         check=True).stdout.split()
    return float(out[0]), float(out[1])


needs_glibc = pytest.mark.skipif(memory._LIBC is None, reason="glibc malloc only")  # noqa: SLF001


@needs_glibc
def test_default_glibc_keeps_freed_buffers_resident_and_trim_returns_them():
    """The failure mode being fixed, shown on this machine's glibc: without tuning, 100 MiB of
    freed buffers stay resident; malloc_trim hands them back."""
    after_free, after_trim = run_scenario("default")
    assert after_free > 60
    assert after_trim < 20


@needs_glibc
def test_tuned_allocator_returns_large_buffers_on_free():
    after_free, after_trim = run_scenario("tune")
    assert after_free < 20
    assert after_trim < 20


@needs_glibc
def test_tune_is_accepted_by_glibc():
    assert memory.tune() is True  # every mallopt call returned 1
