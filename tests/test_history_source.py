"""A new wallet's history from a provider's indexed Transfers API (`history_source = "alchemy_transfers"`)
behind the provider stand-in, which answers `alchemy_getAssetTransfers` from Anvil's logs: the stored
transfers equal the canonical chain, also when the index invents transfers (dropped: eth_getLogs on their
blocks does not show them) or leaves one out (the balance check fails and the window is scanned)."""

from __future__ import annotations

import random
from dataclasses import replace

import aiohttp
import pytest

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import db_rows, running_indexer
from tests.test_provider_standin import wait_indexed
from vip.chain.rpc import RpcClient
from vip.config import RpcConfig
from vip.devstack.provider import PROFILES, FaultRates, IndexFaults, ProviderStandIn
from vip.indexer import store
from vip.indexer.backfill import Backfiller
from vip.indexer.fetcher import LogFetcher
from vip.indexer.history import IndexedTransfersSource, LogScanSource, confirm_spans
from vip.indexer.ranges import AdaptiveRange

# Alchemy's texts with a block-range cap small enough that scanning this chain takes many ranges.
CAPPED = replace(PROFILES["alchemy"], range_cap=20, range_error=PROFILES["quicknode"].range_error)


async def backfill(chain: ChainDriver, engine, provider: ProviderStandIn, watched: dict[str, str], *,
                   page_size: int = 1_000, source: str = "alchemy_transfers"):
    """Watch `watched` (address -> reason) from block 0 with the follower live from the head, and run
    the Backfiller until nothing is pending; returns the history source it used."""
    head = chain.head()[0]
    network = local_network(provider.url, chain.node.chain_id, chain.contracts, initial_block_range=10,
                            max_block_range=10_000).model_copy(update={"history_source": source})
    async with engine.begin() as conn:
        for address, reason in watched.items():
            await store.add_watched_address(conn, "local", address, reason, start_block=0)
        await store.mark_live_from(conn, "local", [a.lower() for a in watched], head + 1)
    rpc = RpcClient("local", provider.url, RpcConfig(timeout_s=30))
    fetcher = LogFetcher(rpc, network, 500, AdaptiveRange(10, 10_000), 20_000)
    history = IndexedTransfersSource(fetcher, LogScanSource(fetcher), page_size=page_size) \
        if source == "alchemy_transfers" else None
    backfiller = Backfiller(network, engine, fetcher, history)
    try:
        for _ in range(500):
            if not await backfiller.step():
                break
        else:
            raise AssertionError("backfill did not finish")
    finally:
        await rpc.close()
    return backfiller.source, head


def activity(chain: ChainDriver, seed: int) -> list[str]:
    rng = random.Random(seed)
    chain.fund(chain.accounts[2:8])
    chain.random_activity(rng, 60, chain.accounts[2:8], chain.accounts[2:8], per_block=2)
    chain.mine(400)  # quiet blocks a scan must cover in 20-block ranges, the index skips
    return chain.accounts[2:4]


def transfers(rows):
    return {r for r in rows if r.kind == "transfer"}


