"""The indexer behind the provider stand-in (vip.devstack.provider): each profile's refusals (block-range
caps, result caps with suggested ranges), 429 with Retry-After, 5xx, time-outs and load-balanced nodes a
few blocks apart, all while it follows and backfills; the stored rows equal the canonical chain. Also the
stand-in's own answers, and finality read from the chain's `finalized` tag."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace

import aiohttp
import pytest
from sqlalchemy import func, select

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import backfills_pending, cursor_of, db_rows, running_indexer
from vip import metrics
from vip.chain.rpc import RangeTooLargeError, RpcClient
from vip.config import RpcConfig, load_settings
from vip.devstack.provider import PROFILES, FaultRates, ProviderStandIn
from vip.indexer import store
from vip.store.tables import token_transfers

# The profiles' own texts and rules, with their numbers scaled to a chain Anvil mines in seconds.
SCALED = {
    "alchemy": replace(PROFILES["alchemy"], result_cap=12, uncapped_range=4, batch_cap=150),
    "infura": replace(PROFILES["infura"], result_cap=12),
    "quicknode": replace(PROFILES["quicknode"], range_cap=25),
    "blockpi": replace(PROFILES["blockpi"], range_cap=10),
}


async def wait_indexed(engine, chain: ChainDriver, network: str, margin: int, timeout_s: float = 450) -> int:
    """Until the cursor is `margin` blocks behind the node's head (on the canonical chain) and no backfill
    is pending; returns the cursor block."""
    deadline = time.monotonic() + timeout_s
    while True:
        head, _ = chain.head()
        cursor = await cursor_of(engine, network)
        if cursor is not None and cursor[0] >= head - margin \
                and await backfills_pending(engine, network) == 0:
            block = chain.node.call("eth_getBlockByNumber", [hex(cursor[0]), False])
            if block["hash"].lower() == cursor[1]:
                return cursor[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"not indexed after {timeout_s}s: cursor {cursor}, head {head}")
        await asyncio.sleep(0.05)


# The backfill gets what the follower leaves of a scaled-down budget, under faults: on a loaded machine it
# takes minutes, so the waits are for the condition, with room to spare.
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("profile", ["alchemy", "infura", "quicknode", "blockpi"])
async def test_exact_behind_each_provider_with_faults_and_lagging_nodes(chain: ChainDriver, database_url,
                                                                       engine, profile):
    rng = random.Random(profile)
    watched = chain.accounts[2:6]
    chain.fund(chain.accounts[2:9])
    chain.random_activity(rng, 160, chain.accounts[2:9], chain.accounts[2:9], per_block=3)
    async with engine.begin() as conn:
        for address in watched[:3]:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)

    margin = 3  # fewer ranges asked again (nothing is lost without it: test_lagging_nodes.py)
    faults = FaultRates(seed=7, http_5xx=0.05, timeout=0.02, timeout_hold_s=1.0)
    plan = 25 * SCALED[profile].default_weight  # about 25 items a second, in the provider's unit
    with ProviderStandIn(chain.node.rpc_url, SCALED[profile], faults=faults, node_lags=(0, 0, 2),
                         missing_log_blocks=1, units_per_s=plan) as provider:
        plain = local_network(provider.url, chain.node.chain_id, chain.contracts, finality_depth=4,
                              initial_block_range=200, max_block_range=5000, head_margin=margin,
                              history_initial_block_range=100_000, history_max_block_range=10_000_000)
        settings = indexer_settings(plain, timeout_s=0.5)
        # The daemon's budget in the provider's unit, set above the plan so that 429s happen too.
        network = plain.model_copy(update={"provider": "requests" if profile == "blockpi" else profile,
                                           "rpc_budget_per_s": plan * 1.5})
        # Retry-After is 1 s; the test obeys at most 0.2 s of it so the run stays short.
        rpc = settings.rpc.model_copy(update={"retry_after_cap_s": 0.2})
        settings = settings.model_copy(update={"rpc": rpc, "networks": {"local": network},
                                               "providers": load_settings().providers})
        async with running_indexer(settings, database_url):
            await wait_indexed(engine, chain, "local", margin)
            # Live blocks while a late wallet's whole history is backfilled.
            async with engine.begin() as conn:
                await store.add_watched_address(conn, "local", watched[3], "wallet", start_block=0)
            chain.random_activity(rng, 40, chain.accounts[2:9], chain.accounts[2:9], per_block=2)
            chain.mine(margin)
            indexed = await wait_indexed(engine, chain, "local", margin)

    assert await db_rows(engine, "local") == chain.token_logs(set(watched), to_block=indexed), (
        f"{profile}: refusals {dict(provider.refusals)}")
    refusals = provider.refusals
    # The provider's habits really met the indexer, and it read them as designed.
    assert refusals["range_cap" if SCALED[profile].range_cap else "result_cap"] > 0, dict(refusals)
    assert refusals["http_5xx"] > 0 and refusals["timeout"] > 0, dict(refusals)
    assert refusals["rate_limited"] > 0, dict(refusals)  # HTTP 429 with Retry-After
    assert provider.lagged_requests > 0
    assert metrics.RPC_ERRORS.labels("local", "eth_getLogs", "range_too_large")._value.get() > 0


async def test_a_lagging_node_never_loses_nor_duplicates_a_row(chain: ChainDriver, database_url, engine):
    """Every other request to a node 2 blocks behind that also lacks the logs of its newest block, while
    blocks keep coming one by one: the follower's head margin keeps every row, exactly once. (With
    `head_margin=0` this test loses rows: a range's headers from the fresh node and its logs from the
    lagging one agree on every hash, yet the logs of the newest blocks are missing.)"""
    rng = random.Random(11)
    watched = chain.accounts[2:5]
    chain.fund(chain.accounts[2:8])
    async with engine.begin() as conn:
        for address in watched:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)
    with ProviderStandIn(chain.node.rpc_url, "node", node_lags=(0, 2), missing_log_blocks=1) as provider:
        network = local_network(provider.url, chain.node.chain_id, chain.contracts, finality_depth=4,
                                head_margin=3)
        async with running_indexer(indexer_settings(network), database_url):
            for _ in range(60):
                chain.random_activity(rng, 2, chain.accounts[2:8], chain.accounts[2:8], per_block=2)
                await asyncio.sleep(0.1)
            chain.mine(3)
            indexed = await wait_indexed(engine, chain, "local", 3)
    rows = await db_rows(engine, "local")
    assert rows == chain.token_logs(set(watched), to_block=indexed)
    async with engine.connect() as conn:  # exactly once: no two rows for one log
        count = await conn.scalar(select(func.count()).select_from(token_transfers)
                                  .where(token_transfers.c.network == "local"))
    assert count == len([r for r in rows if r.kind == "transfer"])
    assert provider.lagged_requests > 0


async def test_final_block_comes_from_the_finalized_tag(chain: ChainDriver, database_url, engine):
    chain.fund(chain.accounts[2:4])
    chain.mine(30)
    with ProviderStandIn(chain.node.rpc_url, "node", finalized_depth=9) as provider:
        network = local_network(provider.url, chain.node.chain_id, chain.contracts, finality="finalized",
                                finality_depth=2)
        async with running_indexer(indexer_settings(network), database_url):
            indexed = await wait_indexed(engine, chain, "local", 0)
            async with engine.connect() as conn:
                final = await store.final_block(conn, network)
    # The tag's block (head - 9), not the depth fallback's (head - 2).
    assert indexed == chain.head()[0]
    assert final == indexed - 9
    assert provider.calls["eth_getBlockByNumber"] > 0


async def test_final_block_by_depth_when_so_configured(chain: ChainDriver, database_url, engine):
    chain.mine(20)
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts, finality_depth=4)
    async with running_indexer(indexer_settings(network), database_url):
        indexed = await wait_indexed(engine, chain, "local", 0)
        async with engine.connect() as conn:
            assert await store.final_block(conn, network) == indexed - 4


# --- the stand-in's own answers ---------------------------------------------------------------------------

async def test_stand_in_refusals_are_what_our_parser_reads(session_chain: ChainDriver):
    chain = session_chain
    chain.fund(chain.accounts[2:6])
    chain.random_activity(random.Random(3), 40, chain.accounts[2:6], chain.accounts[2:6], per_block=2)
    query = {"fromBlock": "0x0", "toBlock": "latest", "address": list(chain.tokens.values())}
    config = RpcConfig(max_attempts=1)
    for name, expected_cap in (("infura", None), ("alchemy", None), ("quicknode", 25), ("blockpi", 10)):
        with ProviderStandIn(chain.node.rpc_url, SCALED[name]) as provider:
            async with RpcClient("local", provider.url, config) as rpc:
                with pytest.raises(RangeTooLargeError) as refused:
                    await rpc.get_logs(query)
        assert refused.value.cap == expected_cap, (name, refused.value.message)
        if expected_cap is None:  # a result cap: a suggested range holding at most the cap
            assert refused.value.suggested_size is not None and refused.value.suggested_size >= 1


async def test_stand_in_rate_limit_answers_429_with_retry_after(session_chain: ChainDriver):
    body = {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}
    with ProviderStandIn(session_chain.node.rpc_url, "infura", units_per_s=2) as provider:
        async with aiohttp.ClientSession() as http:
            statuses = []
            for _ in range(6):
                async with http.post(provider.url, json=body) as resp:
                    statuses.append((resp.status, resp.headers.get("Retry-After"), await resp.json()))
    throttled = [s for s in statuses if s[0] == 429]
    assert throttled, statuses
    assert all(retry == "1" and answer["error"]["code"] == 429 for _, retry, answer in throttled)


async def test_client_waits_as_long_as_retry_after_says(session_chain: ChainDriver):
    # 10 compute units a second: one eth_blockNumber (Alchemy bills it 10).
    with ProviderStandIn(session_chain.node.rpc_url, "alchemy", units_per_s=10) as provider:
        config = RpcConfig(max_attempts=5, backoff_base_s=0.0, backoff_cap_s=0.0, retry_after_cap_s=30)
        async with RpcClient("local", provider.url, config) as rpc:
            await rpc.block_number()  # takes the 10 units of this second
            await rpc.block_number()  # 429, Retry-After: 1, then answered
    assert provider.refusals["rate_limited"] >= 1
    # With no backoff of its own, only the Retry-After wait let the bucket refill: one refusal, not five.
    assert provider.refusals["rate_limited"] < 5


async def test_stand_in_batch_cap_and_filter_value_cap(session_chain: ChainDriver):
    with ProviderStandIn(session_chain.node.rpc_url, replace(PROFILES["alchemy"], batch_cap=3)) as provider:
        async with RpcClient("local", provider.url, RpcConfig(max_attempts=1, max_batch_size=3)) as rpc:
            assert len(await rpc.get_blocks(list(range(7)))) == 7  # chunked under the cap
        async with RpcClient("local", provider.url, RpcConfig(max_attempts=1, max_batch_size=4)) as rpc:
            with pytest.raises(Exception, match="exceeds the limit of 3"):
                await rpc.get_blocks(list(range(4)))
    topics = ["0x" + f"{n:064x}" for n in range(5001)]
    with ProviderStandIn(session_chain.node.rpc_url, "infura") as provider:
        async with RpcClient("local", provider.url, RpcConfig(max_attempts=1)) as rpc:
            with pytest.raises(Exception, match="at most 5000"):
                await rpc.get_logs({"fromBlock": "0x0", "toBlock": "0x1", "topics": [None, topics]})


async def test_stand_in_lagging_node_answers_with_its_own_head(session_chain: ChainDriver):
    session_chain.mine(5)
    head, _ = session_chain.head()
    with ProviderStandIn(session_chain.node.rpc_url, "node", node_lags=(3,)) as provider:
        async with RpcClient("local", provider.url, RpcConfig(max_attempts=1)) as rpc:
            assert await rpc.block_number() == head - 3
            assert (await rpc.get_blocks([head]))[0] is None
            assert (await rpc.get_blocks([head - 3]))[0] is not None
