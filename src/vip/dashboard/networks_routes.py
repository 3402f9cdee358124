"""The networks page (operators and admins): per network the indexer's lag, final block, reorgs and
backfills, and the organisation's jobs in the daemon's queues, read from the database
(vip.dashboard.network_view)."""

from __future__ import annotations

from aiohttp import web

from vip.api.context import CLOCK, ENGINE, HTTP, SETTINGS
from vip.dashboard.network_view import chain_heads, networks_view, seconds_text
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import requires

routes = web.RouteTableDef()


@routes.get("/dashboard/networks")
@requires("operator")
async def networks(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    heads = await chain_heads(request.app[HTTP], settings.enabled_networks())
    now = await request.app[CLOCK].now()
    view = await networks_view(request.app[ENGINE], settings, request[STAFF].organisation_id, now, heads)
    return render(request, "networks.html", view=view, seconds_text=seconds_text)
