"""Webhook endpoints of the caller's organisation (scope `admin`): create (the signing secret is shown
once), list, delete, enable again after an automatic disabling, rotate the secret."""

from __future__ import annotations

from typing import Annotated

from aiohttp import web
from pydantic import Field, WithJsonSchema, field_validator

from vip.api.context import ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import json_response
from vip.api.validation import Body, read_body
from vip.webhooks import service
from vip.webhooks.catalogue import ALL, EVENT_TYPES, normalise_event_types
from vip.webhooks.store import endpoint_json

routes = web.RouteTableDef()
# What the validator accepts, in one schema (pydantic would write an anyOf with null beside the items).
EVENT_TYPES_SCHEMA = {"type": ["array", "null"], "minItems": 1, "maxItems": 50,
                      "items": {"enum": [ALL, *EVENT_TYPES]}}


class CreateWebhookEndpoint(Body):
    url: str = Field(min_length=1, max_length=2048,
                     description="https URL that receives the events (http only in local development); "
                                 "no credentials")
    event_types: Annotated[list[str] | None, WithJsonSchema(EVENT_TYPES_SCHEMA)] = Field(
        default=None, min_length=1, max_length=50,
        description="Event types to receive; omitted or [\"*\"]: every type")
    description: str | None = Field(default=None, max_length=200)

    @field_validator("event_types")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        return normalise_event_types(value)


@routes.post("/v1/webhook-endpoints")
@requires("admin")
async def create_endpoint(request: web.Request) -> web.Response:
    body = await read_body(request, CreateWebhookEndpoint)
    secret, endpoint = await service.create_endpoint(
        request.app[ENGINE], request.app[SETTINGS].webhooks,
        organisation_id=principal(request).organisation_id, url=body.url, event_types=body.event_types,
        description=body.description, cipher=request.app[SETTINGS].api.cipher())
    return json_response({"webhook_endpoint": endpoint_json(endpoint, secret)}, status=201)


@routes.get("/v1/webhook-endpoints")
@requires("admin")
async def list_endpoints(request: web.Request) -> web.Response:
    endpoints = await service.list_endpoints(request.app[ENGINE], principal(request).organisation_id)
    return json_response({"webhook_endpoints": [endpoint_json(e) for e in endpoints]})


@routes.delete("/v1/webhook-endpoints/{endpoint_id}")
@requires("admin")
async def delete_endpoint(request: web.Request) -> web.Response:
    endpoint = await service.delete_endpoint(request.app[ENGINE], principal(request).organisation_id,
                                             request.match_info["endpoint_id"])
    return json_response({"webhook_endpoint": endpoint_json(endpoint)})


@routes.post("/v1/webhook-endpoints/{endpoint_id}/rotate-secret")
@requires("admin")
async def rotate_secret(request: web.Request) -> web.Response:
    secret, endpoint = await service.rotate_secret(request.app[ENGINE], request.app[SETTINGS].webhooks,
                                                   principal(request).organisation_id,
                                                   request.match_info["endpoint_id"],
                                                   cipher=request.app[SETTINGS].api.cipher())
    return json_response({"webhook_endpoint": endpoint_json(endpoint, secret)})


@routes.post("/v1/webhook-endpoints/{endpoint_id}/enable")
@requires("admin")
async def enable_endpoint(request: web.Request) -> web.Response:
    endpoint = await service.enable_endpoint(request.app[ENGINE], principal(request).organisation_id,
                                             request.match_info["endpoint_id"])
    return json_response({"webhook_endpoint": endpoint_json(endpoint)})
