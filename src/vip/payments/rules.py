"""Pure rules of payment intents: amounts in base units, the on-chain intent id, and which intents one
allowance may confirm. No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from eth_utils import keccak

USD_DECIMALS = 6

# Intent statuses (DESIGN: the expired status is `expired`; after a charge `succeeded` or `failed`).
PENDING_APPROVAL = "pending_approval"
APPROVAL_CONFIRMED = "approval_confirmed"
EXPIRED = "expired"
SUCCEEDED = "succeeded"
FAILED = "failed"
# Charge statuses.
CHARGE_PENDING = "pending"


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
class Reservation:
    intent_id: str
    amount: int  # base units


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
