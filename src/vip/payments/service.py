"""Payment operations of the API, one function each: create and read an intent, create (and execute)
and read a charge; and the charge executor the API runs charges with.

Exactly once: this module owns the guarantee that an intent is paid at most once, whatever the
clients, processes and crashes do. It rests on three locks, each closing what the one before leaves open:
1. One charge per intent. `create_charge` takes the intent's row lock (FOR UPDATE), so concurrent
   requests for one intent run one at a time and every later one sees the first one's charge and is
   refused (409 ERR_ALREADY_CHARGED); the unique column `charges.payment_intent_id` is the backstop.
2. One executor per charge at a time. The charge is inserted leased to its request (`store.insert_charge`);
   the daemon takes only charges whose lease lapsed (`store.claim_due_charges`), and each executor pass
   (`charges.ChargeExecutor`) finds every transaction recorded before it was sent (`disburser.Disburser`).
3. The contract. disburse() pulls through the intent's organisation's spender only (an approval given
   for another organisation moves nothing), and refuses an intent id it has paid; the id is derived
   from the intent (`rules.chain_intent_id`), so every retry of every process names the same intent,
   and a refusal for that reason settles the charge from the contract's Disbursed log instead of paying again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import structlog
from eth_utils import to_checksum_address
from sqlalchemy import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts.users import load_user
from vip.chain.contracts import spender_of
from vip.chain.operator import OperatorKeyMissing, load_operator
from vip.chain.rpc import RpcClient
from vip.clock import Clock
from vip.config import DisbursementConfig, Settings
from vip.errors import ApiError, Conflict, NotFound, Unprocessable
from vip.ids import new_id
from vip.indexer.store import add_watched_address
from vip.payments import rules, store
from vip.payments.charges import ChargeExecutor

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class IntentRequest:
    """What a lender asks a payment intent to disburse (already parsed: a positive amount of at most 6
    decimals, checksummed addresses)."""

    user_id: str
    amount_usd: Decimal
    token: str
    network: str
    recipient_wallet: str
    funding_wallet: str | None  # None: the organisation's default funding wallet
    metadata: dict[str, Any]


async def create_intent(engine: AsyncEngine, clock: Clock, settings: Settings, *, organisation_id: str,
                        request: IntentRequest) -> Row[Any]:
    """A new intent waiting for its approval; the network's approvals are indexed from now on."""
    network = rules.disbursement_network(settings, request.network, request.token)
    rules.check_amount(request.amount_usd, settings.disbursement.max_amount_usd)
    token = network.tokens[request.token]
    amount = rules.usd_to_base_units(request.amount_usd, token.decimals)
    now = await clock.now()
    recipient = request.recipient_wallet.lower()
    async with engine.begin() as conn:
        await load_user(conn, organisation_id, request.user_id)
        funding = request.funding_wallet or await store.default_funding_wallet(conn, organisation_id)
        if not funding:
            raise Unprocessable("no funding_wallet given and the organisation has no default one",
                                {"funding_wallet": "required"}, code="ERR_MISSING_FUNDING_WALLET")
        funding = funding.lower()
        rules.check_funding_wallet(await store.funding_wallet(conn, funding), organisation_id, network.name,
                                   to_checksum_address(funding))
        if not await store.is_connected_wallet(conn, request.user_id, network.name, recipient):
            raise Unprocessable("recipient_wallet is not an active connected wallet of this user on "
                                f"{network.name}", {"recipient_wallet": request.recipient_wallet},
                                code="ERR_RECIPIENT_NOT_CONNECTED")
        # The organisation's own spender (see contracts/src/Disbursement.sol): the funding wallet approves
        # it, and the contract pulls this organisation's intents through it only. Watching it indexes
        # the approvals given for this organisation.
        contract = spender_of(network.disbursement_contract, organisation_id).lower()  # type: ignore[arg-type]
        await add_watched_address(conn, network.name, contract, "spender",
                                  start_time=now - rules.APPROVAL_LOOKBACK)
        return await store.create_intent(conn, {
            "id": new_id("pi"), "organisation_id": organisation_id, "user_id": request.user_id,
            "amount_usd": request.amount_usd, "amount": amount, "token": request.token,
            "token_address": token.address.lower(),
            "network": network.name, "recipient_wallet": recipient, "funding_wallet": funding,
            "contract_address": contract, "metadata": request.metadata,
            "expires_at": now + timedelta(seconds=settings.disbursement.intent_ttl_s),
        }, now)


