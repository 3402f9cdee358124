"""Webhooks (admins): the organisation's endpoints (create, change, disable and enable, delete, rotate the
signing secret), test events, its events with every delivery attempt, and manual replay to one endpoint.

Every change goes through the webhook service's `*_on` functions in a transaction that also writes the
audit entry; every lookup is the organisation's own (another organisation's id is a 404)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from vip.api.context import ENGINE, REQUEST_ID, SETTINGS
from vip.dashboard import audit
from vip.dashboard.confirm import confirm_page, confirmed
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import requires, see_other
from vip.dashboard.webhook_view import endpoints_health, error_in_words, payload_text
from vip.errors import ApiError, NotFound
from vip.webhooks import events, service
from vip.webhooks import store as endpoints_store
from vip.webhooks.catalogue import EVENT_TYPES, normalise_event_types
from vip.webhooks.samples import sampled_types

routes = web.RouteTableDef()
BASE = "/dashboard/webhooks"
MAX_DESCRIPTION = 200
EVENTS_PER_PAGE = 25
NOTICES = ("updated", "disabled", "enabled", "deleted")  # what ?notice= may say (nothing a link makes up)


def _form_values(form: MultiMapping[object]) -> dict[str, Any]:
    every = form.get("all_types") == "yes"
    chosen = [str(t) for t in form.getall("event_types", [])]
    return {"url": str(form.get("url", "")).strip(), "description": str(form.get("description", "")).strip(),
            "all_types": every or not chosen, "event_types": chosen}


async def _checked(request: web.Request, values: dict[str, Any]) -> tuple[str, list[str] | None, str | None]:
    """(url, event types or None for every type, description), or ApiError saying what is wrong."""
    description = values["description"]
    if len(description) > MAX_DESCRIPTION:
        raise ApiError(f"The description may be at most {MAX_DESCRIPTION} characters.", status=400)
    if not values["url"] or len(values["url"]) > 2048:
        raise ApiError("Give the endpoint's URL (at most 2048 characters).", status=400)
    try:
        event_types = None if values["all_types"] else normalise_event_types(values["event_types"])
    except ValueError as exc:
        raise ApiError(str(exc), status=400) from None
    url = await service.checked_url(request.app[SETTINGS].webhooks, values["url"])
    return url, event_types, description or None


async def _webhooks_page(request: web.Request, *, status: int = 200, error: str | None = None,
                         values: dict[str, Any] | None = None) -> web.Response:
    organisation_id = request[STAFF].organisation_id
    engine = request.app[ENGINE]
    cursor = request.query.get("cursor") or None
    kind = request.query.get("type") or None
    if kind is not None and kind not in EVENT_TYPES:
        kind = None
    try:
        page = await service.list_events(engine, organisation_id, events.EventFilters(type=kind), cursor,
                                         EVENTS_PER_PAGE)
    except ApiError:  # a cursor not of ours: the first page
        page = await service.list_events(engine, organisation_id, events.EventFilters(type=kind), None,
                                         EVENTS_PER_PAGE)
    endpoints = await service.list_endpoints(engine, organisation_id)
    health = await endpoints_health(engine, endpoints, datetime.now(UTC))  # webhooks run on the wall clock
    return render(request, "webhooks.html", status=status, error=error, endpoints=endpoints, health=health,
                  events=page.events, next_cursor=page.next_cursor, event_type=kind or "",
                  event_types=EVENT_TYPES, test_types=sampled_types(),
                  values=values or {"url": "", "description": "", "all_types": True, "event_types": []},
                  notice=request.query.get("notice") if request.query.get("notice") in NOTICES else None)


@routes.get(BASE)
@requires("admin")
async def webhooks_page(request: web.Request) -> web.StreamResponse:
    return await _webhooks_page(request)


@routes.post(BASE + "/endpoints")
@requires("admin")
async def create_endpoint(request: web.Request) -> web.StreamResponse:
    values = _form_values(await request.post())
    try:
        url, event_types, description = await _checked(request, values)
    except ApiError as exc:
        return await _webhooks_page(request, status=400, error=exc.message, values=values)
    staff = request[STAFF]
    async with request.app[ENGINE].begin() as conn:
        secret, endpoint = await service.create_endpoint_on(
            conn, organisation_id=staff.organisation_id, url=url, event_types=event_types,
            description=description, cipher=request.app[SETTINGS].api.cipher())
        await audit.record(conn, staff, "endpoint.created", endpoint.id,
                           {"url": url, "event_types": event_types or ["*"]}, request.get(REQUEST_ID))
    return render(request, "secret_shown.html", status=201, title="Webhook endpoint created",
                  what=f"Endpoint {endpoint.url} ({endpoint.id})", secret=secret, back=BASE,
                  back_label="Back to webhooks",
                  note="Copy the signing secret now: it is shown only once. Deliveries carry "
                       "Service-Signature: sha256=HMAC(secret, body).")


async def _endpoint(request: web.Request) -> endpoints_store.Endpoint:
    endpoint_id = request.match_info["endpoint_id"]
    async with request.app[ENGINE].connect() as conn:
        endpoint = await endpoints_store.get_endpoint(conn, request[STAFF].organisation_id, endpoint_id)
    if endpoint is None:
        raise NotFound(f"There is no webhook endpoint {endpoint_id} in {request[STAFF].organisation_name}.")
    return endpoint


def _edit_page(request: web.Request, endpoint: endpoints_store.Endpoint, values: dict[str, Any], *,
               status: int = 200, error: str | None = None) -> web.Response:
    return render(request, "endpoint_edit.html", status=status, endpoint=endpoint, values=values, error=error,
                  event_types=EVENT_TYPES)


@routes.get(BASE + "/endpoints/{endpoint_id}")
@requires("admin")
async def edit_form(request: web.Request) -> web.StreamResponse:
    endpoint = await _endpoint(request)
    return _edit_page(request, endpoint, {
        "url": endpoint.url, "description": endpoint.description or "",
        "all_types": endpoint.event_types is None, "event_types": endpoint.event_types or []})


@routes.post(BASE + "/endpoints/{endpoint_id}")
@requires("admin")
async def update_endpoint(request: web.Request) -> web.StreamResponse:
    endpoint = await _endpoint(request)
    values = _form_values(await request.post())
    try:
        url, event_types, description = await _checked(request, values)
    except ApiError as exc:
        return _edit_page(request, endpoint, values, status=400, error=exc.message)
    staff = request[STAFF]
    async with request.app[ENGINE].begin() as conn:
        await service.update_endpoint_on(conn, staff.organisation_id, endpoint.id, url=url,
                                         event_types=event_types, description=description)
        await audit.record(conn, staff, "endpoint.updated", endpoint.id,
                           {"url": url, "event_types": event_types or ["*"], "description": description},
                           request.get(REQUEST_ID))
    return see_other(f"{BASE}?notice=updated")


# What disabling and deleting do, said on the page that asks first.
CONSEQUENCES = {
    "disabled": ("Disable this endpoint?", "Disable the endpoint", [
        "Nothing is sent to it until it is enabled again.",
        "Its pending deliveries are cancelled: events of the disabled time reach it only by replay."]),
    "deleted": ("Delete this endpoint?", "Delete the endpoint", [
        "Nothing more is sent to it, and its pending deliveries are cancelled.",
        "It cannot be brought back: a new endpoint has a new signing secret."]),
}


async def _change(request: web.Request, action: str) -> web.StreamResponse:
    staff, endpoint_id = request[STAFF], request.match_info["endpoint_id"]
    org = staff.organisation_id
    if action in CONSEQUENCES and not confirmed(await request.post()):
        endpoint = await _endpoint(request)
        title, button, consequences = CONSEQUENCES[action]
        return confirm_page(request, title=title, button=button, back=BASE, consequences=consequences,
                            question=f"{title.split()[0]} the endpoint {endpoint.url} "
                                     f"({endpoint.description or endpoint.id})?")
    async with request.app[ENGINE].begin() as conn:
        if action == "disabled":
            endpoint = await service.disable_endpoint_on(conn, org, endpoint_id,
                                                         f"disabled in the dashboard by {staff.email}")
        elif action == "enabled":
            endpoint = await service.enable_endpoint_on(conn, org, endpoint_id)
        else:
            endpoint = await service.delete_endpoint_on(conn, org, endpoint_id)
        await audit.record(conn, staff, f"endpoint.{action}", endpoint.id, {"url": endpoint.url},
                           request.get(REQUEST_ID))
    return see_other(f"{BASE}?notice={action}")


@routes.post(BASE + "/endpoints/{endpoint_id}/disable")
@requires("admin")
async def disable_endpoint(request: web.Request) -> web.StreamResponse:
    return await _change(request, "disabled")


@routes.post(BASE + "/endpoints/{endpoint_id}/enable")
@requires("admin")
async def enable_endpoint(request: web.Request) -> web.StreamResponse:
    return await _change(request, "enabled")


@routes.post(BASE + "/endpoints/{endpoint_id}/delete")
@requires("admin")
async def delete_endpoint(request: web.Request) -> web.StreamResponse:
    return await _change(request, "deleted")


@routes.post(BASE + "/endpoints/{endpoint_id}/rotate-secret")
@requires("admin")
async def rotate_secret(request: web.Request) -> web.StreamResponse:
    staff, settings = request[STAFF], request.app[SETTINGS]
    async with request.app[ENGINE].begin() as conn:
        secret, endpoint = await service.rotate_secret_on(conn, settings.webhooks, staff.organisation_id,
                                                          request.match_info["endpoint_id"],
                                                          cipher=settings.api.cipher())
        await audit.record(conn, staff, "endpoint.secret_rotated", endpoint.id,
                           {"previous_secret_until": endpoint.previous_secret_expires_at.isoformat()
                            if endpoint.previous_secret_expires_at else None}, request.get(REQUEST_ID))
    hours = settings.webhooks.rotation_overlap_s / 3600
    return render(request, "secret_shown.html", title="Signing secret rotated",
                  what=f"Endpoint {endpoint.url} ({endpoint.id})", secret=secret, back=BASE,
                  back_label="Back to webhooks",
                  note=f"Copy the new signing secret now: it is shown only once. The previous secret keeps "
                       f"signing too (a second signature) for {hours:g} hours.")


@routes.post(BASE + "/test-events")
@requires("admin")
async def send_test_event(request: web.Request) -> web.StreamResponse:
    staff = request[STAFF]
    event_type = str((await request.post()).get("type", ""))
    async with request.app[ENGINE].begin() as conn:
        event = await service.trigger_event_on(conn, staff.organisation_id, event_type)
        await audit.record(conn, staff, "event.test_sent", event.id, {"type": event_type},
                           request.get(REQUEST_ID))
    return see_other(f"{BASE}/events/{event.id}?notice=test")


@routes.get(BASE + "/events/{event_id}")
@requires("admin")
async def event_page(request: web.Request) -> web.StreamResponse:
    org = request[STAFF].organisation_id
    detail = await service.get_event(request.app[ENGINE], org, request.match_info["event_id"])
    endpoints = await service.list_endpoints(request.app[ENGINE], org)
    return render(request, "event.html", event=detail.event, deliveries=detail.deliveries,
                  endpoints=[e for e in endpoints if e.disabled_at is None],
                  payload=payload_text(detail.event), in_words=error_in_words,
                  notice=request.query.get("notice"), error=None)


@routes.post(BASE + "/events/{event_id}/replay")
@requires("admin")
async def replay_event(request: web.Request) -> web.StreamResponse:
    staff, event_id = request[STAFF], request.match_info["event_id"]
    endpoint_id = str((await request.post()).get("endpoint_id", "")) or None
    if endpoint_id is None:
        raise ApiError("Choose the endpoint to replay the event to.", status=400)
    async with request.app[ENGINE].begin() as conn:
        await service.replay_event_on(conn, staff.organisation_id, event_id, endpoint_id)
        await audit.record(conn, staff, "event.replayed", event_id, {"endpoint_id": endpoint_id},
                           request.get(REQUEST_ID))
    return see_other(f"{BASE}/events/{event_id}?notice=replayed")
