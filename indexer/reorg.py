"""Pure reorg arithmetic: chain-link checks, fork point, which headers a range needs."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from vip.indexer.decode import BlockHeader


def first_common_block(stored: Sequence[tuple[int, str]],
                       canonical: Sequence[BlockHeader | None]) -> tuple[int, str] | None:
    """Scan stored (number, hash) pairs newest first against the node's headers for the same numbers;
    return the newest block both agree on, or None when none of them match."""
    for (number, stored_hash), header in zip(stored, canonical, strict=True):
        if header is not None and header.number == number and header.hash == stored_hash:
            return number, stored_hash
    return None


def broken_link(headers: Sequence[BlockHeader]) -> int | None:
    """The first block number (ascending, consecutive headers) whose parent hash is not its
    predecessor's hash; None when the sequence is one chain."""
    for previous, current in itertools.pairwise(headers):
        if current.number == previous.number + 1 and current.parent_hash != previous.hash:
            return current.number
    return None


def headers_needed(start: int, end: int, finalized: int, log_blocks: set[int]) -> list[int]:
    """Block numbers whose headers a range [start, end] needs: its ends (to link the cursor and to set
    the new one), the finalized block and every block above it (kept: a fork search walks them), and
    the blocks of logs that came without a timestamp."""
    needed = {start, end} | set(log_blocks)
    needed.update(range(max(start, finalized), end + 1))
    return sorted(needed)


def header_window_start(cursor: int, finalized: int) -> int:
    """Lowest block whose header is kept: the finalized block itself (the anchor a fork search stops at),
    never above the cursor."""
    return min(cursor, finalized)
