"""Pages: Jinja2 templates (autoescaped) rendered on the server into complete HTML responses, with the
headers every dashboard page carries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from vip.dashboard.income_chart import money
from vip.dashboard.staff import StaffIdentity
from vip.formats import checksummed

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


def when(moment: datetime | str | None) -> str:
    """A time as every page shows it, whatever its source (a stored datetime or the API's ISO 8601 text):
    UTC to the second, `2026-03-02 12:04:12 UTC` ("" for none)."""
    if isinstance(moment, str):
        try:
            parsed = datetime.fromisoformat(moment)
        except ValueError:
            return moment
        moment = parsed
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def amount(value: Decimal | int | str | None, unit: str = "USD") -> str:
    """An amount as every page shows it: thousands separated, 2 to 6 decimals (never rounded), then its
    unit: `1,500.00 USD`, `3,250.00 USDC` ("—" for none)."""
    return "—" if value is None else f"{money(value)} {unit}".rstrip()


_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_USD_IN_TEXT = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?) USD\b")


def address(value: str | None) -> str:
    """A 0x address in its EIP-55 form, as the API answers it (anything else as it is)."""
    return checksummed(value) if value and _ADDRESS.match(value) else (value or "")


def amounts_in(text: str) -> str:
    """Text from the service (a pillar's explanation) with its USD figures in the pages' one format:
    `3250.000000 USD` becomes `3,250.00 USD`."""
    return _USD_IN_TEXT.sub(lambda m: amount(m.group(1)), text)


_environment.filters.update(when=when, amount=amount, address=address, amounts_in=amounts_in)


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
