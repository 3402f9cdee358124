"""Backfill of newly watched addresses: their history from a start block (or time) up to where the live
follower took them over, resumable, while the follower keeps going."""

from __future__ import annotations

import asyncio
from datetime import datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.config import NetworkConfig
from vip.indexer import store
from vip.indexer.decode import BlockHeader, TokenLog
from vip.indexer.fetcher import LogFetcher
from vip.indexer.history import HistorySource, history_source
from vip.indexer.progress import Progress
from vip.indexer.store import WatchedAddress
from vip.run_loop import run_steps

log = structlog.get_logger(__name__)


async def first_block_at_or_after(fetcher: LogFetcher, when: datetime, head: int) -> int:
    """Bisect block timestamps for the first block at or after `when` (head + 1 if none)."""
    target = int(when.timestamp())
    lo, hi = 0, head + 1
    while lo < hi:
        mid = (lo + hi) // 2
        header: BlockHeader = (await fetcher.headers([mid]))[mid]
        if header.timestamp >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


class Backfiller:
    """Brings pending watched addresses' history in, oldest first, several addresses per range."""

    def __init__(self, network: NetworkConfig, engine: AsyncEngine, fetcher: LogFetcher,
                 source: HistorySource | None = None) -> None:
        self.network = network
        self.name = network.name
        self.engine = engine
        self.fetcher = fetcher
        self.source = source if source is not None else history_source(network, fetcher)
        self.symbols = network.token_by_address()
        self.log = log.bind(network=self.name, role="backfill")
        self._progress: Progress | None = None

    async def _resolve_starts(self, pending: list[WatchedAddress]) -> list[WatchedAddress]:
        """Give every pending address a start block (bisecting its start time once, then stored)."""
        resolved = []
        head: int | None = None
        for item in pending:
            start = item.start_block
            if start is None and item.start_time is not None:
                head = head if head is not None else await self.fetcher.rpc.block_number()
                start = await first_block_at_or_after(self.fetcher, item.start_time, head)
            start = self.network.start_block if start is None else start
            if start != item.start_block:
                async with self.engine.begin() as conn:
                    await store.set_start_block(conn, self.name, item.address, start)
            resolved.append(WatchedAddress(item.address, start, item.start_time, item.live_from_block,
                                           item.backfill_next_block, item.reason))
        return resolved

    async def step(self) -> bool:
        """Backfill one range for the pending addresses; False when there is nothing to do."""
        async with self.engine.connect() as conn:
            pending = await store.pending_backfills(conn, self.name)
        metrics.BACKFILL_PENDING.labels(self.name).set(len(pending))
        if not pending:
            metrics.BACKFILL_REMAINING.labels(self.name).set(0)
            self._progress = None
            return False
        pending = await self._resolve_starts(pending)
        nexts = {w.address: max(w.backfill_next_block or 0, w.start_block or 0) for w in pending}
        ends = {w.address: w.live_from_block - 1 for w in pending}  # type: ignore[operator]
        done_now = [a for a in nexts if nexts[a] > ends[a]]
        if done_now:
            async with self.engine.begin() as conn:
                await store.advance_backfill(conn, self.name, done_now, max(ends[a] + 1 for a in done_now))
            return True
        start = min(nexts.values())
        group = sorted(a for a in nexts if nexts[a] <= start + self.fetcher.sizer.size - 1)
        limit = max(ends[a] for a in group)
        metrics.BACKFILL_REMAINING.labels(self.name).set(limit - start + 1)
        if self._progress is None:
            self._progress = Progress(f"{self.name} backfill", limit - start + 1)

        reasons = {w.address: w.reason for w in pending}
        fetched = await self.source.fetch(start, limit, group, reasons)
        range_start, range_end, logs = fetched.start, fetched.end, fetched.logs
        # Addresses whose own window ends before this range only keep their logs up to that end.
        logs = [lg for lg in logs if self._wanted(lg, group, ends)]
        untimed = sorted({lg.block_number for lg in logs if lg.block_timestamp is None})
        timestamps = {n: h.timestamp for n, h in (await self.fetcher.headers(untimed)).items()}
        if not await self._commit(logs, timestamps, group, range_end + 1):
            return True
        metrics.BACKFILL_BLOCKS.labels(self.name).inc(range_end - range_start + 1)
        self._progress.advance(range_end - range_start + 1)
        return True

    @staticmethod
    def _wanted(lg: TokenLog, group: list[str], ends: dict[str, int]) -> bool:
        return any(party in ends and party in group and lg.block_number <= ends[party]
                   for party in (lg.party_a, lg.party_b))

    async def _commit(self, logs: list[TokenLog], timestamps: dict[int, int], group: list[str],
                      next_block: int) -> bool:
        async with self.engine.begin() as conn:
            # Serialise with the follower's commits and rollbacks (both lock the cursor row).
            await store.load_cursor(conn, self.name, lock=True)
            # A rollback since the fetch may have lowered an address's live start (the follower
            # re-covers the blocks from there): keep only what is still the backfill's to write.
            live_from = await store.live_from_blocks(conn, self.name, group)
            ends = {a: b - 1 for a, b in live_from.items() if b is not None}
            logs = [lg for lg in logs if self._wanted(lg, group, ends)]
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
