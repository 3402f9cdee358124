"""A worker's wake-up: LISTEN on a channel that a committing transaction NOTIFYs. Polling stays every
worker's fallback: a lost listener only costs latency, and it reconnects."""

from __future__ import annotations

import asyncio

import psycopg
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.errors import ERROR_TEXT_LIMIT
from vip.waits import sleep_or_stop


async def listen_and_wake(engine: AsyncEngine, channel: str, stop: asyncio.Event, wake: asyncio.Event,
                          listening: asyncio.Event, log) -> None:
    """Set `wake` on every notification of `channel`, until `stop`; `listening` is set while the LISTEN
    connection is up. `wake` is also set on each (re)connection: what committed before LISTEN is found
    by the worker's next step."""
    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    failures = 0
    while not stop.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f"LISTEN {channel}")
                failures = 0
                listening.set()
                wake.set()
                async for _ in conn.notifies():
                    wake.set()
        except (psycopg.Error, OSError) as exc:
            listening.clear()
            failures += 1
            log.warning("listener lost; polling meanwhile", channel=channel,
                        error=str(exc)[:ERROR_TEXT_LIMIT])
            await sleep_or_stop(stop, min(30.0, 0.5 * 2 ** min(failures, 6)))
