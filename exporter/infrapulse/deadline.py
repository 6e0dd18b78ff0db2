"""`within`: asyncio.wait_for without its lost cancellations.

Before Python 3.12, `asyncio.wait_for` swallows a cancellation of its caller when the awaitable it
waits on finishes at the same moment (CPython gh-86296): the caller returns the result as if never
cancelled. A source loop that polls with it then keeps polling after the daemon cancelled it, and
`asyncio.run` waits on that loop forever — a daemon that could not bind its port hung instead of
exiting 1. `within` waits with `asyncio.wait`, which never swallows the caller's cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """The awaitable's result, or asyncio.TimeoutError after `seconds` (None: no limit), the awaitable
    cancelled then; a cancellation of the caller cancels it too and is re-raised."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise asyncio.TimeoutError(f"not done within {seconds}s")  # TimeoutError itself from 3.11
    return task.result()
