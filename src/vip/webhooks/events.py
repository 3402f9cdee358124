"""Events of an organisation as lenders read them (with their delivery state), and manual replay."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Exists, and_, case, exists, or_, select, true, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.ids import new_id
from vip.store.tables import outbox_events, webhook_attempts, webhook_deliveries, webhook_endpoints
from vip.webhooks.catalogue import subscribed
from vip.webhooks.records import Attempt, Delivery, ListedEvent
from vip.webhooks.store import receiving

DELIVERY_STATUSES = ("pending", "delivered", "failed", "none")
e, d = outbox_events, webhook_deliveries


def _any_delivery(status: str) -> Exists:
    return exists().where(d.c.event_id == e.c.id, d.c.status == status)


# pending: not fanned out yet, or a delivery still due; failed: one delivery gave up (and none is
# pending); delivered: every live delivery succeeded; none: no endpoint subscribed.
DELIVERY_STATUS = case(
    (or_(e.c.fanned_out_at.is_(None), _any_delivery("pending")), "pending"),
    (_any_delivery("failed"), "failed"),
    (_any_delivery("delivered"), "delivered"),
    else_="none",
).label("delivery_status")


@dataclass(frozen=True)
class EventFilters:
    type: str | None = None
    created_from: datetime | None = None  # inclusive
    created_to: datetime | None = None  # exclusive
    delivery_status: str | None = None


async def list_events(conn: AsyncConnection, organisation_id: str, filters: EventFilters,
                      before_seq: int | None, limit: int) -> tuple[list[ListedEvent], bool]:
    """A page of events, newest first (by commit sequence), and whether more follow."""
    conditions = [e.c.organisation_id == organisation_id]
    if filters.type is not None:
        conditions.append(e.c.type == filters.type)
    if filters.created_from is not None:
        conditions.append(e.c.created_at >= filters.created_from)
    if filters.created_to is not None:
        conditions.append(e.c.created_at < filters.created_to)
    if filters.delivery_status is not None:
        # the SQL expression on the left builds the comparison (not a Yoda condition)
        conditions.append(DELIVERY_STATUS == filters.delivery_status)  # noqa: SIM300
    if before_seq is not None:
        conditions.append(e.c.seq < before_seq)
    rows = [ListedEvent.of(r) for r in await conn.execute(select(e, DELIVERY_STATUS).where(and_(*conditions))
                                                          .order_by(e.c.seq.desc()).limit(limit + 1))]
    return rows[:limit], len(rows) > limit


async def load_event(conn: AsyncConnection, organisation_id: str, event_id: str) -> ListedEvent | None:
    row = (await conn.execute(select(e, DELIVERY_STATUS).where(
        e.c.id == event_id, e.c.organisation_id == organisation_id))).first()
    return ListedEvent.of(row) if row is not None else None


async def deliveries_of(conn: AsyncConnection, event_id: str) -> list[tuple[Delivery, list[Attempt]]]:
    """The event's deliveries (oldest first), each with its attempts."""
    deliveries = [Delivery.of(r) for r in await conn.execute(
        select(d, webhook_endpoints.c.url).join(webhook_endpoints, webhook_endpoints.c.id == d.c.endpoint_id)
        .where(d.c.event_id == event_id).order_by(d.c.created_at, d.c.id))]
    attempts: dict[str, list[Attempt]] = {row.id: [] for row in deliveries}
    if deliveries:
        for a in await conn.execute(select(webhook_attempts).where(
                webhook_attempts.c.delivery_id.in_(list(attempts))).order_by(webhook_attempts.c.id)):
            attempts[a.delivery_id].append(Attempt.of(a))
    return [(row, attempts[row.id]) for row in deliveries]


async def replay(conn: AsyncConnection, organisation_id: str, event_id: str, now: datetime,
                 endpoint_id: str | None = None) -> int | None:
    """Deliver an event again to every endpoint of its organisation subscribed to its type now (or only
    to `endpoint_id`, when given and subscribed): a failed or delivered delivery starts a new round of
    the retry schedule at once, an endpoint added since the event gets a first delivery, a pending one is
    left alone. Returns how many deliveries are now pending (None: no such event)."""
    event = (await conn.execute(select(e.c.id, e.c.type, e.c.fanned_out_at).where(
        e.c.id == event_id, e.c.organisation_id == organisation_id).with_for_update())).first()
    if event is None:
        return None
    if event.fanned_out_at is None:
        # Not fanned out yet: the worker will create its deliveries with the endpoints of that moment.
        return 0
    chosen = webhook_endpoints.c.id == endpoint_id if endpoint_id is not None else true()
    endpoints = await conn.execute(select(webhook_endpoints.c.id, webhook_endpoints.c.event_types).where(
        webhook_endpoints.c.organisation_id == organisation_id, receiving(), chosen,
    ).with_for_update(read=True))
    wanted = [row.id for row in endpoints if subscribed(row.event_types, event.type)]
    if not wanted:
        return 0
    await conn.execute(pg_insert(d).values([
        {"id": new_id("whd"), "event_id": event_id, "endpoint_id": endpoint_id, "status": "pending",
         "attempts": 0, "next_attempt_at": now, "created_at": now} for endpoint_id in wanted
    ]).on_conflict_do_nothing(index_elements=[d.c.event_id, d.c.endpoint_id]))
    await conn.execute(update(d).where(
        d.c.event_id == event_id, d.c.endpoint_id.in_(wanted), d.c.status.in_(("failed", "delivered")),
    ).values(status="pending", attempts=0, next_attempt_at=now, delivered_at=None, created_at=now))
    return len(wanted)
