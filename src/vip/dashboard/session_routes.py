"""Signing in and out, and the home page."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from sqlalchemy import Row

from vip.api.context import CLOCK, ENGINE, HTTP, REQUEST_ID, SETTINGS, public
from vip.api.ratelimit import request_client
from vip.dashboard import audit
from vip.dashboard import staff as staff_store
from vip.dashboard.borrower_list import BorrowerRow, needing_attention
from vip.dashboard.network_view import NetworkFigures, chain_heads, networks_view, seconds_text
from vip.dashboard.render import CSRF, STAFF, nav_for, render
from vip.dashboard.session import (
    COOKIE,
    PASSWORD_PATH,
    SIGN_IN_PATH,
    clear_session_cookie,
    csrf_matches,
    error_page,
    has_nul,
    requires,
    safe_next,
    secure_cookies,
    see_other,
    set_session_cookie,
)
from vip.dashboard.webhook_view import failing_endpoints

routes = web.RouteTableDef()

# The sign-in form has no session yet: its CSRF token is a double-submit cookie (the form's hidden field
# must equal the cookie, which another site can neither read nor set).
SIGN_IN_COOKIE = "vip_sign_in_csrf"
WRONG = "Wrong organisation, email or password."
THROTTLED = ("Too many sign-in attempts for this email or from your address. Wait five minutes and try "
             "again.")


def _sign_in_page(request: web.Request, *, status: int = 200, error: str | None = None,
                  organisation: str = "", email: str = "", next_path: str = "/dashboard") -> web.Response:
    token = request.cookies.get(SIGN_IN_COOKIE) or ""
    if len(token) != 43:
        token = secrets.token_urlsafe(32)
    request[CSRF] = token
    response = render(request, "sign_in.html", status=status, error=error, organisation=organisation,
                      email=email, next_path=next_path)
    response.set_cookie(SIGN_IN_COOKIE, token, path=SIGN_IN_PATH, httponly=True, samesite="Strict",
                        secure=secure_cookies(request))
    return response


@routes.get(SIGN_IN_PATH)
@public
async def sign_in_form(request: web.Request) -> web.StreamResponse:
    return _sign_in_page(request, next_path=safe_next(request.query.get("next")))


@routes.post(SIGN_IN_PATH)
@public
async def sign_in(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    organisation, email, password = (str(form.get(name, ""))
                                     for name in ("organisation", "email", "password"))
    next_path = safe_next(form.get("next"))
    if not csrf_matches(request.cookies.get(SIGN_IN_COOKIE, ""), form.get("csrf_token")):
        return _sign_in_page(request, status=403, organisation=organisation, email=email, next_path=next_path,
                             error="The sign-in form expired: please try again.")
    nul = has_nul(form)  # never reaches a query (PostgreSQL text cannot hold one): a wrong sign-in
    organisation, email = organisation.replace("\x00", ""), email.replace("\x00", "")
    engine = request.app[ENGINE]
    async with engine.begin() as conn:  # counted whatever the outcome, in its own transaction
        allowed = await staff_store.count_sign_in_attempt(conn, organisation, email, request_client(request))
    if not allowed:
        return _sign_in_page(request, status=429, organisation=organisation, email=email,
                             next_path=next_path, error=THROTTLED)
    if nul:
        return _sign_in_page(request, status=401, organisation=organisation, email=email,
                             next_path=next_path, error=WRONG)
    async with engine.begin() as conn:
        member = await staff_store.check_credentials(conn, organisation, email, password)
        if member is None:
            return _sign_in_page(request, status=401, organisation=organisation, email=email,
                                 next_path=next_path, error=WRONG)
        token, _ = await staff_store.open_session(conn, member)
        await audit.record(conn, member, "staff.signed_in", member.member_id, {},
                           request.get(REQUEST_ID))
    if member.must_change_password:  # a first or reset password: replaced before anything else opens
        next_path = f"{PASSWORD_PATH}?{urlencode({'next': next_path})}"
    response = see_other(next_path)
    set_session_cookie(request, response, token)
    response.del_cookie(SIGN_IN_COOKIE, path=SIGN_IN_PATH)
    return response


@routes.post("/dashboard/sign-out")
@requires()
async def sign_out(request: web.Request) -> web.StreamResponse:
    staff = request[STAFF]
    async with request.app[ENGINE].begin() as conn:
        await staff_store.close_session(conn, request.cookies[COOKIE])
        await audit.record(conn, staff, "staff.signed_out", staff.member_id, {}, request.get(REQUEST_ID))
    response = see_other(SIGN_IN_PATH)
    clear_session_cookie(request, response)
    return response


ATTENTION_DAYS = 7
LAGGING_S = 300  # an indexer this far behind its chain's head (or a head unknown) is worth a look


@routes.get("/dashboard")
@requires()
async def home(request: web.Request) -> web.StreamResponse:
    """What needs attention, for the member's role: failing webhook endpoints (admins), borrowers whose
    VIP this week is unverified or flagged (analysts), networks whose indexer lags (operators)."""
    staff = request[STAFF]
    engine, settings = request.app[ENGINE], request.app[SETTINGS]
    sees = {entry.href for entry in nav_for(staff)}
    endpoints: list[Row[Any]] = []
    borrowers: list[BorrowerRow] = []
    networks: list[NetworkFigures] = []
    flagged_total = 0
    now = await request.app[CLOCK].now()
    since = now - timedelta(days=ATTENTION_DAYS)
    if "/dashboard/webhooks" in sees:
        endpoints = await failing_endpoints(engine, staff.organisation_id)
    if "/dashboard/borrowers" in sees:
        borrowers, flagged_total = await needing_attention(engine, staff.organisation_id, since)
    if "/dashboard/networks" in sees:
        heads = await chain_heads(request.app[HTTP], settings.enabled_networks())
        view = await networks_view(engine, settings, staff.organisation_id, now, heads)
        networks = [n for n in view.networks
                    if n.head is None or n.indexed_block is None or (n.lag_seconds or 0) > LAGGING_S]
    week = {"vip_from": since.date().isoformat(), "sort": "vip"}
    borrowers_link = "/dashboard/borrowers?" + urlencode(week)
    return render(request, "home.html", pages=nav_for(staff), endpoints=endpoints, borrowers=borrowers,
                  flagged_total=flagged_total, borrowers_link=borrowers_link, networks=networks,
                  sees=sees, days=ATTENTION_DAYS, seconds_text=seconds_text)


@routes.get("/dashboard/")
@public
async def home_slash(request: web.Request) -> web.StreamResponse:
    return see_other("/dashboard")


__all__ = ["error_page", "routes"]
