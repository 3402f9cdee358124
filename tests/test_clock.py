"""The service clock: a local chain's latest block time, else the wall clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from vip.clock import ChainClock, WallClock, clock_for
from vip.config import NetworkConfig, Settings, TokenConfig
from vip.devstack.anvil import AnvilNode, start_anvil

THIRTY_DAYS = 30 * 24 * 3600
TOKEN = "0x5fbdb2315678afecb367f032d93f642f64180aa3"


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    anvil = start_anvil(chain_id=31339)
    yield anvil
    anvil.stop()


@pytest.fixture
async def clock(node: AnvilNode) -> AsyncIterator[ChainClock]:
    chain_clock = ChainClock(node.rpc_url)
    yield chain_clock
    await chain_clock.close()


def latest_block_time(node: AnvilNode) -> datetime:
    block = node.call("eth_getBlockByNumber", ["latest", False])
    return datetime.fromtimestamp(int(block["timestamp"], 16), UTC)


async def test_chain_clock_is_latest_block_time(node: AnvilNode, clock: ChainClock):
    node.call("anvil_mine", ["0x1"])
    now = await clock.now()
    assert now == latest_block_time(node)
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)


async def test_chain_clock_follows_time_travel(node: AnvilNode, clock: ChainClock):
    before = await clock.now()
    node.call("evm_increaseTime", [THIRTY_DAYS])
    node.call("anvil_mine", ["0x1"])
    after = await clock.now()
    assert after == latest_block_time(node)
    moved = (after - before).total_seconds()
    assert THIRTY_DAYS <= moved <= THIRTY_DAYS + 120
    # Reading again without a new block does not move it: it is the chain's time, not the wall's.
    assert await clock.now() == after


async def test_chain_clock_reusable_after_close(node: AnvilNode):
    chain_clock = ChainClock(node.rpc_url)
    first = await chain_clock.now()
    await chain_clock.close()
    try:
        assert await chain_clock.now() >= first
    finally:
        await chain_clock.close()


async def test_wall_clock_is_now_utc():
    before = datetime.now(UTC)
    now = await WallClock().now()
    assert before <= now <= datetime.now(UTC)
    assert now.utcoffset() == timedelta(0)


def network(*, local: bool, rpc_url: str | None, chain_id: int = 31339) -> NetworkConfig:
    return NetworkConfig(chain_id=chain_id, rpc_url=rpc_url, local=local, finality_depth=0,
                         tokens={"USDC": TokenConfig(address=TOKEN)})


async def test_clock_for_enabled_local_network():
    settings = Settings(networks={
        "ethereum": network(local=False, rpc_url="https://eth.example", chain_id=1),
        "local": network(local=True, rpc_url="http://127.0.0.1:8545"),
    })
    chosen = clock_for(settings)
    try:
        assert isinstance(chosen, ChainClock)
        assert chosen.rpc_url == "http://127.0.0.1:8545"
    finally:
        await chosen.close()


def test_clock_for_without_local_network():
    mainnet = network(local=False, rpc_url="https://eth.example", chain_id=1)
    settings = Settings(networks={"ethereum": mainnet})
    assert isinstance(clock_for(settings), WallClock)


def test_clock_for_disabled_local_network():
    # A local network without an RPC URL is not followed, so it cannot be the clock.
    settings = Settings(networks={
        "local": network(local=True, rpc_url=None),
        "ethereum": network(local=False, rpc_url="https://eth.example", chain_id=1),
    })
    assert isinstance(clock_for(settings), WallClock)


def test_clock_for_no_networks():
    assert isinstance(clock_for(Settings()), WallClock)
