"""POST /v1/users, GET /v1/users/{id}."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from api.context import CLOCK, ENGINE, principal, requires
from api.errors import Conflict, NotFound
from api.jsonio import iso, json_response
from api.validation import Body, read_body
from vip.ids import new_id
from vip.store.tables import users

routes = web.RouteTableDef()


class CreateUser(Body):
    external_id: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)


def user_json(row) -> dict[str, Any]:
    return {"id": row.id, "external_id": row.external_id, "metadata": row.metadata,
            "created_at": iso(row.created_at)}


async def load_user(conn: AsyncConnection, organisation_id: str, user_id: str):
    """The user if it belongs to the organisation; 404 otherwise (never another organisation's)."""
    row = (await conn.execute(select(users).where(users.c.id == user_id,
                                                  users.c.organisation_id == organisation_id))).first()
    if row is None:
        raise NotFound(f"no user {user_id}", {"user_id": user_id})
    return row


@routes.post("/v1/users")
@requires("write")
async def create_user(request: web.Request) -> web.Response:
    body = await read_body(request, CreateUser)
    now = await request.app[CLOCK].now()
    try:
        async with request.app[ENGINE].begin() as conn:
            row = (await conn.execute(users.insert().values(
                id=new_id("usr"), organisation_id=principal(request).organisation_id,
                external_id=body.external_id, metadata=body.metadata, created_at=now,
            ).returning(*users.c))).one()
    except IntegrityError as exc:
        raise Conflict("a user with this external_id exists", {"external_id": body.external_id}) from exc
    return json_response({"user": user_json(row)}, status=201)


@routes.get("/v1/users/{user_id}")
@requires("read")
async def get_user(request: web.Request) -> web.Response:
    async with request.app[ENGINE].connect() as conn:
        row = await load_user(conn, principal(request).organisation_id, request.match_info["user_id"])
    return json_response({"user": user_json(row)})
