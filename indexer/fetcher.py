"""Fetch a block range's token logs and headers from RPC, adapting the range, and check they agree."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from vip import metrics
from vip.chain.contracts import APPROVAL_TOPIC, TRANSFER_TOPIC
from vip.chain.rpc import (
    NodeBehindError,
    RangeTooLargeError,
    RateLimitedError,
    RpcClient,
    TransientRpcError,
)
from vip.config import NetworkConfig
from vip.indexer.decode import BlockHeader, TokenLog, address_topic, parse_header, parse_token_log
from vip.indexer.ranges import AdaptiveRange, next_range
from vip.indexer.reorg import broken_link, headers_needed

log = structlog.get_logger(__name__)

EVENT_TOPICS = [TRANSFER_TOPIC, APPROVAL_TOPIC]


class InconsistentResponse(TransientRpcError):
    """The node's answers disagree with each other (the chain moved between two calls): retry."""

    kind = "inconsistent"


class ReorgDetected(Exception):
    """The first new block does not link to the cursor's hash."""

    def __init__(self, block_number: int) -> None:
        super().__init__(f"block {block_number} does not extend the indexed chain")
        self.block_number = block_number


@dataclass(frozen=True)
class FetchedRange:
    start: int
    end: int
    logs: list[TokenLog]
    headers: dict[int, BlockHeader]


_DECODE_INLINE_MAX = 500


def decode_logs(batches: list[list[dict[str, Any]]], start: int, end: int) -> list[TokenLog]:
    """Token logs of several eth_getLogs answers, deduplicated and in chain order."""
    seen: dict[tuple[str, int], TokenLog] = {}
    for raw in batches:
        for parsed in map(parse_token_log, raw):
            if parsed is None:
                continue
            if not start <= parsed.block_number <= end:
                raise InconsistentResponse("eth_getLogs", f"log of block {parsed.block_number} "
                                           f"outside [{start}, {end}]")
            seen[(parsed.tx_hash, parsed.log_index)] = parsed
    return sorted(seen.values(), key=lambda lg: (lg.block_number, lg.log_index))


class LogFetcher:
    """eth_getLogs for one network, in `watched` mode (topic filters on addresses) or `all` mode."""

    def __init__(self, rpc: RpcClient, network: NetworkConfig, max_addresses_per_filter: int,
                 sizer: AdaptiveRange, target_logs: int) -> None:
        self.rpc = rpc
        self.network = network
        self.tokens = [t.address.lower() for t in network.tokens.values()]
        self.max_addresses = max_addresses_per_filter
        self.sizer = sizer
        self.target_logs = target_logs

    def filters(self, addresses: Sequence[str] | None) -> list[dict[str, Any]]:
        """One filter for `all` mode; two per address chunk in `watched` mode (as topic1, as topic2),
        since a filter ANDs topic positions and we want logs where the address is on either side."""
        base = {"address": self.tokens}
        if addresses is None:
            return [{**base, "topics": [EVENT_TOPICS]}]
        result = []
        for i in range(0, len(addresses), self.max_addresses):
            topics = [address_topic(a) for a in addresses[i:i + self.max_addresses]]
            result.append({**base, "topics": [EVENT_TOPICS, topics]})
            result.append({**base, "topics": [EVENT_TOPICS, None, topics]})
        return result

    async def logs_in(self, start: int, end: int, addresses: Sequence[str] | None) -> list[TokenLog]:
        """All token logs in [start, end] for the address set (None: every log of the tokens)."""
        if addresses is not None and not addresses:
            return []
        batches = [await self.rpc.get_logs({**flt, "fromBlock": hex(start), "toBlock": hex(end)})
                   for flt in self.filters(addresses)]
        if sum(map(len, batches)) < _DECODE_INLINE_MAX:
            return decode_logs(batches, start, end)
        # NOTE: a large range decodes on a worker thread: its bytecode yields the GIL every few ms, so
        # the event loop keeps feeding the database the previous range meanwhile.
        return await asyncio.to_thread(decode_logs, batches, start, end)

    async def logs_adaptive(self, cursor: int, limit: int, addresses: Sequence[str] | None,
                            ) -> tuple[int, int, list[TokenLog], BlockHeader]:
        """Logs of the next range after `cursor` (at most up to `limit`), shrinking the range on
        "too many results" and on failures, growing it after successes. Also returns the range's end
        header as the node knew it just before the log calls."""
        failures = 0
        while True:
            start, end = next_range(cursor, limit, self.sizer.size)  # type: ignore[misc]
            metrics.BLOCK_RANGE_SIZE.labels(self.network.name).set(self.sizer.size)
            try:
                end_before = (await self.headers([end]))[end]
                logs = await self.logs_in(start, end, addresses)
            except RangeTooLargeError as exc:
                if exc.cap and exc.cap < end - start + 1:
                    self.sizer.cap(exc.cap)
                elif exc.suggested_size and exc.suggested_size < end - start + 1:
                    self.sizer.suggest(exc.suggested_size)
                else:
                    self.sizer.failed()
                failures += 1
            except NodeBehindError:
                raise
            except RateLimitedError:
                # A throttle says nothing about the range: the client already waited (Retry-After);
                # ask the same range again rather than paying for more, smaller calls.
                failures += 1
                if failures >= 6:
                    raise
                continue
            except TransientRpcError:
                self.sizer.failed()
                failures += 1
                if failures >= 6 and self.sizer.size == self.sizer.minimum:
                    raise
            else:
                self.sizer.succeeded(len(logs), self.target_logs)
                return start, end, logs, end_before
            if failures >= 12:
                raise TransientRpcError("eth_getLogs", f"range after {cursor} keeps failing")

    async def headers(self, numbers: list[int]) -> dict[int, BlockHeader]:
        blocks = await self.rpc.get_blocks(numbers)
        result = {}
        for number, block in zip(numbers, blocks, strict=True):
            if block is None:
                raise NodeBehindError("eth_getBlockByNumber", f"node has no block {number} yet")
            header = parse_header(block)
            if header.number != number:
                raise InconsistentResponse("eth_getBlockByNumber", f"asked {number}, got {header.number}")
            result[number] = header
        return result

    async def fetch_range(self, cursor: int, cursor_hash: str | None, head: int, finalized: int,
                          addresses: Sequence[str] | None) -> FetchedRange:
        """The next range after the cursor, checked: headers link to the cursor and to each other, and
        the chain did not move between the header and log calls (so no log can be missing)."""
        start, end, logs, end_before = await self.logs_adaptive(cursor, head, addresses)
        untimed = {lg.block_number for lg in logs if lg.block_timestamp is None}
        headers = await self.headers(headers_needed(start, end, finalized, untimed))
        if cursor_hash is not None and headers[start].parent_hash != cursor_hash:
            raise ReorgDetected(start)
        window = [headers[n] for n in range(max(start, finalized + 1), end + 1)]
        if (broken := broken_link(window)) is not None:
            raise InconsistentResponse("eth_getBlockByNumber", f"headers do not link at {broken}")
        for lg in logs:
            header = headers.get(lg.block_number)
            if header is not None and header.hash != lg.block_hash:
                raise InconsistentResponse("eth_getLogs",
                                           f"log hash differs from header at {lg.block_number}")
        # NOTE: the end block's hash, the same before and after the log calls, proves the logs come from
        # this one chain: a reorg between the calls, or a node that clamps the range to its own lagging
        # head (fewer logs, no error), would show as a missing or different end block.
        if headers[end].hash != end_before.hash:
            raise InconsistentResponse("eth_getBlockByNumber", f"block {end} changed during the fetch")
        return FetchedRange(start, end, logs, headers)
