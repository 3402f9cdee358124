"""A range's logs proven complete whatever node of a load balancer answers (decision 230): a node that
answers eth_getLogs with nothing for a block it does not have yet, while another node's header vouches for
that block, loses no row; nor does one that has a block's header but not yet its logs. Each doubt is logged
with its network and block and counted. Also the pure parts: which calls share a batch, which blocks are
doubted, what a bloom says."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import cursor_of, db_rows
from vip import metrics
from vip.chain.contracts import APPROVAL_TOPIC, TRANSFER_TOPIC
from vip.chain.rpc import RpcClient
from vip.daemon import build_network_tasks
from vip.devstack.provider import ProviderStandIn
from vip.indexer import store
from vip.indexer.bloom import BloomQuery
from vip.indexer.completeness import LogsBatch, doubted, plan_batches
from vip.indexer.decode import BlockHeader, address_topic, parse_header
from vip.indexer.fetcher import LogFetcher
from vip.indexer.ranges import AdaptiveRange

SCRIPTED_TIMEOUT_S = 120.0
PADDING = ["0x" + f"{0xabc0_0000 + i:040x}" for i in range(40)]


def doubts(reason: str) -> float:
    return metrics.DOUBTED_BLOCKS.labels("local", reason)._value.get()


async def follower_behind(chain: ChainDriver, engine, provider: ProviderStandIn, fetch: str):
    """A follower (margin 0) caught up with the chain behind `provider`, watching accounts 2-4."""
    network = local_network(provider.url, chain.node.chain_id, chain.contracts, finality_depth=4,
                            initial_block_range=50).model_copy(update={"watched_fetch": fetch})
    # A request timed out and sent again would reach the next scripted node: the order a test scripts holds
    # only if no request times out, however loaded the machine.
    settings = indexer_settings(network, timeout_s=SCRIPTED_TIMEOUT_S)
    async with engine.begin() as conn:
        await store.add_watched_addresses(conn, "local", chain.accounts[2:5] + PADDING, "wallet",
                                          start_block=0)
    rpc = RpcClient("local", provider.url, settings.rpc)
    follower, _ = build_network_tasks(settings, network, engine, rpc)
    await follower.prepare()
    while not await follower.step():
        pass
    return follower, rpc


@pytest.mark.parametrize("fetch", ["topic_filters", "token_logs"])
async def test_a_node_without_the_block_answers_no_logs_and_no_row_is_lost(chain: ChainDriver, engine, fetch):
    chain.fund(chain.accounts[2:5])
    chain.mine(10)
    with ProviderStandIn(chain.node.rpc_url, "node") as provider:
        follower, rpc = await follower_behind(chain, engine, provider, fetch)
        try:
            tx = chain.transfer("USDC", chain.accounts[2], chain.accounts[3], 77)
            block, _ = chain.head()
            before = doubts("node_behind")
            # The head comes from a node that has the new block; the range's logs from one a block behind,
            # which answers eth_getLogs for the block it lacks with an empty, error-free result; then a
            # node that has it.
            provider.script_nodes(0, 1, 0)
            with capture_logs() as logs:
                assert await follower.step()
        finally:
            await rpc.close()
    assert provider.refusals["unknown_block_hash"] == 0
    rows = await db_rows(engine, "local")
    assert tx.lower() in {r.tx_hash for r in rows if r.block_number == block}
    assert rows == chain.token_logs(set(chain.accounts[2:5]))
    assert (await cursor_of(engine, "local"))[0] == block
    assert doubts("node_behind") == before + 1
    [doubt] = [e for e in logs if e.get("reason") == "node_behind"]
    assert (doubt["network"], doubt["block"], doubt["log_level"]) == ("local", block, "warning")


@pytest.mark.parametrize("fetch", ["topic_filters", "token_logs"])
async def test_a_node_with_the_header_but_not_the_logs_is_doubted_and_no_row_is_lost(
        chain: ChainDriver, engine, fetch):
    """A node one block behind whose log index also trails its headers by a block: it has the new block's
    header and answers its logs with nothing. Its header's bloom names our tokens' logs: in `token_logs`
    mode the block is read again by hash; with topic filters the probe of the range end's token logs shows
    the node's logs stop short, and the range is asked again."""
    chain.fund(chain.accounts[2:5])
    chain.mine(10)
    with ProviderStandIn(chain.node.rpc_url, "node", missing_log_blocks=1) as provider:
        follower, rpc = await follower_behind(chain, engine, provider, fetch)
        try:
            tx = chain.transfer("USDT", chain.accounts[3], chain.accounts[4], 5)
            block, _ = chain.head()
            chain.mine(1)  # the real head is one further: the lagging node's head is `block`
            before = doubts("logs_missing")
            # The head and the range's logs from the lagging node (head `block`, logs up to `block - 1`),
            # then a node that has everything (a by-hash read, or the range asked again).
            provider.script_nodes(1, 1, 0, 0)
            with capture_logs() as logs:
                await follower.step()
                while not await follower.step():
                    pass
        finally:
            await rpc.close()
    rows = await db_rows(engine, "local")
    assert tx.lower() in {r.tx_hash for r in rows if r.block_number == block}
    assert rows == chain.token_logs(set(chain.accounts[2:5]))
    assert doubts("logs_missing") == before + 1
    [doubt] = [e for e in logs if e.get("reason") == "logs_missing"]
    assert (doubt["network"], doubt["block"]) == ("local", block)


