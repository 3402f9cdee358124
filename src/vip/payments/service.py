"""Payment operations of the API, one function each: create and read an intent, create (and await)
and read a charge. The API holds no operator key and never signs: a charge is recorded here, pending
and due, and executed by a daemon (`worker.ChargeCompleter`, the only executor); the request waits up
to `charge_wait_s` for the daemon to settle it.

Exactly once: this module and the daemon's claim own the guarantee that an intent is paid at most once,
whatever the clients, processes and crashes do. It rests on three locks, each closing what the one
before leaves open:
1. One charge per intent. `create_charge` takes the intent's row lock (FOR UPDATE), so concurrent
   requests for one intent run one at a time and every later one sees the first one's charge and is
   refused (409 ERR_ALREADY_CHARGED); the unique column `charges.payment_intent_id` is the backstop.
2. One executor per charge at a time. Only daemons execute charges, each after taking the charge's lease
   (`store.claim_due_charges`: FOR UPDATE SKIP LOCKED, then a lease on the database clock; a daemon
   claims only the charges of the networks it has with its operator key); each pass
   (`charges.ChargeExecutor`) finds every transaction recorded before it was sent (`disburser.Disburser`),
   so a daemon that takes over a lapsed lease continues the dead one's transaction, never a new one.
3. The contract. disburse() pulls through the intent's organisation's spender only (an approval given
   for another organisation moves nothing), and refuses an intent id it has paid; the id is derived
   from the intent (`rules.chain_intent_id`), so every retry of every process names the same intent,
   and a refusal for that reason settles the charge from the contract's Disbursed log instead of paying again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import structlog
from eth_utils import to_checksum_address
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts.users import load_user
from vip.chain.clients import RpcClients
from vip.chain.contracts import spender_of
from vip.chain.rpc import RpcError
from vip.chain.token_reads import allowance_at, mined_approval
from vip.clock import Clock
from vip.config import NetworkConfig, Settings
from vip.errors import ERROR_TEXT_LIMIT, ApiError, Conflict, NotFound, Unprocessable
from vip.ids import new_id
from vip.indexer.store import add_watched_address
from vip.payments import ledger, rules, store
from vip.payments.records import Charge, PaymentIntent
from vip.store.idempotency import IdempotencyClaim, record_resource

log = structlog.get_logger(__name__)

SETTLE_POLL_FIRST_S = 0.05
SETTLE_POLL_MAX_S = 0.5


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


async def create_intent(engine: AsyncEngine, clock: Clock, settings: Settings, rpcs: RpcClients, *,
                        organisation_id: str, request: IntentRequest,
                        idempotency: IdempotencyClaim | None = None) -> PaymentIntent:
    """A new intent waiting for its approval; the network's approvals are indexed from now on (recorded
    under the request's Idempotency-Key in the same transaction).

    Its approval instructions ask for the total allowance the funding wallet must give the spender: every
    open intent of the same wallet, token and spender, plus this one (vip.payments.ledger), so that
    following them never lowers another intent's cover. The node is asked first (USDT: is the allowance
    zero now?), then the transaction locks the wallet and the allowance and checks everything again."""
    network = rules.disbursement_network(settings, request.network, request.token)
    rules.check_amount(request.amount_usd, settings.disbursement.max_amount_usd)
    token = network.tokens[request.token]
    amount = rules.usd_to_base_units(request.amount_usd, token.decimals)
    now = await clock.now()
    recipient = request.recipient_wallet.lower()
    async with engine.connect() as conn:
        await load_user(conn, organisation_id, request.user_id)
        default = None if request.funding_wallet else await store.default_funding_wallet(conn,
                                                                                          organisation_id)
        funding = (request.funding_wallet or default or "").lower()
        if funding:
            await _check_intent_parties(conn, organisation_id, network, request, funding, recipient)
    if not funding:
        raise Unprocessable("no funding_wallet given and the organisation has no default one",
                            {"funding_wallet": "required"}, code="ERR_MISSING_FUNDING_WALLET")
    # The organisation's own spender (see contracts/src/Disbursement.sol): the funding wallet approves it,
    # and the contract pulls this organisation's intents through it only.
    contract = spender_of(rules.contract_of(network), organisation_id).lower()
    created_block = await _latest_block(rpcs, network)
    reset = (request.token == "USDT"
             and await _allowance_not_zero(rpcs, network, token.address, funding, contract))
    allowance = rules.Allowance(network.name, token.address.lower(), funding, contract)
    async with engine.begin() as conn:
        # Checked again under the wallet's share lock (a removal waits for this transaction).
        await load_user(conn, organisation_id, request.user_id)
        await _check_intent_parties(conn, organisation_id, network, request, funding, recipient)
        # Watching the spender indexes the approvals given for this organisation.
        await add_watched_address(conn, network.name, contract, "spender",
                                  start_time=now - rules.APPROVAL_LOOKBACK)
        # Under the allowance's lock, so two intents created together each count the other.
        await ledger.lock(conn, allowance)
        total = amount + await ledger.open_total(conn, allowance, now)
        intent = await store.create_intent(conn, {
            "id": new_id("pi"), "organisation_id": organisation_id, "user_id": request.user_id,
            "amount_usd": request.amount_usd, "amount": amount, "token": request.token,
            "token_address": allowance.token,
            "network": network.name, "recipient_wallet": recipient, "funding_wallet": funding,
            "contract_address": contract, "metadata": request.metadata,
            "expires_at": now + timedelta(seconds=settings.disbursement.intent_ttl_s),
            "approval_reset_required": reset, "approval_amount": total, "created_block": created_block,
        }, now)
        await record_resource(conn, idempotency, intent.id)
        return intent


async def _check_intent_parties(conn: AsyncConnection, organisation_id: str, network: NetworkConfig,
                                request: IntentRequest, funding: str, recipient: str) -> None:
    """The funding wallet is registered to the organisation (share-locked until the transaction ends) and
    the recipient is an active connected wallet of the user on the network."""
    rules.check_funding_wallet(await store.funding_wallet(conn, funding), organisation_id, network.name,
                               to_checksum_address(funding))
    if not await store.is_connected_wallet(conn, request.user_id, network.name, recipient):
        raise Unprocessable("recipient_wallet is not an active connected wallet of this user on "
                            f"{network.name}", {"recipient_wallet": request.recipient_wallet},
                            code="ERR_RECIPIENT_NOT_CONNECTED")


async def _latest_block(rpcs: RpcClients, network: NetworkConfig) -> int | None:
    """The node's latest block as the intent is created (an approval mined above it came after the
    intent); None when the node does not answer (confirmation then compares block times instead)."""
    rpc = rpcs.of(network)
    if rpc is None:
        return None
    try:
        return await rpc.block_number()
    except RpcError as exc:
        log.warning("latest block unreadable", network=network.name, error=exc.message[:ERROR_TEXT_LIMIT])
        return None


async def _allowance_not_zero(rpcs: RpcClients, network: NetworkConfig, token: str, owner: str,
                              spender: str) -> bool:
    """Whether the funding wallet's allowance to the spender is not zero now (USDT then refuses a new
    non-zero approve until it is set to 0). A node that does not answer counts as "not zero": an extra
    approve(0) is harmless, a refused approve is not."""
    rpc = rpcs.of(network)
    if rpc is None:
        return True
    try:
        return await allowance_at(rpc, token, owner, spender, "latest") != 0
    except RpcError as exc:
        log.warning("allowance unreadable; the approval instructions ask for approve(0) first",
                    network=network.name, funding_wallet=owner, error=exc.message[:ERROR_TEXT_LIMIT])
        return True


async def get_intent(engine: AsyncEngine, organisation_id: str, intent_id: str) -> PaymentIntent:
    async with engine.connect() as conn:
        row = await store.load_intent(conn, intent_id, organisation_id=organisation_id)
    if row is None:
        raise NotFound(f"no payment intent {intent_id}", {"payment_intent_id": intent_id})
    return row


async def create_charge(engine: AsyncEngine, clock: Clock, settings: Settings, rpcs: RpcClients, *,
                        organisation_id: str, intent_id: str, approval_tx_hash: str,
                        idempotency: IdempotencyClaim | None = None) -> tuple[Charge, PaymentIntent]:
    """Charge a confirmed intent once (see the module docstring): record the charge for the daemon (and,
    in the same transaction, under the request's Idempotency-Key), wait up to `charge_wait_s` for it to
    settle, and return it (pending if it has not) with its intent."""
    now = await clock.now()
    approval = approval_tx_hash.lower()
    config = settings.disbursement
    mined = await _mined_approval(engine, rpcs, settings, organisation_id, intent_id, approval)
    try:
        async with engine.begin() as conn:
            # The intent's row lock serialises every charge request for it: one wins, the rest see it.
            intent = await store.load_intent(conn, intent_id, organisation_id=organisation_id, lock=True)
            if intent is None:
                raise NotFound(f"no payment intent {intent_id}", {"payment_intent_id": intent_id})
            rules.check_chargeable(intent, await store.charge_of_intent(conn, intent.id), now,
                                   intent.status == rules.PENDING_APPROVAL
                                   and await store.approved_in_time(conn, intent.id))
            if not mined and not await _is_intent_approval(conn, intent, approval):
                raise rules.approval_not_confirmed(
                    "approval_tx_hash is not an approval of this payment intent's funding wallet to its "
                    "spender for its token", {"approval_tx_hash": approval_tx_hash})
            if await store.live_executor(conn, intent.network, config.executor_stale_s) is None:
                raise ApiError(f"disbursement is not available on {intent.network}: no daemon with the "
                               "operator key is running", {"network": intent.network},
                               code="ERR_DISBURSEMENT_UNAVAILABLE", status=503)
            charge = await store.insert_charge(conn, {
                "id": new_id("ch"), "organisation_id": organisation_id, "payment_intent_id": intent.id,
                "network": intent.network, "approval_tx_hash": approval, "created_at": now,
            })
            await record_resource(conn, idempotency, charge.id)
    except IntegrityError as exc:  # unreachable while the row lock holds; the unique column is the backstop
        raise Conflict("this payment intent has already been charged",
                       {"payment_intent_id": intent_id}, code="ERR_ALREADY_CHARGED") from exc
    await _await_settlement(engine, charge.id, config.charge_wait_s)
    async with engine.connect() as conn:
        settled = await store.existing_charge(conn, charge.id)
        return settled, await store.intent_of_charge(conn, settled)


async def _is_intent_approval(conn: AsyncConnection, intent: PaymentIntent, tx_hash: str) -> bool:
    """The confirming approval, or any indexed Approval of the same owner, spender and token."""
    return tx_hash == intent.approval_tx_hash or await store.is_indexed_approval(conn, intent, tx_hash)


async def _mined_approval(engine: AsyncEngine, rpcs: RpcClients, settings: Settings, organisation_id: str,
                          intent_id: str, tx_hash: str) -> bool:
    """Whether `tx_hash` is, on the node, a mined Approval of the intent's funding wallet to its spender for
    its token; asked only when the database does not know it as one (an approval not indexed yet, or one
    older than the indexed history that set a standing allowance). Read before any transaction opens."""
    async with engine.connect() as conn:
        intent = await store.load_intent(conn, intent_id, organisation_id=organisation_id)
        if intent is None or await _is_intent_approval(conn, intent, tx_hash):
            return False
    rpc = rpcs.of(settings.network(intent.network))
    if rpc is None:
        return False
    try:
        return await mined_approval(rpc, tx_hash, intent.token_address, intent.funding_wallet,
                                    intent.contract_address) is not None
    except RpcError as exc:
        log.warning("approval unreadable on the node", network=intent.network, approval_tx_hash=tx_hash,
                    error=exc.message[:ERROR_TEXT_LIMIT])
        return False


async def _await_settlement(engine: AsyncEngine, charge_id: str, wait_s: float) -> None:
    """Until the daemon settles the charge or `wait_s` passes. Reads the row (a primary-key lookup) at
    growing intervals, from SETTLE_POLL_FIRST_S up to SETTLE_POLL_MAX_S: a settled charge is seen within
    one interval, and a long wait costs a few queries a second."""
    deadline = time.monotonic() + wait_s
    interval = SETTLE_POLL_FIRST_S
    while True:
        async with engine.connect() as conn:
            if await store.charge_status(conn, charge_id) != rules.CHARGE_PENDING:
                return
        left = deadline - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(interval, left))
        interval = min(interval * 2, SETTLE_POLL_MAX_S)


async def recover_charge(engine: AsyncEngine, settings: Settings, organisation_id: str,
                         charge_id: str) -> tuple[Charge, PaymentIntent]:
    """The charge a request created before its answer was lost (a retry with its Idempotency-Key): waited
    for as the first request would have (up to `charge_wait_s`), then returned with its intent."""
    await get_charge(engine, organisation_id, charge_id)  # 404 for anything not the organisation's
    await _await_settlement(engine, charge_id, settings.disbursement.charge_wait_s)
    return await get_charge(engine, organisation_id, charge_id)


async def get_charge(engine: AsyncEngine, organisation_id: str,
                     charge_id: str) -> tuple[Charge, PaymentIntent]:
    """The charge with its intent."""
    async with engine.connect() as conn:
        charge = await store.load_charge(conn, charge_id, organisation_id=organisation_id)
        if charge is None:
            raise NotFound(f"no charge {charge_id}", {"charge_id": charge_id})
        return charge, await store.intent_of_charge(conn, charge)
