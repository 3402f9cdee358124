"""RPC faults between the daemon and the node (a seeded local proxy): errors, 429s, time-outs, dropped
connections, "too many results" with a suggested range, a lagging node. The result is still exact."""

from __future__ import annotations

import random

import pytest

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import db_rows, running_indexer, wait_synced
from tests.support.rpc_fault_proxy import FaultPlan, RpcFaultProxy
from tests.test_indexer_reorg import fill_tip, reorg
from vip import metrics
from vip.indexer import store


def plan(seed: int) -> FaultPlan:
    return FaultPlan(seed=seed, http_error=0.05, rate_limited=0.05, timeout=0.02, dropped=0.04,
                     rpc_error=0.04, too_many_results=0.5, too_many_results_max_range=6, lag_start=0.05,
                     lag_requests=6, lag_blocks=3, timeout_hold_s=2.0)


# Every request may fail and a failed backfill waits before it tries again (longer after each failure): on
# a loaded machine the same work takes minutes, so the waits are for the condition, with room to spare.
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_exact_through_rpc_faults(chain: ChainDriver, database_url, engine, seed):
    rng = random.Random(seed)
    watched = chain.accounts[2:6]
    chain.fund(chain.accounts[2:9])
    chain.random_activity(rng, 150, chain.accounts[2:9], chain.accounts[2:9], per_block=1)
    async with engine.begin() as conn:
        for address in watched[:3]:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)

    with RpcFaultProxy(chain.node.rpc_url, plan(seed)) as proxy:
        network = local_network(proxy.url, chain.node.chain_id, chain.contracts, finality_depth=4,
                                initial_block_range=40, max_block_range=200)
        async with running_indexer(indexer_settings(network, timeout_s=0.5), database_url):
            await wait_synced(engine, chain, "local", timeout_s=450)
            # Live blocks, a late wallet (backfilled) and a reorg, all under the same faults.
            async with engine.begin() as conn:
                await store.add_watched_address(conn, "local", watched[3], "wallet", start_block=0)
            chain.random_activity(rng, 30, chain.accounts[2:9], chain.accounts[2:9])
            fill_tip(chain, 3, rng, watched)
            await wait_synced(engine, chain, "local", timeout_s=450)
            reorg(chain, 3, rng, watched)
            await wait_synced(engine, chain, "local", timeout_s=450)

    injected = proxy.counts
    assert await db_rows(engine, "local") == chain.token_logs(set(watched)), (
        f"replay with seed {seed}; faults injected: {dict(injected)}")
    # The faults really happened, and the client reacted to them as designed.
    assert injected["too_many_results"] > 0, f"seed {seed}: {dict(injected)}"
    assert len(injected) >= 4, f"seed {seed} injected too few kinds of fault: {dict(injected)}"
    assert metrics.RPC_ERRORS.labels("local", "eth_getLogs", "range_too_large")._value.get() > 0
