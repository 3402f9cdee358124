"""Webhook operations of the API and the dashboard, one function each: an organisation's endpoints (create,
list, change, disable, delete, enable, rotate the secret), its events (list, read with deliveries, replay)
and test events.

A change comes in two forms: `name(engine, ...)` runs in a transaction of its own (the API), and
`name_on(conn, ...)` in the caller's, so that the dashboard writes its audit entry in the same
transaction as the change."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.clock import WallClock
from vip.config import WebhookConfig
from vip.errors import Conflict, NotFound, Unprocessable, ValidationFailed
from vip.store.outbox import record_event
from vip.token_cipher import TokenCipher
from vip.webhooks import events, store
from vip.webhooks.records import Attempt, Delivery, ListedEvent
from vip.webhooks.samples import sample_object, sampled_types
from vip.webhooks.urls import check_endpoint_host, check_endpoint_url

# Webhook timing (created, rotation overlap, replays) is wall-clock time, like the delivery worker's.
WALL = WallClock()
CURSOR_PREFIX = "evt:"


def _endpoint_not_found(endpoint_id: str) -> NotFound:
    return NotFound(f"no webhook endpoint {endpoint_id}", {"endpoint_id": endpoint_id})


def _event_not_found(event_id: str) -> NotFound:
    return NotFound(f"no event {event_id}", {"event_id": event_id})


async def checked_url(config: WebhookConfig, url: str) -> str:
    """An endpoint URL as stored, checked (scheme, no credentials, a public host unless http is allowed);
    ValidationFailed otherwise."""
    try:
        url = check_endpoint_url(url, allow_http=config.allow_http)
        await check_endpoint_host(url, allow_http=config.allow_http)
    except ValueError as exc:
        raise ValidationFailed(f"invalid url: {exc}", {"url": str(exc)}) from exc
    return url


async def create_endpoint(engine: AsyncEngine, config: WebhookConfig, *, organisation_id: str, url: str,
                          event_types: list[str] | None,
                          description: str | None, cipher: TokenCipher) -> tuple[str, store.Endpoint]:
    """A new endpoint and its signing secret (shown once, kept sealed with `cipher`). `event_types` must
    be normalised already (vip.webhooks.catalogue)."""
    url = await checked_url(config, url)
    async with engine.begin() as conn:
        return await create_endpoint_on(conn, organisation_id=organisation_id, url=url,
                                        event_types=event_types, description=description, cipher=cipher)


async def create_endpoint_on(conn: AsyncConnection, *, organisation_id: str, url: str,
                             event_types: list[str] | None, description: str | None,
                             cipher: TokenCipher) -> tuple[str, store.Endpoint]:
    """`create_endpoint` in the caller's transaction; `url` checked already (`checked_url`)."""
    return await store.create_endpoint(conn, organisation_id, url, event_types, description,
                                       await WALL.now(), cipher=cipher)


async def update_endpoint_on(conn: AsyncConnection, organisation_id: str, endpoint_id: str, *, url: str,
                             event_types: list[str] | None, description: str | None) -> store.Endpoint:
    """Change an endpoint's URL (checked already), event types (normalised) and description; later
    attempts of its pending deliveries go to the new URL."""
    endpoint = await store.update_endpoint(conn, organisation_id, endpoint_id, url, event_types, description)
    if endpoint is None:
        raise _endpoint_not_found(endpoint_id)
    return endpoint


async def disable_endpoint_on(conn: AsyncConnection, organisation_id: str, endpoint_id: str,
                              reason: str) -> store.Endpoint:
    """Stop delivering to an endpoint until it is enabled again (its pending deliveries are cancelled;
    events of the disabled time reach it only by replay)."""
    endpoint = await store.disable_endpoint(conn, organisation_id, endpoint_id, await WALL.now(), reason)
    if endpoint is None:
        raise _endpoint_not_found(endpoint_id)
    return endpoint


async def list_endpoints(engine: AsyncEngine, organisation_id: str) -> list[store.Endpoint]:
    async with engine.connect() as conn:
        return await store.list_endpoints(conn, organisation_id)


async def delete_endpoint(engine: AsyncEngine, organisation_id: str, endpoint_id: str) -> store.Endpoint:
    """Stop delivering to an endpoint (its pending deliveries are cancelled)."""
    async with engine.begin() as conn:
        return await delete_endpoint_on(conn, organisation_id, endpoint_id)


async def delete_endpoint_on(conn: AsyncConnection, organisation_id: str, endpoint_id: str) -> store.Endpoint:
    endpoint = await store.delete_endpoint(conn, organisation_id, endpoint_id, await WALL.now())
    if endpoint is None:
        raise _endpoint_not_found(endpoint_id)
    return endpoint


async def enable_endpoint(engine: AsyncEngine, organisation_id: str, endpoint_id: str) -> store.Endpoint:
    """Deliver to an endpoint disabled for failing again (an enabled one is answered as it is)."""
    async with engine.begin() as conn:
        return await enable_endpoint_on(conn, organisation_id, endpoint_id)


async def enable_endpoint_on(conn: AsyncConnection, organisation_id: str, endpoint_id: str) -> store.Endpoint:
    endpoint = await store.enable_endpoint(conn, organisation_id, endpoint_id)
    if endpoint is None:
        raise _endpoint_not_found(endpoint_id)
    return endpoint


