"""The webhook delivery worker: fans committed outbox events out into deliveries, then POSTs each due
delivery to its endpoint, signed, and records the outcome on the spec's retry schedule.

Jobs are rows (docs/webhooks.md): an outbox event with `fanned_out_at` null is work for `fanout`; a
`pending` delivery whose `next_attempt_at` has passed is due and leased by `claims` before it is sent
(`sender`); `outcomes` writes what happened. This module runs them:
- Attempts run as concurrent tasks, at most `max_in_flight_per_endpoint` per endpoint, each bounded by
  `timeout_s`: a slow or dead endpoint occupies only its own slots. A worker leases up to PREFETCH times
  that many per endpoint (and `max_in_flight` in all), so a freed slot starts the next attempt at once.
- An idle worker wakes when an event commits (`listener`: LISTEN on the outbox trigger's NOTIFY), or
  after `poll_interval_s` for retries that fall due.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict, deque
from datetime import datetime, timedelta

import aiohttp
import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.clock import Clock
from vip.config import WebhookConfig
from vip.errors import ERROR_TEXT_LIMIT
from vip.run_loop import run_steps, wake_or_stop
from vip.token_cipher import TokenCipher
from vip.webhooks import claims, fanout, outcomes, sender, store
from vip.webhooks.claims import Job
from vip.webhooks.listener import listen_for_events

log = structlog.get_logger(__name__)

# A worker leases up to this many times an endpoint's concurrent attempts, so a freed slot starts the
# next attempt at once instead of after a round trip to the database.
PREFETCH = 4
OLDEST_EVERY_S = 5.0  # how often the oldest-undelivered gauge is refreshed


class DeliveryWorker:
    def __init__(self, engine: AsyncEngine, clock: Clock, config: WebhookConfig,
                 session: aiohttp.ClientSession | None = None, *, cipher: TokenCipher) -> None:
        self.engine = engine
        self.cipher = cipher  # opens the endpoints' sealed signing secrets
        self.clock = clock
        self.config = config
        self._session = session
        self._own_session = session is None
        self._in_flight: dict[str, asyncio.Task[str]] = {}  # running attempts by delivery id
        self._running: Counter[str] = Counter()  # running attempts per endpoint
        self._taken: Counter[str] = Counter()  # leased here per endpoint: running or queued
        self._queued: dict[str, deque[Job]] = defaultdict(deque)
        self._oldest_checked = 0.0
        self._outcomes = outcomes.OutcomeWriter(engine)
        self._wake = asyncio.Event()  # an event committed (or a slot freed) since the last look
        self._stop: asyncio.Event | None = None  # run(): idle steps wait in step() for a wake-up
        self.listening = asyncio.Event()  # set while the LISTEN connection is up
        self.log = log.bind(role="webhooks")

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = sender.new_session(guarded=not self.config.allow_http)
        return self._session

    async def fan_out(self) -> int:
        """Create the deliveries of one batch of events not fanned out yet; returns how many events."""
        now = await self.clock.now()
        events, deliveries = await fanout.fan_out(self.engine, now, self.config.fanout_batch)
        if events:
            self.log.debug("events fanned out", events=events, deliveries=deliveries)
        return events

    def _taken_cap(self) -> int:
        return self.config.max_in_flight_per_endpoint * PREFETCH

    async def claim(self) -> list[Job]:
        """Lease due deliveries up to `max_in_flight` held by this worker (at most `_taken_cap()` per
        endpoint)."""
        free = self.config.max_in_flight - self._taken.total()
        if free <= 0:
            return []
        # The lease outlasts the queue: the last of an endpoint's prefetched deliveries starts after at
        # most PREFETCH - 1 time-outs.
        lease = timedelta(seconds=self.config.timeout_s * PREFETCH + self.config.lease_margin_s)
        return await claims.claim_due(self.engine, await self.clock.now(), limit=free,
                                      per_endpoint=self._taken_cap(), held=self._taken, lease=lease,
                                      cipher=self.cipher)

    async def attempt(self, job: Job) -> str:
        """POST the event once and record the outcome; returns delivered, retrying or failed."""
        attempted_at = await self.clock.now()
        sent = await sender.send(self.session, job, attempted_at, self.config.timeout_s,
                                 guarded=not self.config.allow_http)
        outcome, row = outcomes.settle(job, attempted_at, await self.clock.now(), sent)
        await self._outcomes.write(row)
        metrics.WEBHOOK_DELIVERIES.labels(job.event_type, outcome).inc()
        self.log.info("webhook attempt", event_id=job.event_id, event_type=job.event_type,
                      endpoint_id=job.endpoint_id, attempt=job.attempts_before + 1, outcome=outcome,
                      status_code=sent.status_code, error=sent.error, ms=round(sent.elapsed_s * 1000))
        if outcome != "delivered" and self.config.disable_after_days > 0:
            await self.disable_if_failing(job.endpoint_id)
        return outcome

    async def disable_if_failing(self, endpoint_id: str) -> None:
        """Disable the endpoint when every attempt has failed for `disable_after_days`."""
        after = timedelta(days=self.config.disable_after_days)
        async with self.engine.begin() as conn:
            disabled = await store.disable_failing(conn, [endpoint_id], await self.clock.now(), after)
        for endpoint in disabled:
            self.log.warning("webhook endpoint disabled: every attempt failed for days",
                             endpoint_id=endpoint.id, organisation_id=endpoint.organisation_id,
                             url=endpoint.url, reason=endpoint.disabled_reason)

    # --- slots -----------------------------------------------------------------------------------------

    def _dispatch(self, job: Job) -> None:
        self._taken[job.endpoint_id] += 1
        self._queued[job.endpoint_id].append(job)
        self._pump(job.endpoint_id)

    def _pump(self, endpoint_id: str) -> None:
        """Start the endpoint's queued deliveries while it has free slots."""
        queue = self._queued[endpoint_id]
        while queue and self._running[endpoint_id] < self.config.max_in_flight_per_endpoint:
            self._start(queue.popleft())
        if not queue:
            del self._queued[endpoint_id]

    def _start(self, job: Job) -> None:
        self._running[job.endpoint_id] += 1
        task = asyncio.create_task(self.attempt(job), name=f"webhook-{job.delivery_id}")
        self._in_flight[job.delivery_id] = task

        def done(t: asyncio.Task[str]) -> None:
            self._in_flight.pop(job.delivery_id, None)
            for counter in (self._running, self._taken):
                counter[job.endpoint_id] -= 1
                if counter[job.endpoint_id] <= 0:
                    del counter[job.endpoint_id]
            if not t.cancelled() and t.exception() is not None:
                metrics.JOB_ERRORS.labels("webhooks", type(t.exception()).__name__).inc()
                self.log.error("webhook attempt crashed; the delivery is retried when its lease ends",
                               event_id=job.event_id, endpoint_id=job.endpoint_id,
                               error=repr(t.exception())[:ERROR_TEXT_LIMIT])
            if not t.cancelled():
                self._pump(job.endpoint_id)

        task.add_done_callback(done)

    # --- the loop --------------------------------------------------------------------------------------

    async def step(self) -> bool:
        """Fan out new events, start the due deliveries that fit; False when there was nothing to do."""
        self._wake.clear()
        fanned = await self.fan_out()
        jobs = await self.claim()
        for job in jobs:
            self._dispatch(job)
        await self._refresh_oldest()
        if fanned or jobs:
            return True
        if self._stop is not None:
            # Until an event commits, a slot frees, the poll interval passes (retries fall due) or stop.
            await wake_or_stop(self._wake, self._stop, self.config.poll_interval_s, self._in_flight.values())
            return False
        if self._in_flight:
            # Slots are taken: look again as soon as one frees (or after a poll), not a whole poll later.
            await asyncio.wait(list(self._in_flight.values()), timeout=self.config.poll_interval_s,
                               return_when=asyncio.FIRST_COMPLETED)
            return True
        return False

    async def drain(self) -> None:
        """Step and wait for every started attempt until nothing is due (tests and benchmarks)."""
        while True:
            worked = await self.step()
            if self._in_flight:
                await asyncio.wait(list(self._in_flight.values()))
            elif not worked:
                return

    async def _refresh_oldest(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._oldest_checked < OLDEST_EVERY_S:
            return
        self._oldest_checked = time.monotonic()
        oldest = await self.oldest_undelivered()
        now = await self.clock.now()
        metrics.WEBHOOK_OLDEST_UNDELIVERED.set(max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)

    async def oldest_undelivered(self) -> datetime | None:
        return await claims.oldest_undelivered(self.engine)

    async def listen(self, stop: asyncio.Event) -> None:
        """Wake the idle loop on every commit that recorded events, until `stop`."""
        await listen_for_events(self.engine, stop, self._wake, self.listening, self.log)

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        listener = asyncio.create_task(self.listen(stop), name="webhooks-listen")
        try:
            # Idle steps wait inside step() (for a commit, a freed slot or the poll interval).
            await run_steps(self.step, stop, network=None, task="webhooks", idle_s=0.0, log=self.log)
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            # Attempts under way end within the time-out; let them record their outcome.
            if self._in_flight:
                await asyncio.wait(list(self._in_flight.values()), timeout=self.config.timeout_s + 5)
            for task in list(self._in_flight.values()):
                task.cancel()
            await self._release_queued()
            if self._own_session and self._session is not None:
                await self._session.close()

    async def _release_queued(self) -> None:
        """Deliveries leased but not started are due again at once for the other workers."""
        ids = [job.delivery_id for queue in self._queued.values() for job in queue]
        self._queued.clear()
        if ids:
            await claims.release(self.engine, ids, await self.clock.now())
