"""Watched mode at scale: all token logs filtered in memory give exactly what topic filters give, through
a reorg and a provider's faults; the watch set lives in memory, picks additions up at once and removals on
a reload; a step at the head asks the provider only what it must."""

from __future__ import annotations

import asyncio
import random

import structlog
from sqlalchemy import func, select

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import cursor_of, db_rows, running_indexer
from tests.test_indexer_reorg import fill_tip, reorg
from tests.test_provider_standin import SCALED, wait_indexed
from vip.chain.contracts import APPROVAL_TOPIC, TRANSFER_TOPIC
from vip.chain.rpc import RpcClient
from vip.daemon import build_network_tasks
from vip.devstack.provider import FaultRates, ProviderStandIn
from vip.indexer import store
from vip.indexer.decode import address_topic
from vip.indexer.fetcher import touching
from vip.indexer.watchset import WATCH_SET_CHANNEL, WatchSetCache, key_of
from vip.store.listen import listen_and_wake
from vip.store.tables import chain_reorgs, watched_addresses

# Addresses nobody sends to: they make the watch set large without making the chain large.
PADDING = ["0x" + f"{0xfeed_0000 + i:040x}" for i in range(300)]


async def watch(engine, network: str, addresses: list[str]) -> None:
    async with engine.begin() as conn:
        for address in addresses:
            await store.add_watched_address(conn, network, address, "wallet", start_block=0)


async def live_from(engine, network: str, address: str) -> int | None:
    async with engine.connect() as conn:
        return (await store.live_from_blocks(conn, network, [address]))[address]


def _raw(topic0: str, a: str, b: str) -> dict:
    return {"topics": [topic0, address_topic(a), address_topic(b)], "data": "0x" + "00" * 32}


def test_touching_keeps_logs_with_a_watched_party_on_either_side():
    watched, other, third = "0x" + "ab" * 20, "0x" + "cd" * 20, "0x" + "ef" * 20
    keys = frozenset({key_of(watched.upper().replace("0X", "0x"))})
    logs = [_raw(TRANSFER_TOPIC, watched, other), _raw(TRANSFER_TOPIC, other, watched),
            _raw(APPROVAL_TOPIC, other, watched), _raw(TRANSFER_TOPIC, other, third),
            {"topics": [TRANSFER_TOPIC, address_topic(watched)], "data": "0x"},  # not an ERC-20 Transfer
            {"topics": [], "data": "0x"}]
    upper = {**logs[0], "topics": [t.upper().replace("0X", "0x") for t in logs[0]["topics"]]}
    assert touching([*logs, upper], keys) == [*logs[:3], upper]


