"""Reads of an ERC-20 stablecoin's state over JSON-RPC: allowances and balances at a block, whether the
token is paused or an address blacklisted (USDC's and USDT's own admin switches), and whether a mined
transaction carries an Approval. The API and the daemon's jobs share these; each reads through the
caller's RpcClient (one per process and network), never inside a database transaction."""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi.abi import decode, encode
from eth_utils import function_signature_to_4byte_selector, to_checksum_address

from vip.chain.contracts import APPROVAL_TOPIC
from vip.chain.rpc import RevertedError, RpcCallError, RpcClient

_ALLOWANCE = function_signature_to_4byte_selector("allowance(address,address)")
_BALANCE_OF = function_signature_to_4byte_selector("balanceOf(address)")
_PAUSED = function_signature_to_4byte_selector("paused()")
# USDC (FiatToken) spells it isBlacklisted; Tether's public mapping is isBlackListed.
_BLACKLIST_GETTERS = (function_signature_to_4byte_selector("isBlacklisted(address)"),
                      function_signature_to_4byte_selector("isBlackListed(address)"))


def _tag(block: int | str) -> str:
    return hex(block) if isinstance(block, int) else block


async def _call(rpc: RpcClient, token: str, data: bytes, block: int | str) -> bytes:
    result = await rpc.call("eth_call", [{"to": to_checksum_address(token), "data": "0x" + data.hex()},
                                         _tag(block)])
    return bytes.fromhex(result[2:]) if isinstance(result, str) and result.startswith("0x") else b""


def _allowance_data(owner: str, spender: str) -> bytes:
    return _ALLOWANCE + encode(["address", "address"],
                               [to_checksum_address(owner), to_checksum_address(spender)])


async def allowance_at(rpc: RpcClient, token: str, owner: str, spender: str, block: int | str) -> int:
    """What `owner` lets `spender` take of `token` at `block` (a number or a tag such as "latest")."""
    return int(decode(["uint256"], await _call(rpc, token, _allowance_data(owner, spender), block))[0])


async def allowances_at(rpc: RpcClient, token: str, owner: str, spender: str,
                        blocks: list[int | str]) -> list[int]:
    """The same allowance at several blocks, in one JSON-RPC batch (one round trip)."""
    call = {"to": to_checksum_address(token), "data": "0x" + _allowance_data(owner, spender).hex()}
    results = await rpc.batch([("eth_call", [call, _tag(block)]) for block in blocks])
    return [int(decode(["uint256"], bytes.fromhex(str(r)[2:]))[0]) for r in results]


async def balance_at(rpc: RpcClient, token: str, holder: str, block: int | str) -> int:
    data = _BALANCE_OF + encode(["address"], [to_checksum_address(holder)])
    return int(decode(["uint256"], await _call(rpc, token, data, block))[0])


async def _optional_flag(rpc: RpcClient, token: str, data: bytes, block: int | str) -> bool | None:
    """A boolean getter the token may not have: None when it reverts or answers nothing (our test
    tokens have no pause or blacklist)."""
    try:
        raw = await _call(rpc, token, data, block)
    except (RevertedError, RpcCallError):
        return None
    return bool(int.from_bytes(raw[:32], "big")) if len(raw) >= 32 else None


@dataclass(frozen=True)
class TokenState:
    """What decides whether `token.transferFrom(owner -> recipient)` by `spender` can succeed, at one
    block. None: the token has no such switch."""

    paused: bool | None
    owner_blacklisted: bool | None
    recipient_blacklisted: bool | None
    balance: int
    allowance: int


async def _blacklisted(rpc: RpcClient, token: str, address: str, block: int | str) -> bool | None:
    for selector in _BLACKLIST_GETTERS:
        data = selector + encode(["address"], [to_checksum_address(address)])
        flag = await _optional_flag(rpc, token, data, block)
        if flag is not None:
            return flag
    return None


async def token_state(rpc: RpcClient, token: str, owner: str, spender: str, recipient: str,
                      block: int | str) -> TokenState:
    """The token's switches and the owner's balance and allowance at `block`, to say why a pull failed."""
    return TokenState(
        paused=await _optional_flag(rpc, token, _PAUSED, block),
        owner_blacklisted=await _blacklisted(rpc, token, owner, block),
        recipient_blacklisted=await _blacklisted(rpc, token, recipient, block),
        balance=await balance_at(rpc, token, owner, block),
        allowance=await allowance_at(rpc, token, owner, spender, block))


async def mined_approval(rpc: RpcClient, tx_hash: str, token: str, owner: str, spender: str) -> int | None:
    """The block of the mined, successful transaction `tx_hash` if it emitted Approval(owner, spender) of
    `token` (the node's canonical chain), else None."""
    receipt = await rpc.call("eth_getTransactionReceipt", [tx_hash])
    if not receipt or receipt.get("blockNumber") is None or int(receipt.get("status", "0x0"), 16) != 1:
        return None
    owner_topic = "0x" + "00" * 12 + owner.lower()[2:]
    spender_topic = "0x" + "00" * 12 + spender.lower()[2:]
    for entry in receipt.get("logs") or []:
        topics = [t.lower() for t in entry.get("topics") or []]
        if (entry.get("address", "").lower() == token.lower() and topics[:3] == [APPROVAL_TOPIC, owner_topic,
                                                                                    spender_topic]):
            return int(receipt["blockNumber"], 16)
    return None
