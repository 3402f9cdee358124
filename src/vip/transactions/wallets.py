"""A user's wallets whose connection is active, with their token balances and first-seen block.

Wallets are connections, but what this reads is the chain as the indexer stored it (balances, the first
stored transfer), scaled with the same token decimals as the transaction list: it lives beside the
transaction query. The connection only decides which wallets are listed (the active ones).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, and_, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Select

from vip.accounts.users import load_user
from vip.config import Settings
from vip.errors import ValidationFailed
from vip.formats import checksummed, iso, token_units
from vip.store.tables import address_balances, connections, token_transfers, wallets
from vip.transactions.query import token_decimals

SPEC_NETWORKS = ("ethereum", "polygon", "base", "arbitrum")
BALANCE_TOKENS = ("USDC", "USDT")


def known_networks(settings: Settings) -> list[str]:
    """The spec's networks and the configured ones."""
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


async def user_wallets(engine: AsyncEngine, settings: Settings, organisation_id: str, user_id: str,
                       network: str | None) -> list[Row[Any]]:
    """Rows of `wallets_query`; 400 for a network not known, 404 for a user not of the organisation."""
    if network is not None and network not in known_networks(settings):
        names = ", ".join(known_networks(settings))
        raise ValidationFailed(f"unknown network {network!r}: one of {names}", {"network": f"one of {names}"})
    async with engine.connect() as conn:
        await load_user(conn, organisation_id, user_id)
        return list((await conn.execute(wallets_query(user_id, network))).all())


def wallet_json(row, settings: Settings) -> dict[str, Any]:
    """A row of `wallets_query` as the spec's Wallet."""
    def balance(token: str):
        raw = getattr(row, f"{token.lower()}_raw")
        return token_units(int(raw or 0), token_decimals(settings, row.network, token))

    return {
        "id": row.id,
        "connection_id": row.connection_id,
        "address": checksummed(row.address),
        "network": row.network,
        "usdc_balance": balance("USDC"),
        "usdt_balance": balance("USDT"),
        "first_seen_block": row.first_seen_block,
        "created_at": iso(row.created_at),
    }
