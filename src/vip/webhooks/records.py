"""The typed records of events as lenders read them: an outbox event (what a delivery's envelope holds),
the same with its delivery state, a delivery to an endpoint and one attempt of it. Built from the rows
vip.webhooks.events and vip.webhooks.stream read, for the API's routes, the dashboard and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row


@dataclass(frozen=True)
class Event:
    """A row of `outbox_events` (vip.store.outbox.envelope reads id, type, created_at, api_version, data)."""

    id: str
    organisation_id: str | None
    type: str
    api_version: str
    data: dict[str, Any]  # {"object": {...}} (and "test": true for a test event)
    created_at: datetime
    seq: int  # commit order
    fanned_out_at: datetime | None

    @classmethod
    def of(cls, row: Row[Any]) -> Event:
        return cls(row.id, row.organisation_id, row.type, row.api_version, row.data, row.created_at, row.seq,
                   row.fanned_out_at)


@dataclass(frozen=True)
class ListedEvent(Event):
    """An event with its delivery state: pending, delivered, failed or none (vip.webhooks.events)."""

    delivery_status: str

    @classmethod
    def of(cls, row: Row[Any]) -> ListedEvent:
        return cls(row.id, row.organisation_id, row.type, row.api_version, row.data, row.created_at, row.seq,
                   row.fanned_out_at, row.delivery_status)


@dataclass(frozen=True)
class Attempt:
    """A row of `webhook_attempts`: one try of a delivery."""

    id: int
    delivery_id: str
    attempted_at: datetime
    status_code: int | None  # None: no HTTP answer (time-out, connection error)
    error: str | None
    duration_ms: int
    request_headers: dict[str, str] | None  # None on attempts older than migration 0022
    response_body: str | None

    @classmethod
    def of(cls, row: Row[Any]) -> Attempt:
        return cls(row.id, row.delivery_id, row.attempted_at, row.status_code, row.error, row.duration_ms,
                   row.request_headers, row.response_body)


@dataclass(frozen=True)
class Delivery:
    """A row of `webhook_deliveries`, with its endpoint's URL."""

    id: str
    event_id: str
    endpoint_id: str
    url: str
    status: str  # pending | delivered | failed | cancelled
    attempts: int  # in the current round
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None
    delivered_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, row: Row[Any]) -> Delivery:
        return cls(row.id, row.event_id, row.endpoint_id, row.url, row.status, row.attempts,
                   row.next_attempt_at, row.last_attempt_at, row.delivered_at, row.created_at)
