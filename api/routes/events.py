"""GET /v1/events (filtered, keyset-paginated), GET /v1/events/{id} with its deliveries and attempts,
POST /v1/events/{id}/replay (scope `admin`): lenders can reconcile by polling as well as by webhooks.
The developer loop: GET /v1/events/stream (Server-Sent Events, what `vip listen` reads) and
POST /v1/events/trigger (a test event, `vip trigger`)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
import structlog
from aiohttp import web
from pydantic import Field

from vip.api.context import ENGINE, REQUEST_ID, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import NOT_BLANK, Body, Query, read_body, read_query
from vip.store.outbox import envelope
from vip.webhooks import events, service, stream
from vip.webhooks.catalogue import EVENT_TYPES
from vip.webhooks.records import Attempt, Delivery, ListedEvent
from vip.webhooks.signing import encode_body, new_secret

log = structlog.get_logger(__name__)

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


def event_json(row: ListedEvent) -> dict[str, Any]:
    return {**envelope(row), "delivery_status": row.delivery_status}


def delivery_json(row: Delivery, attempts: list[Attempt]) -> dict[str, Any]:
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


class TriggerEvent(Body):
    type: str = Field(min_length=1, max_length=100, description="The event type to fire",
                      json_schema_extra={"enum": list(EVENT_TYPES)})


class ReplayEvent(Body):
    endpoint_id: str | None = Field(default=None, min_length=1, max_length=100, pattern=NOT_BLANK,
                                    description="Only to this endpoint (omitted: every endpoint subscribed "
                                                "to the event's type)")


def sse(event: str, data: bytes, event_id: str | None = None) -> bytes:
    """One Server-Sent Events message; `data` is one line (compact JSON never holds a newline)."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {event}\n".encode() + b"data: " + data + b"\n\n"


@routes.get("/v1/events/stream")
@requires("admin")
async def stream_events(request: web.Request) -> web.StreamResponse:
    """The organisation's events as they commit, as Server-Sent Events: first `ready` with a signing
    secret for this session, then one `event` per event (data: the delivery body, exactly as a webhook
    carries it), and a comment line every `stream_keepalive_s`, when the key is looked at again: a
    revoked key ends the stream with an `error` message."""
    config = request.app[SETTINGS].webhooks
    engine = request.app[ENGINE]
    organisation_id, key_id = principal(request).organisation_id, principal(request).key_id
    window = stream.SeqWindow(await stream.latest_seq(engine), lookback_s=30.0)
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
        "X-Request-Id": request[REQUEST_ID]})
    await response.prepare(request)
    secret = new_secret()  # the session's own: `vip listen` signs what it forwards with it
    await response.write(sse("ready", orjson.dumps({"secret": secret, "organisation_id": organisation_id})))
    log.info("event stream opened", organisation_id=organisation_id)
    quiet_since = checked_at = time.monotonic()
    try:
        # Until the client goes (the transport is dropped when the connection is lost).
        while request.transport is not None and not request.transport.is_closing():
            rows = await stream.new_events(engine, organisation_id, window, time.monotonic())
            for row in rows:
                await response.write(sse("event", encode_body(envelope(row)), row.id))
            if rows:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= config.stream_keepalive_s:
                await response.write(b": keep-alive\n\n")
                quiet_since = time.monotonic()
            if time.monotonic() - checked_at >= config.stream_keepalive_s:
                checked_at = time.monotonic()
                if not await stream.key_active(engine, key_id):
                    await response.write(sse("error", orjson.dumps({
                        "code": "ERR_UNAUTHORIZED", "message": "the API key was revoked"})))
                    break
            await asyncio.sleep(config.stream_poll_s)
    except ConnectionResetError:
        pass  # the client went between two looks
    log.info("event stream closed", organisation_id=organisation_id)
    return response


@routes.post("/v1/events/trigger")
@requires("admin")
async def trigger_event(request: web.Request) -> web.Response:
    body = await read_body(request, TriggerEvent)
    row = await service.trigger_event(request.app[ENGINE], principal(request).organisation_id, body.type)
    return json_response({"event": event_json(row)}, status=201)


@routes.get("/v1/events/{event_id}")
@requires("admin")
async def get_event(request: web.Request) -> web.Response:
    detail = await service.get_event(request.app[ENGINE], principal(request).organisation_id,
                                     request.match_info["event_id"])
    return json_response({"event": event_detail_json(detail)})


@routes.post("/v1/events/{event_id}/replay")
@requires("admin")
async def replay_event(request: web.Request) -> web.Response:
    # The body is optional: an empty one replays to every subscribed endpoint, as before.
    body = await read_body(request, ReplayEvent) if (await request.read()).strip() else ReplayEvent()
    detail = await service.replay_event(request.app[ENGINE], principal(request).organisation_id,
                                        request.match_info["event_id"], body.endpoint_id)
    return json_response({"event": event_detail_json(detail)}, status=202)
