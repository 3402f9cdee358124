"""The waits of a background worker that end early when the worker is told to stop (`stop` set): a
plain sleep, and an idle wait that a notification (`wake`) ends too. They import nothing of ours, so every
floor that runs a loop can use them (`vip.run_loop`, the store's listener)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def wake_or_stop(wake: asyncio.Event, stop: asyncio.Event, seconds: float,
                       also: Iterable[asyncio.Future[Any]] = ()) -> None:
    """Wait until `wake` or `stop` is set, one of `also` (tasks the worker started) finishes, or `seconds`
    pass: a worker's idle wait, woken early by a notification."""
    waits = [asyncio.create_task(wake.wait()), asyncio.create_task(stop.wait())]
    try:
        await asyncio.wait([*waits, *also], timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