async def test_token_logs_store_what_topic_filters_store_through_reorg_and_faults(
        chain: ChainDriver, database_url, engine):
    """Two networks on one chain, one per strategy, behind a provider that fails, throttles and has a
    lagging node; then a reorg. Both hold exactly the canonical chain's logs of the watched addresses."""
    rng = random.Random(13)
    watched = chain.accounts[2:5]
    chain.fund(chain.accounts[2:9])
    chain.random_activity(rng, 120, chain.accounts[2:9], chain.accounts[2:9], per_block=3)
    margin = 3  # >= the largest node lag (2) + the blocks whose logs a lagging node misses (1)
    for name in ("tokenlogs", "topics"):
        await watch(engine, name, watched + PADDING)
    faults = FaultRates(seed=5, http_5xx=0.05, timeout=0.02, timeout_hold_s=1.0)
    with ProviderStandIn(chain.node.rpc_url, SCALED["infura"], faults=faults, node_lags=(0, 0, 2),
                         missing_log_blocks=1, units_per_s=60 * 80) as provider:  # credits: 80 an item
        networks = [
            local_network(provider.url, chain.node.chain_id, chain.contracts, name=name, finality_depth=4,
                          initial_block_range=30, max_block_range=500, head_margin=margin).model_copy(
                update={"watched_fetch": fetch, "topic_filter_max_addresses": 50})
            for name, fetch in (("tokenlogs", "auto"), ("topics", "topic_filters"))]
        settings = indexer_settings(*networks, timeout_s=0.5)
        settings = settings.model_copy(update={"rpc": settings.rpc.model_copy(
            update={"retry_after_cap_s": 0.2, "max_addresses_per_filter": 100})})
        async with running_indexer(settings, database_url):
            for name in ("tokenlogs", "topics"):
                await wait_indexed(engine, chain, name, margin)
            fill_tip(chain, 4, rng, watched)
            chain.mine(margin)
            for name in ("tokenlogs", "topics"):
                await wait_indexed(engine, chain, name, margin)
            reorg(chain, 4, rng, watched)
            chain.random_activity(rng, 12, chain.accounts[2:9], chain.accounts[2:9], per_block=3)
            chain.mine(margin)
            indexed = [await wait_indexed(engine, chain, name, margin) for name in ("tokenlogs", "topics")]
    truth = chain.token_logs(set(watched), to_block=min(indexed))
    by_token_logs = {r for r in await db_rows(engine, "tokenlogs") if r.block_number <= min(indexed)}
    by_topics = {r for r in await db_rows(engine, "topics") if r.block_number <= min(indexed)}
    assert by_token_logs == truth
    assert by_topics == truth
    assert any(r.block_number > min(indexed) - 10 for r in truth), "the reorged tip held watched rows"
    # The faults happened, the reorg was repaired on both, and the funding block (14 token logs, over the
    # scaled result cap of 12) was refused whole and asked by topic filters.
    assert provider.refusals["http_5xx"] > 0 and provider.refusals["timeout"] > 0
    assert provider.lagged_requests > 0 and provider.refusals["result_cap"] > 0, provider.refusals
    assert provider.refusals["rate_limited"] > 0, provider.refusals
    async with engine.connect() as conn:
        repaired = dict((await conn.execute(select(chain_reorgs.c.network, func.count())
                                            .group_by(chain_reorgs.c.network))).all())
    assert repaired.get("tokenlogs", 0) >= 1 and repaired.get("topics", 0) >= 1, repaired


async def test_newly_watched_address_is_live_from_the_first_range_with_it_and_backfilled(
        chain: ChainDriver, database_url, engine):
    rng = random.Random(7)
    watched, late = chain.accounts[2:4], chain.accounts[5]
    chain.fund(chain.accounts[2:9])
    chain.random_activity(rng, 60, chain.accounts[2:9], chain.accounts[2:9], per_block=2)
    await watch(engine, "local", watched + PADDING)
    with ProviderStandIn(chain.node.rpc_url, "node", faults=FaultRates(seed=3, http_5xx=0.05)) as provider:
        network = local_network(provider.url, chain.node.chain_id, chain.contracts,
                                initial_block_range=10, max_block_range=40).model_copy(
            update={"watched_fetch": "token_logs"})
        async with running_indexer(indexer_settings(network), database_url):
            await wait_indexed(engine, chain, "local", 0)
            chain.random_activity(rng, 20, chain.accounts[2:9], chain.accounts[2:9], per_block=2)
            before = await cursor_of(engine, "local")
            await watch(engine, "local", [late])
            chain.random_activity(rng, 20, chain.accounts[2:9], chain.accounts[2:9], per_block=2)
            indexed = await wait_indexed(engine, chain, "local", 0)
    first_live = await live_from(engine, "local", late)
    # The first range fetched with it in the set starts after what was indexed when it was added.
    assert before is not None and first_live is not None and before[0] < first_live <= indexed
    assert await db_rows(engine, "local") == chain.token_logs({*watched, late}, to_block=indexed)
    assert any(r.block_number < first_live for r in await db_rows(engine, "local")
               if late in (r.party_a, r.party_b)), "the backfill covered its history before the live start"


