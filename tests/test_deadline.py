"""deadline.within: a timeout that never loses the caller's cancellation (CPython gh-86296: before
3.12, asyncio.wait_for returns the inner result when the caller is cancelled in the same loop
iteration as the inner awaitable finishes; a polling source then kept polling after the daemon
cancelled it, and a daemon that could not bind its port hung on exit)."""

from __future__ import annotations

import asyncio

import pytest

from infrapulse.deadline import within


async def _cancelled_as_the_inner_finishes(wait):
    """The caller is cancelled in the very iteration the awaitable it waits on completes."""
    inner: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def caller() -> str:
        await wait(inner, 10)
        return "carried on as if never cancelled"

    task = asyncio.create_task(caller())
    await asyncio.sleep(0)  # the caller now waits on inner
    inner.set_result(1)
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


async def test_a_cancellation_at_the_moment_the_awaitable_finishes_is_kept():
    assert await _cancelled_as_the_inner_finishes(within) == "cancelled"


async def test_the_result_and_the_timeout():
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    assert await within(value(), 1.0) == 7
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def hangs() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    with pytest.raises(asyncio.TimeoutError):
        await within(hangs(), 0.01)
    assert started.is_set() and cancelled.is_set()  # the awaitable was cancelled, not left running


async def test_cancelling_the_caller_cancels_the_awaitable():
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hangs() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    task = asyncio.create_task(within(hangs(), None))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


def test_the_daemon_never_uses_wait_for():
    """Every timeout in the package goes through `within` (the simulators run in the demo only)."""
    from pathlib import Path

    import infrapulse

    root = Path(infrapulse.__file__).parent
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if p.parts[-2] != "simulate" and p.name != "deadline.py"
                   and "asyncio.wait_for(" in p.read_text())
    assert users == []
