"""One JSON-RPC client per network for a whole process (the API's chain reads): opened on first use,
closed with the process, so requests share connections and the adaptive rate instead of each opening its
own."""

from __future__ import annotations

from vip.chain.rpc import RpcClient
from vip.config import NetworkConfig, RpcConfig


class RpcClients:
    def __init__(self, config: RpcConfig) -> None:
        self.config = config
        self._clients: dict[str, RpcClient] = {}

    def of(self, network: NetworkConfig) -> RpcClient | None:
        """The network's client, or None when it has no RPC endpoint."""
        if not network.rpc_url:
            return None
        client = self._clients.get(network.name)
        if client is None:
            client = self._clients[network.name] = RpcClient(network.name, network.rpc_url, self.config)
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
