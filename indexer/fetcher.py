"""Fetch a block range's token logs and headers from RPC, adapting the range, and prove them complete."""

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
from vip.indexer.bloom import BloomQuery
from vip.indexer.completeness import LogsBatch, blocks_of, doubted, plan_batches
from vip.indexer.decode import BlockHeader, TokenLog, address_topic, parse_header, parse_token_logs
from vip.indexer.ranges import AdaptiveRange, next_range
from vip.indexer.reorg import broken_link, headers_needed
from vip.indexer.store import copy_text

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
    # The logs as COPY text per table (`store.copy_text`), formatted while fetching when asked (`copy`):
    # the follower's commit then only sends it.
    copy: dict[str, bytes] | None = None


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
    """Token logs of several eth_getLogs answers, deduplicated (on transaction and log index) and in chain
    order."""
    logs = [parsed for raw in batches for parsed in parse_token_logs(raw)]
    # What a node sends is already in chain order without repeats: then the list is the answer as it is.
    # It is when (block, log index) strictly rises and no transaction comes back in a later run of logs
    # (a run: one transaction's logs in one block).
    ordered = True
    previous = (start - 1, -1)
    run: tuple[int, str] | None = None
    earlier_runs: set[str] = set()
    for lg in logs:
        if not start <= lg.block_number <= end:
            raise InconsistentResponse("eth_getLogs", f"log of block {lg.block_number} "
                                       f"outside [{start}, {end}]")
        if ordered:
            key = (lg.block_number, lg.log_index)
            ordered = key > previous
            previous = key
            if run is None or run[0] != lg.block_number or run[1] != lg.tx_hash:
                ordered = ordered and lg.tx_hash not in earlier_runs
                earlier_runs.add(lg.tx_hash)
                run = (lg.block_number, lg.tx_hash)
    if ordered:
        return logs
    seen: dict[tuple[str, int], TokenLog] = {}
    for lg in logs:
        seen[(lg.tx_hash, lg.log_index)] = lg
    return sorted(seen.values(), key=lambda lg: (lg.block_number, lg.log_index))


def decode_and_format(batches: list[list[dict[str, Any]]], start: int, end: int, network: str,
                      symbols: dict[str, str]) -> tuple[list[TokenLog], dict[str, bytes] | None]:
    """decode_logs, and the logs' COPY text when every log came with its block's timestamp (else None:
    the text is formatted once the headers are in)."""
    logs = decode_logs(batches, start, end)
    if any(lg.block_timestamp is None for lg in logs):
        return logs, None
    return logs, copy_text(network, logs, symbols, {})


class DoubtedRange(TransientRpcError):
    """The node that answered a range's logs could not prove them complete (it lacked the range's last
    block, or its logs of it): ask again, likely of another node."""

    kind = "doubted"


