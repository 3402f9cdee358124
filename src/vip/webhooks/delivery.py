"""The webhook delivery worker: fans committed outbox events out into deliveries, then POSTs each due
delivery to its endpoint, signed, and records the outcome on the spec's retry schedule.

Jobs are rows (docs/webhooks.md):
- An outbox event with `fanned_out_at` null is work: in one transaction the worker locks a batch of
  them (FOR UPDATE SKIP LOCKED), inserts one `pending` delivery per subscribed endpoint and stamps them.
  An event committed just before a crash is therefore still fanned out by the next worker to look.
- A `pending` delivery whose `next_attempt_at` has passed is due. The worker locks some per endpoint
  (SKIP LOCKED, so several workers share them), moves `next_attempt_at` forward by a lease and commits
  before sending: no transaction stays open during HTTP, and a worker that dies mid-attempt leaves a
  delivery that is due again when the lease ends (at least once; receivers drop duplicates by
  Service-Event-Id).
- Attempts run as concurrent tasks, at most `max_in_flight_per_endpoint` per endpoint, each bounded by
  `timeout_s`: a slow or dead endpoint occupies only its own slots. A worker leases up to PREFETCH times
  that many per endpoint (and `max_in_flight` in all), so a freed slot starts the next attempt at once.
- Outcomes that finish together are written in one transaction (group commit).
- An idle worker wakes when an event commits (LISTEN on the outbox trigger's NOTIFY), or after
  `poll_interval_s` for retries that fall due.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import aiohttp
import psycopg
import structlog
from multidict import CIMultiDict
from sqlalchemy import bindparam, func, select, true, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.clock import Clock
from vip.config import WebhookConfig
from vip.ids import new_id
from vip.indexer.loop import run_steps, sleep_or_stop
from vip.store.outbox import envelope
from vip.store.tables import outbox_events, webhook_attempts, webhook_deliveries, webhook_endpoints
from vip.webhooks.catalogue import subscribed
from vip.webhooks.schedule import is_success, next_attempt_after_failure
from vip.webhooks.signing import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    encode_body,
    signatures,
)
from vip.webhooks.store import signing_secrets

log = structlog.get_logger(__name__)

USER_AGENT = "vip-webhooks/1"
# A worker leases up to this many times an endpoint's concurrent attempts, so a freed slot starts the
# next attempt at once instead of after a round trip to the database.
PREFETCH = 4
OLDEST_EVERY_S = 5.0  # how often the oldest-undelivered gauge is refreshed
ERROR_TEXT_LIMIT = 300
NOTIFY_CHANNEL = "vip_outbox"  # notified at the commit of every transaction that records events

d, ep, ev = webhook_deliveries, webhook_endpoints, outbox_events


@dataclass(frozen=True)
class Job:
    """One taken delivery, with everything needed to send it."""

    delivery_id: str
    endpoint_id: str
    event_id: str
    event_type: str
    url: str
    secrets: list[str] = field(repr=False)  # newest first; never logged
    body: bytes = field(repr=False)
    attempts_before: int


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def due_candidates_query(now: datetime, per_endpoint: int, skip_endpoints: list[str]):
    """Ids of up to `per_endpoint` due deliveries of each live endpoint not in `skip_endpoints`, oldest due
    first (one index probe per endpoint)."""
    due = (select(d.c.id, d.c.next_attempt_at)
           .where(d.c.endpoint_id == ep.c.id, d.c.status == "pending", d.c.next_attempt_at <= now)
           .order_by(d.c.next_attempt_at).limit(per_endpoint).lateral("due"))
    live = ep.c.deleted_at.is_(None)
    if skip_endpoints:
        live = live & ep.c.id.not_in(skip_endpoints)
    return select(due.c.id).select_from(ep.join(due, true())).where(live).order_by(due.c.next_attempt_at)


def lock_due_query(now: datetime, ids: list[str]):
    """Lock those of `ids` still due (SKIP LOCKED: another worker's are skipped), with what sending needs,
    oldest due first and in commit order among equals."""
    return (select(d.c.id, d.c.endpoint_id, d.c.event_id, d.c.attempts, ep.c.url, ep.c.secret,
                   ep.c.previous_secret, ep.c.previous_secret_expires_at, ev.c.type, ev.c.created_at,
                   ev.c.api_version, ev.c.data)
            .select_from(d.join(ep, ep.c.id == d.c.endpoint_id).join(ev, ev.c.id == d.c.event_id))
            .where(d.c.id.in_(ids), d.c.status == "pending", d.c.next_attempt_at <= now)
            .order_by(d.c.next_attempt_at, ev.c.seq)
            .with_for_update(of=d, skip_locked=True))


class DeliveryWorker:
    def __init__(self, engine: AsyncEngine, clock: Clock, config: WebhookConfig,
                 session: aiohttp.ClientSession | None = None) -> None:
        self.engine = engine
        self.clock = clock
        self.config = config
        self._session = session
        self._own_session = session is None
        self._in_flight: dict[str, asyncio.Task] = {}  # running attempts by delivery id
        self._running: Counter[str] = Counter()  # running attempts per endpoint
        self._taken: Counter[str] = Counter()  # leased here per endpoint: running or queued
        self._queued: dict[str, deque[Job]] = defaultdict(deque)
        self._oldest_checked = 0.0
        self._outcomes: list[dict] = []
        self._wake = asyncio.Event()  # an event committed (or a slot freed) since the last look
        self._stop: asyncio.Event | None = None  # run(): idle steps wait in step() for a wake-up
        self.listening = asyncio.Event()  # set while the LISTEN connection is up
        self._flush: asyncio.Future | None = None
        self.log = log.bind(role="webhooks")

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # Our own slots bound concurrency; the connector must not queue requests behind them.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                                  headers={"User-Agent": USER_AGENT})
        return self._session

    # --- fan-out ---------------------------------------------------------------------------------------

    async def fan_out(self) -> int:
        """Create the deliveries of one batch of events not fanned out yet; returns how many events."""
        now = await self.clock.now()
        async with self.engine.begin() as conn:
            events = list(await conn.execute(
                select(ev.c.id, ev.c.organisation_id, ev.c.type).where(ev.c.fanned_out_at.is_(None))
                .order_by(ev.c.seq).limit(self.config.fanout_batch).with_for_update(skip_locked=True)))
            if not events:
                return 0
            orgs = {e.organisation_id for e in events if e.organisation_id is not None}
            endpoints = list(await conn.execute(
                select(ep.c.id, ep.c.organisation_id, ep.c.event_types)
                .where(ep.c.organisation_id.in_(orgs), ep.c.deleted_at.is_(None))
                .with_for_update(read=True))) if orgs else []
            rows = [{"id": new_id("whd"), "event_id": e.id, "endpoint_id": endpoint.id, "status": "pending",
                     "attempts": 0, "next_attempt_at": now, "created_at": now}
                    for e in events for endpoint in endpoints
                    if endpoint.organisation_id == e.organisation_id
                    and subscribed(endpoint.event_types, e.type)]
            if rows:
                await conn.execute(pg_insert(d).values(rows).on_conflict_do_nothing(
                    index_elements=[d.c.event_id, d.c.endpoint_id]))
            await conn.execute(update(ev).where(ev.c.id.in_([e.id for e in events]))
                               .values(fanned_out_at=now))
        self.log.debug("events fanned out", events=len(events), deliveries=len(rows))
        return len(events)

    # --- taking due deliveries -------------------------------------------------------------------------

    def _taken_cap(self) -> int:
        return self.config.max_in_flight_per_endpoint * PREFETCH

    async def claim(self) -> list[Job]:
        """Lease due deliveries up to `max_in_flight` held by this worker (at most `_taken_cap()` per
        endpoint)."""
        free = self.config.max_in_flight - self._taken.total()
        if free <= 0:
            return []
        cap = self._taken_cap()
        full = [e for e, n in self._taken.items() if n >= cap]
        now = await self.clock.now()
        async with self.engine.begin() as conn:
            # Two statements, so the planner never runs the per-endpoint probes once per due row.
            ids = list((await conn.execute(due_candidates_query(now, cap, full).limit(free))).scalars())
            if not ids:
                return []
            rows = list(await conn.execute(lock_due_query(now, ids)))
            taken: list = []
            slots = Counter(self._taken)
            for row in rows:
                if slots[row.endpoint_id] < cap:
                    slots[row.endpoint_id] += 1
                    taken.append(row)
            if not taken:
                return []
            # The lease outlasts the queue: the last of an endpoint's prefetched deliveries starts after
            # at most PREFETCH - 1 time-outs.
            lease = timedelta(seconds=self.config.timeout_s * PREFETCH + self.config.lease_margin_s)
            await conn.execute(update(d).where(d.c.id.in_([r.id for r in taken]))
                               .values(next_attempt_at=now + lease))
        return [Job(r.id, r.endpoint_id, r.event_id, r.type, r.url,
                    signing_secrets(r.secret, r.previous_secret, r.previous_secret_expires_at, now),
                    encode_body(envelope(_EventRow(r))), r.attempts) for r in taken]

    # --- one attempt -----------------------------------------------------------------------------------

    async def attempt(self, job: Job) -> str:
        """POST the event once and record the outcome; returns delivered, retrying or failed."""
        attempted_at = await self.clock.now()
        headers = CIMultiDict({"Content-Type": "application/json", EVENT_ID_HEADER: job.event_id,
                               TIMESTAMP_HEADER: iso(attempted_at)})
        for value in signatures(job.secrets, job.body):
            headers.add(SIGNATURE_HEADER, value)
        status_code: int | None = None
        error: str | None = None
        started = time.perf_counter()
        try:
            async with self.session.post(job.url, data=job.body, headers=headers, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=self.config.timeout_s)) as resp:
                status_code = resp.status
                if not is_success(status_code):
                    error = f"HTTP {status_code}"
        except TimeoutError:
            error = f"no answer within {self.config.timeout_s:g} s"
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            # Anything that stops the request (refused, reset, TLS, a URL the client cannot use) is a
            # failed attempt on the schedule, never a crash that would leave the delivery leased forever.
            error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT]
        elapsed = time.perf_counter() - started
        metrics.WEBHOOK_ATTEMPT_SECONDS.observe(elapsed)
        outcome = await self._record(job, attempted_at, status_code, error, elapsed)
        metrics.WEBHOOK_DELIVERIES.labels(job.event_type, outcome).inc()
        self.log.info("webhook attempt", event_id=job.event_id, event_type=job.event_type,
                      endpoint_id=job.endpoint_id, attempt=job.attempts_before + 1, outcome=outcome,
                      status_code=status_code, error=error, ms=round(elapsed * 1000))
        return outcome

    async def _record(self, job: Job, attempted_at: datetime, status_code: int | None, error: str | None,
                      elapsed: float) -> str:
        finished_at = await self.clock.now()
        attempts = job.attempts_before + 1
        if error is None:
            outcome, status, retry_at = "delivered", "delivered", None
        else:
            retry_at = next_attempt_after_failure(attempts, finished_at)
            outcome, status = ("retrying", "pending") if retry_at is not None else ("failed", "failed")
        await self._write_outcome({
            "b_id": job.delivery_id, "b_status": status, "b_attempts": attempts, "b_last": attempted_at,
            "b_next": retry_at, "b_delivered": finished_at if status == "delivered" else None,
            "b_code": status_code, "b_error": error, "b_ms": round(elapsed * 1000)})
        return outcome

    async def _write_outcome(self, row: dict) -> None:
        """Group commit: outcomes that finish together are written in one transaction (one WAL flush)."""
        self._outcomes.append(row)
        if self._flush is not None:
            await asyncio.shield(self._flush)
            return
        self._flush = asyncio.get_running_loop().create_future()
        flush = self._flush
        await asyncio.sleep(0)  # attempts finishing in this turn of the loop join the batch
        # In id order, like every other multi-row write of deliveries, so two writers never deadlock.
        batch = sorted(self._outcomes, key=lambda row: row["b_id"])
        self._outcomes, self._flush = [], None
        try:
            async with self.engine.begin() as conn:
                await conn.execute(webhook_attempts.insert().values(
                    delivery_id=bindparam("b_id"), attempted_at=bindparam("b_last"),
                    status_code=bindparam("b_code"), error=bindparam("b_error"),
                    duration_ms=bindparam("b_ms")), batch)
                # Only a delivery still ours moves: a deleted endpoint's delivery stays cancelled.
                ours = (d.c.id == bindparam("b_id")) & (d.c.status == "pending")
                await conn.execute(update(d).where(ours).values(
                    status=bindparam("b_status"), attempts=bindparam("b_attempts"),
                    last_attempt_at=bindparam("b_last"), next_attempt_at=bindparam("b_next"),
                    delivered_at=bindparam("b_delivered")), batch)
        except BaseException as exc:
            flush.set_exception(exc)
            flush.exception()  # retrieved here; the joiners re-raise it
            raise
        flush.set_result(None)

    # --- the loop --------------------------------------------------------------------------------------

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

        def done(t: asyncio.Task) -> None:
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
            waits = [asyncio.create_task(self._wake.wait()), asyncio.create_task(self._stop.wait())]
            await asyncio.wait([*waits, *self._in_flight.values()], timeout=self.config.poll_interval_s,
                               return_when=asyncio.FIRST_COMPLETED)
            for task in waits:
                task.cancel()
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
        """Since when the oldest undelivered event has waited: its commit (service clock) if it is not
        fanned out yet, else the fan-out (worker clock) of the oldest pending delivery."""
        not_fanned = select(func.min(ev.c.created_at)).where(ev.c.fanned_out_at.is_(None))
        pending = select(func.min(d.c.created_at)).where(d.c.status == "pending")
        async with self.engine.connect() as conn:
            found = [await conn.scalar(not_fanned), await conn.scalar(pending)]
        return min((t for t in found if t is not None), default=None)

    async def listen(self, stop: asyncio.Event) -> None:
        """Set the wake-up on every commit that recorded events (LISTEN on the outbox trigger's channel).
        Polling stays the fallback: a lost listener only costs latency, and it reconnects."""
        url = self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        failures = 0
        while not stop.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    failures = 0
                    self.listening.set()
                    self._wake.set()  # anything committed before LISTEN is found by the next step
                    async for _ in conn.notifies():
                        self._wake.set()
            except (psycopg.Error, OSError) as exc:
                self.listening.clear()
                failures += 1
                self.log.warning("outbox listener lost; polling meanwhile", error=str(exc)[:ERROR_TEXT_LIMIT])
                await sleep_or_stop(stop, min(30.0, 0.5 * 2 ** min(failures, 6)))

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
            async with self.engine.begin() as conn:
                await conn.execute(update(d).where(d.c.id.in_(ids), d.c.status == "pending")
                                   .values(next_attempt_at=await self.clock.now()))


class _EventRow:
    """The outbox columns `envelope` reads, from a joined claim row."""

    def __init__(self, row) -> None:
        self.id = row.event_id
        self.type = row.type
        self.created_at = row.created_at
        self.api_version = row.api_version
        self.data = row.data
