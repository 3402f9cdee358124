"""Pure rules of payment intents and charges: where and how much an intent may disburse, amounts in base
units, the on-chain intent id, which intents one allowance may confirm, and when an intent may be
charged. No I/O."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from eth_utils import keccak

from vip.config import NetworkConfig, Settings
from vip.errors import ApiError, Conflict, Unprocessable, ValidationFailed
from vip.formats import iso
from vip.payments.records import Charge, FundingWallet, PaymentIntent

USD_DECIMALS = 6
# Approvals given before the intent (a standing allowance) are found if they are at most this old.
APPROVAL_LOOKBACK = timedelta(days=7)

# Intent statuses (DESIGN: the expired status is `expired`; after a charge `succeeded` or `failed`).
PENDING_APPROVAL = "pending_approval"
APPROVAL_CONFIRMED = "approval_confirmed"
EXPIRED = "expired"
SUCCEEDED = "succeeded"
FAILED = "failed"
# How a confirmed intent is covered (`approval_coverage`): by an Approval mined after it was created, or by
# an allowance that stood before it (decision 215).
COVERED_BY_APPROVAL = "approval"
COVERED_BY_STANDING = "standing_allowance"
# Charge statuses.
CHARGE_PENDING = "pending"
# Disbursement transaction statuses that paid the charge on the chain as last seen (ours, or one we did not
# sign: another tool holding the operator key), and those of transactions we did not sign, which are never
# an attempt of ours to send, replace or hold a nonce for (decision 211).
TX_PAID_BY = ("mined", "external")
TX_EXTERNAL = ("external", "external_removed")


def disbursement_network(settings: Settings, name: str, token: str) -> NetworkConfig:
    """The enabled network with a disbursement contract that an intent names, if it carries `token`."""
    network = settings.networks.get(name)
    usable = [n.name for n in settings.enabled_networks() if n.disbursement_contract]
    if network is None or not network.enabled or not network.disbursement_contract:
        raise ValidationFailed(f"network {name} does not disburse",
                               {"network": f"one of: {', '.join(usable) or '(none configured)'}"})
    if token not in network.tokens:
        raise ValidationFailed(f"{token} is not supported on {name}",
                               {"token": f"one of: {', '.join(sorted(network.tokens))}"})
    return network


def contract_of(network: NetworkConfig) -> str:
    """The network's disbursement contract: intents and charges exist only on networks that have one
    (`disbursement_network`, the daemon's payment tasks)."""
    if not network.disbursement_contract:
        raise ValueError(f"network {network.name} has no disbursement contract")
    return network.disbursement_contract


def check_amount(amount_usd: Decimal, maximum_usd: Decimal) -> None:
    """An intent disburses at most the configured maximum."""
    if amount_usd > maximum_usd:
        raise ValidationFailed("amount_usd is above the maximum of a payment intent", {
            "amount_usd": f"at most {maximum_usd}"})


def usd_to_base_units(amount_usd: Decimal, decimals: int) -> int:
    """A USD amount (at most 6 decimals; the stablecoins are 1:1) as token base units, exactly."""
    scaled = amount_usd.scaleb(decimals)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{amount_usd} has more decimals than the token's {decimals}")
    return int(scaled)


def chain_intent_id(intent_id: str) -> str:
    """The bytes32 the contract remembers for an intent: keccak256 of the intent's id, 0x hex. Derived,
    never random, so every retry of every process names the same intent to the contract."""
    return "0x" + keccak(text=intent_id).hex()


@dataclass(frozen=True)
class Allowance:
    """What one funding wallet (owner) lets one disbursement contract (spender) take of one token."""

    network: str
    token: str  # addresses lowercase
    owner: str
    spender: str


@dataclass(frozen=True)
class Reservation:
    intent_id: str
    amount: int  # base units
    organisation_id: str = ""


def check_funding_wallet(registration: FundingWallet | None, organisation_id: str, network: str,
                         address: str) -> None:
    """An intent may name only a funding wallet registered to its own organisation (a contract wallet:
    registered on the intent's network, where its proof was checked). The refusal does not say whether
    the wallet belongs to someone else."""
    if (registration is None or registration.organisation_id != organisation_id
            or (registration.kind == "contract" and registration.network != network)):
        raise Unprocessable("funding_wallet is not a registered funding wallet of this organisation; "
                            "register it first (POST /v1/funding-wallets/nonce, then POST "
                            "/v1/funding-wallets)", {"funding_wallet": address},
                            code="ERR_FUNDING_WALLET_NOT_REGISTERED")


def of_organisation(waiting: Sequence[Reservation], spender: str,
                    spender_of_organisation: Callable[[str], str]) -> list[Reservation]:
    """The waiting intents an Approval to `spender` may confirm: only those of the organisation whose
    spender it is, whatever else the rows say."""
    return [r for r in waiting if spender_of_organisation(r.organisation_id).lower() == spender.lower()]


def unspent(approved_final: int, approved_now: int, reserved: int, consumed_unfinal: int) -> int:
    """What an allowance can still cover (the allowance ledger, vip.payments.ledger): the allowance at the
    final block less what confirmed intents hold and what charges mined above that block pulled; and no
    more than the allowance now less what confirmed intents hold, so that a lowering (a revocation, the
    approve(0) of a USDT reset) counts at once while a raising counts only once final. Never negative."""
    return max(0, min(approved_final - reserved - consumed_unfinal, approved_now - reserved))


def confirmable(allowance: int, reserved: int, waiting: Sequence[Reservation]) -> list[str]:
    """The waiting intents (oldest first) that an allowance confirms.

    `reserved` is what already-confirmed, not yet paid intents of the same funding wallet, token and
    contract hold. Each waiting intent is confirmed when what is left covers it in full, so one
    allowance never confirms more than it can pay; an intent too large to fit does not block a smaller,
    younger one.
    """
    left = allowance - reserved
    chosen = []
    for item in waiting:
        if 0 < item.amount <= left:
            chosen.append(item.intent_id)
            left -= item.amount
    return chosen


def check_chargeable(intent: PaymentIntent, charge: Charge | None, now: datetime,
                     approved_in_time: bool = False) -> None:
    """Refuse a charge of an intent (a payment_intents row) that is already charged (`charge`: its
    charge row, if any), expired, or whose approval is not confirmed yet. Past `expires_at`, an intent with
    an approval mined in time (`approved_in_time`) is not expired: it waits for that approval's finality."""
    if charge is not None or intent.status in (SUCCEEDED, FAILED):
        raise Conflict("this payment intent has already been charged", {
            "payment_intent_id": intent.id, "charge_id": charge.id if charge else None},
            code="ERR_ALREADY_CHARGED")
    if intent.status == EXPIRED or (intent.status == PENDING_APPROVAL and intent.expires_at <= now
                                       and not approved_in_time):
        raise ApiError("the payment intent expired before its approval; create a new one",
                       {"payment_intent_id": intent.id, "expires_at": iso(intent.expires_at)},
                       code="ERR_PAYMENT_INTENT_EXPIRED", status=410)
    if intent.status != APPROVAL_CONFIRMED:
        raise approval_not_confirmed("the approval of this payment intent is not confirmed on-chain yet",
                                     {"payment_intent_id": intent.id, "status": intent.status})


def approval_not_confirmed(message: str, details: dict[str, Any]) -> ApiError:
    return Unprocessable(message, details, code="ERR_APPROVAL_NOT_CONFIRMED")