async def test_a_range_grows_only_once_it_passed_every_check(chain: ChainDriver):
    """A range whose logs came back but whose other headers no node answered (all four requests reached a
    node three blocks behind) failed: the size it was asked at stays, and grows only after the range asked
    again (a block shorter) passed."""
    chain.fund(chain.accounts[2:4])
    chain.mine(20)
    head, _ = chain.head()
    network = local_network("http://unused", chain.node.chain_id, chain.contracts)
    with ProviderStandIn(chain.node.rpc_url, "node") as provider:
        async with RpcClient("local", provider.url,
                             indexer_settings(network, timeout_s=SCRIPTED_TIMEOUT_S).rpc) as rpc:
            fetcher = LogFetcher(rpc, network, 500, AdaptiveRange(4, 100), 20_000)
            provider.script_nodes(0, 3, 3, 3, 3)  # the logs batch, then the other headers' requests
            fetched = await fetcher.fetch_range(head - 4, None, head, head - 64, None, link=False)
    assert (fetched.start, fetched.end) == (head - 3, head - 1)  # asked again a block shorter
    assert fetcher.sizer.size == 8  # grown once, by the range that passed


async def test_a_bloom_says_which_tokens_events_and_parties_a_block_holds(chain: ChainDriver):
    alice, bob, carol = chain.accounts[2:5]
    chain.fund([alice])
    tx = chain.transfer("USDC", alice, bob, 3)
    chain.mine()
    block = chain.node.call("eth_getTransactionReceipt", [tx])["blockNumber"]  # that one transfer
    header = parse_header(chain.node.call("eth_getBlockByNumber", [block, False]))
    usdc, usdt = chain.tokens["USDC"], chain.tokens["USDT"]
    assert BloomQuery.of([usdc], [TRANSFER_TOPIC]).may_hold(header.bloom)
    assert BloomQuery.of([usdt, usdc], [APPROVAL_TOPIC, TRANSFER_TOPIC],
                         [address_topic(carol), address_topic(bob)]).may_hold(header.bloom)
    # Nothing of USDT, no Approval, and Carol in no log: a bloom this sparse says so for certain.
    assert not BloomQuery.of([usdt], [TRANSFER_TOPIC, APPROVAL_TOPIC]).may_hold(header.bloom)
    assert not BloomQuery.of([usdc], [APPROVAL_TOPIC]).may_hold(header.bloom)
    assert not BloomQuery.of([usdc], [TRANSFER_TOPIC], [address_topic(carol)]).may_hold(header.bloom)
    assert not BloomQuery.of([usdc], [TRANSFER_TOPIC]).may_hold(0)


def test_doubted_blocks_are_those_whose_bloom_names_logs_the_answer_lacks():
    query = BloomQuery((0b11,), (0b1100,))
    full, other = 0b1111, 0b0011

    def header(n: int, bloom: int) -> BlockHeader:
        return BlockHeader(n, f"0x{n:064x}", f"0x{n - 1:064x}", n, bloom)

    headers = {n: header(n, full if n in (10, 12, 13) else other) for n in range(10, 15)}
    assert doubted(headers, range(10, 15), answered={10}, query=query) == [12, 13]
    assert doubted(headers, range(11, 13), answered=set(), query=query) == [12]


def test_a_range_goes_in_batches_under_the_cap_each_with_the_range_end():
    token = ({"topics": ["t"]}, None)
    batches, rest = plan_batches([token], needed=range(90, 101), end=100, proof=True, probe=False,
                                 max_items=10, max_units=10_000, logs_weight=60, header_weight=20)
    assert batches == [LogsBatch(({"topics": ["t"]},), None, False, (100,))]
    assert rest == list(range(90, 100))  # asked once the logs are in: any node may answer them
    chunks = [({"c": i}, (f"0x{i}",)) for i in range(5)]
    batches, rest = plan_batches(chunks, needed=[100], end=100, proof=True, probe=True, max_items=4,
                                 max_units=10_000, logs_weight=60, header_weight=20)
    # Each batch: two filters, the probe, the end's header.
    assert [(len(b.filters), b.probe, b.headers, b.parties) for b in batches] == [
        (2, True, (100,), ("0x0", "0x1")), (2, True, (100,), ("0x2", "0x3")), (1, True, (100,), ("0x4",))]
    assert rest == []
    batches, _ = plan_batches(chunks[:3], needed=[100], end=100, proof=True, probe=False, max_items=10,
                              max_units=150, logs_weight=60, header_weight=20)
    assert [len(b.filters) for b in batches] == [2, 1]  # 2 x 60 + 20 = 140 units of a request's 150
    batches, rest = plan_batches([token], needed=[7, 9], end=9, proof=False, probe=False, max_items=10,
                                 max_units=10_000, logs_weight=60, header_weight=20)
    assert batches[0].headers == () and rest == [7, 9]  # a deep range: nothing to prove
