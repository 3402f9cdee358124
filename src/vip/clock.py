"""The service's one clock. Production: the wall clock. With a network marked local: the chain's latest
block timestamp, so moving Anvil's time moves lookback windows, expiries and caches with it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

import aiohttp
import orjson

from vip.config import Settings
from vip.store.transaction_guard import http_trace


class Clock(Protocol):
    async def now(self) -> datetime: ...


class WallClock:
    async def now(self) -> datetime:
        return datetime.now(UTC)


class ChainClock:
    """Reads the latest block's timestamp of a (local) network on every call: never stale."""

    def __init__(self, rpc_url: str, timeout_s: float = 5.0) -> None:
        self.rpc_url = rpc_url
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def now(self) -> datetime:
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


def clock_for(settings: Settings) -> Clock:
    """ChainClock on the first enabled local network, else the wall clock."""
    for network in settings.enabled_networks():
        if network.local:
            return ChainClock(network.rpc_url)  # type: ignore[arg-type]
    return WallClock()
