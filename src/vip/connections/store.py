"""Connections, wallets and platform income records in the database; every function runs in the
caller's transaction."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Row, delete, exists, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from vip.connections.income_records import IncomeRecord
from vip.errors import Conflict
from vip.ids import new_id
from vip.store import label_queue
from vip.store.tables import connections, income_records, wallets


async def lock_wallet_address(conn: AsyncConnection, network: str, address: str) -> None:
    """Serialise, per (network, address), connecting and revoking wallets until the transaction ends.

    Without it a revoke could miss a connection committed meanwhile and drop an address from the
    watch set that an active wallet still needs.
    """
    key = f"wallet:{network}:{address.lower()}"
    await conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))


# --- any connection -----------------------------------------------------------------------------------------


async def user_connections(conn: AsyncConnection, organisation_id: str, user_id: str) -> list[Row[Any]]:
    """The user's connections, newest first."""
    rows = await conn.execute(select(connections).where(
        connections.c.user_id == user_id, connections.c.organisation_id == organisation_id,
    ).order_by(connections.c.created_at.desc(), connections.c.id.desc()))
    return list(rows)


def _this(organisation_id: str, connection_id: str) -> ColumnElement[bool]:
    return (connections.c.id == connection_id) & (connections.c.organisation_id == organisation_id)


async def find_connection(conn: AsyncConnection, organisation_id: str, connection_id: str) -> Row[Any] | None:
    return (await conn.execute(select(connections).where(_this(organisation_id, connection_id)))).first()


async def revoke_if_active(conn: AsyncConnection, organisation_id: str, connection_id: str,
                           now: dt.datetime) -> Row[Any] | None:
    """Mark the connection revoked if it is active; None when it was not (revoked, expired)."""
    return (await conn.execute(update(connections)
                               .where(_this(organisation_id, connection_id), connections.c.status == "active")
                               .values(status="revoked", revoked_at=now)
                               .returning(*connections.c))).first()


# --- wallets ------------------------------------------------------------------------------------------------


async def active_wallet(conn: AsyncConnection, user_id: str, network: str, address: str) -> Row[Any] | None:
    """The user's active wallet connection to (network, address), if any."""
    return (await conn.execute(select(connections).where(
        connections.c.user_id == user_id, connections.c.type == "wallet", connections.c.status == "active",
        connections.c.network == network, connections.c.identifier == address))).first()


async def insert_wallet_connection(conn: AsyncConnection, *, organisation_id: str, user_id: str,
                                   provider: str, network: str, address: str,
                                   now: dt.datetime) -> Row[Any] | None:
    """A new active wallet connection and its wallet row; None when the user already has one to this
    address (a racing sign-in got there first: `uq_connections_active_wallet`)."""
    row = (await conn.execute(pg_insert(connections).values(
        id=new_id("con"), organisation_id=organisation_id, user_id=user_id, type="wallet",
        provider=provider, identifier=address, network=network, status="active",
        created_at=now, last_synced_at=now,
    ).on_conflict_do_nothing(
        index_elements=["user_id", "network", "identifier"],
        index_where=text("type = 'wallet' AND status = 'active'"),
    ).returning(*connections.c))).first()
    if row is not None:
        await conn.execute(wallets.insert().values(
            id=new_id("wal"), organisation_id=organisation_id, user_id=user_id, connection_id=row.id,
            address=address, network=network, created_at=now))
        # Its history (once backfilled) may pay the user's records: label it without waiting for a VIP.
        await label_queue.queue_user(conn, user_id, now)
    return row


async def wallet_address_in_use(conn: AsyncConnection, network: str, address: str) -> bool:
    """Whether any active wallet connection (any user, any organisation) holds the address."""
    return bool(await conn.scalar(select(exists().where(
        connections.c.type == "wallet", connections.c.status == "active",
        connections.c.network == network, connections.c.identifier == address))))


# --- platforms ----------------------------------------------------------------------------------------------


async def upsert_platform_connection(
    conn: AsyncConnection, *, organisation_id: str, user_id: str, provider: str, source_type: str,
    account_id: str, holder: str, records: list[IncomeRecord], now: dt.datetime,
) -> tuple[Row[Any], bool]:
    """Create the active connection of (user, provider, account id), or reuse it, and make `records` its
    records (replacing the old ones). Returns (row, created)."""
    row = (await conn.execute(pg_insert(connections).values(
        id=new_id("con"), organisation_id=organisation_id, user_id=user_id, type="platform",
        provider=provider, identifier=holder, source_type=source_type, account_id=account_id,
        status="active", created_at=now, last_synced_at=now,
    ).on_conflict_do_nothing(
        index_elements=["user_id", "provider", "account_id"],
        index_where=text("type = 'platform' AND status = 'active'"),
    ).returning(*connections.c))).first()
    created = row is not None
    if row is None:
        # The UPDATE locks the row: a concurrent sync of the same account waits for this one.
        row = (await conn.execute(update(connections).where(
            connections.c.user_id == user_id, connections.c.provider == provider,
            connections.c.account_id == account_id, connections.c.type == "platform",
            connections.c.status == "active",
        ).values(identifier=holder, source_type=source_type, last_synced_at=now)
            .returning(*connections.c))).first()
        if row is None:  # revoked between the two statements
            raise Conflict("the connection changed while it was being synced; retry",
                           {"account_id": account_id}, code="ERR_CONNECTION_CHANGED")
    await replace_income_records(conn, row.id, records, existing=not created)
    await label_queue.queue_user(conn, user_id, now)
    return row, created


async def replace_income_records(conn: AsyncConnection, connection_id: str, records: list[IncomeRecord], *,
                                 existing: bool = True) -> None:
    """Make `records` the connection's records (delete + insert: never duplicated)."""
    if existing:
        await conn.execute(delete(income_records).where(income_records.c.connection_id == connection_id))
    if records:
        await conn.execute(income_records.insert(), [r.row(connection_id) for r in records])


async def resync_platform_connection(conn: AsyncConnection, *, connection_id: str, holder: str,
                                     records: list[IncomeRecord], now: dt.datetime) -> Row[Any] | None:
    """A re-pull of an existing connection (GET /v1/vip-report?refresh=true): as a reconnection of the
    same account, but never creating one. None when the connection is no longer active (revoked while it
    was being pulled: its records are no one's input any more)."""
    row = (await conn.execute(update(connections).where(
        connections.c.id == connection_id, connections.c.type == "platform", connections.c.status == "active",
    ).values(identifier=holder, last_synced_at=now).returning(*connections.c))).first()
    if row is not None:
        await replace_income_records(conn, row.id, records)
        await label_queue.queue_user(conn, row.user_id, now)
    return row
