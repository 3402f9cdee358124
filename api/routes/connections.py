"""GET /v1/connections (a user's connections), DELETE /v1/connections/{id} (revoke)."""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from vip.api.context import CLOCK, ENGINE, principal, requires
from vip.api.jsonio import json_response
from vip.api.validation import Query, read_query
from vip.connections import service
from vip.connections.resource import connection_json, list_item

routes = web.RouteTableDef()


class ListConnections(Query):
    user_id: str = Field(min_length=1, max_length=100)


@routes.get("/v1/connections")
@requires("read")
async def list_connections(request: web.Request) -> web.Response:
    query = read_query(request, ListConnections)
    rows = await service.list_connections(request.app[ENGINE], principal(request).organisation_id,
                                          query.user_id)
    return json_response({"connections": [list_item(r) for r in rows]})


@routes.delete("/v1/connections/{connection_id}")
@requires("write")
async def revoke_connection(request: web.Request) -> web.Response:
    app = request.app
    row = await service.revoke_connection(app[ENGINE], app[CLOCK], principal(request).organisation_id,
                                          request.match_info["connection_id"])
    return json_response({"connection": connection_json(row)})
