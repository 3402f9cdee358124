"""Several networks in one daemon are independent: a dead node stalls only its own network."""

from __future__ import annotations

import asyncio
import random
import time

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import db_rows, running_indexer, wait_synced
from vip import metrics
from vip.devstack.anvil import start_anvil
from vip.indexer import store


async def test_two_chains_one_dies(chain: ChainDriver, database_url, engine):
    other = ChainDriver(start_anvil(chain_id=31338))
    try:
        rng = random.Random(9)
        for driver in (chain, other):
            driver.fund(driver.accounts[2:6])
            driver.random_activity(rng, 30, driver.accounts[2:6], driver.accounts[2:6])
        alpha = local_network(chain.node.rpc_url, 31337, chain.contracts, name="alpha", mode="all")
        beta = local_network(other.node.rpc_url, 31338, other.contracts, name="beta", mode="all")
        async with engine.begin() as conn:
            await store.add_watched_address(conn, "beta", other.accounts[2], "wallet", start_block=0)

        async with running_indexer(indexer_settings(alpha, beta, timeout_s=0.5), database_url):
            await wait_synced(engine, chain, "alpha")
            await wait_synced(engine, other, "beta")
            assert await db_rows(engine, "beta") == other.token_logs(None)

            other.node.kill()  # beta's RPC is gone for good
            errors_before = metrics.FOLLOWER_ERRORS.labels("beta", "RpcTimeoutError")._value.get() + \
                metrics.FOLLOWER_ERRORS.labels("beta", "TransientRpcError")._value.get()
            for _ in range(5):
                chain.random_activity(rng, 6, chain.accounts[2:6], chain.accounts[2:6])
                # alpha keeps up within a couple of polls, every time.
                await wait_synced(engine, chain, "alpha", timeout_s=5)
                assert metrics.LAG_BLOCKS.labels("alpha")._value.get() <= 2
                await asyncio.sleep(0.3)
            errors_after = metrics.FOLLOWER_ERRORS.labels("beta", "RpcTimeoutError")._value.get() + \
                metrics.FOLLOWER_ERRORS.labels("beta", "TransientRpcError")._value.get()
            assert errors_after > errors_before  # beta is failing (and retrying), not silently idle

        assert await db_rows(engine, "alpha") == chain.token_logs(None)
    finally:
        other.node.stop()


async def test_wrong_chain_id_is_refused(chain: ChainDriver, database_url, engine):
    network = local_network(chain.node.rpc_url, 1, chain.contracts, name="misconfigured")
    refusals = metrics.FOLLOWER_ERRORS.labels("misconfigured", "chain_id")
    before = refusals._value.get()
    async with running_indexer(indexer_settings(network), database_url) as task:
        deadline = time.monotonic() + 60  # led, then refused: however long a loaded machine takes
        while refusals._value.get() == before:
            assert time.monotonic() < deadline, "the wrong chain id was never refused"
            assert not task.done()
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert not task.done()  # the daemon lives on; only that network is refused
    assert refusals._value.get() == before + 1
    assert await db_rows(engine, "misconfigured") == set()
