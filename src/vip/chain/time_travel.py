"""Test clocks for integrators: move a local chain's time forward and mine blocks.

Only networks marked `local = true` in config may be moved: on a real network these RPC methods do not
exist, and a node that accepted them would not be a network anyone's money lives on. The service's own
clock follows the first local network's head (`vip.clock.ChainClock`), so moving that chain's time moves
lookback windows, intent expiries and caches with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from vip.chain.rpc import RpcCallError, RpcClient
from vip.config import NetworkConfig, RpcConfig, Settings

# NOTE: Anvil mines each block more slowly the longer its chain (about 2 ms a block at 1,000 blocks, 9 ms
# at 3,000): time travel is for moving time, which one block does; a few blocks cover finality depths.
MAX_BLOCKS = 1_000
MINE_TIMEOUT_S = 120.0
MAX_SECONDS = 10 * 366 * 86_400  # ten years: far enough for any loan schedule


class TimeTravelRefused(Exception):
    """The network may not be moved (unknown, without an RPC URL, or not local)."""

    code = "ERR_NETWORK_NOT_LOCAL"

    def __init__(self, network: str, reason: str) -> None:
        super().__init__(f"time travel refused on {network}: {reason}")
        self.network = network
        self.reason = reason


class UnknownNetwork(TimeTravelRefused):
    """No network of that name is configured."""


class NotForward(Exception):
    """The requested time is not after the head block's: chains only move forward."""

    def __init__(self, target: int, head: int) -> None:
        super().__init__(f"target time {target} is not after the head block's timestamp {head}")
        self.target = target
        self.head = head


@dataclass(frozen=True)
class ChainHead:
    number: int
    timestamp: int

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp, UTC)


@dataclass(frozen=True)
class TimeTravel:
    network: str
    before: ChainHead
    after: ChainHead


def local_network(settings: Settings, name: str) -> NetworkConfig:
    """The network called `name` if time may be moved on it; else `TimeTravelRefused`."""
    network = settings.networks.get(name)
    if network is None:
        raise UnknownNetwork(name, "no such network in the configuration")
    if not network.local:
        raise TimeTravelRefused(name, "the network is not marked local = true")
    if not network.enabled:
        raise TimeTravelRefused(name, "the network has no RPC URL")
    return network


def target_timestamp(head: int, seconds: int | None, to_timestamp: int | None) -> int | None:
    """The first new block's timestamp, or None to let the node choose (only mining)."""
    if seconds is not None and to_timestamp is not None:
        raise ValueError("give seconds or to_timestamp, not both")
    if to_timestamp is not None:
        if to_timestamp <= head:
            raise NotForward(to_timestamp, head)
        return to_timestamp
    if seconds:
        return head + seconds
    return None


async def _head(rpc: RpcClient) -> ChainHead:
    block = await rpc.call("eth_getBlockByNumber", ["latest", False])
    return ChainHead(int(block["number"], 16), int(block["timestamp"], 16))


async def _mine(rpc: RpcClient, blocks: int) -> None:
    try:
        await rpc.call("anvil_mine", [hex(blocks)], max_attempts=1)
    except RpcCallError:  # NOTE: a node without Anvil's batch call (e.g. Hardhat) still has evm_mine
        for _ in range(blocks):
            await rpc.call("evm_mine", [], max_attempts=1)


async def travel(network: NetworkConfig, rpc_config: RpcConfig, *, seconds: int | None = None,
                 to_timestamp: int | None = None, blocks: int = 1) -> TimeTravel:
    """Mine `blocks` blocks, the first stamped `seconds` after the head (or at `to_timestamp`).

    The exact timestamp is set with `evm_setNextBlockTimestamp` rather than `evm_increaseTime`, whose
    offset adds to the wall time elapsed since the head and so lands a few seconds past the target. Later
    blocks follow the node's clock from there. Mutating calls are sent once: a retry could mine twice.
    """
    if not 1 <= blocks <= MAX_BLOCKS:
        raise ValueError(f"blocks must be between 1 and {MAX_BLOCKS}")
    if seconds is not None and not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(f"seconds must be between 0 and {MAX_SECONDS}")
    config = rpc_config.model_copy(update={"timeout_s": max(rpc_config.timeout_s, MINE_TIMEOUT_S)})
    async with RpcClient(network.name, network.rpc_url, config) as rpc:  # type: ignore[arg-type]
        before = await _head(rpc)
        target = target_timestamp(before.timestamp, seconds, to_timestamp)
        if target is not None:
            await rpc.call("evm_setNextBlockTimestamp", [hex(target)], max_attempts=1)
        await _mine(rpc, blocks)
        after = await _head(rpc)
    return TimeTravel(network.name, before, after)
