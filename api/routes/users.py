"""POST /v1/users, GET /v1/users/{id}."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field
from sqlalchemy import Row

from vip.accounts import users
from vip.api.context import CLOCK, ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.routes.test_clocks import refuse_outside_development
from vip.api.validation import NOT_BLANK, Body, read_body

routes = web.RouteTableDef()


class CreateUser(Body):
    external_id: str | None = Field(default=None, min_length=1, pattern=NOT_BLANK, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)
    test_clock: str | None = Field(default=None, min_length=1, max_length=100,
                                   description="Development stacks only: a test clock of the organisation "
                                               "(POST /v1/test-clocks); the user is verified at its time")


def user_json(row: Row[Any]) -> dict[str, Any]:
    shown = {"id": row.id, "external_id": row.external_id, "metadata": row.metadata,
             "created_at": iso(row.created_at)}
    if row.test_clock_id is not None:  # development stacks only: production users never carry it
        shown["test_clock"] = row.test_clock_id
    return shown


@routes.post("/v1/users")
@requires("write")
async def create_user(request: web.Request) -> web.Response:
    body = await read_body(request, CreateUser)
    if body.test_clock is not None:
        refuse_outside_development(request.app[SETTINGS])
    row = await users.create_user(request.app[ENGINE], organisation_id=principal(request).organisation_id,
                                  external_id=body.external_id, metadata=body.metadata,
                                  now=await request.app[CLOCK].now(), test_clock=body.test_clock)
    return json_response({"user": user_json(row)}, status=201)


@routes.get("/v1/users/{user_id}")
@requires("read")
async def get_user(request: web.Request) -> web.Response:
    row = await users.get_user(request.app[ENGINE], principal(request).organisation_id,
                               request.match_info["user_id"])
    return json_response({"user": user_json(row)})
