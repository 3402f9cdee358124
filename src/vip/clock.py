"""The service's one clock. Production: the wall clock. With a network marked local: the chain's latest
block timestamp, so moving Anvil's time moves lookback windows, expiries and caches with it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

import aiohttp
import orjson

from vip.chain.rpc import RpcClient
from vip.config import Settings
from vip.store.transaction_guard import http_trace


class Clock(Protocol):
    async def now(self) -> datetime: ...


class WallClock:
    async def now(self) -> datetime:
        return datetime.now(UTC)


class ChainClock:
    """Reads the latest block's timestamp of a (local) network on every call: never stale. Given the
    daemon's client of the network, it reads through it (and its RPC budget, decision 233)."""

    def __init__(self, rpc_url: str, timeout_s: float = 5.0, rpc: RpcClient | None = None) -> None:
        self.rpc_url = rpc_url
        self.rpc = rpc
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def now(self) -> datetime:
        if self.rpc is not None:
            block = await self.rpc.call("eth_getBlockByNumber", ["latest", False])
            return datetime.fromtimestamp(int(block["timestamp"], 16), UTC)
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout, trace_configs=[http_trace()])
        payload = {"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": ["latest", False]}
        async with self._session.post(self.rpc_url, data=orjson.dumps(payload),
                                      headers={"Content-Type": "application/json"}) as resp:
            block = orjson.loads(await resp.read())["result"]
        return datetime.fromtimestamp(int(block["timestamp"], 16), UTC)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def clock_for(settings: Settings, rpcs: Mapping[str, RpcClient] | None = None) -> Clock:
    """ChainClock on the first enabled local network (through its client in `rpcs`, when given), else the
    wall clock."""
    for network in settings.enabled_networks():
        if network.local:
            return ChainClock(network.rpc_url, rpc=(rpcs or {}).get(network.name))  # type: ignore[arg-type]
    return WallClock()
