"""Users of an organisation: creation, and the tenancy-checked lookup that user-scoped work starts with."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts import test_clocks
from vip.errors import Conflict, NotFound
from vip.ids import new_id
from vip.store.tables import users


async def load_user(conn: AsyncConnection, organisation_id: str, user_id: str) -> Row[Any]:
    """The user if it belongs to the organisation; 404 otherwise (never another organisation's)."""
    row = (await conn.execute(select(users).where(users.c.id == user_id,
                                                  users.c.organisation_id == organisation_id))).first()
    if row is None:
        raise NotFound(f"no user {user_id}", {"user_id": user_id})
    return row


async def create_user(engine: AsyncEngine, *, organisation_id: str, external_id: str | None,
                      metadata: dict[str, Any], now: datetime, test_clock: str | None = None) -> Row[Any]:
    """A new user (on the organisation's `test_clock` when given); 409 when the organisation already has
    one with this `external_id`."""
    try:
        async with engine.begin() as conn:
            if test_clock is not None:
                await test_clocks.load_clock(conn, organisation_id, test_clock)
            return (await conn.execute(users.insert().values(
                id=new_id("usr"), organisation_id=organisation_id, external_id=external_id,
                metadata=metadata, created_at=now, test_clock_id=test_clock,
            ).returning(*users.c))).one()
    except IntegrityError as exc:
        raise Conflict("a user with this external_id exists", {"external_id": external_id}) from exc


async def get_user(engine: AsyncEngine, organisation_id: str, user_id: str) -> Row[Any]:
    async with engine.connect() as conn:
        return await load_user(conn, organisation_id, user_id)
