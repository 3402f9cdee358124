"""Named locks that may be held across a network call: PostgreSQL session-level advisory locks.

A row lock lives in a transaction, and no transaction may stay open across a network call
(`vip.store.transaction_guard`). Some work must still run one at a time while it calls out: one refresh
of a platform's OAuth token per connection (a refresh token is single use), one run of an Idempotency-Key's
request. `held_lock` takes an advisory lock on a connection of its own in autocommit mode: no
transaction is open, nothing but the same lock waits for it, and a process that dies releases it with
its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.store.engine import autocommit_connection

POLL_S = 0.02


class LockBusy(Exception):
    """The lock stayed held by another session for the whole wait."""


def _key(name: str) -> object:
    return func.hashtextextended(name, 0)  # a 64-bit key per name; a collision only serialises two names


async def _acquire(conn: AsyncConnection, name: str, wait_s: float | None) -> None:
    if wait_s is None:
        await conn.execute(select(func.pg_advisory_lock(_key(name))))
        return
    deadline = time.monotonic() + wait_s
    while not await conn.scalar(select(func.pg_try_advisory_lock(_key(name)))):
        if time.monotonic() >= deadline:
            raise LockBusy(name)
        await asyncio.sleep(POLL_S)


async def _discard(conn: AsyncConnection) -> None:
    """Close the connection for good: a session lock in an unknown state must never go back to the pool."""
    with contextlib.suppress(Exception):
        await conn.invalidate()


@asynccontextmanager
async def held_lock(engine: AsyncEngine, name: str, wait_s: float | None = None) -> AsyncIterator[None]:
    """Hold the advisory lock `name` for the block. Waits for it as long as it takes (`wait_s` None), or
    up to `wait_s` seconds, then raises LockBusy."""
    async with autocommit_connection(engine) as conn:
        try:
            await _acquire(conn, name, wait_s)
        except LockBusy:
            raise
        except BaseException:  # cancelled or failed mid-acquire: the lock may be held
            await _discard(conn)
            raise
        try:
            yield
        finally:
            try:
                await conn.execute(select(func.pg_advisory_unlock(_key(name))))
            except BaseException:
                await _discard(conn)
                raise
