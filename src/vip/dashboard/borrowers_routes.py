"""The borrowers pages (analysts and admins, read-only): find a borrower by id or external_id, and one
borrower's page: connections, the latest VIP as a chart with its table, fraud flags with the transfers
behind them, the risk score, the transactions with the API's filters, payment intents and charges."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from vip.api.context import ENGINE, SETTINGS
from vip.api.routes.transactions import DEFAULT_LIMIT, TransactionsQuery
from vip.api.validation import validate
from vip.dashboard.borrower_list import (
    PAGE_SIZE,
    RECOMMENDATIONS,
    SORTS,
    STATUSES,
    ListFilters,
    borrower_page,
    csv_text,
    export_rows,
    find_exact,
)
from vip.dashboard.borrower_view import (
    TransactionsView,
    borrower_count,
    borrower_view,
    transactions,
)
from vip.dashboard.income_chart import TIER_TEXT, money
from vip.dashboard.render import PAGE_HEADERS, STAFF, render
from vip.dashboard.session import requires
from vip.errors import ValidationFailed

routes = web.RouteTableDef()

# The transaction filters of GET /v1/transactions the page's form offers (user_id is the page's own).
FILTER_FIELDS = ("wallet_id", "direction", "classification", "token", "from_date", "to_date",
                 "include_filtered", "limit")


def _no_nul(value: str, name: str) -> str:
    """PostgreSQL text cannot hold a NUL: refused (400 page) before a query sees it."""
    if "\x00" in value:
        raise ValidationFailed(f"{name} contains a NUL character", {name: "contains NUL"})
    return value


LIST_FIELDS = ("q", "status", "recommendation", "flagged", "vip_from", "vip_to", "sort")


def _list_filters(request: web.Request) -> tuple[ListFilters, dict[str, str]]:
    return ListFilters.from_query({k: request.query.get(k, "") for k in LIST_FIELDS})


@routes.get("/dashboard/borrowers")
@requires("analyst")
async def borrowers(request: web.Request) -> web.Response:
    staff = request[STAFF]
    engine, settings = request.app[ENGINE], request.app[SETTINGS]
    filters, problems = _list_filters(request)
    # A whole id or external id pasted in the search box opens that borrower's page at once.
    if filters.q and not problems and set(filters.as_query()) == {"q"}:
        user_id = await find_exact(engine, staff.organisation_id, filters.q)
        if user_id is not None:
            raise web.HTTPSeeOther(f"/dashboard/borrowers/{user_id}")
    per_page_text = request.query.get("per_page", "")
    per_page = int(per_page_text) if per_page_text.isdigit() and 1 <= int(per_page_text) <= 200 else PAGE_SIZE
    page = await borrower_page(engine, settings, staff.organisation_id, filters,
                               request.query.get("cursor") or None, per_page)
    query = filters.as_query() | ({"per_page": str(per_page)} if per_page != PAGE_SIZE else {})
    next_page = (f"{request.path}?{urlencode({**query, 'cursor': page.next_cursor})}#borrowers"
                 if page.next_cursor else None)
    first_page = f"{request.path}?{urlencode(query)}#borrowers" if request.query.get("cursor") else None
    not_found = bool(filters.q) and page.total == 0  # a search that finds nothing: 404, as before
    return render(request, "borrowers.html", status=400 if problems else 404 if not_found else 200,
                  filters=filters, problems=problems, page=page, not_found=not_found, next_page=next_page,
                  first_page=first_page,
                  export=f"/dashboard/borrowers.csv?{urlencode(filters.as_query())}", statuses=STATUSES,
                  recommendations=RECOMMENDATIONS, sorts=SORTS,
                  total=await borrower_count(engine, staff.organisation_id))


@routes.get("/dashboard/borrowers.csv")
@requires("analyst")
async def borrowers_csv(request: web.Request) -> web.StreamResponse:
    """The list's borrowers (same filters and order, up to 10,000) as a CSV file."""
    staff = request[STAFF]
    filters, problems = _list_filters(request)
    if problems:
        raise ValidationFailed("the filters are not valid: " + ", ".join(sorted(problems)), problems)
    rows, more = await export_rows(request.app[ENGINE], request.app[SETTINGS], staff.organisation_id, filters)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    headers = {**PAGE_HEADERS, "Content-Disposition": f'attachment; filename="borrowers-{stamp}.csv"',
               "X-Export-Truncated": "true" if more else "false"}
    return web.Response(text=csv_text(rows), content_type="text/csv", charset="utf-8", headers=headers)


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
