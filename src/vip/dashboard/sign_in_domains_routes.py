"""Sign-in domains (admins): the sites the organisation's borrowers sign in on, with the URI prefixes a
wallet message may name there; add (or replace a domain's prefixes), remove. Each change is written to
the audit log in its transaction. The same as POST/GET/DELETE /v1/sign-in-domains and the CLI."""

from __future__ import annotations

from aiohttp import web

from vip.api.context import CLOCK, ENGINE, REQUEST_ID, SETTINGS
from vip.connections import sign_in_domains
from vip.dashboard import audit
from vip.dashboard.confirm import confirm_page, confirmed
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import requires, see_other
from vip.errors import NotFound, ValidationFailed

routes = web.RouteTableDef()
PAGE = "/dashboard/sign-in-domains"


async def _page(request: web.Request, *, status: int = 200, error: str | None = None, domain: str = "",
                prefixes: str = "") -> web.Response:
    async with request.app[ENGINE].connect() as conn:
        rows = await sign_in_domains.rows_of(conn, request[STAFF].organisation_id)
    own = sign_in_domains.service_site(request.app[SETTINGS])
    return render(request, "sign_in_domains.html", status=status, domains=rows, own=own, error=error,
                  domain=domain, prefixes=prefixes, changed=request.query.get("changed", "")[:300])


@routes.get(PAGE)
@requires("admin")
async def domains_page(request: web.Request) -> web.StreamResponse:
    return await _page(request)


@routes.post(PAGE)
@requires("admin")
async def add_domain(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    domain = str(form.get("domain", "")).strip()
    prefixes_text = str(form.get("uri_prefixes", ""))
    prefixes = [line.strip() for line in prefixes_text.splitlines() if line.strip()]
    staff = request[STAFF]
    now = await request.app[CLOCK].now()
    try:
        async with request.app[ENGINE].begin() as conn:
            row, created = await sign_in_domains.put_domain(conn, staff.organisation_id, domain, prefixes,
                                                            now)
            await audit.record(conn, staff, "sign_in_domain.added" if created else "sign_in_domain.updated",
                               row.domain, {"uri_prefixes": list(row.uri_prefixes)}, request.get(REQUEST_ID))
    except ValidationFailed as exc:
        reason = "; ".join(str(v) for v in exc.details.values()) if exc.details else ""
        return await _page(request, status=400, error=f"{exc.message}{f' ({reason})' if reason else ''}.",
                           domain=domain[:300], prefixes=prefixes_text[:3000])
    return see_other(f"{PAGE}?changed={row.domain}")


@routes.post(PAGE + "/{domain}/remove")
@requires("admin")
async def remove_domain(request: web.Request) -> web.StreamResponse:
    staff, domain = request[STAFF], request.match_info["domain"]
    if not confirmed(await request.post()):
        async with request.app[ENGINE].connect() as conn:
            listed = await sign_in_domains.rows_of(conn, staff.organisation_id)
        if not any(row.domain == domain for row in listed):
            raise NotFound(f"{domain} is not a sign-in domain of {staff.organisation_name}.")
        return confirm_page(
            request, title="Remove this sign-in domain?", button="Remove the domain", back=PAGE,
            question=f"Remove {domain} from the sites your borrowers sign in on?",
            consequences=["A wallet message naming it is refused from now on (ERR_DOMAIN_MISMATCH).",
                          "Borrowers signing in on that site see an error until it is added again."])
    async with request.app[ENGINE].begin() as conn:
        row = await sign_in_domains.remove_domain(conn, staff.organisation_id, domain)
        await audit.record(conn, staff, "sign_in_domain.removed", row.domain, {}, request.get(REQUEST_ID))
    return see_other(PAGE)
