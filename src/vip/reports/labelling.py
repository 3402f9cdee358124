"""The daemon's labelling job (decision 162): works a user's transfer labels out again when what they depend
on changed (records stored, a wallet connected, the user's transfers become final; `vip.store.label_queue`),
without making a VIP. The same pure pipeline as the VIP job on the same inputs (`trace_inputs`: the funding
trace's counterparties fetched and waited for), so a self-funded payout is flagged, never income; only the
labels and their `fraud.flagged` events are written. A user on a test clock is labelled at the clock's time,
as their VIPs are made."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from structlog.typing import FilteringBoundLogger

from vip import metrics
from vip.accounts import test_clocks
from vip.clock import Clock
from vip.config import PlatformConfig, Settings
from vip.reports import inputs as inputs
from vip.reports import labels
from vip.reports.trace_inputs import TraceCollector, TraceInputs
from vip.run_loop import run_steps
from vip.store import label_queue
from vip.store.tables import users
from vip.verification.pipeline import verify
from vip.verification.profile import vip_periods

log = structlog.get_logger(__name__)

JOB = "labels"
RETRY_DELAY = timedelta(seconds=30)
# The span labelled: the window of the longest VIP a lender can ask for (12 months, at the user's time),
# widened to the earliest record like a VIP's, so a VIP never labels a transfer this job did not look at.
SPAN_MONTHS = 12
LABELLED, SKIPPED, BUSY = "labelled", "skipped", "busy"


def _month_start(period: str) -> datetime:
    year, month = map(int, period.split("-"))
    return datetime(year, month, 1, tzinfo=UTC)


class LabellingJob:
    """One worker of the labelling queue. `run_once` does one step (tests call it directly)."""

    def __init__(self, settings: Settings, engine: AsyncEngine, clock: Clock,
                 platforms: dict[str, PlatformConfig]) -> None:
        self.config = settings.verification
        self.engine = engine
        self.clock = clock
        self.platforms = platforms
        self.collector = TraceCollector(settings)

    async def run(self, stop: asyncio.Event) -> None:
        await run_steps(self.run_once, stop, network=None, task=JOB, idle_s=self.config.job_idle_s, log=log)

    async def run_once(self) -> bool:
        """Work one due row; False when there was none, or it waits for backfills or another writer."""
        now = await self.clock.now()
        async with self.engine.begin() as conn:
            metrics.JOB_OLDEST_PENDING.labels(JOB).set(await label_queue.oldest_pending_age(conn, now))
            row = await label_queue.take_due(conn, now)
            if row is None:
                return False
            bound = log.bind(user_id=row.user_id, queue_id=row.id)
            started = time.perf_counter()
            try:
                async with conn.begin_nested():  # a failure rolls back to here and is recorded below
                    result = await self._label(conn, row, now, bound)
            except Exception as exc:
                attempt = row.attempts + 1
                will_retry = attempt < self.config.max_attempts
                bound.exception("labelling failed", attempt=attempt, will_retry=will_retry)
                metrics.JOB_ERRORS.labels(JOB, type(exc).__name__).inc()
                if will_retry:
                    await label_queue.postpone(conn, row.id, now + RETRY_DELAY * attempt, attempts=attempt)
                else:
                    # Given up: the user's next change queues them again; a VIP labels them too.
                    await label_queue.done(conn, row.id)
                return True
        if result == LABELLED:
            bound.info("labels written", seconds=round(time.perf_counter() - started, 3))
        return result in (LABELLED, SKIPPED, "fetching")

    async def _label(self, conn: AsyncConnection, row: Row[Any], now: datetime,
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
        earliest = min([_month_start(periods[0]),
                        *(datetime.combine(r.record_date, datetime.min.time(), UTC) for r in records)])
        since = earliest - timedelta(days=self.config.matching.days_before
                                     + self.config.funding_trace.history_days)

        async def fetch_requested(at: datetime) -> None:
            await label_queue.mark_fetch_requested(conn, row.id, at)

        gathered = await self.collector.gather(conn, wallets, since, fetch_requested_at, fetch_requested,
                                               bound)
        if not isinstance(gathered, TraceInputs):
            await label_queue.postpone(conn, row.id, now)
            return gathered
        prior = await labels.prior_flags(conn, wallets)
        outcome = verify(wallets, gathered.transfers, records, platforms, periods, self.config,
                         known=gathered.known, capped=gathered.capped, prior_flags=prior, history_from=since,
                         openings=gathered.openings)
        organisation_id: str = (await conn.execute(
            select(users.c.organisation_id).where(users.c.id == row.user_id))).scalar_one()
        await labels.store_labels(conn, user_id=row.user_id, organisation_id=organisation_id, outcome=outcome,
                                  now=now)
        await label_queue.done(conn, row.id)
        return LABELLED
