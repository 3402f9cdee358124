"""GET /v1/wallets: a user's wallets whose connection is active, with balances and first-seen block.

- `user_id` is required and must be a user of the caller's organisation (else 404).
- `network` is optional; it must be one of the spec's `ethereum`, `polygon`, `base`, `arbitrum` or a
  network named in the service's configuration (else 400).
- `usdc_balance` / `usdt_balance`: token units (exact JSON numbers) of `balanceOf` at the latest block the
  indexer has processed, as stored by `indexer.balances`; 0 until the first reading (and for a token the
  network does not have).
- `first_seen_block`: the lowest block of a stored USDC or USDT transfer to or from the address on that
  network, null when none is stored yet.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field
from sqlalchemy import and_, func, select
from sqlalchemy.sql import Select

from vip.accounts.users import load_user
from vip.api.context import ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response, token_units
from vip.api.serializers import address_out
from vip.api.validation import Query, read_query
from vip.config import Settings
from vip.errors import ValidationFailed
from vip.store.tables import address_balances, connections, token_transfers, wallets
from vip.transactions.query import token_decimals

routes = web.RouteTableDef()

SPEC_NETWORKS = ("ethereum", "polygon", "base", "arbitrum")
BALANCE_TOKENS = ("USDC", "USDT")


class WalletsQuery(Query):
    user_id: str = Field(min_length=1, max_length=100)
    network: str | None = Field(default=None, min_length=1, max_length=100)


def known_networks(settings: Settings) -> list[str]:
    return sorted(set(SPEC_NETWORKS) | set(settings.networks))


def _first_seen(party) -> Any:
    return (select(func.min(token_transfers.c.block_number))
            .where(token_transfers.c.network == wallets.c.network, party == wallets.c.address,
                   token_transfers.c.token.in_(BALANCE_TOKENS))
            .scalar_subquery())


def wallets_query(user_id: str, network: str | None) -> Select:
    balances = {}
    for token in BALANCE_TOKENS:
        b = address_balances.alias(f"balance_{token.lower()}")
        balances[token] = (select(b.c.balance).where(
            b.c.network == wallets.c.network, b.c.address == wallets.c.address, b.c.token == token)
            .scalar_subquery().label(f"{token.lower()}_raw"))
    query = (
        select(wallets.c.id, wallets.c.connection_id, wallets.c.address, wallets.c.network,
               wallets.c.created_at, *balances.values(),
               # Two index probes (min of each address index), not a scan of the wallet's transfers.
               func.least(_first_seen(token_transfers.c.from_address),
                          _first_seen(token_transfers.c.to_address)).label("first_seen_block"))
        .select_from(wallets.join(connections, and_(connections.c.id == wallets.c.connection_id,
                                                    connections.c.status == "active")))
        .where(wallets.c.user_id == user_id)
        .order_by(wallets.c.created_at, wallets.c.id)
    )
    if network is not None:
        query = query.where(wallets.c.network == network)
    return query


def wallet_json(row, settings: Settings) -> dict[str, Any]:
    def balance(token: str):
        raw = getattr(row, f"{token.lower()}_raw")
        return token_units(int(raw or 0), token_decimals(settings, row.network, token))

    return {
        "id": row.id,
        "connection_id": row.connection_id,
        "address": address_out(row.address),
        "network": row.network,
        "usdc_balance": balance("USDC"),
        "usdt_balance": balance("USDT"),
        "first_seen_block": row.first_seen_block,
        "created_at": iso(row.created_at),
    }


@routes.get("/v1/wallets")
@requires("read")
async def list_wallets(request: web.Request) -> web.Response:
    query = read_query(request, WalletsQuery)
    settings = request.app[SETTINGS]
    if query.network is not None and query.network not in known_networks(settings):
        names = ", ".join(known_networks(settings))
        raise ValidationFailed(f"unknown network {query.network!r}: one of {names}",
                               {"network": f"one of {names}"})
    async with request.app[ENGINE].connect() as conn:
        await load_user(conn, principal(request).organisation_id, query.user_id)
        rows = (await conn.execute(wallets_query(query.user_id, query.network))).all()
    return json_response({"wallets": [wallet_json(row, settings) for row in rows]})
