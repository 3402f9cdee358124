"""Who is signed in: the session cookie, role checks and CSRF checks around every dashboard handler.

`requires(*roles)` wraps a handler: without a live session it redirects to the sign-in page (303, with
`next`), with a role that may not open the page it answers the 403 page, and on a POST it checks the
form's `csrf_token` against the session's (403 page otherwise, before the handler runs). An admin may
open every page. Errors a handler raises (aiohttp's HTTP errors, the services' ApiError) become the error
page with their status."""

from __future__ import annotations

import functools
import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlsplit

from aiohttp import web
from multidict import MultiMapping

from vip.api.context import ENGINE, SETTINGS, public
from vip.dashboard import staff as staff_store
from vip.dashboard.render import CSRF, STAFF, render
from vip.dashboard.staff import ROLES, Role, StaffIdentity
from vip.errors import ApiError

__all__ = ["COOKIE", "CSRF", "ROLES", "STAFF", "Role", "StaffIdentity", "requires", "safe_next",
           "set_session_cookie"]

COOKIE = "vip_staff_session"
COOKIE_PATH = "/dashboard"
SIGN_IN_PATH = "/dashboard/sign-in"
PASSWORD_PATH = "/dashboard/password"
# What a member whose password someone else chose may open before replacing it.
OPEN_BEFORE_PASSWORD_CHANGE = (PASSWORD_PATH, "/dashboard/sign-out")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def secure_cookies(request: web.Request) -> bool:
    """Cookies are Secure (HTTPS only) except on a local development stack, served over plain http."""
    return not request.app[SETTINGS].is_development


def set_session_cookie(request: web.Request, response: web.StreamResponse, token: str) -> None:
    response.set_cookie(COOKIE, token, path=COOKIE_PATH, httponly=True, samesite="Lax",
                        secure=secure_cookies(request),
                        max_age=int(staff_store.SESSION_ABSOLUTE.total_seconds()))


def clear_session_cookie(request: web.Request, response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path=COOKIE_PATH, secure=secure_cookies(request), httponly=True,
                        samesite="Lax")


def see_other(location: str) -> web.Response:
    """A 303 to `location` (after a form post: the browser follows with a GET)."""
    return web.Response(status=303, headers={"Location": location, "Cache-Control": "no-store"})


def safe_next(value: object, default: str = "/dashboard") -> str:
    """Where to go after a form (sign-in, a forced password change): a path of the dashboard's, never
    another site (no scheme, no host, no `//` or backslash) and nothing that could not stand in a
    Location header (no control character: a line break there would break the response)."""
    if not isinstance(value, str) or not value or len(value) >= 2000:
        return default
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" for c in value):
        return default
    if value.startswith("//") or "\\" in value:
        return default
    parts = urlsplit(value)
    ours = parts.path == "/dashboard" or parts.path.startswith("/dashboard/")
    if parts.scheme or parts.netloc or not ours:
        return default
    return value


def csrf_matches(expected: str, given: object) -> bool:
    """Whether a form's token is the expected one (compared in constant time)."""
    if not isinstance(given, str) or not expected:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def has_nul(form: MultiMapping[object]) -> bool:
    return any(isinstance(value, str) and "\x00" in value for value in form.values())


def error_page(request: web.Request, status: int, message: str) -> web.Response:
    titles = {400: "Bad request", 403: "Not allowed", 404: "Not found", 405: "Method not allowed",
              409: "Conflict", 429: "Too many requests"}
    return render(request, "error.html", status=status, title=titles.get(status, "Something went wrong"),
                  message=message)


async def current_session(request: web.Request) -> staff_store.Session | None:
    token = request.cookies.get(COOKIE)
    if not token or len(token) > 200:
        return None
    async with request.app[ENGINE].begin() as conn:
        return await staff_store.find_session(conn, token)


def requires(*roles: Role) -> Callable[[Handler], Handler]:
    """Only staff with one of `roles` (or admins) may open the wrapped handler's page; no roles: any
    signed-in member. Sets request[STAFF] (the StaffIdentity) and request[CSRF] (the session's token)."""
    allowed = {*roles, "admin"} if roles else set(ROLES)

    def wrap(handler: Handler) -> Handler:
        @public  # no API key: the dashboard's own session stands in for one
        @functools.wraps(handler)
        async def guarded(request: web.Request) -> web.StreamResponse:
            session = await current_session(request)
            if session is None:
                target = request.path_qs if request.method == "GET" else "/dashboard"
                return see_other(f"{SIGN_IN_PATH}?next={quote(target, safe='')}")
            request[STAFF] = session.staff
            request[CSRF] = session.csrf_token
            if session.staff.must_change_password and request.path not in OPEN_BEFORE_PASSWORD_CHANGE:
                target = request.path_qs if request.method == "GET" else "/dashboard"
                return see_other(f"{PASSWORD_PATH}?next={quote(target, safe='')}")
            if session.staff.role not in allowed:
                return error_page(request, 403, "Your role does not include this page.")
            if request.method == "POST":
                form = await request.post()
                if not csrf_matches(session.csrf_token, form.get("csrf_token")):
                    return error_page(request, 403, "The form's security token is missing or out of date: "
                                                    "reload the page and try again.")
                if has_nul(form):  # PostgreSQL text cannot hold one: refused before any query sees it
                    return error_page(request, 400, "A field of the form contains a NUL character.")
            try:
                return await handler(request)
            except web.HTTPException as exc:
                if exc.status < 400:
                    raise
                return error_page(request, exc.status, exc.reason)
            except ApiError as exc:
                if exc.status >= 500:
                    raise
                return error_page(request, exc.status, exc.message)

        return guarded

    return wrap
