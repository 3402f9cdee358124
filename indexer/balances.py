"""Token balances of watched addresses as of the latest indexed block, kept current by the indexer.

One `BalanceRefresher` per network. Each poll it finds the watched wallets whose stored balances are
stale, reads `balanceOf(address)` of every configured token with one batch of `eth_call`s at the indexer's
cursor block (never "latest", so a balance always matches the indexed transfers), and upserts them into
`address_balances`. The batch is as large as `rpc.max_batch_size` and the network's budget allow one
request of the background to be; the refresher draws from the budget after the follower and the jobs
(decision 233).

Balances are read for watched addresses whose reason is `wallet` only: nothing reads a counterparty's or a
spender's. A new wallet's first balances wait until its history is backfilled (decision 234), and when that
history starts at block 0 (a chain indexed from its genesis, such as a local one) they are its stored
transfers' sum, set-based in SQL, without a call; otherwise they are read as above.

A balance row is stale when:
- a configured token has no row for the address yet (once its backfill is done);
- a stored transfer touching the address is newer than the row's block (new activity);
- the row's block is above the cursor: a reorg rolled the indexed data back below it;
- the row's block is inside the header window and its stored header has another hash: a reorg replaced
  that block, even if the follower has since re-indexed past it at the same height;
- the row was read more than `max_age_s` ago (`indexer.balance_max_age_s`, a week): a safety net for
  balance changes that emit no Transfer (mainnet USDT's `destroyBlackFunds` burns a blacklisted balance
  with its own event).

An address untouched since its reading keeps its row (and the older block number): its balance is still
the balance at the cursor.

Consistency with the indexed data: the batch that reads the balances also fetches the header of the
cursor block; the result is kept only when that header's hash is the cursor's hash (the node's chain at
that height is the one we indexed), and the write happens only if the cursor has not been rolled back
below that block in the meantime (checked under the cursor row lock, which the follower's rollback also
takes). Anything refused is retried on the next poll.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import ColumnElement, ScalarSelect, Select, and_, exists, func, literal, or_, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.chain.rpc import RpcClient
from vip.config import NetworkConfig
from vip.indexer import store
from vip.indexer.fetcher import InconsistentResponse
from vip.run_loop import run_steps
from vip.store.tables import address_balances, block_headers, token_transfers, watched_addresses

log = structlog.get_logger(__name__)

BALANCE_OF = "0x70a08231"  # balanceOf(address)
# New wallets whose balances are summed from their history in one statement.
DERIVED_PER_STEP = 5_000
# Balances are read again after this long even without a new transfer (the daemon passes
# `indexer.balance_max_age_s`; this is its default).
MAX_AGE_S = 7 * 86400.0


def balance_of_call(token_address: str, holder: str, block: int) -> tuple[str, list[Any]]:
    """The `eth_call` of `balanceOf(holder)` on a token at a block number."""
    data = BALANCE_OF + holder.lower().removeprefix("0x").rjust(64, "0")
    return "eth_call", [{"to": token_address.lower(), "data": data}, hex(block)]


def decode_uint(result: str | None) -> int:
    """A uint256 return value. No code at the address (`0x`: the token does not exist at that block, e.g. a
    cursor below its deployment) reads as a zero balance."""
    if result is None or result in ("0x", "0x0"):
        return 0
    if not isinstance(result, str) or not result.startswith("0x"):
        raise InconsistentResponse("eth_call", f"returned {result!r}")
    return int(result[:66], 16)


@dataclass(frozen=True)
class Reading:
    address: str
    token: str
    balance: int


def stale_addresses_query(network: str, tokens: list[str], cursor_block: int, limit: int,
                          max_age_s: float = MAX_AGE_S) -> Select[str]:
    """Watched addresses of `network` whose balances must be (re)read at `cursor_block`."""
    wa = watched_addresses
    b = address_balances.alias("b")
    mine = and_(b.c.network == network, b.c.address == wa.c.address, b.c.token.in_(tokens))
    rows_n = select(func.count()).where(mine).scalar_subquery()
    oldest = select(func.min(b.c.block_number)).where(mine).scalar_subquery()
    newest_row = select(func.max(b.c.block_number)).where(mine).scalar_subquery()

    def newest_transfer(column: ColumnElement[str]) -> ScalarSelect[int | None]:
        return (select(func.max(token_transfers.c.block_number))
                .where(token_transfers.c.network == network, column == wa.c.address,
                       token_transfers.c.block_number <= cursor_block)
                .scalar_subquery())

    newest = func.greatest(newest_transfer(token_transfers.c.from_address),
                           newest_transfer(token_transfers.c.to_address))
    h = block_headers.alias("h")
    replaced = exists().where(mine, h.c.network == network, h.c.block_number == b.c.block_number,
                              h.c.block_hash != b.c.block_hash)
    oldest_read = select(func.min(b.c.updated_at)).where(mine).scalar_subquery()
    expired = oldest_read < func.now() - func.make_interval(0, 0, 0, 0, 0, 0, max_age_s)
    # A new wallet waits for its backfill; one whose history starts at block 0 is summed instead (below).
    missing = and_(rows_n < literal(len(tokens)), wa.c.backfill_done_at.is_not(None),
                   wa.c.start_block > 0)
    stale = or_(missing, and_(rows_n > 0, or_(rows_n < literal(len(tokens)), newest_row > cursor_block,
                                                newest > oldest, replaced, expired)))
    return (select(wa.c.address).where(wa.c.network == network, wa.c.reason == "wallet", stale)
            .order_by(wa.c.address).limit(limit))


# New wallets whose whole history is stored (from block 0, backfill done): each configured token's balance
# at the cursor is what their transfers brought in minus what they sent, written under the cursor lock.
_SUMMED_FROM_HISTORY = text("""
WITH todo AS (
    SELECT w.address FROM watched_addresses w
    WHERE w.network = :network AND w.reason = 'wallet' AND w.start_block = 0
      AND w.backfill_done_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM address_balances b WHERE b.network = w.network AND b.address = w.address)
    ORDER BY w.address LIMIT :limit),
