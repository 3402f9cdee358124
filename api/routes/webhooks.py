"""Webhook endpoints of the caller's organisation (scope `admin`): create (the signing secret is shown
once), list, delete, rotate the secret."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aiohttp import web
from pydantic import Field, field_validator

from vip.api.context import ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import Body, read_body
from vip.clock import WallClock
from vip.errors import NotFound, ValidationFailed
from vip.webhooks import store
from vip.webhooks.catalogue import ALL, normalise_event_types
from vip.webhooks.urls import check_endpoint_url

routes = web.RouteTableDef()
# Webhook timing (created, rotation overlap, replays) is wall-clock time, like the delivery worker's.
WALL = WallClock()


class CreateWebhookEndpoint(Body):
    url: str = Field(min_length=1, max_length=2048,
                     description="https URL that receives the events (http only in local development); "
                                 "no credentials")
    event_types: list[str] | None = Field(
        default=None, min_length=1, max_length=50,
        description="Event types to receive; omitted or [\"*\"]: every type")
    description: str | None = Field(default=None, max_length=200)

    @field_validator("event_types")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        return normalise_event_types(value)


def endpoint_json(endpoint: store.Endpoint, secret: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": endpoint.id, "url": endpoint.url, "description": endpoint.description,
        "event_types": endpoint.event_types if endpoint.event_types is not None else [ALL],
        "status": "deleted" if endpoint.deleted_at else "enabled",
        "created_at": iso(endpoint.created_at),
        "previous_secret_expires_at": iso(endpoint.previous_secret_expires_at),
        "deleted_at": iso(endpoint.deleted_at),
    }
    if secret is not None:
        body["secret"] = secret
    return body


def _not_found(endpoint_id: str) -> NotFound:
    return NotFound(f"no webhook endpoint {endpoint_id}", {"endpoint_id": endpoint_id})


@routes.post("/v1/webhook-endpoints")
@requires("admin")
async def create_endpoint(request: web.Request) -> web.Response:
    body = await read_body(request, CreateWebhookEndpoint)
    try:
        url = check_endpoint_url(body.url, allow_http=request.app[SETTINGS].webhooks.allow_http)
    except ValueError as exc:
        raise ValidationFailed(f"invalid url: {exc}", {"url": str(exc)}) from exc
    async with request.app[ENGINE].begin() as conn:
        secret, endpoint = await store.create_endpoint(conn, principal(request).organisation_id, url,
                                                       body.event_types, body.description, await WALL.now())
    return json_response({"webhook_endpoint": endpoint_json(endpoint, secret)}, status=201)


@routes.get("/v1/webhook-endpoints")
@requires("admin")
async def list_endpoints(request: web.Request) -> web.Response:
    async with request.app[ENGINE].connect() as conn:
        endpoints = await store.list_endpoints(conn, principal(request).organisation_id)
    return json_response({"webhook_endpoints": [endpoint_json(e) for e in endpoints]})


@routes.delete("/v1/webhook-endpoints/{endpoint_id}")
@requires("admin")
async def delete_endpoint(request: web.Request) -> web.Response:
    endpoint_id = request.match_info["endpoint_id"]
    async with request.app[ENGINE].begin() as conn:
        endpoint = await store.delete_endpoint(conn, principal(request).organisation_id, endpoint_id,
                                               await WALL.now())
    if endpoint is None:
        raise _not_found(endpoint_id)
    return json_response({"webhook_endpoint": endpoint_json(endpoint)})


@routes.post("/v1/webhook-endpoints/{endpoint_id}/rotate-secret")
@requires("admin")
async def rotate_secret(request: web.Request) -> web.Response:
    endpoint_id = request.match_info["endpoint_id"]
    overlap = timedelta(seconds=request.app[SETTINGS].webhooks.rotation_overlap_s)
    async with request.app[ENGINE].begin() as conn:
        rotated = await store.rotate_secret(conn, principal(request).organisation_id, endpoint_id,
                                            await WALL.now(), overlap)
    if rotated is None:
        raise _not_found(endpoint_id)
    secret, endpoint = rotated
    return json_response({"webhook_endpoint": endpoint_json(endpoint, secret)})
