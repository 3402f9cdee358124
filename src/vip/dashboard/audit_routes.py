"""The audit log page (admins): what the organisation's staff changed, newest first, filtered by action,
member and UTC days."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from aiohttp import web

from vip.api.context import ENGINE
from vip.dashboard import audit
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import requires

routes = web.RouteTableDef()
PAGE_SIZE = 50
FIELDS = ("action", "member", "from", "to")


def _day(text: str) -> date | None:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    return day if 1970 <= day.year <= 9998 else None


@routes.get("/dashboard/audit")
@requires("admin")
async def audit_page(request: web.Request) -> web.StreamResponse:
    given = {k: v for k in FIELDS if (v := request.query.get(k, "").strip()[:200]) and "\x00" not in v}
    problems = {k: "a day as YYYY-MM-DD" for k in ("from", "to") if k in given and _day(given[k]) is None}
    since, until = _day(given.get("from", "")), _day(given.get("to", ""))
    filters = audit.AuditFilters(
        action=given.get("action"), member=given.get("member"),
        since=datetime.combine(since, time(), UTC) if since else None,
        until=datetime.combine(until + timedelta(days=1), time(), UTC) if until else None)
    before_text = request.query.get("before", "")
    before = int(before_text) if before_text.isdigit() and len(before_text) < 19 else None
    organisation_id = request[STAFF].organisation_id
    async with request.app[ENGINE].connect() as conn:
        found = await audit.entries(conn, organisation_id, limit=PAGE_SIZE + 1, before=before,
                                    filters=filters)
        actions = await audit.actions_of(conn, organisation_id)
    families = sorted({a.split(".", 1)[0] + "." for a in actions if "." in a})
    older = found[PAGE_SIZE - 1].id if len(found) > PAGE_SIZE else None
    return render(request, "audit.html", status=400 if problems else 200, entries=found[:PAGE_SIZE],
                  older=f"/dashboard/audit?{urlencode({**given, 'before': older})}" if older else None,
                  given=given, problems=problems, actions=actions, families=families)
