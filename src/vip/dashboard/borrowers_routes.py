"""The borrowers pages (analysts and admins, read-only): find a borrower by id or external_id, and one
borrower's page: connections, the latest VIP as a chart with its table, fraud flags with the transfers
behind them, the risk score, the transactions with the API's filters, payment intents and charges."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from vip.api.context import ENGINE, SETTINGS
from vip.api.routes.transactions import DEFAULT_LIMIT, TransactionsQuery
from vip.api.validation import validate
from vip.dashboard.borrower_view import (
    TransactionsView,
    borrower_count,
    borrower_view,
    find_borrower,
    recent_borrowers,
    transactions,
)
from vip.dashboard.income_chart import TIER_TEXT, money
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import requires
from vip.errors import ValidationFailed

routes = web.RouteTableDef()

# The transaction filters of GET /v1/transactions the page's form offers (user_id is the page's own).
FILTER_FIELDS = ("wallet_id", "direction", "classification", "token", "from_date", "to_date",
                 "include_filtered", "limit")
MAX_SEARCH = 200


def _no_nul(value: str, name: str) -> str:
    """PostgreSQL text cannot hold a NUL: refused (400 page) before a query sees it."""
    if "\x00" in value:
        raise ValidationFailed(f"{name} contains a NUL character", {name: "contains NUL"})
    return value


@routes.get("/dashboard/borrowers")
@requires("analyst")
async def borrowers(request: web.Request) -> web.Response:
    staff = request[STAFF]
    engine = request.app[ENGINE]
    wanted = _no_nul(request.query.get("q", "").strip()[:MAX_SEARCH], "q")
    if wanted:
        user_id = await find_borrower(engine, staff.organisation_id, wanted)
        if user_id is not None:
            raise web.HTTPSeeOther(f"/dashboard/borrowers/{user_id}")
    recent = await recent_borrowers(engine, staff.organisation_id)
    return render(request, "borrowers.html", status=404 if wanted else 200, query=wanted,
                  not_found=bool(wanted), borrowers=recent, money=money,
                  total=await borrower_count(engine, staff.organisation_id))


def _filters_of(request: web.Request, user_id: str) -> tuple[dict[str, str], TransactionsQuery | None,
                                                             dict[str, Any]]:
    """The form's values (blank ones dropped), the parsed query, and its problems by field."""
    given = {k: v.strip() for k in FILTER_FIELDS if (v := request.query.get(k, "")).strip()}
    data: dict[str, Any] = {**given, "user_id": user_id}
    if cursor := request.query.get("cursor", "").strip():
        data["cursor"] = cursor
    try:
        query = validate(TransactionsQuery, data, "filters")
        query.check()
    except ValidationFailed as exc:
        return given, None, exc.details or {"filters": exc.message}
    return given, query, {}


@routes.get("/dashboard/borrowers/{user_id}")
@requires("analyst")
async def borrower(request: web.Request) -> web.Response:
    staff = request[STAFF]
    engine, settings = request.app[ENGINE], request.app[SETTINGS]
    user_id = _no_nul(request.match_info["user_id"], "user_id")
    view = await borrower_view(engine, settings, staff.organisation_id, user_id)  # 404 page if not ours
    given, query, problems = _filters_of(request, user_id)
    page: TransactionsView | None = None
    if query is not None:
        try:
            page = await transactions(engine, settings, staff.organisation_id, query.filters(), query.cursor,
                                      query.limit)
        except ValidationFailed as exc:  # a cursor altered, or issued for other filters
            problems = exc.details or {"cursor": exc.message}
    next_page = None
    if page is not None and page.cursor is not None:
        next_page = f"{request.path}?{urlencode({**given, 'cursor': page.cursor})}#transactions"
    first_page = f"{request.path}?{urlencode(given)}#transactions" if query and query.cursor else None
    return render(request, "borrower.html", status=400 if problems else 200, view=view, user=view.user,
                  filters=given, default_limit=DEFAULT_LIMIT, problems=problems, page=page,
                  next_page=next_page, first_page=first_page, tier_text=TIER_TEXT, money=money)