async def rotate_secret(engine: AsyncEngine, config: WebhookConfig, organisation_id: str,
                        endpoint_id: str, *, cipher: TokenCipher) -> tuple[str, store.Endpoint]:
    """A new signing secret; the current one keeps signing for the configured overlap."""
    async with engine.begin() as conn:
        return await rotate_secret_on(conn, config, organisation_id, endpoint_id, cipher=cipher)


async def rotate_secret_on(conn: AsyncConnection, config: WebhookConfig, organisation_id: str,
                           endpoint_id: str, *, cipher: TokenCipher) -> tuple[str, store.Endpoint]:
    overlap = timedelta(seconds=config.rotation_overlap_s)
    rotated = await store.rotate_secret(conn, organisation_id, endpoint_id, await WALL.now(), overlap,
                                        cipher=cipher)
    if rotated is None:
        raise _endpoint_not_found(endpoint_id)
    return rotated


# --- events --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EventPage:
    events: list[ListedEvent]
    next_cursor: str | None  # None: this is the last page
    has_more: bool


@dataclass(frozen=True)
class EventDetail:
    event: ListedEvent
    deliveries: list[tuple[Delivery, list[Attempt]]]  # each delivery (oldest first) and its attempts


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


async def list_events(engine: AsyncEngine, organisation_id: str, filters: events.EventFilters,
                      cursor: str | None, limit: int) -> EventPage:
    """A page of the organisation's events, newest first, after `cursor` (the previous page's)."""
    before = decode_cursor(cursor) if cursor else None
    async with engine.connect() as conn:
        rows, more = await events.list_events(conn, organisation_id, filters, before, limit)
    return EventPage(rows, encode_cursor(rows[-1].seq) if more and rows else None, more)


async def _detail(conn: AsyncConnection, organisation_id: str, event_id: str) -> EventDetail:
    row = await events.load_event(conn, organisation_id, event_id)
    if row is None:
        raise _event_not_found(event_id)
    return EventDetail(row, await events.deliveries_of(conn, event_id))


async def get_event(engine: AsyncEngine, organisation_id: str, event_id: str) -> EventDetail:
    async with engine.connect() as conn:
        return await _detail(conn, organisation_id, event_id)


async def replay_event(engine: AsyncEngine, organisation_id: str, event_id: str,
                       endpoint_id: str | None = None) -> EventDetail:
    """Deliver an event again to every endpoint subscribed to its type now, or only to `endpoint_id`
    (events.replay); refused when none is and no delivery is still pending."""
    async with engine.begin() as conn:
        return await replay_event_on(conn, organisation_id, event_id, endpoint_id)


async def replay_event_on(conn: AsyncConnection, organisation_id: str, event_id: str,
                          endpoint_id: str | None = None) -> EventDetail:
    """`replay_event` in the caller's transaction (a refusal changes nothing)."""
    if endpoint_id is not None:
        endpoint = await store.get_endpoint(conn, organisation_id, endpoint_id)
        if endpoint is None:
            raise _endpoint_not_found(endpoint_id)
        if endpoint.disabled_at is not None:
            raise Conflict(f"webhook endpoint {endpoint_id} is disabled; enable it first",
                           {"endpoint_id": endpoint_id}, code="ERR_WEBHOOK_ENDPOINT_DISABLED")
    queued = await events.replay(conn, organisation_id, event_id, await WALL.now(), endpoint_id)
    if queued is None:
        raise _event_not_found(event_id)
    detail = await _detail(conn, organisation_id, event_id)
    if endpoint_id is not None and queued == 0:
        raise Unprocessable(f"webhook endpoint {endpoint_id} does not receive {detail.event.type} events",
                            {"endpoint_id": endpoint_id, "type": detail.event.type},
                            code="ERR_NO_WEBHOOK_ENDPOINT")
    if queued == 0 and detail.event.delivery_status != "pending":
        raise Unprocessable("no webhook endpoint of the organisation receives this event type",
                            {"type": detail.event.type}, code="ERR_NO_WEBHOOK_ENDPOINT")
    return detail


# --- the developer loop: test events and the live stream -----------------------------------------------

async def trigger_event(engine: AsyncEngine, organisation_id: str, event_type: str) -> ListedEvent:
    """Record a test event of `event_type` for the organisation: the type's sample object, with
    `data.test: true`; delivered to its subscribed endpoints and seen by `vip listen` like any other."""
    async with engine.begin() as conn:
        return await trigger_event_on(conn, organisation_id, event_type)


async def trigger_event_on(conn: AsyncConnection, organisation_id: str, event_type: str) -> ListedEvent:
    """`trigger_event` in the caller's transaction."""
    try:
        obj = sample_object(event_type)
    except KeyError as exc:
        raise ValidationFailed(f"unknown event type {event_type}; one of: {', '.join(sampled_types())}",
                               {"type": "unknown event type"}) from exc
    event_id = await record_event(conn, event_type, obj, created_at=await WALL.now(),
                                  organisation_id=organisation_id, test=True)
    return await _listed(conn, organisation_id, event_id)


async def _listed(conn: AsyncConnection, organisation_id: str, event_id: str) -> ListedEvent:
    """An event just recorded in this transaction (so it is there)."""
    event = await events.load_event(conn, organisation_id, event_id)
    if event is None:
        raise _event_not_found(event_id)
    return event
