"""The worker's wake-up: LISTEN on the channel the outbox trigger NOTIFYs at the commit of every
transaction that records events. Polling stays the fallback: a lost listener only costs latency, and
it reconnects."""

from __future__ import annotations

import asyncio

import psycopg
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.run_loop import sleep_or_stop
from vip.webhooks.sender import ERROR_TEXT_LIMIT

NOTIFY_CHANNEL = "vip_outbox"  # notified by the outbox trigger (migration 0006)


async def listen_for_events(engine: AsyncEngine, stop: asyncio.Event, wake: asyncio.Event,
                            listening: asyncio.Event, log) -> None:
    """Set `wake` on every commit that recorded events, until `stop`; `listening` is set while the
    LISTEN connection is up."""
    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    failures = 0
    while not stop.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                failures = 0
                listening.set()
                wake.set()  # anything committed before LISTEN is found by the next step
                async for _ in conn.notifies():
                    wake.set()
        except (psycopg.Error, OSError) as exc:
            listening.clear()
            failures += 1
            log.warning("outbox listener lost; polling meanwhile", error=str(exc)[:ERROR_TEXT_LIMIT])
            await sleep_or_stop(stop, min(30.0, 0.5 * 2 ** min(failures, 6)))
