"""GET /v1/events (filtered, keyset-paginated), GET /v1/events/{id} with its deliveries and attempts,
POST /v1/events/{id}/replay (scope `admin`): lenders can reconcile by polling as well as by webhooks."""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web
from pydantic import Field

from vip.api.context import ENGINE, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.routes.webhooks import WALL
from vip.api.validation import Query, read_query
from vip.errors import NotFound, Unprocessable, ValidationFailed
from vip.store.outbox import envelope
from vip.webhooks import events

routes = web.RouteTableDef()
CURSOR_PREFIX = "evt:"


class ListEvents(Query):
    type: str | None = Field(default=None, min_length=1, max_length=100)
    created_from: datetime | None = None
    created_to: datetime | None = None
    delivery_status: Literal["pending", "delivered", "failed", "none"] | None = None
    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=100)


def _utc(ts: datetime | None) -> datetime | None:
    """A time without an offset is read as UTC."""
    return ts.replace(tzinfo=UTC) if ts is not None and ts.tzinfo is None else ts


def encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"{CURSOR_PREFIX}{seq}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith(CURSOR_PREFIX):
            raise ValueError(text)
        return int(text.removeprefix(CURSOR_PREFIX))
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValidationFailed("invalid cursor: use the cursor of the previous response unchanged",
                               {"cursor": "not a cursor"}) from exc


def event_json(row) -> dict[str, Any]:
    return {**envelope(row), "delivery_status": row.delivery_status}


def delivery_json(row, attempts: list) -> dict[str, Any]:
    return {
        "id": row.id, "endpoint_id": row.endpoint_id, "url": row.url, "status": row.status,
        "attempt_count": row.attempts, "next_attempt_at": iso(row.next_attempt_at),
        "delivered_at": iso(row.delivered_at),
        "attempts": [{"attempted_at": iso(a.attempted_at), "status_code": a.status_code, "error": a.error,
                      "duration_ms": a.duration_ms} for a in attempts],
    }


async def _detail(conn, organisation_id: str, event_id: str) -> dict[str, Any]:
    row = await events.load_event(conn, organisation_id, event_id)
    if row is None:
        raise NotFound(f"no event {event_id}", {"event_id": event_id})
    deliveries = await events.deliveries_of(conn, event_id)
    return {**event_json(row), "deliveries": [delivery_json(d, a) for d, a in deliveries]}


@routes.get("/v1/events")
@requires("admin")
async def list_events(request: web.Request) -> web.Response:
    query = read_query(request, ListEvents)
    filters = events.EventFilters(query.type, _utc(query.created_from), _utc(query.created_to),
                                  query.delivery_status)
    before = decode_cursor(query.cursor) if query.cursor else None
    async with request.app[ENGINE].connect() as conn:
        rows, more = await events.list_events(conn, principal(request).organisation_id, filters, before,
                                              query.limit)
    cursor = encode_cursor(rows[-1].seq) if more and rows else None
    return json_response({"events": [event_json(r) for r in rows],
                          "pagination": {"cursor": cursor, "has_more": more}})


@routes.get("/v1/events/{event_id}")
@requires("admin")
async def get_event(request: web.Request) -> web.Response:
    async with request.app[ENGINE].connect() as conn:
        body = await _detail(conn, principal(request).organisation_id, request.match_info["event_id"])
    return json_response({"event": body})


@routes.post("/v1/events/{event_id}/replay")
@requires("admin")
async def replay_event(request: web.Request) -> web.Response:
    event_id = request.match_info["event_id"]
    org = principal(request).organisation_id
    async with request.app[ENGINE].begin() as conn:
        queued = await events.replay(conn, org, event_id, await WALL.now())
        if queued is None:
            raise NotFound(f"no event {event_id}", {"event_id": event_id})
        body = await _detail(conn, org, event_id)
    if queued == 0 and body["delivery_status"] != "pending":
        raise Unprocessable("no webhook endpoint of the organisation receives this event type",
                            {"type": body["type"]}, code="ERR_NO_WEBHOOK_ENDPOINT")
    return json_response({"event": body}, status=202)
