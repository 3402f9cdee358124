"""Backfill of newly watched addresses: their history from a start block (or time) up to where the live
follower took them over, resumable, while the follower keeps going."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.config import NetworkConfig
from vip.indexer import store
from vip.indexer.completeness import CHECKED_DEPTH
from vip.indexer.decode import TokenLog
from vip.indexer.fetcher import LogFetcher, TokenLogFilter
from vip.indexer.history import HistorySource, LogScanSource, history_source
from vip.indexer.progress import Progress
from vip.indexer.ranges import Bounds, bisection_probes, narrow_bisections
from vip.run_loop import run_steps

log = structlog.get_logger(__name__)


async def first_blocks_at_or_after(fetcher: LogFetcher, targets: Iterable[int], head: int) -> dict[int, int]:
    """For each unix time of `targets`, the first block at or after it (head + 1 if none): every search
    bisects block timestamps in the same rounds, each round's probes asked together (batched under the
    provider's batch cap), so targets near each other share their probes."""
    bounds: Bounds = dict.fromkeys(set(targets), (0, head + 1))
    stamps: dict[int, int] = {}
    while probes := bisection_probes(bounds):
        wanted = [n for n in probes if n not in stamps]
        stamps.update((n, h.timestamp) for n, h in (await fetcher.headers(wanted)).items())
        bounds = narrow_bisections(bounds, stamps)
    return {target: lo for target, (lo, _) in bounds.items()}


class Backfiller:
    """Brings pending watched addresses' history in, oldest first, several addresses per range. Every
    statement is set-based: 200,000 addresses added at once are one group, not 200,000 steps."""

    def __init__(self, network: NetworkConfig, engine: AsyncEngine, fetcher: LogFetcher,
                 source: HistorySource | None = None) -> None:
        self.network = network
        self.name = network.name
        self.engine = engine
        self.fetcher = fetcher
        self.scan = LogScanSource(fetcher)
        self.source = source if source is not None else history_source(network, fetcher)
        self.symbols = network.token_by_address()
        self.log = log.bind(network=self.name, role="backfill")
        self._progress: Progress | None = None

    async def _resolve_starts(self) -> None:
        """Give every pending address a start block: its start time's hour bisected once for all the
        addresses sharing it (decision 232), or the network's start block."""
        async with self.engine.connect() as conn:
            hours = await store.start_hours_to_resolve(conn, self.name)
        by_hour: dict[datetime, int] = {}
        if hours:
            head = await self.fetcher.rpc.block_number()
            found = await first_blocks_at_or_after(self.fetcher, [int(h.timestamp()) for h in hours], head)
            by_hour = {h: found[int(h.timestamp())] for h in hours}
            self.log.info("backfill start blocks resolved", hours=len(hours))
        async with self.engine.begin() as conn:
            await store.set_start_blocks(conn, self.name, by_hour, self.network.start_block)

    async def step(self) -> bool:
        """Backfill one range for the pending addresses; False when there is nothing to do."""
        async with self.engine.connect() as conn:
            pending = await store.pending_backfill_count(conn, self.name)
        metrics.BACKFILL_PENDING.labels(self.name).set(pending)
        if not pending:
            metrics.BACKFILL_REMAINING.labels(self.name).set(0)
            self._progress = None
            return False
        await self._resolve_starts()
        async with self.engine.begin() as conn:
            if await store.finish_covered_backfills(conn, self.name):
                return True
            start = await store.backfill_front(conn, self.name)
            if start is None:
                return False
            group = await store.backfill_group(conn, self.name, start + self.fetcher.sizer.size - 1)
            cursor = await store.load_cursor(conn, self.name)
        ends = {w.address: w.live_from_block - 1 for w in group}  # type: ignore[operator]
        limit = max(ends.values())
        # Blocks near the follower's cursor are near the head, where a lagging node may lack them.
        checked_from = (cursor.block_number if cursor is not None else limit) - CHECKED_DEPTH
        metrics.BACKFILL_REMAINING.labels(self.name).set(limit - start + 1)
        if self._progress is None:
            self._progress = Progress(f"{self.name} backfill", limit - start + 1)

        addresses = [w.address for w in group]
        if self._many(addresses):
            # Past the follower's topic-filter threshold, one query for all the tokens' logs, kept in memory
            # when they touch the group, costs less than two filters per 500 addresses (decision 175).
            keys = frozenset(a.removeprefix("0x") for a in addresses)
            fetched = await self.scan.fetch_selection(start, limit, TokenLogFilter(keys, lambda: addresses),
                                                      checked_from)
        else:
            fetched = await self.source.fetch(start, limit, addresses, {w.address: w.reason for w in group},
                                              checked_from)
        range_start, range_end = fetched.start, fetched.end
        # Addresses whose own window ends before this range only keep their logs up to that end.
        logs = [lg for lg in fetched.logs if self._wanted(lg, ends)]
        untimed = sorted({lg.block_number for lg in logs if lg.block_timestamp is None})
        timestamps = {n: h.timestamp for n, h in (await self.fetcher.headers(untimed)).items()}
        if not await self._commit(logs, timestamps, addresses, range_end + 1):
            return True
        metrics.BACKFILL_BLOCKS.labels(self.name).inc(range_end - range_start + 1)
        self._progress.advance(range_end - range_start + 1)
        return True

    def _many(self, addresses: list[str]) -> bool:
        return (self.network.watched_fetch != "topic_filters"
                and len(addresses) > self.network.topic_filter_max_addresses)

    @staticmethod
    def _wanted(lg: TokenLog, ends: dict[str, int]) -> bool:
        """A log of the group's addresses inside that address's own window (`ends`: its last block)."""
        end_a, end_b = ends.get(lg.party_a), ends.get(lg.party_b)
        return (end_a is not None and lg.block_number <= end_a) or (end_b is not None
                                                                     and lg.block_number <= end_b)

    async def _commit(self, logs: list[TokenLog], timestamps: dict[int, int], group: list[str],
                      next_block: int) -> bool:
        async with self.engine.begin() as conn:
            # Serialise with the follower's commits and rollbacks (both lock the cursor row).
            await store.load_cursor(conn, self.name, lock=True)
            # A rollback since the fetch may have lowered an address's live start (the follower
            # re-covers the blocks from there): keep only what is still the backfill's to write.
            live_from = await store.live_from_blocks(conn, self.name, group)
            ends = {a: b - 1 for a, b in live_from.items() if b is not None}
            logs = [lg for lg in logs if self._wanted(lg, ends)]
            # Logs of blocks inside the header window must carry the hash the follower indexed, or
            # the range was fetched across a reorg: retry it.
            known = await store.stored_header_hashes(conn, self.name, {lg.block_number for lg in logs})
            if any(known.get(lg.block_number, lg.block_hash) != lg.block_hash for lg in logs):
                self.log.warning("backfill range crosses a reorg; retrying", next_block=next_block)
                return False
            await store.insert_logs(conn, self.name, logs, self.symbols, timestamps)
            await store.advance_backfill(conn, self.name, group, next_block)
        return True

    async def run(self, stop: asyncio.Event) -> None:
        await run_steps(self.step, stop, network=self.name, task="backfill",
                        idle_s=self.network.poll_interval_s, log=self.log)
