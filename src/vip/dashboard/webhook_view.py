"""What the webhook pages show an integrator debugging their receiver: each endpoint's health over the last
day, an attempt's outcome in words, the event's payload as it was sent.

`error_in_words` and `health_state` are pure; `endpoints_health` reads the attempts of the organisation's
endpoints (their deliveries carry the endpoint)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.store.outbox import envelope
from vip.store.tables import webhook_attempts, webhook_deliveries, webhook_endpoints
from vip.webhooks.signing import encode_body
from vip.webhooks.store import Endpoint

HEALTH_WINDOW = timedelta(hours=24)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "non-standard status"


def error_in_words(status_code: int | None, error: str | None) -> str:
    """An attempt's outcome as a sentence an integrator can act on (the raw error is shown beside it)."""
    if error is None:
        return f"Delivered: the receiver answered {status_code} {_reason(status_code or 0)}."
    if status_code is not None:
        phrase = f"The receiver answered {status_code} {_reason(status_code)}"
        if 300 <= status_code < 400:
            return f"{phrase}: redirects are not followed, give the endpoint its final URL."
        if status_code in (401, 403):
            return (f"{phrase}: it refused the request. If it checks Service-Signature, check it uses this "
                    "endpoint's current signing secret on the raw body.")
        if status_code in (404, 405, 410):
            return f"{phrase}: nothing handles POST at this URL. Check the path."
        if status_code == 413:
            return f"{phrase}: its body size limit is smaller than the event."
        if status_code == 429:
            return f"{phrase}: it is rate limiting us; the retry schedule backs off."
        if 400 <= status_code < 500:
            return f"{phrase}: it refused the event. Its answer below may say why."
        return f"{phrase}: it failed while handling the event. Its answer below may say why; its logs will."
    if error.startswith("no answer within"):
        return (f"{error[0].upper()}{error[1:]}: the receiver took too long. Answer 2xx at once and do the "
                "work afterwards.")
    if error.startswith("RefusedAddress"):
        return ("Not sent: the URL's host is, or resolves to, a private or reserved address. Webhooks go to "
                "public addresses.")
    if "signing secret does not open" in error:
        return ("Not sent: the endpoint's signing secret cannot be opened with the service's key ring "
                "(an operator must restore the key, or rotate the secret).")
    if "DNS" in error or "Name or service not known" in error or "nodename nor servname" in error:
        return "Not sent: the URL's host name does not resolve."
    if "Certificate" in error or "SSL" in error or "certificate" in error:
        return "The TLS handshake failed: the receiver's certificate is not valid for this host name."
    if "Connect call failed" in error or "Connection refused" in error or "Cannot connect" in error:
        host = re.search(r"host ([^\s]+)", error)
        where = f" at {host.group(1)}" if host else ""
        return f"Could not connect{where}: nothing accepted the connection. Is the receiver running?"
    if "ServerDisconnected" in error or "Connection reset" in error:
        return "The receiver closed the connection without answering."
    return "The request failed before the receiver answered."


@dataclass(frozen=True)
class EndpointHealth:
    """An endpoint's attempts over the last day."""

    endpoint: Endpoint
    attempts: int
    succeeded: int
    median_ms: int | None
    last_success_at: datetime | None
    last_failure_at: datetime | None
    last_failure: str | None  # in words
    pending: int  # deliveries waiting for an attempt
    failing_since: datetime | None  # the first failure since the last success (None: not failing)

    @property
    def success_rate(self) -> str:
        return f"{100 * self.succeeded / self.attempts:.0f}%" if self.attempts else "—"

    @property
    def state(self) -> str:
        return health_state(self.endpoint, self.failing_since, self.attempts, self.succeeded)


def health_state(endpoint: Endpoint, failing_since: datetime | None, attempts: int, succeeded: int) -> str:
    """disabled | failing (every attempt since the last success failed) | degraded (some of the day's
    failed) | healthy | idle (no attempt today)."""
    if endpoint.disabled_at is not None:
        return "disabled"
    if failing_since is not None:
        return "failing"
    if attempts == 0:
        return "idle"
    return "healthy" if succeeded == attempts else "degraded"


async def endpoints_health(engine: AsyncEngine, endpoints: list[Endpoint], now: datetime
                           ) -> list[EndpointHealth]:
    """The health of each endpoint (of one organisation: the caller lists them) since HEALTH_WINDOW ago."""
    if not endpoints:
        return []
    a, d = webhook_attempts, webhook_deliveries
    ids = [e.id for e in endpoints]
    ok = a.c.error.is_(None)
    async with engine.connect() as conn:
        failing = {r.id: r.failing_since for r in await conn.execute(
            select(webhook_endpoints.c.id, webhook_endpoints.c.failing_since)
            .where(webhook_endpoints.c.id.in_(ids)))}
        figures = {r.endpoint_id: r for r in await conn.execute(
            select(d.c.endpoint_id, func.count().label("attempts"), func.count().filter(ok).label("ok"),
                   func.percentile_cont(0.5).within_group(a.c.duration_ms).label("median"),
                   func.max(a.c.attempted_at).filter(ok).label("last_ok"),
                   func.max(a.c.attempted_at).filter(~ok).label("last_fail"))
            .join(d, d.c.id == a.c.delivery_id)
            .where(d.c.endpoint_id.in_(ids), a.c.attempted_at >= now - HEALTH_WINDOW)
            .group_by(d.c.endpoint_id))}
        pending = {r.endpoint_id: r.n for r in await conn.execute(
            select(d.c.endpoint_id, func.count().label("n"))
            .where(d.c.endpoint_id.in_(ids), d.c.status == "pending").group_by(d.c.endpoint_id))}
        newest = func.row_number().over(partition_by=d.c.endpoint_id,
                                        order_by=(a.c.attempted_at.desc(), a.c.id.desc())).label("n")
        failures = (select(d.c.endpoint_id, a.c.status_code, a.c.error, newest)
                    .join(d, d.c.id == a.c.delivery_id)
                    .where(d.c.endpoint_id.in_(ids), ~ok, a.c.attempted_at >= now - HEALTH_WINDOW)
                    .subquery())
        last_failures = {r.endpoint_id: error_in_words(r.status_code, r.error) for r in await conn.execute(
            select(failures).where(failures.c.n == 1))}
    out = []
    for endpoint in endpoints:
        row = figures.get(endpoint.id)
        out.append(EndpointHealth(
            endpoint, row.attempts if row else 0, row.ok if row else 0,
            round(row.median) if row and row.median is not None else None,
            row.last_ok if row else None, row.last_fail if row else None,
            last_failures.get(endpoint.id), pending.get(endpoint.id, 0), failing.get(endpoint.id)))
    return out


async def failing_endpoints(engine: AsyncEngine, organisation_id: str) -> list[Row[Any]]:
    """The organisation's endpoints that fail now or were disabled for failing (home page)."""
    e = webhook_endpoints
    async with engine.connect() as conn:
        return list(await conn.execute(
            select(e.c.id, e.c.url, e.c.failing_since, e.c.disabled_at, e.c.disabled_reason)
            .where(e.c.organisation_id == organisation_id, e.c.deleted_at.is_(None),
                   e.c.failing_since.is_not(None) | e.c.disabled_at.is_not(None))
            .order_by(e.c.failing_since.asc().nulls_last(), e.c.id)))


def payload_text(event_row: Any) -> str:
    """The event's body as every delivery carries it (the signed bytes), indented for reading."""
    return json.dumps(json.loads(encode_body(envelope(event_row))), indent=2, ensure_ascii=False)
