"""The live follower of one network: cursor -> head, one checked range per transaction, reorg repair."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import psycopg
import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.chain.rpc import NodeBehindError, RpcCallError, RpcClient, RpcError
from vip.config import IndexerConfig, NetworkConfig
from vip.errors import ERROR_TEXT_LIMIT
from vip.indexer import store
from vip.indexer.completeness import CHECKED_DEPTH
from vip.indexer.decode import BlockHeader, parse_header
from vip.indexer.fetcher import FetchedRange, LogFetcher, ReorgDetected, Selection, TokenLogFilter
from vip.indexer.progress import Progress
from vip.indexer.ranges import finalized_block
from vip.indexer.reorg import first_common_block, header_window_start
from vip.indexer.store import Cursor
from vip.indexer.watchset import WATCH_SET_CHANNEL, WatchSetCache, WatchSnapshot
from vip.run_loop import failure_backoff_s, sleep_or_stop
from vip.store.listen import listen_and_wake

log = structlog.get_logger(__name__)

# A sync further behind than this many blocks reports progress (blocks/s, ETA).
PROGRESS_THRESHOLD_BLOCKS = 5000
# The lag counts from the highest head a node showed in this many seconds (a reorg forgets them).
HEAD_MEMORY_S = 60.0
# Requests asking for our tip before a suspected reorg is repaired (a lagging node has no block there).
TIP_RECHECKS = 4


class ChainIdMismatch(Exception):
    pass


class LeadershipLost(Exception):
    """Another daemon took the network's lead (the cursor row's fencing token moved on): this follower
    commits nothing more and stops."""


def holder_name() -> str:
    """How a daemon names itself as a network's leader (`chain_cursors.leader`)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Follower:
    """Follows one network from its cursor to the head; safe to kill at any point."""

    def __init__(self, network: NetworkConfig, engine: AsyncEngine, rpc: RpcClient, fetcher: LogFetcher,
                 config: IndexerConfig, holder: str | None = None) -> None:
        self.network = network
        self.holder = holder or holder_name()
        # The fencing token this follower's lead got (prepare()); every commit checks it under the cursor
        # row lock, so a follower another daemon has deposed can never store a range.
        self.token: int | None = None
        self.name = network.name
        self.engine = engine
        self.rpc = rpc
        self.fetcher = fetcher
        self.config = config
        self.symbols = network.token_by_address()
        self._behind_since: float | None = None
        self._prefetch: _Prefetch | None = None
        self._progress: Progress | None = None
        self._tag_unknown = False
        self._final: tuple[float, int] | None = None  # (monotonic time asked, the tag's block)
        self._tip_seen: tuple[str, Cursor] | None = None  # (head hash, cursor) last found consistent
        # Heads the nodes showed lately (monotonic time, head): lag counts from the highest (decision 236).
        self._heads_seen: deque[tuple[float, BlockHeader]] = deque()
        self._indexed: tuple[int, int | None] | None = None  # the cursor's block and its timestamp
        extra = (network.disbursement_contract,) if network.disbursement_contract else ()
        self.watch = WatchSetCache(self.name, config.watch_set_reload_s, extra)
        self._strategy: str | None = None
        self._watch_changed = asyncio.Event()  # addresses were removed: reload the watch set
        self.log = log.bind(network=self.name)

    # --- start ---------------------------------------------------------------------------------------

    async def prepare(self) -> Cursor:
        """Check the node's chain id against config and the database, create the cursor if new, and take
        the network's lead: raise its fencing token (after any commit of the previous leader under way)
        and load the watch set whole from then on."""
        cursor = await self._prepare_cursor()
        async with self.engine.begin() as conn:
            self.token = await store.take_lead(conn, self.name, self.holder)
        self.watch.invalidate()
        return cursor

    async def _prepare_cursor(self) -> Cursor:
        chain_id = await self.rpc.chain_id()
        if chain_id != self.network.chain_id:
            raise ChainIdMismatch(
                f"{self.name}: RPC chain id {chain_id}, config says {self.network.chain_id}")
        async with self.engine.begin() as conn:
            stored = await store.stored_chain_id(conn, self.name)
            if stored is not None and stored != chain_id:
                raise ChainIdMismatch(f"{self.name}: database indexed chain id {stored}, RPC is {chain_id}")
            cursor = await store.load_cursor(conn, self.name)
        if cursor is not None:
            return cursor
        start = self.network.start_block
        anchor_hash = None
        if start > 0:
            anchor_hash = (await self.fetcher.headers([start - 1]))[start - 1].hash
        async with self.engine.begin() as conn:
            await store.init_cursor(conn, self.name, chain_id, Cursor(start - 1, anchor_hash))
            return await store.load_cursor(conn, self.name)  # type: ignore[return-value]

    def _started_at(self, cursor: Cursor) -> None:
        self._indexed = (cursor.block_number, None)
        metrics.INDEXED_BLOCK.labels(self.name).set(cursor.block_number)
        metrics.CURSOR_MOVED.labels(self.name).set(time.time())

    # --- one iteration ---------------------------------------------------------------------------------

    async def step(self) -> bool:
        """Index the next range; True when caught up with the head (the caller then waits a poll)."""
        head, finalized = await self._head_and_final()
        self._saw_head(head)
        if self._watch_changed.is_set():
            self._watch_changed.clear()
            self.watch.invalidate()
        async with self.engine.connect() as conn:
            cursor = await store.load_cursor(conn, self.name)
            # Every address not covered yet is in `watch`: a range fetched with it covers them from its
            # first block on.
            watch, new_addresses = await self.watch.refresh(conn)
        assert cursor is not None, "prepare() creates the cursor"
        if self._indexed is None or self._indexed[0] != cursor.block_number:
            self._indexed = (cursor.block_number, None)
        # Stay `head_margin` blocks behind this node's head: not for correctness (every range is proven
        # complete), but so that a range seldom ends at a block other nodes lack yet (asked again) or that
        # a shallow reorg replaces (rolled back); the lag metrics count from the highest head seen.
        target = head.number - self.network.head_margin
        checked_from = min(finalized, head.number - CHECKED_DEPTH)
        metrics.WATCHED_ADDRESSES.labels(self.name).set(self.watch.watched)

        if target <= cursor.block_number:
            await self._check_tip(cursor, head)
            if new_addresses:
                # Idle at the head: the next range starts after the cursor and will include them.
                async with self.engine.begin() as conn:
                    self._check_lead(await store.locked_cursor(conn, self.name))
                    await store.mark_live_from(conn, self.name, new_addresses,
                                               self._live_from(cursor.block_number + 1))
            metrics.LAST_PROGRESS.labels(self.name).set(time.time())
            return True
        self._behind_since = None

        selection = self._selection(watch)
        started = time.perf_counter()
        try:
            fetched = await self._take_prefetched(cursor, watch.version)
            if fetched is None:
                fetched = await self.fetcher.fetch_range(cursor.block_number, cursor.block_hash,
                                                         target, checked_from, selection, copy=True)
        except ReorgDetected as exc:
            self.log.warning("reorg suspected", block=exc.block_number, cursor=cursor.block_number)
            await self._repair_reorg(cursor, head)
            return False
        fetched_at = time.perf_counter()
        if fetched.end < target:
            # Catching up: download the next range while this one is written.
            next_cursor = Cursor(fetched.end, fetched.headers[fetched.end].hash)
            self._prefetch = _Prefetch(next_cursor, watch.version, asyncio.create_task(
                self.fetcher.fetch_range(next_cursor.block_number, next_cursor.block_hash, target,
                                         checked_from, selection, copy=True)))
        await self._commit(fetched, head, finalized, new_addresses)
        # Polls that see this same head need not ask about the new tip: nothing changed on the node
        # since it was fetched (a change shows as another head, and the next range checks its link).
        self._tip_seen = (head.hash, Cursor(fetched.end, fetched.headers[fetched.end].hash))
        metrics.BATCH_SECONDS.labels(self.name, "fetch").observe(fetched_at - started)
        metrics.BATCH_SECONDS.labels(self.name, "store").observe(time.perf_counter() - fetched_at)
        metrics.LAST_PROGRESS.labels(self.name).set(time.time())
        self._report_progress(cursor.block_number, fetched.end, target)
        return fetched.end >= target

    def _selection(self, watch: WatchSnapshot) -> Selection:
        """How this range is asked for: every token log (`all` mode), topic filters on the watch set, or
        every token log filtered in memory (decision 175)."""
        if self.network.mode == "all":
            return None
        strategy = self.network.watched_fetch
        if strategy == "auto":
            small = len(watch) <= self.network.topic_filter_max_addresses
            strategy = "topic_filters" if small else "token_logs"
        if strategy != self._strategy:
            self.log.info("watched logs fetched by " + strategy.replace("_", " "), watched=len(watch),
                          setting=self.network.watched_fetch)
            self._strategy = strategy
        return TokenLogFilter(watch.keys, watch.addresses) if strategy == "token_logs" else watch.addresses()

    async def _head_and_final(self) -> tuple[BlockHeader, int]:
        """The node's head and the highest block it calls final: its `finalized` (or `safe`) block, asked
        in the same HTTP request as the head so both come from one node, at most every
        `finality_refresh_s` (in between the last answer stands: a final block stays final);
        `finality_depth` behind the head on a network configured so, or whose node does not know the
        tag (logged once)."""
        now = time.monotonic()
        if self._final is not None and now - self._final[0] < self.network.finality_refresh_s \
                and not self._tag_unknown:
            head = parse_header(await self.rpc.call("eth_getBlockByNumber", ["latest", False]))
            return head, min(self._final[1], head.number)
        if self.network.finality != "depth" and not self._tag_unknown:
            try:
                latest, tagged = await self.rpc.batch_one([
                    ("eth_getBlockByNumber", ["latest", False]),
                    ("eth_getBlockByNumber", [self.network.finality, False])])
            except RpcCallError as exc:
                self._tag_unknown = True
                self.log.error("node does not answer the finality tag; using finality_depth instead",
                               tag=self.network.finality, finality_depth=self.network.finality_depth,
                               error=exc.message[:ERROR_TEXT_LIMIT])
            else:
                head = parse_header(latest)
                # A node may not have a finalized block yet (a young chain): nothing is final then.
                final = parse_header(tagged).number if tagged else -1
                self._final = (now, final)
                return head, min(final, head.number)
        head = parse_header(await self.rpc.call("eth_getBlockByNumber", ["latest", False]))
        return head, finalized_block(head.number, self.network.finality_depth)

    async def _take_prefetched(self, cursor: Cursor, watch_version: int) -> FetchedRange | None:
        """The prefetched next range, if it continues from this cursor with the same watch set (a range
        fetched before an address joined would not cover it)."""
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is None:
            return None
        if prefetch.cursor == cursor and prefetch.watch_version == watch_version:
            return await prefetch.task
        await _cancel(prefetch.task)
        return None

    async def _commit(self, fetched: FetchedRange, head: BlockHeader, finalized: int,
                      new_addresses: list[str]) -> None:
        timestamps = {n: h.timestamp for n, h in fetched.headers.items()}
        keep_from = header_window_start(fetched.end, finalized)
        headers = [h for n, h in fetched.headers.items() if n >= keep_from]
        end_header = fetched.headers[fetched.end]
        for direct in (True, False):
            try:
                async with self.engine.begin() as conn:
                    # The cursor row lock serialises this commit with backfills, reorg repair and a
                    # take of the lead; the token proves this follower still leads, so its watch set is
                    # whole: it was loaded after the take, and only the leader marks addresses live.
                    locked = self._check_lead(await store.locked_cursor(conn, self.name))
                    if locked is None or locked.block_number != fetched.start - 1:
                        self.log.warning("cursor moved during fetch; discarding range", start=fetched.start)
                        return
                    transfers, approvals = await store.commit_range(
                        conn, self.name, logs=fetched.logs, symbols=self.symbols, timestamps=timestamps,
                        headers=headers, cursor=Cursor(fetched.end, end_header.hash),
                        keep_headers_from=keep_from, direct=direct, texts=fetched.copy, final=finalized)
                    if new_addresses:
                        await store.mark_live_from(conn, self.name, new_addresses,
                                                   self._live_from(fetched.start))
                break
            except psycopg.errors.UniqueViolation:
                # Rows above the cursor should never exist; if some do, merge rather than fail.
                self.log.warning("range already partly stored; merging", block_from=fetched.start)
        metrics.LOGS_INGESTED.labels(self.name, "transfer").inc(transfers)
        metrics.LOGS_INGESTED.labels(self.name, "approval").inc(approvals)
        metrics.INDEXED_BLOCK.labels(self.name).set(fetched.end)
        metrics.CURSOR_MOVED.labels(self.name).set(time.time())
        self._indexed = (fetched.end, end_header.timestamp)
        self.log.debug("indexed range", block_from=fetched.start, block_to=fetched.end,
                       logs=len(fetched.logs), finalized=finalized)

    def _check_lead(self, locked: tuple[Cursor, int] | None) -> Cursor | None:
        """The locked cursor, if this follower still leads the network; else LeadershipLost."""
        if locked is None:
            return None
        cursor, token = locked
        if token != self.token:
            raise LeadershipLost(f"{self.name}: the lead moved to token {token}; this follower had "
                                 f"{self.token}")
        return cursor

    def _live_from(self, first_block: int) -> int:
        """First block the live follower covers for an address it starts watching at `first_block`:
        in `all` mode it covers every log from the network's start block anyway."""
        return self.network.start_block if self.network.mode == "all" else first_block

    # --- tip check and reorg repair ---------------------------------------------------------------------

    async def _check_tip(self, cursor: Cursor, head: BlockHeader) -> None:
        """Caught up: make sure our tip is still the node's block at that height."""
        if cursor.block_hash is None or cursor.block_number < 0:
            return
        if self._tip_seen == (head.hash, cursor):
            return  # the same head as when this tip was last found on its chain: nothing to ask again
        if head.number < cursor.block_number:
            # A node behind our cursor is usually a lagging replica: wait, then treat as a reorg to a
            # shorter chain only if it stays behind.
            now = time.monotonic()
            self._behind_since = self._behind_since or now
            if now - self._behind_since < self.config.lag_grace_s:
                return
        else:
            self._behind_since = None  # a node at or past our cursor: whatever lagged has caught up
            tip = head if head.number == cursor.block_number else None
            if tip is None:
                try:
                    tip = (await self.fetcher.headers([cursor.block_number]))[cursor.block_number]
                except NodeBehindError:
                    return
            if tip.hash == cursor.block_hash:
                self._tip_seen = (head.hash, cursor)
                return
        await self._repair_reorg(cursor, head)

    async def _repair_reorg(self, cursor: Cursor, head: BlockHeader) -> None:
        """Find the newest block we share with the node, drop everything above it, continue from it."""
        fork = await self._find_fork_point(cursor)
        if fork is None:
            return  # the node changed its mind while we looked: nothing to repair now
        depth = cursor.block_number - fork.block_number
        async with self.engine.begin() as conn:
            locked = self._check_lead(await store.locked_cursor(conn, self.name))
            if locked != cursor:
                return
            # Beyond finality: the reorg removed a block already treated as final.
            final = await store.final_block(conn, self.network)
            beyond = final is not None and fork.block_number < final
            await store.rollback_to(conn, self.name, fork=fork, old_head=cursor, beyond_finality=beyond)
        metrics.REORGS.labels(self.name).inc()
        metrics.REORG_DEPTH.labels(self.name).observe(depth)
        metrics.INDEXED_BLOCK.labels(self.name).set(fork.block_number)
        self._indexed = (fork.block_number, None)
        self._heads_seen.clear()  # a head of the abandoned branch may stand above the new chain's
        fields = {"fork_block": fork.block_number, "old_head": cursor.block_number, "depth": depth,
                  "node_head": head.number}
        if beyond:
            metrics.DEEP_REORGS.labels(self.name).inc()
            self.log.error("reorg deeper than the finality depth repaired", **fields,
                           finality_depth=self.network.finality_depth)
        else:
            self.log.warning("reorg repaired", **fields)

    async def _tip_on_some_node(self, cursor: Cursor) -> bool:
        """Whether a node behind the load balancer still has our tip: our block at the cursor's height is
        asked a few times, spread over `lag_grace_s` (each request may reach another node, and a lagging
        one catches up). A node without any block there proves nothing; one with another block is a fork."""
        for attempt in range(TIP_RECHECKS):
            if attempt:
                await asyncio.sleep(self.config.lag_grace_s / TIP_RECHECKS)
            [block] = await self.rpc.get_blocks([cursor.block_number])
            if block is not None:
                return str(block.get("hash", "")).lower() == cursor.block_hash
        return False

    async def _find_fork_point(self, cursor: Cursor) -> Cursor | None:
        if await self._tip_on_some_node(cursor):
            return None  # a lagging replica, not a reorg
        async with self.engine.connect() as conn:
            stored = await store.stored_headers_desc(conn, self.name, cursor.block_number)
        # Re-check before rolling back: if the node agrees with our tip now, it was a lagging replica.
        candidates = list(stored)
        lowest = candidates[-1][0] if candidates else cursor.block_number + 1
        while True:
            for i in range(0, len(candidates), 50):
                chunk = candidates[i:i + 50]
                canonical = await self._canonical([n for n, _ in chunk])
                if i == 0 and chunk and chunk[0][0] == cursor.block_number and canonical[0] is not None \
                        and canonical[0].hash == cursor.block_hash:
                    return None
                match = first_common_block(chunk, canonical)
                if match is not None:
                    return Cursor(*match)
            # Deeper than the header window: anchor on the blocks of stored logs, newest first.
            async with self.engine.connect() as conn:
                candidates = await store.row_blocks_desc(conn, self.name, lowest, 200)
            if not candidates:
                start = self.network.start_block
                anchor = None
                if start > 0:
                    anchor = (await self.fetcher.headers([start - 1]))[start - 1].hash
                return Cursor(start - 1, anchor)
            lowest = candidates[-1][0]

    async def _canonical(self, numbers: list[int]) -> list[BlockHeader | None]:
        blocks = await self.rpc.get_blocks(numbers)
        return [parse_header(b) if b else None for b in blocks]

    # --- metrics and progress ----------------------------------------------------------------------------

    def _saw_head(self, head: BlockHeader) -> None:
        now = time.monotonic()
        self._heads_seen.append((now, head))
        while self._heads_seen and self._heads_seen[0][0] < now - HEAD_MEMORY_S:
            self._heads_seen.popleft()

    def update_lag(self) -> None:
        """The lag gauges from the highest head any node showed in the last `HEAD_MEMORY_S` and the
        cursor: called after every attempt, failed or not, so a stuck follower's lag keeps showing."""
        if self._indexed is None or not self._heads_seen:
            return
        highest = max((h for _, h in self._heads_seen), key=lambda h: h.number)
        indexed, indexed_ts = self._indexed
        metrics.HEAD_BLOCK.labels(self.name).set(highest.number)
        metrics.LAG_BLOCKS.labels(self.name).set(max(0, highest.number - indexed))
        if indexed_ts is not None:
            metrics.LAG_SECONDS.labels(self.name).set(max(0, highest.timestamp - indexed_ts))

    def _report_progress(self, previous: int, indexed: int, head: int) -> None:
        if self._progress is None and head - previous > PROGRESS_THRESHOLD_BLOCKS:
            self._progress = Progress(f"{self.name} sync", head - previous)
        if self._progress is not None:
            self._progress.advance(indexed - previous)
            if indexed >= head or self._progress.done >= self._progress.total:
                self._progress = None

    # --- loop --------------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Follow until `stop` is set. Errors are logged and retried with backoff; never fatal except a
        chain id mismatch, which stops this network only."""
        delay = self.network.poll_interval_s
        while not stop.is_set():
            try:
                self._started_at(await self.prepare())
                break
            except ChainIdMismatch as exc:
                metrics.FOLLOWER_ERRORS.labels(self.name, "chain_id").inc()
                self.log.error("refusing to index: chain id mismatch", error=str(exc))
                return
            except (RpcError, OSError) as exc:
                metrics.FOLLOWER_ERRORS.labels(self.name, type(exc).__name__).inc()
                self.log.warning("network unreachable at start", error=str(exc)[:ERROR_TEXT_LIMIT])
                await sleep_or_stop(stop, min(30.0, delay))
        # Removals from the watch set are NOTIFYed (migration 0017); the periodic reload is the fallback.
        listener = asyncio.create_task(listen_and_wake(self.engine, WATCH_SET_CHANNEL, stop,
                                                       self._watch_changed, asyncio.Event(), self.log))
        try:
            await self._follow(stop)
        finally:
            await _cancel(listener)
            if self._prefetch is not None:
                await _cancel(self._prefetch.task)

    async def _follow(self, stop: asyncio.Event) -> None:
        failures = 0
        while not stop.is_set():
            try:
                caught_up = await self.step()
                failures = 0
            except LeadershipLost:
                raise
            except Exception as exc:  # one bad iteration must not end the follower
                failures += 1
                self.update_lag()
                metrics.FOLLOWER_ERRORS.labels(self.name, type(exc).__name__).inc()
                self.log.warning("follower iteration failed", failures=failures,
                                 error=f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT])
                await sleep_or_stop(stop, failure_backoff_s(failures, self.network.poll_interval_s, 5))
                continue
            self.update_lag()
            if caught_up:
                await sleep_or_stop(stop, self.network.poll_interval_s)


@dataclass(frozen=True)
class _Prefetch:
    """A download of the range after `cursor`, running while the previous range is written."""

    cursor: Cursor
    watch_version: int
    task: asyncio.Task[FetchedRange]


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
