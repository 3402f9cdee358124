"""GET /v1/connections (a user's connections), DELETE /v1/connections/{id} (revoke)."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field
from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.accounts.users import load_user
from vip.api.context import CLOCK, ENGINE, principal, requires
from vip.api.jsonio import json_response
from vip.api.serializers import connection_json
from vip.api.validation import Query, read_query
from vip.connections import platform_tokens
from vip.errors import NotFound
from vip.store.outbox import record_event
from vip.store.tables import connections, watched_addresses

routes = web.RouteTableDef()

LIST_FIELDS = ("id", "type", "provider", "identifier", "status", "created_at", "network", "source_type")


class ListConnections(Query):
    user_id: str = Field(min_length=1, max_length=100)


async def lock_wallet_address(conn: AsyncConnection, network: str, address: str) -> None:
    """Serialise, per (network, address), connecting and revoking wallets until the transaction ends.

    Without it a revoke could miss a connection committed meanwhile and drop an address from the
    watch set that an active wallet still needs.
    """
    key = f"wallet:{network}:{address.lower()}"
    await conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))


def list_item(row) -> dict[str, Any]:
    """The spec's list item: id, type, provider, identifier, status, created_at, plus network (wallet)
    or source_type (platform)."""
    return {k: v for k, v in connection_json(row).items() if k in LIST_FIELDS}


@routes.get("/v1/connections")
@requires("read")
async def list_connections(request: web.Request) -> web.Response:
    query = read_query(request, ListConnections)
    org = principal(request).organisation_id
    async with request.app[ENGINE].connect() as conn:
        await load_user(conn, org, query.user_id)
        rows = await conn.execute(select(connections).where(
            connections.c.user_id == query.user_id, connections.c.organisation_id == org,
        ).order_by(connections.c.created_at.desc(), connections.c.id.desc()))
        items = [list_item(r) for r in rows]
    return json_response({"connections": items})


async def _unwatch_if_unused(conn: AsyncConnection, network: str, address: str) -> None:
    """Drop a revoked wallet from the indexer's watch set unless another active wallet connection (any
    user, any organisation) holds the address. Rows watched for another reason (counterparty,
    spender) are not ours to drop."""
    still_used = await conn.scalar(select(exists().where(
        connections.c.type == "wallet", connections.c.status == "active",
        connections.c.network == network, connections.c.identifier == address)))
    if not still_used:
        await conn.execute(delete(watched_addresses).where(
            watched_addresses.c.network == network, watched_addresses.c.address == address,
            watched_addresses.c.reason == "wallet"))


@routes.delete("/v1/connections/{connection_id}")
@requires("write")
async def revoke_connection(request: web.Request) -> web.Response:
    connection_id = request.match_info["connection_id"]
    org = principal(request).organisation_id
    now = await request.app[CLOCK].now()
    this = (connections.c.id == connection_id) & (connections.c.organisation_id == org)
    async with request.app[ENGINE].begin() as conn:
        row = (await conn.execute(select(connections).where(this))).first()
        if row is None:
            raise NotFound(f"no connection {connection_id}", {"connection_id": connection_id})
        if row.type == "wallet":
            await lock_wallet_address(conn, row.network, row.identifier)
        # Only an active connection moves; a revoked (or expired) one is answered as it is, no event.
        revoked = (await conn.execute(update(connections).where(this, connections.c.status == "active")
                                      .values(status="revoked", revoked_at=now)
                                      .returning(*connections.c))).first()
        if revoked is None:
            row = (await conn.execute(select(connections).where(this))).one()
            return json_response({"connection": connection_json(row)})
        if revoked.type == "wallet":
            await _unwatch_if_unused(conn, revoked.network, revoked.identifier)
        else:  # a revoked platform connection is never pulled again: its OAuth token goes
            await platform_tokens.forget(conn, revoked.id)
        body = connection_json(revoked)
        await record_event(conn, "connection.revoked", body, created_at=now, organisation_id=org)
    return json_response({"connection": body})
