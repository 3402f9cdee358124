"""A page of a user's transaction list: the query of vip.transactions.query run once, its tenancy checks
and the next page's cursor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from vip.accounts.users import load_user
from vip.config import Settings
from vip.errors import NotFound
from vip.store.engine import autocommit_connection
from vip.transactions.query import (
    Filters,
    Position,
    active_wallets,
    decode_cursor,
    encode_cursor,
    transactions_query,
)


@dataclass(frozen=True)
class TransactionsPage:
    rows: list[Any]  # rows of `transactions_query`, at most `limit`
    cursor: str | None  # the next page's, None on the last page
    has_more: bool


async def transactions_page(engine: AsyncEngine, settings: Settings, organisation_id: str, filters: Filters,
                            cursor: str | None, limit: int) -> TransactionsPage:
    """The page after `cursor` (400 for a cursor of other filters); 404 for a user, or a wallet, not of
    the organisation."""
    after = decode_cursor(settings, filters, cursor) if cursor is not None else None
    statement, params = transactions_query(organisation_id, filters, after, limit + 1)
    # One statement is its own snapshot: no transaction needed (and none costs two round trips).
    async with autocommit_connection(engine) as conn:
        rows = (await conn.execute(statement, params)).all()
        if not rows:
            # Rows prove the user and the wallet are the organisation's; without any, check them (404).
            await load_user(conn, organisation_id, filters.user_id)
            if filters.wallet_id is not None:
                wallet = active_wallets(organisation_id, filters.user_id, filters.wallet_id)
                if (await conn.execute(wallet)).first() is None:
                    raise NotFound(f"no active wallet {filters.wallet_id} of user {filters.user_id}",
                                   {"wallet_id": filters.wallet_id})
    has_more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = None
    if has_more:
        last = rows[-1]
        next_cursor = encode_cursor(settings, filters, Position(last.block_number, last.log_index,
                                                                 last.wallet_id))
    return TransactionsPage(rows, next_cursor, has_more)
