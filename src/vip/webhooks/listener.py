"""The worker's wake-up: LISTEN on the channel the outbox trigger NOTIFYs at the commit of every
transaction that records events (vip.store.listen)."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.typing import FilteringBoundLogger

from vip.store.listen import listen_and_wake

NOTIFY_CHANNEL = "vip_outbox"  # notified by the outbox trigger (migration 0006)


async def listen_for_events(engine: AsyncEngine, stop: asyncio.Event, wake: asyncio.Event,
                            listening: asyncio.Event, log: FilteringBoundLogger) -> None:
    """Set `wake` on every commit that recorded events, until `stop`; `listening` is set while the
    LISTEN connection is up."""
    await listen_and_wake(engine, NOTIFY_CHANNEL, stop, wake, listening, log)
