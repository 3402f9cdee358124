"""GET /v1/events (filtered, keyset-paginated), GET /v1/events/{id} with its deliveries and attempts,
POST /v1/events/{id}/replay (scope `admin`): lenders can reconcile by polling as well as by webhooks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web
from pydantic import Field

from vip.api.context import ENGINE, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import Query, read_query
from vip.store.outbox import envelope
from vip.webhooks import events, service

routes = web.RouteTableDef()


class ListEvents(Query):
    type: str | None = Field(default=None, min_length=1, max_length=100)
    created_from: datetime | None = None
    created_to: datetime | None = None
    delivery_status: Literal["pending", "delivered", "failed", "none"] | None = None
    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, min_length=1, max_length=100)


def _utc(ts: datetime | None) -> datetime | None:
    """A time without an offset is read as UTC."""
    return ts.replace(tzinfo=UTC) if ts is not None and ts.tzinfo is None else ts


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


def event_detail_json(detail: service.EventDetail) -> dict[str, Any]:
    return {**event_json(detail.event), "deliveries": [delivery_json(d, a) for d, a in detail.deliveries]}


@routes.get("/v1/events")
@requires("admin")
async def list_events(request: web.Request) -> web.Response:
    query = read_query(request, ListEvents)
    filters = events.EventFilters(query.type, _utc(query.created_from), _utc(query.created_to),
                                  query.delivery_status)
    page = await service.list_events(request.app[ENGINE], principal(request).organisation_id, filters,
                                     query.cursor, query.limit)
    return json_response({"events": [event_json(r) for r in page.events],
                          "pagination": {"cursor": page.next_cursor, "has_more": page.has_more}})


@routes.get("/v1/events/{event_id}")
@requires("admin")
async def get_event(request: web.Request) -> web.Response:
    detail = await service.get_event(request.app[ENGINE], principal(request).organisation_id,
                                     request.match_info["event_id"])
    return json_response({"event": event_detail_json(detail)})


@routes.post("/v1/events/{event_id}/replay")
@requires("admin")
async def replay_event(request: web.Request) -> web.Response:
    detail = await service.replay_event(request.app[ENGINE], principal(request).organisation_id,
                                        request.match_info["event_id"])
    return json_response({"event": event_detail_json(detail)}, status=202)
