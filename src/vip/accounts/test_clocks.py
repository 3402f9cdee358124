"""Test clocks (development stacks only), as Stripe's: a frozen time owned by an organisation, which the
users created on it are verified at. A user on a clock gets VIPs, their cache and their risk scores at the
clock's time, not at the chain's; moving the local chain (the example, another test) changes nothing a
clock's users see. A clock only moves forward, when its owner advances it. Business time elsewhere
(intents, charges, webhooks) stays the service clock's."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.errors import NotFound, ValidationFailed
from vip.ids import new_id
from vip.store.tables import test_clocks, users


async def create_clock(conn: AsyncConnection, organisation_id: str, frozen_time: datetime,
                       name: str | None, now: datetime) -> Row[Any]:
    return (await conn.execute(test_clocks.insert().values(
        id=new_id("clk"), organisation_id=organisation_id, name=name, frozen_time=frozen_time, created_at=now,
    ).returning(*test_clocks.c))).one()


async def load_clock(conn: AsyncConnection, organisation_id: str, clock_id: str, *,
                     lock: bool = False) -> Row[Any]:
    """The organisation's clock; 404 for any other (never another organisation's)."""
    query = select(test_clocks).where(test_clocks.c.id == clock_id,
                                      test_clocks.c.organisation_id == organisation_id)
    row = (await conn.execute(query.with_for_update() if lock else query)).first()
    if row is None:
        raise NotFound(f"no test clock {clock_id}", {"test_clock": clock_id}, code="ERR_NOT_FOUND")
    return row


async def advance_clock(conn: AsyncConnection, organisation_id: str, clock_id: str,
                        frozen_time: datetime) -> Row[Any]:
    """Move the clock to `frozen_time`, which must not be before its time (400 otherwise)."""
    clock = await load_clock(conn, organisation_id, clock_id, lock=True)
    if frozen_time < clock.frozen_time:
        raise ValidationFailed("a test clock only moves forward",
                               {"frozen_time": f"before the clock's time {clock.frozen_time.isoformat()}"})
    return (await conn.execute(update(test_clocks).where(test_clocks.c.id == clock_id)
                               .values(frozen_time=frozen_time).returning(*test_clocks.c))).one()


async def user_time(conn: AsyncConnection, user_id: str, service_now: datetime) -> datetime:
    """The time the user's verification runs at: its test clock's, else the service clock's."""
    frozen = await conn.scalar(select(test_clocks.c.frozen_time)
                               .join(users, users.c.test_clock_id == test_clocks.c.id)
                               .where(users.c.id == user_id))
    return frozen if frozen is not None else service_now
