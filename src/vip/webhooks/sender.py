"""One delivery attempt over HTTP: the event's body POSTed to its endpoint, signed with every secret that
signs now, bounded by the time-out. Whatever stops the request is a failed attempt, never a crash."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

import aiohttp
from multidict import CIMultiDict

from vip import metrics
from vip.formats import iso
from vip.webhooks.claims import Job
from vip.webhooks.schedule import is_success
from vip.webhooks.signing import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signatures

USER_AGENT = "vip-webhooks/1"
ERROR_TEXT_LIMIT = 300


@dataclass(frozen=True)
class Sent:
    """How an attempt went: the endpoint's status code (None: no answer) and, unless it succeeded,
    what went wrong."""

    status_code: int | None
    error: str | None
    elapsed_s: float


def new_session() -> aiohttp.ClientSession:
    # The worker's own slots bound concurrency; the connector must not queue requests behind them.
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers={"User-Agent": USER_AGENT})


async def send(session: aiohttp.ClientSession, job: Job, attempted_at: datetime, timeout_s: float) -> Sent:
    """POST the job's event to its endpoint once."""
    headers = CIMultiDict({"Content-Type": "application/json", EVENT_ID_HEADER: job.event_id,
                           TIMESTAMP_HEADER: iso(attempted_at)})
    for value in signatures(job.secrets, job.body):
        headers.add(SIGNATURE_HEADER, value)
    status_code: int | None = None
    error: str | None = None
    started = time.perf_counter()
    try:
        async with session.post(job.url, data=job.body, headers=headers, allow_redirects=False,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            status_code = resp.status
            if not is_success(status_code):
                error = f"HTTP {status_code}"
    except TimeoutError:
        error = f"no answer within {timeout_s:g} s"
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        # Anything that stops the request (refused, reset, TLS, a URL the client cannot use) is a
        # failed attempt on the schedule, never a crash that would leave the delivery leased forever.
        error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT]
    elapsed = time.perf_counter() - started
    metrics.WEBHOOK_ATTEMPT_SECONDS.observe(elapsed)
    return Sent(status_code, error, elapsed)
