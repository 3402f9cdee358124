"""The daemon's labelling job (decision 162): works a user's transfer labels out again when what they depend
on changed (records stored, a wallet connected, the user's transfers become final: the job follows each
network's final block with a cursor of its own and queues their owners; `vip.store.label_queue`),
without making a VIP. The same pure pipeline as the VIP job on the same inputs (`trace_inputs`: the funding
trace's counterparties fetched and waited for), so a self-funded payout is flagged, never income; only the
labels and their `fraud.flagged` events are written. A user on a test clock is labelled at the clock's time,
as their VIPs are made."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from structlog.typing import FilteringBoundLogger

from vip.accounts import test_clocks
from vip.clock import Clock
from vip.config import PlatformConfig, Settings
from vip.reports import inputs as inputs
from vip.reports import labels
from vip.reports.queue_job import RETRY_DELAY, QueueJob, history_from
from vip.reports.trace_inputs import TraceInputs
from vip.store import label_queue
from vip.store.tables import users
from vip.verification.profile import vip_periods

log: FilteringBoundLogger = structlog.get_logger(__name__)

JOB = "labels"
# The span labelled: the window of the longest VIP a lender can ask for (12 months, at the user's time),
# widened to the earliest record like a VIP's, so a VIP never labels a transfer this job did not look at.
SPAN_MONTHS = 12
LABELLED, SKIPPED, BUSY = "labelled", "skipped", "busy"
# Blocks of one network queued per step while the labelling cursor catches up with the final block: one
# step's join stays short, and rows are worked between steps.
QUEUE_BLOCKS_PER_STEP = 5_000


class LabellingJob(QueueJob):
    """One worker of the labelling queue. `run_once` does one step (tests call it directly)."""

    job, log, failure_message, queue = JOB, log, "labelling failed", label_queue

    def __init__(self, settings: Settings, engine: AsyncEngine, clock: Clock,
                 platforms: Mapping[str, PlatformConfig]) -> None:
        super().__init__(settings, engine, clock, platforms)
        self.networks = [n.name for n in settings.enabled_networks()]
        self.starts = {n.name: n.start_block - 1 for n in settings.enabled_networks()}

    async def run_once(self) -> bool:
        """Queue the owners of newly final transfers, then work one due row; False when there was nothing
        to queue and no row (or the row waits: see `finished`)."""
        queued = await self.queue_newly_final()
        return await super().run_once() or queued

    async def queue_newly_final(self) -> bool:
        """Follow the networks' final blocks with the labelling cursor (`label_queue.queue_newly_final`);
        the indexer's commit does none of this work. True when blocks were queued."""
        async with self.engine.begin() as conn:
            finals = await inputs.final_blocks(conn, self.settings, self.networks)
            return await label_queue.queue_newly_final(conn, finals, self.starts, QUEUE_BLOCKS_PER_STEP) > 0

    def bind(self, row: Any) -> FilteringBoundLogger:
        return log.bind(user_id=row.user_id, queue_id=row.id)

    async def failed(self, conn: AsyncConnection, row: Any, now: datetime, attempt: int,
                     will_retry: bool) -> None:
        if will_retry:
            await label_queue.postpone(conn, row.id, now + RETRY_DELAY * attempt, attempts=attempt)
        else:
            # Given up: the user's next change queues them again; a VIP labels them too.
            await label_queue.done(conn, row.id)

    def finished(self, result: Any, seconds: float, bound: FilteringBoundLogger) -> bool:
        """Work done, unless the row waits for backfills or another writer."""
        if result == LABELLED:
            bound.info("labels written", seconds=round(seconds, 3))
        return result in (LABELLED, SKIPPED, "fetching")

    async def work(self, conn: AsyncConnection, row: Row[Any], now: datetime,
                   bound: FilteringBoundLogger) -> str | None:
        """LABELLED, SKIPPED (nothing to label), BUSY (another run writes the user's labels: after it),
        or "fetching" / None while the trace's history is not indexed yet."""
        if not await labels.try_lock_user_labels(conn, row.user_id):
            await label_queue.postpone(conn, row.id, now)
            return BUSY
        fetch_requested_at = await label_queue.absorb_others(conn, row)
        wallets = await inputs.active_wallets(conn, row.user_id)
        records, platforms = await inputs.income_inputs(conn, row.user_id, self.platforms)
        if not wallets or not records:
            await label_queue.done(conn, row.id)  # no income to label; a VIP still labels what it sees
            return SKIPPED
        as_of = await test_clocks.user_time(conn, row.user_id, now)
        periods = vip_periods(as_of, SPAN_MONTHS, [r.record_date for r in records])
        since = history_from(periods, records, self.config)

        async def fetch_requested(at: datetime) -> None:
            await label_queue.mark_fetch_requested(conn, row.id, at)

        gathered = await self.collector.gather(conn, wallets, since, fetch_requested_at, fetch_requested,
                                               bound)
        if not isinstance(gathered, TraceInputs):
            await label_queue.postpone(conn, row.id, now)
            return gathered
        outcome = await self.verify(conn, wallets, gathered, records, platforms, periods, since)
        organisation_id: str = (await conn.execute(
            select(users.c.organisation_id).where(users.c.id == row.user_id))).scalar_one()
        await labels.store_labels(conn, user_id=row.user_id, organisation_id=organisation_id, outcome=outcome,
                                  now=now)
        await label_queue.done(conn, row.id)
        return LABELLED
