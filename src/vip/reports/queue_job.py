"""What the daemon's two verification jobs share (the VIP job, `worker`; the labelling job, `labelling`):
one step takes a due row of the job's queue inside a transaction, works it in a savepoint, and records a
failure in the queue (a retry later, or given up) without losing the row; and the history both read, from
the earliest income they examine less the funding trace's reach."""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from structlog.typing import FilteringBoundLogger

from vip import metrics
from vip.clock import Clock
from vip.config import PlatformConfig, Settings
from vip.reports import labels
from vip.reports.trace_inputs import TraceCollector, TraceInputs
from vip.run_loop import run_steps
from vip.verification.config import VerificationConfig
from vip.verification.model import IncomeRecord
from vip.verification.pipeline import Outcome, Platform, Wallet, verify

RETRY_DELAY = timedelta(seconds=30)  # times the attempt number: 30 s, 60 s, ...


def month_start(period: str) -> datetime:
    year, month = map(int, period.split("-"))
    return datetime(year, month, 1, tzinfo=UTC)


def month_after(period: str) -> datetime:
    start = month_start(period)
    return (start + timedelta(days=32)).replace(day=1)


def history_from(periods: Sequence[str], records: Sequence[IncomeRecord],
                 config: VerificationConfig) -> datetime:
    """Where the transfers a run reads begin: the window's first month or the earliest record, whichever is
    first, less what matching looks back and the funding trace's history."""
    earliest = min([month_start(periods[0]),
                    *(datetime.combine(r.record_date, datetime.min.time(), UTC) for r in records)])
    return earliest - timedelta(days=config.matching.days_before + config.funding_trace.history_days)


class QueueJob(ABC):
    """One worker of a job's queue. A job names itself (`job`, its log), its queue (`queue`: a store module
    with `oldest_pending_age(conn, now)` and `take_due(conn, now)`), and says how a row is worked (`work`),
    what a failure does to the row (`failed`) and what a worked row counts as (`finished`). `run_once` does
    one step (tests call it)."""

    job: str
    log: FilteringBoundLogger
    failure_message: str
    queue: ModuleType

    def __init__(self, settings: Settings, engine: AsyncEngine, clock: Clock,
                 platforms: Mapping[str, PlatformConfig]) -> None:
        self.settings = settings
        self.config = settings.verification
        self.engine = engine
        self.clock = clock
        self.platforms = platforms
        self.collector = TraceCollector(settings)

    async def run(self, stop: asyncio.Event) -> None:
        await run_steps(self.run_once, stop, network=None, task=self.job, idle_s=self.config.job_idle_s,
                        log=self.log)

    async def run_once(self) -> bool:
        """Work one due row; False when there was none (or the row waits: see `finished`)."""
        now = await self.clock.now()
        async with self.engine.begin() as conn:
            metrics.JOB_OLDEST_PENDING.labels(self.job).set(await self.queue.oldest_pending_age(conn, now))
            row = await self.queue.take_due(conn, now)
            if row is None:
                return False
            bound = self.bind(row)
            started = time.perf_counter()
            try:
                async with conn.begin_nested():  # a failure rolls back to here and is recorded below
                    result = await self.work(conn, row, now, bound)
            except Exception as exc:
                attempt = row.attempts + 1
                will_retry = attempt < self.config.max_attempts
                bound.exception(self.failure_message, attempt=attempt, will_retry=will_retry)
                metrics.JOB_ERRORS.labels(self.job, type(exc).__name__).inc()
                await self.failed(conn, row, now, attempt, will_retry)
                return True
        return self.finished(result, time.perf_counter() - started, bound)

    # --- what each job says ----------------------------------------------------------------------------

    @abstractmethod
    def bind(self, row: Any) -> FilteringBoundLogger:
        """The job's logger bound to the row's identifiers."""

    @abstractmethod
    async def work(self, conn: AsyncConnection, row: Any, now: datetime, bound: FilteringBoundLogger) -> Any:
        """Work the row inside the step's savepoint; what `finished` is given."""

    @abstractmethod
    async def failed(self, conn: AsyncConnection, row: Any, now: datetime, attempt: int,
                     will_retry: bool) -> None:
        """Record in the queue that working the row failed (a retry later, or given up)."""

    @abstractmethod
    def finished(self, result: Any, seconds: float, bound: FilteringBoundLogger) -> bool:
        """Log the result; True when there may be more to do at once."""

    # --- what both jobs do -----------------------------------------------------------------------------

    async def verify(self, conn: AsyncConnection, wallets: list[Wallet], gathered: TraceInputs,
                     records: list[IncomeRecord], platforms: list[Platform], periods: list[str],
                     since: datetime) -> Outcome:
        """The pure pipeline on what was gathered, keeping the flags earlier runs raised."""
        prior = await labels.prior_flags(conn, wallets)
        return verify(wallets, gathered.transfers, records, platforms, periods, self.config,
                      known=gathered.known, capped=gathered.capped, prior_flags=prior, history_from=since,
                      openings=gathered.openings, windowed=gathered.windowed, unread=gathered.unread)
