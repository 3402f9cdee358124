"""Fan-out: each committed outbox event becomes one `pending` delivery per subscribed endpoint of its
organisation, in one transaction with the event's `fanned_out_at` stamp.

The batch of events is locked FOR UPDATE SKIP LOCKED, so several workers share the backlog, and an
event committed just before a crash is still fanned out by the next worker to look. Endpoints are read
FOR SHARE: an endpoint deleted meanwhile either commits first (and gets nothing) or waits for this
transaction and cancels what it created (`store.delete_endpoint`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.ids import new_id
from vip.store.tables import outbox_events, webhook_deliveries, webhook_endpoints
from vip.webhooks.catalogue import subscribed
from vip.webhooks.store import receiving

d, ep, ev = webhook_deliveries, webhook_endpoints, outbox_events


async def fan_out(engine: AsyncEngine, now: datetime, batch: int) -> tuple[int, int]:
    """Create the deliveries of up to `batch` events not fanned out yet, oldest first; returns how many
    events and how many deliveries."""
    async with engine.begin() as conn:
        events = list(await conn.execute(
            select(ev.c.id, ev.c.organisation_id, ev.c.type).where(ev.c.fanned_out_at.is_(None))
            .order_by(ev.c.seq).limit(batch).with_for_update(skip_locked=True)))
        if not events:
            return 0, 0
        orgs = {e.organisation_id for e in events if e.organisation_id is not None}
        endpoints = list(await conn.execute(
            select(ep.c.id, ep.c.organisation_id, ep.c.event_types)
            .where(ep.c.organisation_id.in_(orgs), receiving())
            .with_for_update(read=True))) if orgs else []
        rows = [{"id": new_id("whd"), "event_id": e.id, "endpoint_id": endpoint.id, "status": "pending",
                 "attempts": 0, "next_attempt_at": now, "created_at": now}
                for e in events for endpoint in endpoints
                if endpoint.organisation_id == e.organisation_id and subscribed(endpoint.event_types, e.type)]
        if rows:
            await conn.execute(pg_insert(d).values(rows).on_conflict_do_nothing(
                index_elements=[d.c.event_id, d.c.endpoint_id]))
        await conn.execute(update(ev).where(ev.c.id.in_([e.id for e in events])).values(fanned_out_at=now))
    return len(events), len(rows)
