"""POST /v1/funding-wallets/nonce, POST and GET /v1/funding-wallets: register a lender's treasury to its
organisation with the wallet's signature, before payment intents may name it; PUT
/v1/funding-wallets/{address}/default makes one the organisation's default, DELETE
/v1/funding-wallets/{address} removes one no open intent names."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from eth_utils import to_checksum_address
from pydantic import Field, field_validator

from vip.api.context import CLOCK, ENGINE, RPCS, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.routes.payments import ADDRESS_PATTERN, _checksummed
from vip.api.validation import Body, read_body
from vip.errors import ValidationFailed
from vip.payments import funding
from vip.payments.records import FundingWallet

routes = web.RouteTableDef()


class FundingWalletNonce(Body):
    address: str = Field(pattern=ADDRESS_PATTERN, description="The wallet to register (any case; "
                         "mixed case must be EIP-55 checksummed)")
    network: str = Field(min_length=1, max_length=50,
                         description="Where a contract wallet's ERC-1271 signature is checked")

    _address = field_validator("address")(_checksummed)


class RegisterFundingWallet(Body):
    address: str = Field(pattern=ADDRESS_PATTERN)
    nonce: str = Field(min_length=1, max_length=100)
    # Hex; any length, since contract wallets sign in their own formats.
    signature: str = Field(pattern=r"^0x([0-9a-fA-F]{2})*$", max_length=2 + 2 * 8192,
                           description="The wallet's EIP-191 (personal_sign) signature of `message`")

    _address = field_validator("address")(_checksummed)


def funding_wallet_json(row: FundingWallet, default: str | None) -> dict[str, Any]:
    """A registration; `default` is the organisation's default funding wallet (lowercase) or None."""
    return {"address": to_checksum_address(row.address), "network": row.network, "kind": row.kind,
            "registered_at": iso(row.registered_at), "default": row.address == default}


def _address(request: web.Request) -> str:
    """The {address} of the path, in any letter case (a path is not a checksum carrier)."""
    address = request.match_info["address"]
    if not re.fullmatch(ADDRESS_PATTERN, address):
        raise ValidationFailed("address must be 0x and 40 hex digits", {"address": address[:100]})
    return address.lower()


@routes.post("/v1/funding-wallets/nonce")
@requires("disburse")
async def funding_wallet_nonce(request: web.Request) -> web.Response:
    body = await read_body(request, FundingWalletNonce)
    challenge = await funding.issue_challenge(request.app[ENGINE], request.app[CLOCK], request.app[SETTINGS],
                                              organisation_id=principal(request).organisation_id,
                                              address=body.address, network=body.network)
    return json_response({"nonce": challenge.nonce, "message": challenge.message,
                          "expires_at": iso(challenge.expires_at)}, status=201)


@routes.post("/v1/funding-wallets")
@requires("disburse")
async def register_funding_wallet(request: web.Request) -> web.Response:
    body = await read_body(request, RegisterFundingWallet)
    row, created = await funding.register(request.app[ENGINE], request.app[CLOCK], request.app[SETTINGS],
                                          request.app[RPCS],
                                          organisation_id=principal(request).organisation_id,
                                          address=body.address, nonce=body.nonce, signature=body.signature)
    default = await funding.default_wallet(request.app[ENGINE], principal(request).organisation_id)
    return json_response({"funding_wallet": funding_wallet_json(row, default)},
                         status=201 if created else 200)


@routes.get("/v1/funding-wallets")
@requires("read")
async def list_funding_wallets(request: web.Request) -> web.Response:
    rows, default = await funding.list_wallets(request.app[ENGINE], principal(request).organisation_id)
    return json_response({"funding_wallets": [funding_wallet_json(r, default) for r in rows]})


@routes.put("/v1/funding-wallets/{address}/default")
@requires("disburse")
async def set_default_funding_wallet(request: web.Request) -> web.Response:
    row = await funding.set_default_wallet(request.app[ENGINE], principal(request).organisation_id,
                                           _address(request))
    return json_response({"funding_wallet": funding_wallet_json(row, row.address)})


@routes.delete("/v1/funding-wallets/{address}")
@requires("disburse")
async def remove_funding_wallet(request: web.Request) -> web.Response:
    row = await funding.remove_wallet(request.app[ENGINE], principal(request).organisation_id,
                                      _address(request))
    return json_response({"funding_wallet": funding_wallet_json(row, None)})
