"""POST and GET /v1/sign-in-domains, DELETE /v1/sign-in-domains/{domain} (scope `admin`): the sites the
organisation's borrowers sign in on; a Sign-In with Ethereum message is accepted only for one of them."""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import Field

from vip.api.context import CLOCK, ENGINE, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import Body, read_body
from vip.connections import sign_in_domains

routes = web.RouteTableDef()


class RegisterSignInDomain(Body):
    domain: str = Field(min_length=1, max_length=300, description="The EIP-4361 `domain` borrowers' messages "
                        "name: the site's host, with its port if it has one (app.lender.example)")
    uri_prefixes: list[Annotated[str, Field(max_length=2000)]] = Field(
        default_factory=list, max_length=sign_in_domains.MAX_PREFIXES,
        description="The URIs a message may name start with one of these (https URIs on the domain; http "
                    "for localhost only); none given: https://<domain>/")


def domain_json(row: Any) -> dict[str, Any]:
    return {"domain": row.domain, "uri_prefixes": list(row.uri_prefixes), "created_at": iso(row.created_at),
            "updated_at": iso(row.updated_at)}


@routes.post("/v1/sign-in-domains")
@requires("admin")
async def register_sign_in_domain(request: web.Request) -> web.Response:
    body = await read_body(request, RegisterSignInDomain)
    now = await request.app[CLOCK].now()
    async with request.app[ENGINE].begin() as conn:
        row, created = await sign_in_domains.put_domain(conn, principal(request).organisation_id, body.domain,
                                                        body.uri_prefixes, now)
    return json_response({"sign_in_domain": domain_json(row)}, status=201 if created else 200)


@routes.get("/v1/sign-in-domains")
@requires("admin")
async def list_sign_in_domains(request: web.Request) -> web.Response:
    rows = await sign_in_domains.list_domains(request.app[ENGINE], principal(request).organisation_id)
    return json_response({"sign_in_domains": [domain_json(r) for r in rows]})


@routes.delete("/v1/sign-in-domains/{domain}")
@requires("admin")
async def remove_sign_in_domain(request: web.Request) -> web.Response:
    async with request.app[ENGINE].begin() as conn:
        row = await sign_in_domains.remove_domain(conn, principal(request).organisation_id,
                                                  request.match_info["domain"])
    return json_response({"sign_in_domain": domain_json(row)})
