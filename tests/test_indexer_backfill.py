"""A watched address added later is backfilled from its start (block or time) while live indexing goes on."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import db_rows, running_indexer, wait_synced
from vip.indexer import store


async def test_late_addresses_are_backfilled_while_live_continues(chain: ChainDriver, database_url, engine):
    rng = random.Random(21)
    first, late, timed = chain.accounts[2], chain.accounts[3], chain.accounts[4]
    actors = chain.accounts[2:9]
    chain.fund(actors)
    chain.random_activity(rng, 120, actors, actors, per_block=1)
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts,
                            initial_block_range=5, max_block_range=10)
    async with engine.begin() as conn:
        await store.add_watched_address(conn, "local", first, "wallet", start_block=0)

    async with running_indexer(indexer_settings(network), database_url):
        await wait_synced(engine, chain, "local")
        # The history of `timed` counts from the first block of its start time's hour (decision 232): two
        # hours pass after this block, so that hour begins after it.
        cut_block, _ = chain.head()
        cut_time = chain.node.call("eth_getBlockByNumber", [hex(cut_block), False])["timestamp"]
        chain.node.call("evm_increaseTime", [7200])
        chain.random_activity(rng, 40, actors, actors, per_block=1)
        await wait_synced(engine, chain, "local")

        async with engine.begin() as conn:
            await store.add_watched_address(conn, "local", late, "wallet", start_block=0)
            await store.add_watched_address(conn, "local", timed, "wallet",
                                            start_time=datetime.fromtimestamp(int(cut_time, 16) + 7200, UTC))
        # Live blocks keep coming while the backfill runs.
        for _ in range(4):
            chain.random_activity(rng, 5, actors, actors, per_block=1)
            await asyncio.sleep(0.05)
        await wait_synced(engine, chain, "local")

    everything = chain.token_logs(None)
    expected = {r for r in everything if first in (r.party_a, r.party_b) or late in (r.party_a, r.party_b)
                or (timed in (r.party_a, r.party_b) and r.block_number > cut_block)}
    stored = await db_rows(engine, "local")
    assert stored == expected
    # The late wallet's early history (before it was added) really came from the backfill.
    assert any(late in (r.party_a, r.party_b) and first not in (r.party_a, r.party_b) and r.block_number < 50
               for r in stored)
    watch = {w.address: w for w in await _watch(engine)}
    assert watch[timed].start_block == cut_block + 1
    assert watch[late].live_from_block > cut_block


async def _watch(engine):
    async with engine.connect() as conn:
        return await store.load_watch_set(conn, "local")


async def test_watching_again_with_an_earlier_start_backfills_the_difference(engine):
    address = "0x" + "ab" * 20
    late, early = datetime(2026, 6, 1, tzinfo=UTC), datetime(2025, 12, 1, tzinfo=UTC)
    async with engine.begin() as conn:
        assert await store.add_watched_address(conn, "local", address, "counterparty", start_time=late)
        await store.mark_live_from(conn, "local", [address], 500)
        await store.set_start_block(conn, "local", address, 400)
        await store.advance_backfill(conn, "local", [address], 500)
        assert await store.pending_backfill_count(conn, "local") == 0
        # The counterparty becomes a connected wallet with twelve months of history.
        assert not await store.add_watched_address(conn, "local", address, "wallet", start_time=early)
        assert await store.pending_backfill_count(conn, "local") == 1
        [pending] = await store.load_watch_set(conn, "local")
        # Watching it again with a later start changes nothing.
        assert not await store.add_watched_address(conn, "local", address, "counterparty", start_time=late)
    assert pending.start_time == early and pending.start_block is None
    assert pending.backfill_next_block is None and pending.live_from_block == 500
    async with engine.connect() as conn:
        [row] = await store.load_watch_set(conn, "local")
        reason = (await conn.exec_driver_sql("select reason from watched_addresses")).scalar()
    assert row.start_time == early and reason == "counterparty"
