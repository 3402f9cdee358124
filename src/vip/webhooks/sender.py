"""One delivery attempt over HTTP: the event's body POSTed to its endpoint, signed with every secret that
signs now, bounded by the time-out. Whatever stops the request is a failed attempt, never a crash.

Outside local development the session resolves names through `GuardedResolver`: the connector connects
only to the addresses the resolver returned, and the resolver returns nothing unless every address is a
public one (vip.webhooks.urls), so an endpoint whose name now points into our network (DNS rebinding) is
refused at the attempt that would have reached it. Hosts written as IP addresses skip the resolver and
are checked in `send`. Redirects are never followed.
"""

from __future__ import annotations

import errno
import socket
import time
from dataclasses import dataclass
from datetime import datetime

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict
from yarl import URL

from vip import metrics
from vip.errors import ERROR_TEXT_LIMIT
from vip.formats import iso
from vip.store.transaction_guard import http_trace
from vip.webhooks.claims import Job
from vip.webhooks.schedule import is_success
from vip.webhooks.signing import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signatures
from vip.webhooks.urls import ip_literal, refused_address_reason, refused_among

USER_AGENT = "vip-webhooks/1"
# How much of a receiver's answer is kept for the dashboard (bytes read; the text is decoded leniently):
# enough for an error page's message, never a receiver's megabytes.
RESPONSE_TEXT_LIMIT = 2048


@dataclass(frozen=True)
class Sent:
    """How an attempt went: the endpoint's status code (None: no answer) and, unless it succeeded,
    what went wrong."""

    status_code: int | None
    error: str | None
    elapsed_s: float
    # What was sent (the headers, signatures included) and the start of the receiver's answer.
    request_headers: dict[str, str] | None = None
    response_text: str | None = None


class RefusedAddress(OSError):
    """The endpoint's host is, or resolves to, an address webhooks are not delivered to."""

    def __init__(self, reason: str) -> None:
        # (errno, strerror): aiohttp's connector error shows strerror, so the reason reaches the attempt.
        super().__init__(errno.EACCES, reason)


class GuardedResolver(AbstractResolver):
    """Resolves with `inner` (the system resolver by default) and refuses the name when any address it
    resolves to is not public: the connection is made only to addresses this returned."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = aiohttp.ThreadedResolver()
        results = await self._inner.resolve(host, port, family)
        reason = refused_among(host, [r["host"] for r in results])
        if reason:
            raise RefusedAddress(reason)
        return results

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()


def new_session(*, guarded: bool = True, resolver: AbstractResolver | None = None) -> aiohttp.ClientSession:
    """The worker's HTTP session: names resolved through GuardedResolver unless `guarded` is false
    (local development), no DNS cache (each attempt resolves and checks afresh), no proxy from the
    environment."""
    # The worker's own slots bound concurrency; the connector must not queue requests behind them.
    connector = aiohttp.TCPConnector(limit=0, use_dns_cache=False,
                                     resolver=GuardedResolver(resolver) if guarded else resolver)
    return aiohttp.ClientSession(connector=connector, headers={"User-Agent": USER_AGENT}, trust_env=False,
                                 trace_configs=[http_trace()])


def refused_literal(url: str) -> str | None:
    """Why a URL whose host is written as an IP address must not be called (None: a name, or public)."""
    host = URL(url).raw_host or ""
    literal = ip_literal(host)
    reason = refused_address_reason(literal) if literal is not None else None
    return f"the URL's host {host} is {reason}; webhooks go to public addresses" if reason else None


def delivery_headers(event_id: str, body: bytes, secrets_newest_first: list[str],
                     attempted_at: datetime) -> CIMultiDict[str]:
    """The headers of a delivery: one Service-Signature per secret that signs now, the event id, the
    attempt's time (deliveries and `vip listen --forward-to` alike)."""
    headers = CIMultiDict({"Content-Type": "application/json", EVENT_ID_HEADER: event_id,
                           TIMESTAMP_HEADER: iso(attempted_at)})
    for value in signatures(secrets_newest_first, body):
        headers.add(SIGNATURE_HEADER, value)
    return headers


async def send(session: aiohttp.ClientSession, job: Job, attempted_at: datetime, timeout_s: float, *,
               guarded: bool = True) -> Sent:
    """POST the job's event to its endpoint once. When `guarded` (outside local development) a host
    written as a private IP address is refused here; `session` must then come from
    `new_session(guarded=True)`, whose resolver refuses names that resolve to one."""
    headers = delivery_headers(job.event_id, job.body, job.secrets, attempted_at)
    sent_headers = {"User-Agent": USER_AGENT, **{name: ", ".join(headers.getall(name)) for name in headers}}
    status_code: int | None = None
    error: str | None = None
    response_text: str | None = None
    started = time.perf_counter()
    refused = refused_literal(job.url) if guarded else None
    if not job.secrets:
        # Never an unsigned request: the stored secret does not open with the key ring (a key removed
        # before `vip secrets reseal`). A failed attempt on the schedule, so the operator can fix it.
        return Sent(None, "the endpoint's signing secret does not open with the key ring (VIP_TOKEN_KEY)",
                    0.0)
    try:
        if refused:
            raise RefusedAddress(refused)
        async with session.post(job.url, data=job.body, headers=headers, allow_redirects=False,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            status_code = resp.status
            if not is_success(status_code):
                error = f"HTTP {status_code}"
            response_text = (await resp.content.read(RESPONSE_TEXT_LIMIT)).decode("utf-8", "replace")
    except TimeoutError:
        error = f"no answer within {timeout_s:g} s"
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        # Anything that stops the request (refused, reset, TLS, a URL the client cannot use) is a
        # failed attempt on the schedule, never a crash that would leave the delivery leased forever.
        error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT]
    elapsed = time.perf_counter() - started
    metrics.WEBHOOK_ATTEMPT_SECONDS.observe(elapsed)
    # PostgreSQL text cannot hold a NUL: a receiver's binary answer is kept without them.
    return Sent(status_code, error, elapsed, sent_headers,
                response_text.replace("\x00", "\ufffd") if response_text is not None else None)