tokens AS (SELECT unnest(CAST(:tokens AS text[])) AS token),
flows AS (
    SELECT t.to_address AS address, t.token, t.amount FROM token_transfers t
    JOIN todo ON t.to_address = todo.address WHERE t.network = :network AND t.block_number <= :block
    UNION ALL
    SELECT t.from_address, t.token, -t.amount FROM token_transfers t
    JOIN todo ON t.from_address = todo.address WHERE t.network = :network AND t.block_number <= :block)
INSERT INTO address_balances (network, address, token, balance, block_number, block_hash)
SELECT :network, todo.address, tokens.token, coalesce(sum(flows.amount), 0), :block, :hash
FROM todo CROSS JOIN tokens LEFT JOIN flows ON flows.address = todo.address AND flows.token = tokens.token
GROUP BY todo.address, tokens.token
ON CONFLICT DO NOTHING
""")


class BalanceRefresher:
    """Keeps `address_balances` of one network equal to `balanceOf` at the indexer's cursor block."""

    def __init__(self, network: NetworkConfig, engine: AsyncEngine, rpc: RpcClient,
                 max_age_s: float = MAX_AGE_S) -> None:
        self.network = network
        self.name = network.name
        self.engine = engine
        self.rpc = rpc
        self.max_age_s = max_age_s
        self.tokens = sorted(network.tokens)  # symbols
        self.log = log.bind(network=self.name, role="balances")

    def addresses_per_batch(self) -> int:
        """Wallets read in one HTTP request: each costs one eth_call per token, with the cursor block's
        header beside them, within `rpc.max_batch_size` and one background request's share of the budget."""
        items, units = self.rpc.batch_limits()
        per_wallet = len(self.tokens) * self.rpc.weight("eth_call")
        header = self.rpc.weight("eth_getBlockByNumber")
        by_units = int((units - header) // per_wallet) if per_wallet else items
        return max(1, min((items - 1) // len(self.tokens), by_units))

    async def step(self) -> bool:
        """Sum new wallets' balances from their history, or read one batch of stale ones; False when there
        is nothing to do."""
        if not self.tokens:
            return False
        async with self.engine.connect() as conn:
            cursor = await store.load_cursor(conn, self.name)
        if cursor is None or cursor.block_number < 0 or cursor.block_hash is None:
            return False
        if await self._sum_from_history():
            return True
        async with self.engine.connect() as conn:
            stale = list((await conn.execute(stale_addresses_query(
                self.name, self.tokens, cursor.block_number, self.addresses_per_batch(),
                self.max_age_s))).scalars())
        if not stale:
            return False
        block = cursor.block_number
        calls = [balance_of_call(self.network.tokens[token].address, address, block)
                 for address in stale for token in self.tokens]
        calls.append(("eth_getBlockByNumber", [hex(block), False]))
        # One request: the header vouches for the node that read the balances.
        results = await self.rpc.batch_one(calls)
        header = results.pop()
        if header is None or str(header.get("hash", "")).lower() != cursor.block_hash:
            # The node's block at our cursor is not the one we indexed (a reorg the follower has not
            # repaired yet, or a lagging node): read again once the follower has caught up.
            self.log.info("cursor block differs on the node; balances wait", block=block)
            return False
        readings = [Reading(address, token, decode_uint(results[i * len(self.tokens) + j]))
                    for i, address in enumerate(stale) for j, token in enumerate(self.tokens)]
        return await self._store(readings, block, cursor.block_hash)

    async def _sum_from_history(self) -> int:
        """Balances of new wallets whose history from block 0 is stored; how many wallets got them."""
        async with self.engine.begin() as conn:
            # The cursor row lock: no range is committed or rolled back while the sums are taken.
            cursor = await store.load_cursor(conn, self.name, lock=True)
            if cursor is None or cursor.block_hash is None:
                return 0
            written = await conn.execute(_SUMMED_FROM_HISTORY, {
                "network": self.name, "limit": DERIVED_PER_STEP, "tokens": self.tokens,
                "block": cursor.block_number, "hash": cursor.block_hash})
        return max(written.rowcount, 0) // len(self.tokens)

    async def _store(self, readings: list[Reading], block: int, block_hash: str) -> bool:
        async with self.engine.begin() as conn:
            # Serialise with the follower's rollbacks (they lock the cursor row too).
            now = await store.load_cursor(conn, self.name, lock=True)
            if now is None or now.block_number < block:
                self.log.info("cursor rolled back while balances were read; retrying", block=block)
                return True
            stmt = pg_insert(address_balances).values([
                {"network": self.name, "address": r.address, "token": r.token, "balance": r.balance,
                 "block_number": block, "block_hash": block_hash} for r in readings])
            current = address_balances.c
            await conn.execute(stmt.on_conflict_do_update(
                index_elements=[current.network, current.address, current.token],
                set_={"balance": stmt.excluded.balance, "block_number": stmt.excluded.block_number,
                      "block_hash": stmt.excluded.block_hash, "updated_at": func.now()},
                # Never replace a newer reading with an older one, unless that one is above the cursor.
                where=or_(current.block_number <= stmt.excluded.block_number,
                          current.block_number > now.block_number)))
        return True

    async def run(self, stop: asyncio.Event) -> None:
        await run_steps(self.step, stop, network=self.name, task="balances",
                        idle_s=self.network.poll_interval_s, log=self.log)
