"""Pages: Jinja2 templates (autoescaped) rendered on the server into complete HTML responses, with the
headers every dashboard page carries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from vip.dashboard.staff import StaffIdentity

# Scripts: none at all. Styles: our stylesheet only. Forms post only to us; no framing.
PAGE_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",  # pages show secrets once and per-organisation data: never cached
}

# request[STAFF]: the signed-in member (set by session.requires); request[CSRF]: the token of the page's forms
STAFF = web.RequestKey("staff", StaffIdentity)
CSRF = web.RequestKey("csrf_token", str)


@dataclass(frozen=True)
class NavEntry:
    label: str
    href: str
    roles: tuple[str, ...]  # who sees it besides admins (an admin sees every entry)


NAV = (
    NavEntry("Borrowers", "/dashboard/borrowers", ("analyst",)),
    NavEntry("Networks", "/dashboard/networks", ("operator",)),
    NavEntry("API keys", "/dashboard/keys", ()),
    NavEntry("Webhooks", "/dashboard/webhooks", ()),
    NavEntry("Sign-in domains", "/dashboard/sign-in-domains", ()),
    NavEntry("Staff", "/dashboard/staff", ()),
    NavEntry("Audit log", "/dashboard/audit", ()),
)

_environment = Environment(loader=PackageLoader("vip.dashboard", "templates"),
                           autoescape=select_autoescape(default=True, default_for_string=True),
                           undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def when(moment: datetime | None) -> str:
    """A time as the pages show it: UTC to the second ("" for none)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else ""


_environment.filters["when"] = when


def nav_for(staff: StaffIdentity | None) -> list[NavEntry]:
    if staff is None:
        return []
    return [e for e in NAV if staff.role == "admin" or staff.role in e.roles]


def render(request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
    """The template rendered as a page. Every template sees `staff` (the signed-in member or None),
    `csrf_token` (for its forms), `nav` (the entries the role may open) and `current_path`."""
    staff = request.get(STAFF)
    page = _environment.get_template(template).render(
        staff=staff, csrf_token=request.get(CSRF, ""), nav=nav_for(staff), current_path=request.path,
        **context)
    return web.Response(text=page, status=status, content_type="text/html", headers=PAGE_HEADERS)
