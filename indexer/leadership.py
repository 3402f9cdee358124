"""One follower per network at a time, whatever the operator starts: a network's chain work (its follower,
backfiller and balance refresher) runs only in the daemon that holds the network's lead, a PostgreSQL
session advisory lock on a connection of its own. The other daemons configured with the network stand by:
they try the lock every `lead_poll_s` and take over as soon as it is free, which is at once when the
leader's process dies (kill -9 included: the server drops a session whose socket closes, and its lock
with it).

The lock alone cannot stop a leader that lost its session while a commit was under way (a connection cut
by the network, a server restart): taking the lead also raises the cursor row's fencing token
(`Follower.prepare`), and every commit of a follower checks its token under the cursor row lock
(`Follower._check_lead`), so a deposed leader never stores a range.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import Any

import structlog
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip import metrics
from vip.errors import ERROR_TEXT_LIMIT
from vip.indexer.follower import LeadershipLost
from vip.run_loop import failure_backoff_s, sleep_or_stop
from vip.store.tables import chain_cursors

log = structlog.get_logger(__name__)

Work = Callable[[asyncio.Event], list[Coroutine[Any, Any, None]]]


def lock_name(network: str) -> str:
    return f"vip-indexer-lead:{network}"


def _key(network: str) -> object:
    return func.hashtextextended(lock_name(network), 0)


async def current_leader(conn: AsyncConnection, network: str) -> str | None:
    return await conn.scalar(select(chain_cursors.c.leader).where(chain_cursors.c.network == network))


class NetworkLead:
    """Competes for one network's lead and runs `work` (the network's tasks, built afresh for each term)
    while it holds it. Never fatal: a lost database connection ends the term, and the daemon competes
    again."""

    def __init__(self, network: str, engine: AsyncEngine, work: Work, poll_s: float) -> None:
        self.network = network
        self.engine = engine
        self.work = work
        self.poll_s = poll_s
        self.log = log.bind(network=network)
        self.leading = asyncio.Event()  # set while this daemon leads the network
        self.terms = 0  # how many times this daemon took the lead
        self.standing_by = asyncio.Event()  # set while this daemon waits for another one's lead to end

    async def run(self, stop: asyncio.Event) -> None:
        metrics.INDEXER_LEADER.labels(self.network).set(0)
        failures = 0
        while not stop.is_set():
            terms = self.terms
            try:
                await self._term(stop)
                failures = 0
            except Exception as exc:
                failures = 1 if self.terms != terms else failures + 1  # a term that led starts afresh
                metrics.FOLLOWER_ERRORS.labels(self.network, f"lead_{type(exc).__name__}").inc()
                self.log.warning("network lead ended; competing for it again",
                                 error=f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT], failures=failures)
                await sleep_or_stop(stop, failure_backoff_s(failures, self.poll_s))
            finally:
                self.leading.clear()
                metrics.INDEXER_LEADER.labels(self.network).set(0)

    async def _term(self, stop: asyncio.Event) -> None:
        """Wait for the lock (standing by), then lead until stopped or deposed; the lock is released on the
        way out, or goes with its connection."""
        async with self.engine.connect() as pooled:
            conn = await pooled.execution_options(isolation_level="AUTOCOMMIT")
            held = False
            try:
                held = await self._acquire(conn, stop)
                if held:
                    await self._lead(conn, stop)
            except BaseException:
                with contextlib.suppress(Exception):
                    await conn.invalidate()  # a session lock in an unknown state never goes back to the pool
                raise
            if held:
                await conn.execute(select(func.pg_advisory_unlock(_key(self.network))))

    async def _acquire(self, conn: AsyncConnection, stop: asyncio.Event) -> bool:
        standby_since: float | None = None
        while not stop.is_set():
            if await conn.scalar(select(func.pg_try_advisory_lock(_key(self.network)))):
                self.standing_by.clear()
                waited = None if standby_since is None else round(time.monotonic() - standby_since, 3)
                self.log.info("leading network: this daemon follows it", standby_s=waited,
                              previous_leader=await current_leader(conn, self.network))
                return True
            if standby_since is None:
                standby_since = time.monotonic()
                self.standing_by.set()
                self.log.info("standby for network: another daemon leads it; taking over when it stops",
                              leader=await current_leader(conn, self.network), poll_s=self.poll_s)
            await sleep_or_stop(stop, self.poll_s)
        return False

    async def _lead(self, conn: AsyncConnection, stop: asyncio.Event) -> None:
        term_stop = asyncio.Event()
        tasks = [asyncio.create_task(c) for c in self.work(term_stop)]
        self.terms += 1
        metrics.INDEXER_LEADER.labels(self.network).set(1)
        self.leading.set()
        try:
            while not stop.is_set():
                await sleep_or_stop(stop, self.poll_s)
                for task in tasks:
                    failure = task.exception() if task.done() and not task.cancelled() else None
                    if isinstance(failure, LeadershipLost):
                        self.log.warning("deposed: another daemon took the network's lead",
                                         error=str(failure))
                        return
                    if failure is not None:  # a task that gave up (the database at its start): lead again
                        raise failure
                await conn.execute(select(1))  # the lock's session is alive, so the lock is held
        finally:
            term_stop.set()
            metrics.INDEXER_LEADER.labels(self.network).set(0)
            self.leading.clear()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            metrics.forget_network_follower(self.network)
