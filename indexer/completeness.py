"""Proving a range's logs complete (pure; no I/O): which calls go in one JSON-RPC batch, and which blocks'
answers are doubted (decision 230).

A load balancer sends each HTTP request to one of several nodes, some a few blocks behind; a node asked
about blocks past its own head answers `eth_getLogs` with nothing, and no error. So the logs of a range and
the header of its last block go in one batch, answered by one node: a node that returns the header has
the block (and every block below it). What a node with the block may still lack is the logs of its newest
blocks (its log index trails its headers): a block whose `logsBloom` says it holds our tokens' Transfer or
Approval logs, for which the answer has none, is doubted and read again by its hash (EIP-234), which a node
answers from the block's own receipts, or refuses when it does not know the hash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vip.indexer.bloom import BloomQuery
from vip.indexer.decode import BlockHeader

# Blocks within this many of the head are read with their headers and checked against their blooms,
# whatever the finality tag says: a lagging node trails by a few blocks, never by this many.
CHECKED_DEPTH = 64


@dataclass(frozen=True)
class LogsBatch:
    """One HTTP request: eth_getLogs filters (without their block fields), a probe of the range end's
    token logs (topic filters only: it shows whether the node's logs reach the end), and the range end's
    header when it needs proving. `parties`: the addresses the filters ask about (None: every token log)."""

    filters: tuple[dict[str, Any], ...]
    parties: tuple[str, ...] | None
    probe: bool
    headers: tuple[int, ...]


def plan_batches(filters: Sequence[tuple[dict[str, Any], tuple[str, ...] | None]], needed: Iterable[int],
                 end: int, proof: bool, probe: bool, max_items: int, max_units: float, logs_weight: float,
                 header_weight: float) -> tuple[list[LogsBatch], list[int]]:
    """The eth_getLogs `filters` (each with the addresses it asks about) packed into batches of at most
    `max_items` items and `max_units` of the budget, each with the range end's header when `proof` (and
    a probe when `probe`). The other `needed` headers are returned apart: asked once the logs are in (any
    node may answer them), so that a range refused for its size wastes no header."""
    fixed = [end] if proof else []
    overhead_items = len(fixed) + probe
    overhead_units = len(fixed) * header_weight + probe * logs_weight
    per_batch = max(1, min(max_items - overhead_items, int((max_units - overhead_units) // logs_weight)))
    batches = []
    for i in range(0, len(filters), per_batch):
        group = filters[i:i + per_batch]
        parties = None if any(p is None for _, p in group) else tuple(a for _, p in group for a in p or ())
        batches.append(LogsBatch(tuple(f for f, _ in group), parties, probe, tuple(fixed)))
    return batches, sorted(n for n in set(needed) if n not in fixed)


def blocks_of(raw: Iterable[Mapping[str, Any]]) -> set[int]:
    """The block numbers an eth_getLogs answer has logs in."""
    return {int(item["blockNumber"], 16) for item in raw}


def doubted(headers: Mapping[int, BlockHeader], blocks: Iterable[int], answered: set[int],
            query: BloomQuery) -> list[int]:
    """Blocks among `blocks` whose bloom may hold a log of `query` while the answer has none there."""
    return [n for n in blocks if n not in answered and n in headers and query.may_hold(headers[n].bloom)]