async def test_index_history_equals_the_canonical_chain(chain: ChainDriver, engine):
    wallets = activity(chain, 1)
    with ProviderStandIn(chain.node.rpc_url, CAPPED) as provider:
        source, head = await backfill(chain, engine, provider, dict.fromkeys(wallets, "wallet"), page_size=4)
    canonical = chain.token_logs({w.lower() for w in wallets}, to_block=head)
    rows = await db_rows(engine, "local")
    assert transfers(rows) == transfers(canonical)
    assert rows <= canonical  # approvals in the confirmed blocks are real ones too
    assert isinstance(source, IndexedTransfersSource) and not source.scanned
    # Pages of 4 were followed by pageKey. The confirmation learnt the 20-block cap from one refused
    # batch (two items) and asked far fewer ranges than a scan's head / 20.
    assert provider.calls["alchemy_getAssetTransfers"] > 4 * len(wallets)
    assert provider.refusals["range_cap"] == 2
    assert provider.calls["eth_getLogs"] - 2 < 2 * (head // 20) / 2


async def test_invented_transfers_are_never_stored(chain: ChainDriver, engine):
    wallets = activity(chain, 2)
    with ProviderStandIn(chain.node.rpc_url, CAPPED, index_faults=IndexFaults(invent=3)) as provider:
        source, head = await backfill(chain, engine, provider, dict.fromkeys(wallets, "wallet"))
    canonical = chain.token_logs({w.lower() for w in wallets}, to_block=head)
    assert transfers(await db_rows(engine, "local")) == transfers(canonical)
    assert isinstance(source, IndexedTransfersSource) and not source.scanned  # nothing was missing


async def test_an_omitted_transfer_makes_the_window_scanned(chain: ChainDriver, engine):
    wallets = activity(chain, 3)
    # A transfer alone in its block: no other transfer the index names leads confirmation to it.
    omitted = chain.transfer("USDC", chain.accounts[6], wallets[0], 12_345).lower()
    chain.mine(50)
    faults = IndexFaults(omit=frozenset({omitted}))
    with ProviderStandIn(chain.node.rpc_url, CAPPED, index_faults=faults) as provider:
        source, head = await backfill(chain, engine, provider, dict.fromkeys(wallets, "wallet"))
    canonical = chain.token_logs({w.lower() for w in wallets}, to_block=head)
    rows = await db_rows(engine, "local")
    assert rows == canonical  # scanned: approvals too
    assert omitted in {r.tx_hash for r in rows}
    assert isinstance(source, IndexedTransfersSource) and source.scanned == {w.lower() for w in wallets}
    assert provider.calls["eth_getLogs"] > 2 * (head // 20)  # the whole window was scanned


async def test_a_spender_is_always_scanned(chain: ChainDriver, engine):
    """A spender's history is approvals, which a transfer index does not list."""
    activity(chain, 4)
    spender = chain.accounts[5]
    with ProviderStandIn(chain.node.rpc_url, CAPPED) as provider:
        _, head = await backfill(chain, engine, provider, {spender: "spender"})
    assert await db_rows(engine, "local") == chain.token_logs({spender.lower()}, to_block=head)
    assert provider.calls["alchemy_getAssetTransfers"] == 0


async def call(url: str, method: str, params: list) -> dict:
    async with aiohttp.ClientSession() as http, http.post(url, json={
            "jsonrpc": "2.0", "id": 1, "method": method, "params": params}) as resp:
        return await resp.json()


async def test_stand_in_speaks_alchemy_transfers_api(chain: ChainDriver):
    wallets = activity(chain, 5)
    wallet = wallets[0].lower()
    expected = sorted((r.block_number, r.log_index, r.tx_hash, r.party_a, r.amount, r.token_address)
                      for r in chain.token_logs({wallet}) if r.kind == "transfer" and r.party_b == wallet)
    with ProviderStandIn(chain.node.rpc_url, "alchemy") as provider:
        query = {"fromBlock": "0x0", "toBlock": "latest", "toAddress": wallets[0], "category": ["erc20"],
                 "contractAddresses": [chain.contracts.usdc, chain.contracts.usdt], "withMetadata": True,
                 "maxCount": "0x5"}
        pages, seen = 0, []
        while True:
            result = (await call(provider.url, "alchemy_getAssetTransfers", [query]))["result"]
            pages += 1
            assert len(result["transfers"]) <= 5
            for t in result["transfers"]:
                tx_hash, kind, index = t["uniqueId"].split(":")
                assert (kind, tx_hash) == ("log", t["hash"]) and t["category"] == "erc20"
                assert t["rawContract"]["decimal"] == "0x6"
                assert t["value"] == int(t["rawContract"]["value"], 16) / 10**6
                assert t["metadata"]["blockTimestamp"].endswith("Z")
                seen.append((int(t["blockNum"], 16), int(index), t["hash"].lower(), t["from"].lower(),
                             int(t["rawContract"]["value"], 16), t["rawContract"]["address"].lower()))
            if "pageKey" not in result:
                break
            query = {**query, "pageKey": result["pageKey"]}
        assert sorted(seen) == expected and pages == -(-len(expected) // 5)
        # fromAddress and toAddress are ANDed.
        both = {**query, "fromAddress": wallets[1], "maxCount": "0x3e8"}
        both.pop("pageKey", None)
        pair = (await call(provider.url, "alchemy_getAssetTransfers", [both]))["result"]["transfers"]
        assert {t["from"].lower() for t in pair} <= {wallets[1].lower()}
        assert len(pair) == len([e for e in expected if e[3] == wallets[1].lower()])
        bad = await call(provider.url, "alchemy_getAssetTransfers", [{"fromBlock": "0x0"}])
        assert bad["error"]["code"] == -32602  # category is required
    with ProviderStandIn(chain.node.rpc_url, "quicknode") as other:
        missing = await call(other.url, "alchemy_getAssetTransfers", [query])
        assert missing["error"]["code"] == -32601


@pytest.mark.parametrize(("blocks", "spans"), [
    ([], []),
    ([5], [(5, 5)]),
    ([5, 5, 9, 200, 201, 1000], [(5, 9), (200, 201), (1000, 1000)]),
])
def test_confirm_spans_cover_exactly_the_named_blocks(blocks, spans):
    assert confirm_spans(blocks, gap=64, width=1_000) == spans
    assert confirm_spans([5, 9, 200, 1999, 2005]) == [(5, 1999), (2005, 2005)]  # the defaults: 2,000
    assert confirm_spans(range(0, 5000, 10), width=100)[0] == (0, 90)


async def test_a_provider_without_the_index_is_scanned(chain: ChainDriver, engine):
    wallets = activity(chain, 6)
    with ProviderStandIn(chain.node.rpc_url, replace(CAPPED, asset_transfers=False)) as provider:
        _, head = await backfill(chain, engine, provider, dict.fromkeys(wallets, "wallet"))
    assert await db_rows(engine, "local") == chain.token_logs({w.lower() for w in wallets}, to_block=head)
    assert provider.calls["alchemy_getAssetTransfers"] == 1  # refused (-32601), then the scan


async def test_the_daemon_backfills_through_the_index_under_faults(chain: ChainDriver, database_url, engine):
    """The configured source in the running daemon, with 5xx, time-outs and 429s while it follows: a
    wallet watched late gets its history from the index, exactly."""
    rng = random.Random(7)
    wallets = chain.accounts[2:4]
    chain.fund(chain.accounts[2:8])
    chain.random_activity(rng, 40, chain.accounts[2:8], chain.accounts[2:8], per_block=2)
    chain.mine(100)
    faults = FaultRates(seed=3, http_5xx=0.05, timeout=0.02, timeout_hold_s=1.0)
    with ProviderStandIn(chain.node.rpc_url, CAPPED, faults=faults, units_per_s=40 * 20) as provider:
        network = local_network(provider.url, chain.node.chain_id, chain.contracts, finality_depth=4,
                                initial_block_range=10, max_block_range=10_000,
                                history_initial_block_range=100_000, history_max_block_range=10_000_000,
                                ).model_copy(update={"history_source": "alchemy_transfers"})
        settings = indexer_settings(network, timeout_s=0.5)
        rpc = settings.rpc.model_copy(update={"retry_after_cap_s": 0.2})
        settings = settings.model_copy(update={"rpc": rpc})
        async with running_indexer(settings, database_url):
            await wait_indexed(engine, chain, "local", 0)
            async with engine.begin() as conn:
                for address in wallets:
                    await store.add_watched_address(conn, "local", address, "wallet", start_block=0)
            chain.random_activity(rng, 10, chain.accounts[2:8], chain.accounts[2:8], per_block=2)
            indexed = await wait_indexed(engine, chain, "local", 0)
    canonical = chain.token_logs({w.lower() for w in wallets}, to_block=indexed)
    rows = await db_rows(engine, "local")
    assert transfers(rows) == transfers(canonical) and rows <= canonical, dict(provider.refusals)
    assert provider.calls["alchemy_getAssetTransfers"] >= 2 * len(wallets)
    assert provider.refusals["http_5xx"] + provider.refusals["timeout"] > 0, dict(provider.refusals)
