"""Parse JSON-RPC log and block objects into frozen, typed values (pure; no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from vip.chain.contracts import APPROVAL_TOPIC, TRANSFER_TOPIC


@dataclass(frozen=True, slots=True)
class BlockHeader:
    number: int
    hash: str
    parent_hash: str
    timestamp: int  # unix seconds
    bloom: int = 0  # logsBloom as one big-endian integer (indexer.bloom); not stored

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp, UTC)


class TokenLog(NamedTuple):
    """A decoded ERC-20 Transfer or Approval log. A NamedTuple: immutable, and cheap to build on the
    hot path (hundreds of thousands per backfill)."""

    kind: str  # "transfer" | "approval"
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    token_address: str  # lower-case
    party_a: str  # transfer: from; approval: owner
    party_b: str  # transfer: to; approval: spender
    amount: int
    block_timestamp: int | None  # unix seconds when the node includes it in the log


def parse_header(block: dict[str, Any]) -> BlockHeader:
    return BlockHeader(
        number=int(block["number"], 16),
        hash=block["hash"].lower(),
        parent_hash=block["parentHash"].lower(),
        timestamp=int(block["timestamp"], 16),
        bloom=int(block.get("logsBloom") or "0x0", 16),
    )


def parse_token_log(log: dict[str, Any]) -> TokenLog | None:
    """Decode a Transfer/Approval log; None for anything else (other events, non-standard layouts).

    NOTE: a log with `removed: true` comes from a subscription after a reorg; eth_getLogs never returns
    one for a range we ask about, but if it does, it is not part of the canonical chain: skip it.
    """
    topics = log.get("topics") or []
    if log.get("removed") or len(topics) != 3:
        return None
    topic0 = topics[0].lower()
    if topic0 == TRANSFER_TOPIC:
        kind = "transfer"
    elif topic0 == APPROVAL_TOPIC:
        kind = "approval"
    else:
        return None
    data = log.get("data") or "0x"
    if len(data) != 66:  # one uint256 word; anything else is not a standard ERC-20 event
        return None
    timestamp = log.get("blockTimestamp")
    return TokenLog(
        kind,
        log["transactionHash"].lower(),
        int(log["logIndex"], 16),
        int(log["blockNumber"], 16),
        log["blockHash"].lower(),
        log["address"].lower(),
        "0x" + topics[1][-40:].lower(),
        "0x" + topics[2][-40:].lower(),
        int(data, 16),
        int(timestamp, 16) if timestamp else None,
    )


_KINDS = {TRANSFER_TOPIC: "transfer", APPROVAL_TOPIC: "approval"}


def parse_token_logs(raw: list[dict[str, Any]]) -> list[TokenLog]:
    """parse_token_log over one eth_getLogs answer, the Nones left out: the same values, with what the
    logs of one block, transaction, token or party share converted once (the hot path of every range)."""
    ints: dict[str, int] = {}
    lowered: dict[str, str] = {}
    parties: dict[str, str] = {}
    result: list[TokenLog] = []
    append = result.append
    for log in raw:
        topics = log.get("topics") or []
        if log.get("removed") or len(topics) != 3:
            continue
        kind = _KINDS.get(topics[0].lower())
        if kind is None:
            continue
        data = log.get("data") or "0x"
        if len(data) != 66:
            continue
        number, index, stamp = log["blockNumber"], log["logIndex"], log.get("blockTimestamp")
        block_hash, tx_hash, token = log["blockHash"], log["transactionHash"], log["address"]
        a, b = topics[1], topics[2]
        if (n := ints.get(number)) is None:
            n = ints[number] = int(number, 16)
        if (i := ints.get(index)) is None:
            i = ints[index] = int(index, 16)
        if stamp:
            if (ts := ints.get(stamp)) is None:
                ts = ints[stamp] = int(stamp, 16)
        else:
            ts = None
        if (bh := lowered.get(block_hash)) is None:
            bh = lowered[block_hash] = block_hash.lower()
        if (tx := lowered.get(tx_hash)) is None:
            tx = lowered[tx_hash] = tx_hash.lower()
        if (tk := lowered.get(token)) is None:
            tk = lowered[token] = token.lower()
        if (pa := parties.get(a)) is None:
            pa = parties[a] = "0x" + a[-40:].lower()
        if (pb := parties.get(b)) is None:
            pb = parties[b] = "0x" + b[-40:].lower()
        append(TokenLog(kind, tx, i, n, bh, tk, pa, pb, int(data, 16), ts))
    return result


def address_topic(address: str) -> str:
    """An address as a 32-byte topic value."""
    return "0x" + "0" * 24 + address.lower().removeprefix("0x")
