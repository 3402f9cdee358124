"""POST /v1/users, GET /v1/users/{id}."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field

from vip.accounts import users
from vip.api.context import CLOCK, ENGINE, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import NOT_BLANK, Body, read_body

routes = web.RouteTableDef()


class CreateUser(Body):
    external_id: str | None = Field(default=None, min_length=1, pattern=NOT_BLANK, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)


def user_json(row) -> dict[str, Any]:
    return {"id": row.id, "external_id": row.external_id, "metadata": row.metadata,
            "created_at": iso(row.created_at)}


@routes.post("/v1/users")
@requires("write")
async def create_user(request: web.Request) -> web.Response:
    body = await read_body(request, CreateUser)
    row = await users.create_user(request.app[ENGINE], organisation_id=principal(request).organisation_id,
                                  external_id=body.external_id, metadata=body.metadata,
                                  now=await request.app[CLOCK].now())
    return json_response({"user": user_json(row)}, status=201)


@routes.get("/v1/users/{user_id}")
@requires("read")
async def get_user(request: web.Request) -> web.Response:
    row = await users.get_user(request.app[ENGINE], principal(request).organisation_id,
                               request.match_info["user_id"])
    return json_response({"user": user_json(row)})
