"""Due deliveries leased to a worker: a `pending` delivery whose `next_attempt_at` has passed is due.

A claim locks some per endpoint (SKIP LOCKED, so several workers share them), moves their
`next_attempt_at` forward by a lease and commits before anything is sent: no transaction stays open
during HTTP, and a worker that dies mid-attempt leaves a delivery that is due again when the lease ends
(at least once; receivers drop duplicates by Service-Event-Id).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, Select, func, select, true, update
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.store.outbox import envelope
from vip.store.tables import outbox_events, webhook_deliveries, webhook_endpoints
from vip.token_cipher import TokenCipher
from vip.webhooks.signing import encode_body
from vip.webhooks.store import open_secret, receiving, signing_secrets

d, ep, ev = webhook_deliveries, webhook_endpoints, outbox_events


@dataclass(frozen=True)
class Job:
    """One taken delivery, with everything needed to send it."""

    delivery_id: str
    endpoint_id: str
    event_id: str
    event_type: str
    url: str
    secrets: list[str] = field(repr=False)  # newest first, in clear; never logged; empty: none opens
    body: bytes = field(repr=False)
    attempts_before: int


def due_candidates_query(now: datetime, per_endpoint: int, skip_endpoints: list[str]) -> Select[str]:
    """Ids of up to `per_endpoint` due deliveries of each live endpoint not in `skip_endpoints`, oldest due
    first (one index probe per endpoint)."""
    due = (select(d.c.id, d.c.next_attempt_at)
           .where(d.c.endpoint_id == ep.c.id, d.c.status == "pending", d.c.next_attempt_at <= now)
           .order_by(d.c.next_attempt_at).limit(per_endpoint).lateral("due"))
    live = receiving()
    if skip_endpoints:
        live = live & ep.c.id.not_in(skip_endpoints)
    return select(due.c.id).select_from(ep.join(due, true())).where(live).order_by(due.c.next_attempt_at)


def lock_due_query(now: datetime, ids: list[str]) -> Select[Any]:
    """Lock those of `ids` still due (SKIP LOCKED: another worker's are skipped), with what sending needs,
    oldest due first and in commit order among equals."""
    return (select(d.c.id, d.c.endpoint_id, d.c.event_id, d.c.attempts, ep.c.url, ep.c.secret,
                   ep.c.previous_secret, ep.c.previous_secret_expires_at, ev.c.type, ev.c.created_at,
                   ev.c.api_version, ev.c.data)
            .select_from(d.join(ep, ep.c.id == d.c.endpoint_id).join(ev, ev.c.id == d.c.event_id))
            .where(d.c.id.in_(ids), d.c.status == "pending", d.c.next_attempt_at <= now)
            .order_by(d.c.next_attempt_at, ev.c.seq)
            .with_for_update(of=d, skip_locked=True))


async def claim_due(engine: AsyncEngine, now: datetime, *, limit: int, per_endpoint: int,
                    held: Counter[str], lease: timedelta, cipher: TokenCipher) -> list[Job]:
    """Lease up to `limit` due deliveries until `now + lease`, at most `per_endpoint` per endpoint
    counting those the caller already `held`; their signing secrets opened with `cipher`."""
    full = [endpoint for endpoint, n in held.items() if n >= per_endpoint]
    async with engine.begin() as conn:
        # Two statements, so the planner never runs the per-endpoint probes once per due row.
        ids = list((await conn.execute(due_candidates_query(now, per_endpoint, full).limit(limit))).scalars())
        if not ids:
            return []
        rows = list(await conn.execute(lock_due_query(now, ids)))
        taken: list[Row[Any]] = []
        slots = Counter(held)
        for row in rows:
            if slots[row.endpoint_id] < per_endpoint:
                slots[row.endpoint_id] += 1
                taken.append(row)
        if not taken:
            return []
        await conn.execute(update(d).where(d.c.id.in_([r.id for r in taken]))
                           .values(next_attempt_at=now + lease))
    return [Job(r.id, r.endpoint_id, r.event_id, r.type, r.url,
                signing_secrets(open_secret(cipher, r.endpoint_id, r.secret),
                                open_secret(cipher, r.endpoint_id, r.previous_secret),
                                r.previous_secret_expires_at, now),
                encode_body(envelope(_EventRow(r))), r.attempts) for r in taken]


async def release(engine: AsyncEngine, delivery_ids: list[str], now: datetime) -> None:
    """Leased deliveries that were never sent are due again at `now`, for any worker."""
    async with engine.begin() as conn:
        await conn.execute(update(d).where(d.c.id.in_(delivery_ids), d.c.status == "pending")
                           .values(next_attempt_at=now))


async def oldest_undelivered(engine: AsyncEngine) -> datetime | None:
    """Since when the oldest undelivered event has waited: its commit (service clock) if it is not
    fanned out yet, else the fan-out (worker clock) of the oldest pending delivery."""
    not_fanned = select(func.min(ev.c.created_at)).where(ev.c.fanned_out_at.is_(None))
    pending = select(func.min(d.c.created_at)).where(d.c.status == "pending")
    async with engine.connect() as conn:
        found = [await conn.scalar(not_fanned), await conn.scalar(pending)]
    return min((t for t in found if t is not None), default=None)


class _EventRow:
    """The outbox columns `envelope` reads, from a joined claim row."""

    def __init__(self, row: Row[Any]) -> None:
        self.id = row.event_id
        self.type = row.type
        self.created_at = row.created_at
        self.api_version = row.api_version
        self.data = row.data
