"""Test clocks for integrators (development stacks only; see vip.accounts.test_clocks): create, read,
advance. Users created with `test_clock` are verified at the clock's time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field, WithJsonSchema
from sqlalchemy import Row

from vip.accounts import test_clocks
from vip.api.context import CLOCK, ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import NOT_BLANK, Body, read_body
from vip.config import Settings
from vip.errors import Unprocessable

routes = web.RouteTableDef()
MOMENT = WithJsonSchema({"type": "string", "format": "date-time"})
MOMENT_OR_NULL = WithJsonSchema({"type": ["string", "null"], "format": "date-time"})


def refuse_outside_development(settings: Settings) -> None:
    """Test clocks exist on development stacks only (a network marked local): 422 elsewhere."""
    if not settings.is_development:
        raise Unprocessable("test clocks exist only on development stacks (a network marked local = true)",
                            {}, code="ERR_TEST_CLOCKS_UNAVAILABLE")


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class CreateTestClock(Body):
    """A clock frozen at `frozen_time` (default: the service clock's now)."""

    frozen_time: Annotated[datetime | None, MOMENT_OR_NULL] = Field(default=None, description="ISO 8601")
    name: str | None = Field(default=None, min_length=1, pattern=NOT_BLANK, max_length=200)


class AdvanceTestClock(Body):
    """Move the clock forward to `frozen_time` (a clock never goes back)."""

    frozen_time: Annotated[datetime, MOMENT] = Field(description="ISO 8601; not before the clock's time")


def clock_json(row: Row[Any]) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "frozen_time": iso(row.frozen_time),
            "created_at": iso(row.created_at)}


@routes.post("/v1/test-clocks")
@requires("write")
async def create(request: web.Request) -> web.Response:
    refuse_outside_development(request.app[SETTINGS])
    body = await read_body(request, CreateTestClock)
    now = await request.app[CLOCK].now()
    async with request.app[ENGINE].begin() as conn:
        frozen = _utc(body.frozen_time) if body.frozen_time else now
        row = await test_clocks.create_clock(conn, principal(request).organisation_id, frozen, body.name, now)
    return json_response({"test_clock": clock_json(row)}, status=201)


@routes.get("/v1/test-clocks/{clock_id}")
@requires("read")
async def read(request: web.Request) -> web.Response:
    refuse_outside_development(request.app[SETTINGS])
    async with request.app[ENGINE].connect() as conn:
        row = await test_clocks.load_clock(conn, principal(request).organisation_id,
                                           request.match_info["clock_id"])
    return json_response({"test_clock": clock_json(row)})


@routes.post("/v1/test-clocks/{clock_id}/advance")
@requires("write")
async def advance(request: web.Request) -> web.Response:
    refuse_outside_development(request.app[SETTINGS])
    body = await read_body(request, AdvanceTestClock)
    async with request.app[ENGINE].begin() as conn:
        row = await test_clocks.advance_clock(conn, principal(request).organisation_id,
                                              request.match_info["clock_id"], _utc(body.frozen_time))
    return json_response({"test_clock": clock_json(row)})