async def test_watch_set_cache_adds_at_once_and_drops_on_reload(engine):
    cache = WatchSetCache("cachenet", reload_s=3600, extra=("0x" + "dd" * 20,))
    first, second = "0x" + "a1" * 20, "0x" + "b2" * 20
    await watch(engine, "cachenet", [first])
    async with engine.connect() as conn:
        snapshot, uncovered = await cache.refresh(conn)
    assert snapshot.keys == {key_of(first), "dd" * 20} and uncovered == [first]
    async with engine.begin() as conn:
        await store.mark_live_from(conn, "cachenet", [first], 10)
    await watch(engine, "cachenet", [second])
    async with engine.connect() as conn:
        added, uncovered = await cache.refresh(conn)
    assert added.keys == {key_of(first), key_of(second), "dd" * 20} and uncovered == [second]
    assert added.version == snapshot.version + 1 and cache.full_loads == 1 and cache.watched == 2
    async with engine.begin() as conn:
        await store.mark_live_from(conn, "cachenet", [second], 11)
        await store.remove_watched_address(conn, "cachenet", first, "wallet")
    async with engine.connect() as conn:
        kept, uncovered = await cache.refresh(conn)
        assert kept is added and uncovered == []  # a removal waits for a reload
        cache.invalidate()
        reloaded, _ = await cache.refresh(conn)
    assert reloaded.keys == {key_of(second), "dd" * 20} and cache.full_loads == 2 and cache.watched == 1
    assert reloaded.addresses() == sorted(["0x" + "dd" * 20, second])


async def test_removing_watched_addresses_notifies_the_follower(engine):
    await watch(engine, "notifynet", ["0x" + "c3" * 20])
    stop, wake, listening = asyncio.Event(), asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(listen_and_wake(engine, WATCH_SET_CHANNEL, stop, wake, listening,
                                               structlog.get_logger()))
    try:
        await asyncio.wait_for(listening.wait(), 10)
        wake.clear()
        async with engine.begin() as conn:
            await store.add_watched_address(conn, "notifynet", "0x" + "c4" * 20, "wallet")
        await asyncio.sleep(0.3)
        assert not wake.is_set(), "an addition is read by the every-step query, not signalled"
        async with engine.begin() as conn:
            await store.remove_watched_address(conn, "notifynet", "0x" + "c3" * 20, "wallet")
        await asyncio.wait_for(wake.wait(), 10)
    finally:
        stop.set()
        task.cancel()
    async with engine.connect() as conn:
        left = (await conn.execute(select(watched_addresses.c.address)
                                   .where(watched_addresses.c.network == "notifynet"))).scalars().all()
    assert left == ["0x" + "c4" * 20]


async def test_a_step_at_the_head_asks_only_what_it_must(chain: ChainDriver, engine):
    """Idle: the head only. A new block: the head, one eth_getLogs, the block's header. The finality tag
    once per `finality_refresh_s`."""
    chain.fund(chain.accounts[2:5])
    chain.mine(70)
    await watch(engine, "local", chain.accounts[2:4] + PADDING)
    with ProviderStandIn(chain.node.rpc_url, "node") as provider:
        network = local_network(provider.url, chain.node.chain_id, chain.contracts, finality="finalized",
                                initial_block_range=100).model_copy(
            update={"topic_filter_max_addresses": 10, "finality_refresh_s": 3600})
        settings = indexer_settings(network)
        async with RpcClient("local", provider.url, settings.rpc) as rpc:
            follower, _ = build_network_tasks(settings, network, engine, rpc)
            await follower.prepare()
            while not await follower.step():
                pass
            provider.calls.clear()
            assert await follower.step()  # nothing new
            assert dict(provider.calls) == {"eth_getBlockByNumber": 1}
            provider.calls.clear()
            chain.transfer("USDC", chain.accounts[2], chain.accounts[4], 5)
            assert await follower.step()
            assert dict(provider.calls) == {"eth_getBlockByNumber": 2, "eth_getLogs": 1}
            provider.calls.clear()
            chain.mine(3)
            assert await follower.step()  # three blocks: the head, the logs, three headers
            assert dict(provider.calls) == {"eth_getBlockByNumber": 4, "eth_getLogs": 1}
    rows = await db_rows(engine, "local")
    assert rows == chain.token_logs(set(chain.accounts[2:4]))
