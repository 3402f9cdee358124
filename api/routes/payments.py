"""POST/GET /v1/payment-intents, POST/GET /v1/charges: stage a disbursement, then have the daemon execute
it once (the API holds no operator key)."""

from __future__ import annotations

from decimal import Context, Decimal
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field, WithJsonSchema, field_validator

from vip.api.context import (
    CLOCK,
    ENGINE,
    IDEMPOTENCY,
    IDEMPOTENT_RESOURCE,
    RPCS,
    SETTINGS,
    principal,
    requires,
)
from vip.api.jsonio import json_response
from vip.api.validation import Body, read_body
from vip.formats import address_in
from vip.payments import service
from vip.payments.rules import CHARGE_PENDING
from vip.payments.shapes import charge_json, intent_json

routes = web.RouteTableDef()

ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}$"
# What the amount's validators below accept: a JSON number (pydantic's own schema would allow strings).
AMOUNT_SCHEMA = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10**31, "multipleOf": 0.000001}


def _amount(value: Any) -> Any:
    # JSON numbers only (the body parser makes fractions Decimal): no strings, no booleans.
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ValueError("must be a JSON number")
    return value


def _checksummed(value: str) -> str:
    # Any case; mixed case must be a right EIP-55 checksum (decision 132). Given on in EIP-55 form.
    return address_in(value)


class CreatePaymentIntent(Body):
    user_id: str = Field(min_length=1, max_length=100)
    amount_usd: Annotated[Decimal, WithJsonSchema(AMOUNT_SCHEMA)] = Field(
        description="USD, > 0, at most 6 decimals, at most the configured maximum")
    token: str = Field(default="USDC", pattern=r"^(USDC|USDT)$")
    network: str = Field(min_length=1, max_length=50)
    recipient_wallet: str = Field(pattern=ADDRESS_PATTERN,
                                  description="An active connected wallet of the user on the network "
                                              "(any case; mixed case must be EIP-55 checksummed)")
    funding_wallet: str | None = Field(default=None, pattern=ADDRESS_PATTERN,
                                       description="The lender's wallet that approves; default: the "
                                                   "organisation's default funding wallet")
    metadata: dict[str, Any] = Field(default_factory=dict)

    _amount_number = field_validator("amount_usd", mode="before")(_amount)
    _recipient = field_validator("recipient_wallet")(_checksummed)

    @field_validator("funding_wallet")
    @classmethod
    def _funding(cls, value: str | None) -> str | None:
        return None if value is None else _checksummed(value)

    @field_validator("amount_usd")
    @classmethod
    def _positive(cls, value: Decimal) -> Decimal:
        if not value.is_finite() or value <= 0:
            raise ValueError("must be greater than 0")
        if value.adjusted() > 30:
            raise ValueError("too large")
        if value != value.quantize(Decimal("0.000001"), context=Context(prec=100)):
            raise ValueError("at most 6 decimals")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in ("loan_id", "product"):
            if key in value and not isinstance(value[key], str):
                raise ValueError(f"{key} must be a string")
        if "term_months" in value and (isinstance(value["term_months"], bool)
                                       or not isinstance(value["term_months"], int)):
            raise ValueError("term_months must be an integer")
        return value


class CreateCharge(Body):
    payment_intent_id: str = Field(min_length=1, max_length=100)
    approval_tx_hash: str = Field(pattern=r"^0x[0-9a-fA-F]{64}$")


@routes.post("/v1/payment-intents")
@requires("disburse")
async def create_payment_intent(request: web.Request) -> web.Response:
    body = await read_body(request, CreatePaymentIntent)
    if IDEMPOTENT_RESOURCE in request:  # the first attempt created it; its answer was lost
        intent = await service.get_intent(request.app[ENGINE], principal(request).organisation_id,
                                          request[IDEMPOTENT_RESOURCE])
        return json_response({"payment_intent": intent_json(intent)}, status=201)
    intent = await service.create_intent(
        request.app[ENGINE], request.app[CLOCK], request.app[SETTINGS], request.app[RPCS],
        organisation_id=principal(request).organisation_id, request=service.IntentRequest(
            user_id=body.user_id, amount_usd=body.amount_usd, token=body.token, network=body.network,
            recipient_wallet=body.recipient_wallet, funding_wallet=body.funding_wallet,
            metadata=body.metadata), idempotency=request.get(IDEMPOTENCY))
    return json_response({"payment_intent": intent_json(intent)}, status=201)


@routes.get("/v1/payment-intents/{intent_id}")
@requires("read")
async def get_payment_intent(request: web.Request) -> web.Response:
    intent = await service.get_intent(request.app[ENGINE], principal(request).organisation_id,
                                      request.match_info["intent_id"])
    return json_response({"payment_intent": intent_json(intent)})


@routes.post("/v1/charges")
@requires("disburse")
async def create_charge(request: web.Request) -> web.Response:
    body = await read_body(request, CreateCharge)
    if IDEMPOTENT_RESOURCE in request:  # the first attempt created it; its answer was lost
        charge, intent = await service.recover_charge(
            request.app[ENGINE], request.app[SETTINGS], principal(request).organisation_id,
            request[IDEMPOTENT_RESOURCE])
    else:
        charge, intent = await service.create_charge(
            request.app[ENGINE], request.app[CLOCK], request.app[SETTINGS], request.app[RPCS],
            organisation_id=principal(request).organisation_id, intent_id=body.payment_intent_id,
            approval_tx_hash=body.approval_tx_hash, idempotency=request.get(IDEMPOTENCY))
    status = 202 if charge.status == CHARGE_PENDING else 201
    return json_response({"charge": charge_json(charge, intent)}, status=status)


@routes.get("/v1/charges/{charge_id}")
@requires("read")
async def get_charge(request: web.Request) -> web.Response:
    charge, intent = await service.get_charge(request.app[ENGINE], principal(request).organisation_id,
                                              request.match_info["charge_id"])
    return json_response({"charge": charge_json(charge, intent)})