class LogFetcher:
    """eth_getLogs for one network, in `watched` mode (topic filters on addresses) or `all` mode, each
    range proven complete (indexer/completeness.py)."""

    def __init__(self, rpc: RpcClient, network: NetworkConfig, max_addresses_per_filter: int,
                 sizer: AdaptiveRange, target_logs: int) -> None:
        self.rpc = rpc
        self.network = network
        self.tokens = [t.address.lower() for t in network.tokens.values()]
        self.symbols = network.token_by_address()
        self.max_addresses = max_addresses_per_filter
        self.sizer = sizer
        self.target_logs = target_logs
        self.token_events = BloomQuery.of(self.tokens, EVENT_TOPICS)
        self.log = log.bind(network=network.name)

    def filters(self, addresses: Selection) -> list[dict[str, Any]]:
        """One filter for `all` mode and for `token_logs`; two per address chunk with topic filters (as
        topic1, as topic2), since a filter ANDs topic positions and we want logs where the address is on
        either side."""
        return [f for f, _ in self._filters(addresses)]

    def _filters(self, addresses: Selection) -> list[tuple[dict[str, Any], tuple[str, ...] | None]]:
        """`filters`, each with the addresses it asks about (None: every token log)."""
        base = {"address": self.tokens}
        if addresses is None or isinstance(addresses, TokenLogFilter):
            return [({**base, "topics": [EVENT_TOPICS]}, None)]
        result: list[tuple[dict[str, Any], tuple[str, ...] | None]] = []
        for i in range(0, len(addresses), self.max_addresses):
            chunk = tuple(addresses[i:i + self.max_addresses])
            topics = [address_topic(a) for a in chunk]
            result.append(({**base, "topics": [EVENT_TOPICS, topics]}, chunk))
            result.append(({**base, "topics": [EVENT_TOPICS, None, topics]}, chunk))
        return result

    async def fetch_range(self, cursor: int, cursor_hash: str | None, limit: int, checked_from: int,
                          addresses: Selection, *, link: bool = True, copy: bool = False) -> FetchedRange:
        """The next range after `cursor` (at most up to `limit`), proven complete: its logs and the
        header of its end from one node, every block from `checked_from` on checked against its bloom
        and read again by hash when doubted; with `link`, its headers link to the cursor's hash and to
        each other; with `copy`, its logs' COPY text is formatted too (off the event loop for a large
        range). The range shrinks on "too many results" and on failures, and grows only once a
        range has passed every check."""
        failures = doubts = 0
        selection = addresses
        probe = True
        while True:
            start, end = next_range(cursor, limit, self.sizer.size)  # type: ignore[misc]
            metrics.BLOCK_RANGE_SIZE.labels(self.network.name).set(self.sizer.size)
            try:
                fetched, answered = await self._fetch_checked(start, end, cursor_hash, checked_from,
                                                              selection, link, probe, copy)
            except RangeTooLargeError as exc:
                if isinstance(selection, TokenLogFilter) and start == end:
                    # One block with more token logs than the provider's result cap (decision 175). The
                    # refusal shows the node has its logs: no probe of them (it would be refused too).
                    self.log.warning("block over the result cap; asked by topic filters", block=start)
                    selection, probe = selection.addresses(), False
                    continue
                if exc.cap and exc.cap < end - start + 1:
                    self.sizer.cap(exc.cap)
                elif exc.suggested_size and exc.suggested_size < end - start + 1:
                    self.sizer.suggest(exc.suggested_size)
                else:
                    self.sizer.failed()
                failures += 1
            except (DoubtedRange, NodeBehindError):
                # The answering node lacks the range's newest block (or its logs): ask again, a block
                # shorter, which that node or another likely has. The size is not at fault and stays.
                doubts += 1
                if doubts >= 8:
                    raise
                limit = max(start, end - 1)
                continue
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
                return fetched
            if failures >= 12:
                raise TransientRpcError("eth_getLogs", f"range after {cursor} keeps failing")

    async def _fetch_checked(self, start: int, end: int, cursor_hash: str | None, checked_from: int,
                             selection: Selection, link: bool, probe: bool,
                             copy: bool = False) -> tuple[FetchedRange, int]:
        """One attempt at [start, end]: the checked range and how many logs the node answered with."""
        needed = headers_needed(start, end, checked_from, set()) if link else \
            list(range(max(start, checked_from), end + 1))
        proof = end >= checked_from
        empty = selection is not None and not (selection.keys if isinstance(selection, TokenLogFilter)
                                               else selection)
        filters = [] if empty else self._filters(selection)
        topic_mode = bool(filters) and filters[0][1] is not None
        items, units = self.rpc.batch_limits()
        batches, rest = plan_batches(filters, needed, end, proof and bool(filters),
                                     proof and topic_mode and probe, items, units,
                                     self.rpc.weight("eth_getLogs"), self.rpc.weight("eth_getBlockByNumber"))
        answers = [await self._ask(batch, start, end) for batch in batches]
        headers: dict[int, BlockHeader] = {}
        for answer in answers:
            headers.update(answer.headers)
        headers.update(await self._headers_of_chain(rest))

        if link and cursor_hash is not None and headers[start].parent_hash != cursor_hash:
            raise ReorgDetected(start)
        window = [headers[n] for n in range(max(start, checked_from), end + 1)]
        if (broken := broken_link(window)) is not None:
            raise InconsistentResponse("eth_getBlockByNumber", f"headers do not link at {broken}")
        checked = range(max(start, checked_from), end + 1)
        for batch, answer in zip(batches, answers, strict=True):
            await self._prove(batch, answer, headers, checked, end)

        raw = [logs for answer in answers for logs in answer.logs]
        answered = sum(map(len, raw))
        if isinstance(selection, TokenLogFilter):
            raw = [touching(logs, selection.keys) for logs in raw]
        inline = sum(map(len, raw)) < _DECODE_INLINE_MAX
        texts: dict[str, bytes] | None = None
        if not copy:
            logs = decode_logs(raw, start, end) if inline else \
                await asyncio.to_thread(decode_logs, raw, start, end)
        elif inline:
            logs, texts = decode_and_format(raw, start, end, self.network.name, self.symbols)
        else:
            # NOTE: a large range decodes (and formats its COPY text) on a worker thread: its bytecode
            # yields the GIL every few ms, so the event loop keeps feeding the database the previous range
            # meanwhile, and the commit only sends the text.
            logs, texts = await asyncio.to_thread(decode_and_format, raw, start, end, self.network.name,
                                                  self.symbols)
        untimed = sorted({lg.block_number for lg in logs if lg.block_timestamp is None} - headers.keys())
        headers.update(await self._headers_of_chain(untimed))
        for lg in logs:
            header = headers.get(lg.block_number)
            if header is not None and header.hash != lg.block_hash:
                raise InconsistentResponse("eth_getLogs",
                                           f"log hash differs from header at {lg.block_number}")
        if copy and texts is None:
            # Some log came without its block's timestamp: formatted now the headers are in.
            timestamps = {n: h.timestamp for n, h in headers.items()}
            texts = copy_text(self.network.name, logs, self.symbols, timestamps) if inline else \
                await asyncio.to_thread(copy_text, self.network.name, logs, self.symbols, timestamps)
        return FetchedRange(start, end, logs, headers, texts), answered

    async def _ask(self, batch: LogsBatch, start: int, end: int) -> _Answer:
        """One batch, one node: its logs answers, its probe's, its headers; doubted when it lacks `end`."""
        span = {"fromBlock": hex(start), "toBlock": hex(end)}
        calls: list[tuple[str, list[Any]]] = [("eth_getLogs", [{**f, **span}]) for f in batch.filters]
        if batch.probe:
            calls.append(("eth_getLogs", [{"address": self.tokens, "topics": [EVENT_TOPICS],
                                           "fromBlock": hex(end), "toBlock": hex(end)}]))
        calls += [("eth_getBlockByNumber", [hex(n), False]) for n in batch.headers]
        replies = await self.rpc.batch_one(calls)
        logs = [r or [] for r in replies[:len(batch.filters)]]
        probed = replies[len(batch.filters)] or [] if batch.probe else None
        headers = {}
        for number, block in zip(batch.headers, replies[len(replies) - len(batch.headers):], strict=True):
            if block is None:
                if number == end:
                    self._doubt("node_behind", end, "the node answering the logs has no block at the "
                                                    "range's end; asking again")
                    raise DoubtedRange("eth_getLogs", f"node lacks block {end}")
                raise NodeBehindError("eth_getBlockByNumber", f"node has no block {number} yet")
            headers[number] = _header(number, block)
        return _Answer(logs, probed, headers)

    async def _prove(self, batch: LogsBatch, answer: _Answer, headers: Mapping[int, BlockHeader],
                     checked: range, end: int) -> None:
        """Doubt the blocks of `checked` whose bloom names logs the batch's answer lacks, and read each
        again by its hash (the answer's logs of it replaced)."""
        if not batch.filters or not checked:
            return
        answered = set().union(*map(blocks_of, answer.logs))
        if batch.parties is None:
            suspects = doubted(headers, checked, answered, self.token_events)
        elif answer.probe is not None and self.token_events.may_hold(headers[end].bloom):
            if not answer.probe:
                # Its logs stop short of a block it has the header of: its other answers are suspect too.
                self._doubt("logs_missing", end, "the node has the range end's header but not its logs; "
                                                 "asking again")
                raise DoubtedRange("eth_getLogs", f"node lacks the logs of block {end}")
            suspects = []  # its logs reach the end, so every block below (a log index fills in order)
        else:
            parties = BloomQuery.of(self.tokens, EVENT_TOPICS, [address_topic(a) for a in batch.parties])
            suspects = doubted(headers, checked, answered, parties)
        for number in suspects:
            found = await self._read_by_hash(batch, headers[number])
            self._doubt("logs_missing", number, "block's bloom names our tokens' logs the answer lacked; "
                                                "read again by hash", found=len(found))
            for logs in answer.logs:
                logs[:] = [lg for lg in logs if int(lg["blockNumber"], 16) != number]
            answer.logs.append(found)

    async def _read_by_hash(self, batch: LogsBatch, header: BlockHeader) -> list[dict[str, Any]]:
        """The batch's logs of one block, by its hash, with the block itself in the same request: a node
        that does not know the hash answers no block (or refuses the logs, as EIP-234 allows), and the read
        is made again."""
        calls: list[tuple[str, list[Any]]] = [("eth_getBlockByHash", [header.hash, False])]
        calls += [("eth_getLogs", [{**f, "blockHash": header.hash}]) for f in batch.filters]
        for _ in range(6):
            try:
                replies = await self.rpc.batch_one(calls, max_attempts=2)
            except TransientRpcError:
                continue
            if replies[0] is not None and str(replies[0].get("hash", "")).lower() == header.hash:
                return [lg for r in replies[1:] for lg in (r or [])]
        raise DoubtedRange("eth_getLogs", f"no node answered block {header.number} by its hash")

    def _doubt(self, reason: str, block: int, message: str, **fields: Any) -> None:
        metrics.DOUBTED_BLOCKS.labels(self.network.name, reason).inc()
        self.log.warning(message, block=block, reason=reason, **fields)

    async def _headers_of_chain(self, numbers: list[int]) -> dict[int, BlockHeader]:
        """Headers of blocks the chain has (a node answering a range's logs had them): one a lagging node
        lacks is asked again a few times."""
        result: dict[int, BlockHeader] = {}
        missing = list(numbers)
        for _ in range(4):
            if not missing:
                break
            blocks = await self.rpc.get_blocks(missing)
            for number, block in zip(missing, blocks, strict=True):
                if block is not None:
                    result[number] = _header(number, block)
            missing = [n for n in missing if n not in result]
        if missing:
            raise NodeBehindError("eth_getBlockByNumber", f"no node answered block {missing[0]}")
        return result

    async def headers(self, numbers: list[int]) -> dict[int, BlockHeader]:
        blocks = await self.rpc.get_blocks(numbers)
        result = {}
        for number, block in zip(numbers, blocks, strict=True):
            if block is None:
                raise NodeBehindError("eth_getBlockByNumber", f"node has no block {number} yet")
            result[number] = _header(number, block)
        return result


@dataclass
class _Answer:
    """What one node answered for a LogsBatch: each filter's logs, the probe's (None: no probe), headers."""

    logs: list[list[dict[str, Any]]]
    probe: list[dict[str, Any]] | None
    headers: dict[int, BlockHeader]


def _header(number: int, block: dict[str, Any]) -> BlockHeader:
    header = parse_header(block)
    if header.number != number:
        raise InconsistentResponse("eth_getBlockByNumber", f"asked {number}, got {header.number}")
    return header
