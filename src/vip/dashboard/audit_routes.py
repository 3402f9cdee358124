"""The audit log page (admins): what the organisation's staff changed, newest first."""

from __future__ import annotations

from aiohttp import web

from vip.api.context import ENGINE
from vip.dashboard import audit
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import requires

routes = web.RouteTableDef()
PAGE_SIZE = 50


@routes.get("/dashboard/audit")
@requires("admin")
async def audit_page(request: web.Request) -> web.StreamResponse:
    before_text = request.query.get("before", "")
    before = int(before_text) if before_text.isdigit() and len(before_text) < 19 else None
    async with request.app[ENGINE].connect() as conn:
        found = await audit.entries(conn, request[STAFF].organisation_id, limit=PAGE_SIZE + 1, before=before)
    return render(request, "audit.html", entries=found[:PAGE_SIZE],
                  older=found[PAGE_SIZE - 1].id if len(found) > PAGE_SIZE else None)
