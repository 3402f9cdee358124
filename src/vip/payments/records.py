"""The typed records of disbursement's rows: payment intents, charges, funding wallets and the succeeded
charges re-checked until final. Built from the rows vip.payments.store and vip.payments.funding read,
so that the API's routes, the daemon's jobs and the dashboard read named, typed fields."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Row


@dataclass(frozen=True)
class PaymentIntent:
    """A row of `payment_intents` (vip.store.tables says what each column holds)."""

    id: str
    organisation_id: str
    user_id: str
    status: str  # pending_approval | approval_confirmed | expired | succeeded | failed
    amount_usd: Decimal
    amount: int  # token base units
    token: str
    token_address: str  # lower-case
    network: str
    recipient_wallet: str  # lower-case
    funding_wallet: str  # lower-case
    contract_address: str  # lower-case; the organisation's spender
    chain_intent_id: str
    metadata: dict[str, Any]
    expires_at: datetime
    created_at: datetime
    approval_tx_hash: str | None
    approval_confirmed_at: datetime | None
    updated_at: datetime
    approval_reset_required: bool
    seq: int
    approval_amount: int | None  # None on rows older than migration 0019: the intent's own amount
    approval_coverage: str | None  # approval | standing_allowance, once confirmed
    created_block: int | None

    @classmethod
    def of(cls, row: Row[Any]) -> PaymentIntent:
        return cls(
            id=row.id, organisation_id=row.organisation_id, user_id=row.user_id, status=row.status,
            amount_usd=row.amount_usd, amount=int(row.amount), token=row.token,
            token_address=row.token_address,
            network=row.network, recipient_wallet=row.recipient_wallet, funding_wallet=row.funding_wallet,
            contract_address=row.contract_address, chain_intent_id=row.chain_intent_id, metadata=row.metadata,
            expires_at=row.expires_at, created_at=row.created_at, approval_tx_hash=row.approval_tx_hash,
            approval_confirmed_at=row.approval_confirmed_at, updated_at=row.updated_at,
            approval_reset_required=row.approval_reset_required, seq=row.seq,
            approval_amount=None if row.approval_amount is None else int(row.approval_amount),
            approval_coverage=row.approval_coverage, created_block=row.created_block)


@dataclass(frozen=True)
class Charge:
    """A row of `charges`."""

    id: str
    organisation_id: str
    payment_intent_id: str
    status: str  # pending | succeeded | failed
    network: str
    approval_tx_hash: str
    disbursement_tx_hash: str | None
    failure_code: str | None
    failure_message: str | None
    created_at: datetime
    requested_at: datetime  # wall clock
    executed_at: datetime | None
    locked_until: datetime | None  # the executing daemon's lease (database clock)
    next_attempt_at: datetime
    attempts: int

    @classmethod
    def of(cls, row: Row[Any]) -> Charge:
        return cls(
            id=row.id, organisation_id=row.organisation_id, payment_intent_id=row.payment_intent_id,
            status=row.status, network=row.network, approval_tx_hash=row.approval_tx_hash,
            disbursement_tx_hash=row.disbursement_tx_hash, failure_code=row.failure_code,
            failure_message=row.failure_message, created_at=row.created_at, requested_at=row.requested_at,
            executed_at=row.executed_at, locked_until=row.locked_until, next_attempt_at=row.next_attempt_at,
            attempts=row.attempts)


@dataclass(frozen=True)
class FundingWallet:
    """A row of `funding_wallets`: a lender's treasury registered to one organisation."""

    address: str  # lower-case
    organisation_id: str
    network: str  # where the proof was checked
    kind: str  # eoa | contract
    registered_at: datetime

    @classmethod
    def of(cls, row: Row[Any]) -> FundingWallet:
        return cls(address=row.address, organisation_id=row.organisation_id, network=row.network,
                   kind=row.kind, registered_at=row.registered_at)


@dataclass(frozen=True)
class UnfinalSuccess:
    """A succeeded charge whose paying transaction is mined above the final block (a reorg may remove it)."""

    charge_id: str
    tx_hash: str
    block_number: int
