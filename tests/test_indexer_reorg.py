"""Reorgs (anvil_reorg) from depth 1 to beyond the finality window: the database equals the new chain."""

from __future__ import annotations

import random

import pytest
from eth_abi import encode
from sqlalchemy import select

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import db_rows, running_indexer, wait_synced
from vip import metrics
from vip.indexer import store
from vip.store.tables import chain_reorgs

FINALITY = 5


def transfer_request(chain: ChainDriver, token: str, sender: str, to: str, amount: int) -> dict:
    data = "0xa9059cbb" + encode(["address", "uint256"], [to, amount]).hex()
    return {"from": sender, "to": chain.tokens[token], "data": data, "gas": hex(200_000)}


def fill_tip(chain: ChainDriver, depth: int, rng: random.Random, watched: list[str]) -> None:
    """Make the last `depth` blocks hold watched transfers (so a reorg of them changes what we stored)."""
    for _ in range(depth):
        chain.transfer("USDC", watched[0], watched[1], rng.randint(1, 10**6))


def reorg(chain: ChainDriver, depth: int, rng: random.Random, watched: list[str]) -> None:
    """Replace the last `depth` blocks: their transactions are dropped, new transfers (touching watched
    addresses) land in some of the new blocks."""
    replacements = []
    for offset in range(depth):
        if rng.random() < 0.6:
            sender = rng.choice(watched)
            to = rng.choice([a for a in chain.accounts[2:9] if a != sender])
            tx = transfer_request(chain, rng.choice(["USDC", "USDT"]), sender, to, rng.randint(1, 10**6))
            replacements.append([tx, offset])
    chain.node.call("anvil_reorg", [depth, replacements])


async def reorg_count(engine) -> list[tuple[int, int]]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(chain_reorgs.c.depth, chain_reorgs.c.beyond_finality)
                                  .order_by(chain_reorgs.c.id))
        return [tuple(r) for r in rows]


@pytest.mark.parametrize("depth", [1, 2, FINALITY, FINALITY + 1, 3 * FINALITY])
async def test_reorg_leaves_the_canonical_chain(chain: ChainDriver, database_url, engine, depth):
    rng = random.Random(depth)
    watched = chain.accounts[2:5]
    chain.fund(chain.accounts[2:9])
    chain.random_activity(rng, 80, chain.accounts[2:9], chain.accounts[2:9], per_block=2)
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts,
                            finality_depth=FINALITY)
    async with engine.begin() as conn:
        for address in watched:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)
    reorgs_before = metrics.REORGS.labels("local")._value.get()

    async with running_indexer(indexer_settings(network), database_url):
        fill_tip(chain, depth, rng, watched)
        await wait_synced(engine, chain, "local")
        before = await db_rows(engine, "local")
        reorg(chain, depth, rng, watched)
        await wait_synced(engine, chain, "local")
        after = await db_rows(engine, "local")
        assert after == chain.token_logs(set(watched))
        assert after != before  # the reorg dropped and replaced logs we had stored

        # A second reorg on top, then more blocks: still exact.
        fill_tip(chain, 2, rng, watched)
        await wait_synced(engine, chain, "local")
        reorg(chain, max(1, depth // 2), rng, watched)
        chain.random_activity(rng, 10, chain.accounts[2:9], chain.accounts[2:9])
        await wait_synced(engine, chain, "local")
        assert await db_rows(engine, "local") == chain.token_logs(set(watched))

    history = await reorg_count(engine)
    assert len(history) >= 2
    assert history[0][0] >= 1
    assert metrics.REORGS.labels("local")._value.get() - reorgs_before == len(history)
    # Only reorgs deeper than the finality depth are flagged (and alerted on).
    assert any(flag for _, flag in history) == (depth > FINALITY)


async def test_reorg_while_the_indexer_is_down(chain: ChainDriver, database_url, engine):
    rng = random.Random(3)
    chain.fund(chain.accounts[2:9])
    chain.random_activity(rng, 40, chain.accounts[2:9], chain.accounts[2:9])
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts, mode="all",
                            finality_depth=FINALITY)
    settings = indexer_settings(network)
    fill_tip(chain, 4, rng, chain.accounts[2:5])
    async with running_indexer(settings, database_url):
        await wait_synced(engine, chain, "local")
    reorg(chain, 4, rng, chain.accounts[2:5])
    chain.random_activity(rng, 10, chain.accounts[2:9], chain.accounts[2:9])
    async with running_indexer(settings, database_url):
        await wait_synced(engine, chain, "local")
    assert await db_rows(engine, "local") == chain.token_logs(None)
    assert len(await reorg_count(engine)) == 1


async def test_reorg_to_a_shorter_chain(chain: ChainDriver, database_url, engine):
    """A chain that loses blocks (a revert to a snapshot) is followed down, then up again."""
    rng = random.Random(5)
    chain.fund(chain.accounts[2:9])
    snapshot = chain.node.call("evm_snapshot")
    chain.random_activity(rng, 30, chain.accounts[2:9], chain.accounts[2:9])
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts, mode="all",
                            finality_depth=FINALITY)
    async with running_indexer(indexer_settings(network), database_url):
        await wait_synced(engine, chain, "local")
        assert chain.node.call("evm_revert", [snapshot])
        await wait_synced(engine, chain, "local", timeout_s=30)
        assert await db_rows(engine, "local") == chain.token_logs(None)
        chain.random_activity(rng, 12, chain.accounts[2:9], chain.accounts[2:9])
        await wait_synced(engine, chain, "local")
        assert await db_rows(engine, "local") == chain.token_logs(None)
