"""Scripted activity on a local development chain (Anvil): blocks at chosen times, test-token mints and
transfers sent as any address. Anvil's impersonation sends a transaction from an address without its key,
so scripted payers and borrowers need no key material at all. Local networks only: callers check with
`time_travel.local_network` first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from eth_abi.abi import encode
from eth_utils import keccak, to_checksum_address

from vip.chain.rpc import RpcClient

GAS_MONEY = 10**19  # wei given to a scripted sender (10 ETH: far more than it ever spends)


def _selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


class LocalChain:
    """One local network's RPC, for scripts (personas). Mutating calls are sent once: a retry could send
    twice."""

    def __init__(self, rpc: RpcClient) -> None:
        self.rpc = rpc
        self._ready: set[str] = set()

    async def head_time(self) -> int:
        block = await self.rpc.call("eth_getBlockByNumber", ["latest", False])
        return int(block["timestamp"], 16)

    async def at(self, moment: datetime) -> None:
        """The next block is stamped at `moment`, or one second after the head if that is later."""
        target = max(int(moment.timestamp()), await self.head_time() + 1)
        await self.rpc.call("evm_setNextBlockTimestamp", [hex(target)], max_attempts=1)

    async def mine(self, blocks: int = 1) -> None:
        await self.rpc.call("anvil_mine", [hex(blocks)], max_attempts=1)

    async def _as(self, address: str) -> str:
        """Let `address` send (impersonated, with gas money); returns it checksummed."""
        sender = to_checksum_address(address)
        if sender not in self._ready:
            await self.rpc.call("anvil_impersonateAccount", [sender], max_attempts=1)
            await self.rpc.call("anvil_setBalance", [sender, hex(GAS_MONEY)], max_attempts=1)
            self._ready.add(sender)
        return sender

    async def _send(self, sender: str, to: str, data: bytes) -> str:
        tx: dict[str, Any] = {"from": await self._as(sender), "to": to_checksum_address(to),
                              "data": "0x" + data.hex()}
        tx_hash = await self.rpc.call("eth_sendTransaction", [tx], max_attempts=1)
        receipt = await self.rpc.call("eth_getTransactionReceipt", [tx_hash])
        if receipt is None or int(receipt["status"], 16) != 1:
            raise RuntimeError(f"scripted transaction {tx_hash} did not succeed")
        return str(tx_hash)

    async def minter(self, token: str) -> str:
        answer = await self.rpc.call("eth_call", [{"to": to_checksum_address(token),
                                                   "data": "0x" + _selector("minter()").hex()}, "latest"])
        return to_checksum_address("0x" + str(answer)[-40:])

    async def mint(self, token: str, to: str, amount: int) -> str:
        """Mint `amount` base units of a test token (sent as its minter)."""
        data = _selector("mint(address,uint256)") + encode(["address", "uint256"],
                                                           [to_checksum_address(to), amount])
        return await self._send(await self.minter(token), token, data)

    async def transfer(self, token: str, sender: str, to: str, amount: int) -> str:
        data = _selector("transfer(address,uint256)") + encode(["address", "uint256"],
                                                               [to_checksum_address(to), amount])
        return await self._send(sender, token, data)
