"""Any connection, wallet or platform: a user's list, and the revoke that ends one (the wallet's address
leaves the indexer's watch set when nothing else holds it; a platform's OAuth token is deleted)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts.users import load_user
from vip.clock import Clock
from vip.connections import platform_tokens, store
from vip.connections.resource import connection_json
from vip.errors import NotFound
from vip.indexer.store import remove_watched_address
from vip.store.outbox import record_event

EVENT_REVOKED = "connection.revoked"


async def list_connections(engine: AsyncEngine, organisation_id: str, user_id: str) -> list[Row[Any]]:
    """The user's connections, newest first; 404 for a user not of the organisation."""
    async with engine.connect() as conn:
        await load_user(conn, organisation_id, user_id)
        return await store.user_connections(conn, organisation_id, user_id)


async def _unwatch_if_unused(conn: AsyncConnection, network: str, address: str) -> None:
    """Drop a revoked wallet from the indexer's watch set unless another active wallet connection (any
    user, any organisation) holds the address."""
    if not await store.wallet_address_in_use(conn, network, address):
        await remove_watched_address(conn, network, address, "wallet")


async def revoke_connection(engine: AsyncEngine, clock: Clock, organisation_id: str,
                            connection_id: str) -> Row[Any]:
    """Revoke an active connection (event `connection.revoked`); a revoked or expired one is answered as
    it is, without an event. 404 for a connection not of the organisation."""
    now = await clock.now()
    async with engine.begin() as conn:
        row = await store.find_connection(conn, organisation_id, connection_id)
        if row is None:
            raise NotFound(f"no connection {connection_id}", {"connection_id": connection_id})
        if row.type == "wallet":
            await store.lock_wallet_address(conn, row.network, row.identifier)
        # Only an active connection moves; a revoked (or expired) one is answered as it is, no event.
        revoked = await store.revoke_if_active(conn, organisation_id, connection_id, now)
        if revoked is None:
            current = await store.find_connection(conn, organisation_id, connection_id)
            assert current is not None  # found above; connections are never deleted
            return current
        if revoked.type == "wallet":
            await _unwatch_if_unused(conn, revoked.network, revoked.identifier)
        else:  # a revoked platform connection is never pulled again: its OAuth token goes
            await platform_tokens.forget(conn, revoked.id)
        await record_event(conn, EVENT_REVOKED, connection_json(revoked), created_at=now,
                           organisation_id=organisation_id)
    return revoked
