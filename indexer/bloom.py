"""A block's `logsBloom` asked whether it may hold a log (pure; no I/O).

Ethereum's bloom (yellow paper, 4.3.1) sets three of its 2,048 bits for every log's address and each of
its topics: bits taken from the first six bytes of the item's keccak-256 hash. A bloom without all three
bits of an item has no log with it; a bloom with them may (false positives grow as a busy block fills its
bloom). The header's `logsBloom` is the same on every node for a given block hash, so a header from any
node says whether the block holds our tokens' Transfer or Approval logs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from eth_utils import keccak


@lru_cache(maxsize=65536)
def bloom_mask(item: bytes) -> int:
    """The three bits an item sets, as a mask over the bloom read as one big-endian integer."""
    digest = keccak(item)
    mask = 0
    for i in (0, 2, 4):
        mask |= 1 << (((digest[i] << 8) | digest[i + 1]) & 2047)
    return mask


def hex_item(value: str) -> bytes:
    """An address or a topic (0x hex) as the bytes the bloom hashes."""
    return bytes.fromhex(value.removeprefix("0x"))


@dataclass(frozen=True)
class BloomQuery:
    """Logs the bloom is asked about: one of `addresses` (log address) and one of `topics0` (event
    signature), and, when `parties` is given, one of them as a further topic (a watched address)."""

    addresses: tuple[int, ...]
    topics0: tuple[int, ...]
    parties: tuple[int, ...] | None = None

    @classmethod
    def of(cls, addresses: Iterable[str], topics0: Iterable[str],
           parties: Iterable[str] | None = None) -> BloomQuery:
        return cls(tuple(bloom_mask(hex_item(a)) for a in addresses),
                   tuple(bloom_mask(hex_item(t)) for t in topics0),
                   None if parties is None else tuple(bloom_mask(hex_item(p)) for p in parties))

    def may_hold(self, bloom: int) -> bool:
        """Whether a block with this bloom may hold such a log (False: it certainly does not)."""
        def any_in(masks: tuple[int, ...]) -> bool:
            return any(bloom & m == m for m in masks)

        return any_in(self.addresses) and any_in(self.topics0) and (
            self.parties is None or any_in(self.parties))
