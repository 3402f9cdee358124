"""The indexer stores each Transfer/Approval of both tokens exactly once, equal to the node's own logs."""

from __future__ import annotations

import random

import pytest

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import db_rows, running_indexer, wait_synced
from vip.indexer import store


@pytest.mark.parametrize("mode", ["watched", "all"])
async def test_index_equals_ground_truth(chain: ChainDriver, database_url, engine, mode):
    rng = random.Random(7)
    watched = chain.accounts[2:5]
    everyone = chain.accounts[2:10] + ["0x" + f"{i:040x}" for i in range(1, 6)]
    chain.fund(chain.accounts[2:10])
    chain.random_activity(rng, 120, chain.accounts[2:10], everyone)

    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts, mode=mode,
                            initial_block_range=3)
    async with engine.begin() as conn:
        for address in watched:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)

    async with running_indexer(indexer_settings(network), database_url):
        await wait_synced(engine, chain, "local")
        # Live: more activity after the initial sync is picked up too.
        chain.random_activity(rng, 40, chain.accounts[2:10], everyone)
        await wait_synced(engine, chain, "local")

    expected = chain.token_logs(None if mode == "all" else set(watched))
    stored = await db_rows(engine, "local")
    assert stored == expected
    # Both tokens, both kinds, and the test is not vacuous.
    assert {r.token_address for r in stored} == set(chain.tokens.values())
    assert {r.kind for r in stored} == {"transfer", "approval"}
    if mode == "watched":
        assert len(stored) < len(chain.token_logs(None))


async def test_restart_adds_nothing_twice(chain: ChainDriver, database_url, engine):
    rng = random.Random(11)
    chain.fund(chain.accounts[2:6])
    chain.random_activity(rng, 30, chain.accounts[2:6], chain.accounts[2:6])
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts, mode="all")
    settings = indexer_settings(network)
    async with running_indexer(settings, database_url):
        await wait_synced(engine, chain, "local")
    first = await db_rows(engine, "local")
    # A second daemon over the same database and chain: same rows, no duplicates.
    chain.random_activity(rng, 10, chain.accounts[2:6], chain.accounts[2:6])
    async with running_indexer(settings, database_url):
        await wait_synced(engine, chain, "local")
    second = await db_rows(engine, "local")
    assert first < second
    assert second == chain.token_logs(None)
