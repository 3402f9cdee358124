"""Fetch a block range's token logs and headers from RPC, adapting the range, and check they agree."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
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


@dataclass(frozen=True)
class TokenLogFilter:
    """The `token_logs` way of watching (decision 175): one eth_getLogs for every log of the tokens, and
    only those whose two address topics touch one of `keys` (bare lower-case hex, as an address ends a
    topic) are decoded and kept. `addresses` gives the same set as `0x` addresses, for a block holding
    more token logs than the provider answers with: that one block is asked by topic filters."""

    keys: frozenset[str]
    addresses: Callable[[], Sequence[str]]


# What a range is asked for: every token log (None), topic filters on these addresses, or all token logs
# filtered in memory.
Selection = Sequence[str] | TokenLogFilter | None

_DECODE_INLINE_MAX = 500


def touching(raw: list[dict[str, Any]], keys: frozenset[str]) -> list[dict[str, Any]]:
    """The raw logs whose second or third topic (Transfer: from, to; Approval: owner, spender) ends in one
    of `keys`: a set lookup on the topic text, before any decoding."""
    kept = []
    for item in raw:
        topics = item.get("topics")
        if topics and len(topics) == 3 and (topics[1][-40:].lower() in keys
                                            or topics[2][-40:].lower() in keys):
            kept.append(item)
    return kept


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

    def filters(self, addresses: Selection) -> list[dict[str, Any]]:
        """One filter for `all` mode and for `token_logs`; two per address chunk with topic filters (as
        topic1, as topic2), since a filter ANDs topic positions and we want logs where the address is on
        either side."""
        base = {"address": self.tokens}
        if addresses is None or isinstance(addresses, TokenLogFilter):
            return [{**base, "topics": [EVENT_TOPICS]}]
        result = []
        for i in range(0, len(addresses), self.max_addresses):
            topics = [address_topic(a) for a in addresses[i:i + self.max_addresses]]
            result.append({**base, "topics": [EVENT_TOPICS, topics]})
            result.append({**base, "topics": [EVENT_TOPICS, None, topics]})
        return result

    async def logs_in(self, start: int, end: int, addresses: Selection) -> list[TokenLog]:
        """All token logs in [start, end] for the selection (None: every log of the tokens)."""
        return (await self._logs_counted(start, end, addresses))[0]

    async def _logs_counted(self, start: int, end: int, addresses: Selection) -> tuple[list[TokenLog], int]:
        """The range's logs, and how many logs the node answered with (what sizes the next range)."""
        if addresses is not None and not (addresses.keys if isinstance(addresses, TokenLogFilter)
                                          else addresses):
            return [], 0
        batches = [await self.rpc.get_logs({**flt, "fromBlock": hex(start), "toBlock": hex(end)})
                   for flt in self.filters(addresses)]
        answered = sum(map(len, batches))
        if isinstance(addresses, TokenLogFilter):
            batches = [touching(raw, addresses.keys) for raw in batches]
        if sum(map(len, batches)) < _DECODE_INLINE_MAX:
            return decode_logs(batches, start, end), answered
        # NOTE: a large range decodes on a worker thread: its bytecode yields the GIL every few ms, so
        # the event loop keeps feeding the database the previous range meanwhile.
        return await asyncio.to_thread(decode_logs, batches, start, end), answered

    async def logs_adaptive(self, cursor: int, limit: int, addresses: Selection,
                            known: Mapping[int, BlockHeader] | None = None,
                            ) -> tuple[int, int, list[TokenLog], BlockHeader]:
        """Logs of the next range after `cursor` (at most up to `limit`), shrinking the range on
        "too many results" and on failures, growing it after successes. Also returns the range's end
        header as the node knew it before the log calls: one of `known` (headers the caller fetched
        before calling: the heads it saw) when the range ends at it, else fetched first."""
        failures = 0
        selection = addresses
        while True:
            start, end = next_range(cursor, limit, self.sizer.size)  # type: ignore[misc]
            metrics.BLOCK_RANGE_SIZE.labels(self.network.name).set(self.sizer.size)
            try:
                seen = known.get(end) if known is not None else None
                # A head seen earlier serves: it was fetched before this range's log calls (decision 180).
                end_before = seen if seen is not None else (await self.headers([end]))[end]
                logs, answered = await self._logs_counted(start, end, selection)
            except RangeTooLargeError as exc:
                if isinstance(selection, TokenLogFilter) and start == end:
                    # One block with more token logs than the provider's result cap (decision 175).
                    log.warning("block over the result cap; asked by topic filters",
                                network=self.network.name, block=start)
                    selection = selection.addresses()
                    continue
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
                self.sizer.succeeded(answered, self.target_logs)
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
                          addresses: Selection, known: Mapping[int, BlockHeader] | None = None,
                          ) -> FetchedRange:
        """The next range after the cursor, checked: headers link to the cursor and to each other, and
        the chain did not move between the header and log calls (so no log can be missing). `known`:
        headers fetched before this call (heads seen), used as the end's "before" when the range ends at
        one of them."""
        start, end, logs, end_before = await self.logs_adaptive(cursor, head, addresses, known)
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
