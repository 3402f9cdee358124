"""Balances of watched addresses (`indexer.balances`) on a real Anvil node and PostgreSQL: after the indexer
has synced, every watched address has one row per configured token equal to `balanceOf` at the head (the
cursor block, with its hash); they follow new transfers, and reorgs (shorter or same-height)."""

from __future__ import annotations

import asyncio
import random
import time

from sqlalchemy import select

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import running_indexer, wait_synced
from tests.test_indexer_reorg import reorg
from vip.chain.rpc import RpcClient
from vip.indexer import store
from vip.indexer.balances import BalanceRefresher, balance_of_call, decode_uint, stale_addresses_query
from vip.store.tables import address_balances

QUIET = "0x" + "0d" * 20  # watched, never touched: its balances are 0


def balance_of(chain: ChainDriver, token: str, holder: str, block: str = "latest") -> int:
    method, params = balance_of_call(chain.tokens[token], holder, 0)
    return decode_uint(chain.node.call(method, [params[0], block]))


async def stored_balances(engine, network: str = "local") -> dict[tuple[str, str], tuple[int, int, str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(address_balances).where(address_balances.c.network == network))
        return {(r.address, r.token): (int(r.balance), r.block_number, r.block_hash) for r in rows}


def block_hash(chain: ChainDriver, number: int) -> str | None:
    block = chain.node.call("eth_getBlockByNumber", [hex(number), False])
    return block["hash"].lower() if block else None


async def wait_balances(engine, chain: ChainDriver, addresses: list[str], timeout_s: float = 20.0) -> None:
    """Until every address has, for both tokens, a row equal to `balanceOf` at the head, read at a block of
    the canonical chain (the cursor block when it was read; an address untouched since keeps its row)."""
    deadline = time.monotonic() + timeout_s
    while True:
        head = chain.head()[0]
        stored = await stored_balances(engine)
        wrong = {}
        for address in addresses:
            for token in chain.tokens:
                row = stored.get((address, token))
                now = balance_of(chain, token, address)
                if (row is None or row[0] != now or not row[1] <= head
                        or block_hash(chain, row[1]) != row[2]
                        or balance_of(chain, token, address, hex(row[1])) != now):
                    wrong[(address, token)] = (row, now, head)
        if not wrong:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"balances not current after {timeout_s}s: {wrong}")
        await asyncio.sleep(0.05)


def test_balance_of_call_and_decoding():
    method, params = balance_of_call("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
                                     "0x00000000000000000000000000000000000000Ab", 255)
    assert method == "eth_call"
    assert params == [{"to": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
                       "data": "0x70a08231" + "0" * 62 + "ab"}, "0xff"]
    assert decode_uint("0x" + "0" * 63 + "1") == 1
    assert decode_uint("0x" + "f" * 64) == 2**256 - 1
    assert decode_uint("0x") == 0  # no code at that block


async def test_balances_equal_balance_of_and_follow_transfers(chain: ChainDriver, database_url, engine):
    rng = random.Random(4)
    actors = chain.accounts[2:7]
    watched = [*actors[:3], QUIET]
    chain.fund(actors)
    chain.random_activity(rng, 60, actors, actors)
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    async with engine.begin() as conn:
        for address in watched:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)
    async with running_indexer(indexer_settings(network), database_url):
        await wait_synced(engine, chain, "local")
        await wait_balances(engine, chain, watched)
        # New transfers (and blocks without any for our addresses) are followed.
        for _ in range(3):
            chain.random_activity(rng, 12, actors, actors)
            chain.mine(2)
            await wait_synced(engine, chain, "local")
            await wait_balances(engine, chain, watched)
        # A newly watched address gets its balances too.
        async with engine.begin() as conn:
            await store.add_watched_address(conn, "local", actors[4], "wallet", start_block=0)
        await wait_synced(engine, chain, "local")
        await wait_balances(engine, chain, [*watched, actors[4]])
    stored = await stored_balances(engine)
    assert {address for address, _ in stored} == {*watched, actors[4]}  # unwatched addresses: no rows
    assert stored[(QUIET, "USDC")][0] == 0
    assert any(balance > 0 for balance, _, _ in stored.values())


async def test_balances_follow_reorgs(chain: ChainDriver, database_url, engine):
    rng = random.Random(8)
    actors = chain.accounts[2:7]
    watched = actors[:3]
    chain.fund(actors)
    chain.random_activity(rng, 30, actors, actors)
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts, finality_depth=5)
    async with engine.begin() as conn:
        for address in watched:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)
    async with running_indexer(indexer_settings(network), database_url):
        await wait_synced(engine, chain, "local")
        await wait_balances(engine, chain, watched)
        for depth in (1, 3):
            # The last blocks are replaced by as many others with other transfers of watched addresses:
            # same height, other hashes and balances.
            chain.random_activity(rng, 8, watched, actors, per_block=2)
            await wait_synced(engine, chain, "local")
            await wait_balances(engine, chain, watched)
            reorg(chain, depth, rng, watched)
            await wait_synced(engine, chain, "local")
            await wait_balances(engine, chain, watched)


async def test_stale_rows_are_found_and_a_moved_node_is_waited_for(chain: ChainDriver, database_url, engine):
    """The refresher on its own: nothing before a cursor exists; then missing rows, rows older than a
    transfer, rows above the cursor (a rollback) are refreshed; a node whose block at the cursor has
    another hash is not read from."""
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    settings = indexer_settings(network)
    alice, bob = chain.accounts[2], chain.accounts[3]
    chain.fund([alice, bob], 1000)
    async with engine.begin() as conn:
        await store.add_watched_address(conn, "local", alice, "wallet", start_block=0)
    async with RpcClient("local", chain.node.rpc_url, settings.rpc) as rpc:
        refresher = BalanceRefresher(network, engine, rpc)
        assert await refresher.step() is False  # no cursor yet
        async with running_indexer(settings, database_url):
            await wait_synced(engine, chain, "local")
            await wait_balances(engine, chain, [alice])
        head, head_hash = chain.head()
        assert await refresher.step() is False  # all current
        async with engine.begin() as conn:
            # A row above the cursor, as after a rollback the refresher has not seen yet.
            await conn.execute(address_balances.update().where(address_balances.c.token == "USDC")
                               .values(block_number=head + 5, balance=1))
            stale = (await conn.execute(stale_addresses_query("local", ["USDC", "USDT"], head, 10))).scalars()
            assert list(stale) == [alice]
            # The node's block at our cursor is not the one we indexed: wait rather than read.
            await conn.exec_driver_sql(f"UPDATE chain_cursors SET block_hash = '0x{'1' * 64}'")
        assert await refresher.step() is False
        assert (await stored_balances(engine))[(alice, "USDC")][1] == head + 5
        async with engine.begin() as conn:
            await conn.exec_driver_sql(f"UPDATE chain_cursors SET block_hash = '{head_hash}'")
        assert await refresher.step() is True
        assert (await stored_balances(engine))[(alice, "USDC")] == (1000, head, head_hash)
