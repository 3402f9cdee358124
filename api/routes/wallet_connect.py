"""GET /v1/connect/wallet/nonce, POST /v1/connect/wallet: connect a wallet by Sign-In with Ethereum."""

from __future__ import annotations

from typing import Annotated

from aiohttp import web
from pydantic import Field, StringConstraints, field_validator

from vip.api.context import CLOCK, ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import NOT_BLANK, Body, read_body
from vip.connections import siwe, wallet_signin
from vip.connections.resource import connection_json
from vip.connections.siwe import MAX_MESSAGE_CHARS
from vip.errors import ValidationFailed
from vip.formats import address_in

routes = web.RouteTableDef()


class ConnectWallet(Body):
    user_id: str = Field(min_length=1, pattern=NOT_BLANK, max_length=100)
    address: str = Field(pattern=r"^0x[0-9a-fA-F]{40}$")
    network: str = Field(min_length=1, pattern=NOT_BLANK, max_length=50)
    # The signed text, byte for byte: never stripped.
    message: Annotated[str, StringConstraints(strip_whitespace=False)] = Field(
        min_length=1, max_length=MAX_MESSAGE_CHARS)
    # Hex; any length, since contract wallets sign in their own formats ("0x" for on-chain approvals).
    signature: str = Field(pattern=r"^0x([0-9a-fA-F]{2})*$", max_length=2 + 2 * 8192)
    provider: str = Field(default="siwe", pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        return address_in(value)


@routes.get("/v1/connect/wallet/nonce")
@requires("write")
async def wallet_nonce(request: web.Request) -> web.Response:
    user_id = request.headers.get("X-User-Id", "").strip()
    if not 1 <= len(user_id) <= 100:
        raise ValidationFailed("the X-User-Id header is required",
                               {"X-User-Id": "required, 1 to 100 characters"})
    nonce = await wallet_signin.issue_nonce(request.app[ENGINE], request.app[SETTINGS],
                                            principal(request).organisation_id, user_id)
    # `sign_in_domains`: the domains (and URI prefixes under them) a message with this nonce may name.
    return json_response({"nonce": nonce.value, "issued_at": iso(nonce.issued_at),
                          "expires_at": iso(nonce.expires_at), "statement": siwe.STATEMENT,
                          "sign_in_domains": [site.json() for site in nonce.sites]})


@routes.post("/v1/connect/wallet")
@requires("write")
async def connect_wallet(request: web.Request) -> web.Response:
    body = await read_body(request, ConnectWallet)
    sign_in = wallet_signin.SignIn(user_id=body.user_id, address=body.address, network=body.network,
                                   message=body.message, signature=body.signature, provider=body.provider)
    app = request.app
    row, created = await wallet_signin.connect_wallet(app[ENGINE], app[CLOCK], app[SETTINGS],
                                                      principal(request).organisation_id, sign_in)
    return json_response({"connection": connection_json(row)}, status=201 if created else 200)
