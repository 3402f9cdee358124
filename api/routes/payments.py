"""POST/GET /v1/payment-intents, POST/GET /v1/charges: stage a disbursement, then execute it once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Context, Decimal
from typing import Any

import structlog
from aiohttp import web
from eth_utils import is_checksum_address
from pydantic import Field, field_validator
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from vip.accounts.users import load_user
from vip.api.context import CLOCK, ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import json_response
from vip.api.validation import Body, read_body
from vip.chain.operator import OperatorKeyMissing, load_operator
from vip.chain.rpc import RpcClient
from vip.config import NetworkConfig, Settings
from vip.errors import ApiError, Conflict, NotFound, Unprocessable, ValidationFailed
from vip.ids import new_id
from vip.indexer.store import add_watched_address
from vip.payments import rules, store
from vip.payments.charges import ChargeExecutor
from vip.store.tables import connections, organisations, token_approvals

log = structlog.get_logger(__name__)
routes = web.RouteTableDef()

EXECUTOR = web.AppKey("charge_executor", ChargeExecutor)
# Approvals given before the intent (a standing allowance) are found if they are at most this old.
APPROVAL_LOOKBACK = timedelta(days=7)
ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}$"


def _amount(value: Any) -> Any:
    # JSON numbers only (the body parser makes fractions Decimal): no strings, no booleans.
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ValueError("must be a JSON number")
    return value


def _checksummed(value: str) -> str:
    if not is_checksum_address(value):
        raise ValueError("must be a checksummed (EIP-55) address")
    return value


class CreatePaymentIntent(Body):
    user_id: str = Field(min_length=1, max_length=100)
    amount_usd: Decimal = Field(description="USD, > 0, at most 6 decimals, at most the configured maximum")
    token: str = Field(default="USDC", pattern=r"^(USDC|USDT)$")
    network: str = Field(min_length=1, max_length=50)
    recipient_wallet: str = Field(pattern=ADDRESS_PATTERN,
                                  description="An active connected wallet of the user on the network")
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


def _disbursement_network(settings: Settings, name: str, token: str) -> NetworkConfig:
    network = settings.networks.get(name)
    usable = [n.name for n in settings.enabled_networks() if n.disbursement_contract]
    if network is None or not network.enabled or not network.disbursement_contract:
        raise ValidationFailed(f"network {name} does not disburse",
                               {"network": f"one of: {', '.join(usable) or '(none configured)'}"})
    if token not in network.tokens:
        raise ValidationFailed(f"{token} is not supported on {name}",
                               {"token": f"one of: {', '.join(sorted(network.tokens))}"})
    return network


@routes.post("/v1/payment-intents")
@requires("disburse")
async def create_payment_intent(request: web.Request) -> web.Response:
    body = await read_body(request, CreatePaymentIntent)
    settings = request.app[SETTINGS]
    network = _disbursement_network(settings, body.network, body.token)
    if body.amount_usd > settings.disbursement.max_amount_usd:
        raise ValidationFailed("amount_usd is above the maximum of a payment intent", {
            "amount_usd": f"at most {settings.disbursement.max_amount_usd}"})
    token = network.tokens[body.token]
    amount = rules.usd_to_base_units(body.amount_usd, token.decimals)
    org = principal(request).organisation_id
    now = await request.app[CLOCK].now()
    recipient = body.recipient_wallet.lower()
    async with request.app[ENGINE].begin() as conn:
        await load_user(conn, org, body.user_id)
        funding = body.funding_wallet or await conn.scalar(
            select(organisations.c.default_funding_wallet).where(organisations.c.id == org))
        if not funding:
            raise Unprocessable("no funding_wallet given and the organisation has no default one",
                                {"funding_wallet": "required"}, code="ERR_MISSING_FUNDING_WALLET")
        connected = await conn.scalar(select(connections.c.id).where(
            connections.c.user_id == body.user_id, connections.c.type == "wallet",
            connections.c.status == "active", connections.c.network == network.name,
            connections.c.identifier == recipient))
        if connected is None:
            raise Unprocessable("recipient_wallet is not an active connected wallet of this user on "
                                f"{network.name}", {"recipient_wallet": body.recipient_wallet},
                                code="ERR_RECIPIENT_NOT_CONNECTED")
        contract = network.disbursement_contract.lower()  # type: ignore[union-attr]
        # Approval logs name the contract as spender: watching it indexes every funding wallet's approvals.
        await add_watched_address(conn, network.name, contract, "spender", start_time=now - APPROVAL_LOOKBACK)
        row = await store.create_intent(conn, {
            "id": new_id("pi"), "organisation_id": org, "user_id": body.user_id,
            "amount_usd": body.amount_usd, "amount": amount, "token": body.token,
            "token_address": token.address.lower(),
            "network": network.name, "recipient_wallet": recipient, "funding_wallet": funding.lower(),
            "contract_address": contract, "metadata": body.metadata,
            "expires_at": now + timedelta(seconds=settings.disbursement.intent_ttl_s),
        }, now)
    return json_response({"payment_intent": store.intent_json(row)}, status=201)


@routes.get("/v1/payment-intents/{intent_id}")
@requires("read")
async def get_payment_intent(request: web.Request) -> web.Response:
    intent_id = request.match_info["intent_id"]
    async with request.app[ENGINE].connect() as conn:
        row = await store.load_intent(conn, intent_id, organisation_id=principal(request).organisation_id)
    if row is None:
        raise NotFound(f"no payment intent {intent_id}", {"payment_intent_id": intent_id})
    return json_response({"payment_intent": store.intent_json(row)})


def _not_confirmed(message: str, details: dict[str, Any]) -> ApiError:
    return Unprocessable(message, details, code="ERR_APPROVAL_NOT_CONFIRMED")


@routes.post("/v1/charges")
@requires("disburse")
async def create_charge(request: web.Request) -> web.Response:
    body = await read_body(request, CreateCharge)
    executor = request.app.get(EXECUTOR)
    org = principal(request).organisation_id
    settings = request.app[SETTINGS]
    now = await request.app[CLOCK].now()
    approval = body.approval_tx_hash.lower()
    try:
        async with request.app[ENGINE].begin() as conn:
            # The intent's row lock serialises every charge request for it: one wins, the rest see it.
            intent = await store.load_intent(conn, body.payment_intent_id, organisation_id=org, lock=True)
            if intent is None:
                raise NotFound(f"no payment intent {body.payment_intent_id}",
                               {"payment_intent_id": body.payment_intent_id})
            existing = await store.charge_of_intent(conn, intent.id)
            if existing is not None or intent.status in (rules.SUCCEEDED, rules.FAILED):
                raise Conflict("this payment intent has already been charged", {
                    "payment_intent_id": intent.id, "charge_id": existing.id if existing else None},
                    code="ERR_ALREADY_CHARGED")
            if intent.status == rules.EXPIRED or (intent.status == rules.PENDING_APPROVAL
                                                  and intent.expires_at <= now):
                raise ApiError("the payment intent expired before its approval; create a new one",
                               {"payment_intent_id": intent.id, "expires_at": store.intent_json(intent)[
                                   "expires_at"]}, code="ERR_PAYMENT_INTENT_EXPIRED", status=410)
            if intent.status != rules.APPROVAL_CONFIRMED:
                raise _not_confirmed("the approval of this payment intent is not confirmed on-chain yet",
                                     {"payment_intent_id": intent.id, "status": intent.status})
            if not await _is_intent_approval(conn, intent, approval):
                raise _not_confirmed("approval_tx_hash is not a confirmed approval of this payment intent",
                                     {"approval_tx_hash": body.approval_tx_hash})
            if executor is None:
                raise ApiError("disbursement is not available: no operator key is configured", {},
                               code="ERR_DISBURSEMENT_UNAVAILABLE", status=503)
            charge = await store.insert_charge(conn, {
                "id": new_id("ch"), "organisation_id": org, "payment_intent_id": intent.id,
                "network": intent.network, "approval_tx_hash": approval, "created_at": now,
            }, settings.disbursement.lease_s)
    except IntegrityError as exc:  # unreachable while the row lock holds; the unique column is the backstop
        raise Conflict("this payment intent has already been charged",
                       {"payment_intent_id": body.payment_intent_id}, code="ERR_ALREADY_CHARGED") from exc
    await _execute(request.app, executor, charge.id, settings.disbursement.charge_wait_s)
    async with request.app[ENGINE].connect() as conn:
        charge = await store.load_charge(conn, charge.id)
        intent = await store.load_intent(conn, charge.payment_intent_id)
    status = 202 if charge.status == rules.CHARGE_PENDING else 201
    return json_response({"charge": store.charge_json(charge, intent)}, status=status)


async def _is_intent_approval(conn, intent, tx_hash: str) -> bool:
    """The confirming approval, or any indexed Approval of the same owner, spender and token."""
    if tx_hash == intent.approval_tx_hash:
        return True
    found = await conn.scalar(select(token_approvals.c.tx_hash).where(
        token_approvals.c.network == intent.network, token_approvals.c.tx_hash == tx_hash,
        token_approvals.c.token_address == intent.token_address,
        token_approvals.c.owner_address == intent.funding_wallet,
        token_approvals.c.spender_address == intent.contract_address).limit(1))
    return found is not None


async def _execute(app: web.Application, executor: ChargeExecutor, charge_id: str, wait_s: float) -> None:
    """Run the charge now, within the request; whatever happens, hand it to the daemon afterwards.
    Shielded: a client that hangs up does not cut a charge off between signing and recording."""
    async def run() -> None:
        try:
            await executor.advance(charge_id, wait_s)
        except Exception:
            log.exception("charge execution failed in the request; the daemon will finish it",
                          charge_id=charge_id)
        finally:
            async with app[ENGINE].begin() as conn:
                await store.release_charge(conn, charge_id, app[SETTINGS].disbursement.poll_interval_s)

    await asyncio.shield(asyncio.ensure_future(run()))


@routes.get("/v1/charges/{charge_id}")
@requires("read")
async def get_charge(request: web.Request) -> web.Response:
    charge_id = request.match_info["charge_id"]
    async with request.app[ENGINE].connect() as conn:
        charge = await store.load_charge(conn, charge_id, organisation_id=principal(request).organisation_id)
        if charge is None:
            raise NotFound(f"no charge {charge_id}", {"charge_id": charge_id})
        intent = await store.load_intent(conn, charge.payment_intent_id)
    return json_response({"charge": store.charge_json(charge, intent)})


async def disbursement_resources(app: web.Application) -> AsyncIterator[None]:
    """The charge executor (operator key, one RPC client per disbursing network), when a key is set."""
    settings = app[SETTINGS]
    networks = [n for n in settings.enabled_networks() if n.disbursement_contract]
    rpcs = {n.name: RpcClient(n.name, n.rpc_url, settings.rpc) for n in networks}  # type: ignore[arg-type]
    try:
        operator = load_operator(settings.disbursement)
    except OperatorKeyMissing as exc:
        if networks:
            log.warning("POST /v1/charges answers 503", reason=str(exc))
    else:
        if networks:
            app[EXECUTOR] = ChargeExecutor(settings, app[ENGINE], rpcs, operator, app[CLOCK])
    yield
    for rpc in rpcs.values():
        await rpc.close()