async def get_intent(engine: AsyncEngine, organisation_id: str, intent_id: str) -> Row[Any]:
    async with engine.connect() as conn:
        row = await store.load_intent(conn, intent_id, organisation_id=organisation_id)
    if row is None:
        raise NotFound(f"no payment intent {intent_id}", {"payment_intent_id": intent_id})
    return row


async def create_charge(engine: AsyncEngine, clock: Clock, settings: Settings,
                        executor: ChargeExecutor | None, *, organisation_id: str, intent_id: str,
                        approval_tx_hash: str) -> tuple[Row[Any], Row[Any]]:
    """Charge a confirmed intent once (see the module docstring), run the charge for up to
    `charge_wait_s`, and return it (pending if its transaction is not mined yet) with its intent."""
    now = await clock.now()
    approval = approval_tx_hash.lower()
    try:
        async with engine.begin() as conn:
            # The intent's row lock serialises every charge request for it: one wins, the rest see it.
            intent = await store.load_intent(conn, intent_id, organisation_id=organisation_id, lock=True)
            if intent is None:
                raise NotFound(f"no payment intent {intent_id}", {"payment_intent_id": intent_id})
            rules.check_chargeable(intent, await store.charge_of_intent(conn, intent.id), now)
            if not await _is_intent_approval(conn, intent, approval):
                raise rules.approval_not_confirmed(
                    "approval_tx_hash is not a confirmed approval of this payment intent",
                    {"approval_tx_hash": approval_tx_hash})
            if executor is None:
                raise ApiError("disbursement is not available: no operator key is configured", {},
                               code="ERR_DISBURSEMENT_UNAVAILABLE", status=503)
            charge = await store.insert_charge(conn, {
                "id": new_id("ch"), "organisation_id": organisation_id, "payment_intent_id": intent.id,
                "network": intent.network, "approval_tx_hash": approval, "created_at": now,
            }, settings.disbursement.lease_s)
    except IntegrityError as exc:  # unreachable while the row lock holds; the unique column is the backstop
        raise Conflict("this payment intent has already been charged",
                       {"payment_intent_id": intent_id}, code="ERR_ALREADY_CHARGED") from exc
    await _execute(engine, executor, charge.id, settings.disbursement)
    async with engine.connect() as conn:
        charge = await store.load_charge(conn, charge.id)
        return charge, await store.load_intent(conn, charge.payment_intent_id)


async def _is_intent_approval(conn: AsyncConnection, intent: Row[Any], tx_hash: str) -> bool:
    """The confirming approval, or any indexed Approval of the same owner, spender and token."""
    return tx_hash == intent.approval_tx_hash or await store.is_indexed_approval(conn, intent, tx_hash)


async def _execute(engine: AsyncEngine, executor: ChargeExecutor, charge_id: str,
                   config: DisbursementConfig) -> None:
    """Run the charge now, within the request; whatever happens, hand it to the daemon afterwards.
    Shielded: a client that hangs up does not cut a charge off between signing and recording."""
    async def run() -> None:
        try:
            await executor.advance(charge_id, config.charge_wait_s)
        except Exception:
            log.exception("charge execution failed in the request; the daemon will finish it",
                          charge_id=charge_id)
        finally:
            async with engine.begin() as conn:
                await store.release_charge(conn, charge_id, config.poll_interval_s)

    await asyncio.shield(asyncio.ensure_future(run()))


async def get_charge(engine: AsyncEngine, organisation_id: str, charge_id: str) -> tuple[Row[Any], Row[Any]]:
    """The charge with its intent."""
    async with engine.connect() as conn:
        charge = await store.load_charge(conn, charge_id, organisation_id=organisation_id)
        if charge is None:
            raise NotFound(f"no charge {charge_id}", {"charge_id": charge_id})
        return charge, await store.load_intent(conn, charge.payment_intent_id)


@asynccontextmanager
async def charge_executor(settings: Settings, engine: AsyncEngine,
                          clock: Clock) -> AsyncIterator[ChargeExecutor | None]:
    """The executor of the API's charges (operator key, one RPC client per disbursing network), or None
    when no operator key is set (then creating a charge answers 503)."""
    networks = [n for n in settings.enabled_networks() if n.disbursement_contract]
    rpcs = {n.name: RpcClient(n.name, n.rpc_url, settings.rpc) for n in networks}  # type: ignore[arg-type]
    executor = None
    try:
        operator = load_operator(settings.disbursement)
    except OperatorKeyMissing as exc:
        if networks:
            log.warning("POST /v1/charges answers 503", reason=str(exc))
    else:
        if networks:
            executor = ChargeExecutor(settings, engine, rpcs, operator, clock)
    try:
        yield executor
    finally:
        for rpc in rpcs.values():
            await rpc.close()
