"""The allowance ledger of one (network, token, funding wallet, spender): what the database knows of
an allowance that the chain holds as one number.

An ERC-20 allowance is one number per owner and spender, set by `approve` and lowered by every
`transferFrom`; approvals do not add up. So whether an intent is covered is worked out, every pass of
approval confirmation, from three parts (docs/disbursement.md, "One allowance, several intents"):

- approved: the allowance on chain at the indexer's final block (read by the caller, outside any
  transaction), and at the latest block as a second, lowering-only check;
- reserved: what confirmed intents not yet paid hold (`approval_confirmed`, with or without a pending
  charge; a charge a reorg reopened counts again);
- consumed, not yet final: what succeeded charges pulled in blocks above the final block (the allowance
  at the final block still includes it).

Unspent = approved - reserved - consumed; waiting intents are confirmed oldest first while it covers
them (rules.confirmable). A reorg changes the chain's answer or reopens a charge, and the next pass
reads both again: nothing is carried over from a pass to the next. Also here: the total an intent's
approval instructions ask for (every open intent of the group plus the new one), and the group's lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.payments import rules
from vip.payments.records import PaymentIntent
from vip.payments.store import awaiting, of_allowance
from vip.store.tables import charges, disbursement_transactions, payment_intents, token_approvals


def allowance_of(intent: PaymentIntent) -> rules.Allowance:
    """The allowance an intent (a payment_intents row) is paid from."""
    return rules.Allowance(intent.network, intent.token_address, intent.funding_wallet,
                           intent.contract_address)


async def lock(conn: AsyncConnection, allowance: rules.Allowance) -> None:
    """Until the transaction ends, the caller is the only one confirming intents of this allowance or
    creating one (whose instructions count the others), across API processes and daemons."""
    key = f"allowance:{allowance.network}:{allowance.token}:{allowance.owner}:{allowance.spender}"
    await conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))


@dataclass(frozen=True)
class Approval:
    """The indexed Approval that set the allowance at a block."""

    tx_hash: str
    block_number: int
    block_timestamp: datetime
    amount: int


@dataclass(frozen=True)
class Book:
    """The database's side of the ledger at a final block."""

    reserved: int  # base units held by confirmed intents not yet paid
    consumed_unfinal: int  # base units pulled by succeeded charges mined above the final block
    approval: Approval | None  # the last indexed Approval at or below the final block


async def reserved(conn: AsyncConnection, allowance: rules.Allowance) -> int:
    """Base units the allowance's confirmed intents hold until they are paid (a pending charge's
    included: its pull has not happened, or is not recorded yet)."""
    return int(await conn.scalar(select(func.coalesce(func.sum(payment_intents.c.amount), 0)).where(
        of_allowance(allowance), payment_intents.c.status == rules.APPROVAL_CONFIRMED)) or 0)


async def consumed_above(conn: AsyncConnection, allowance: rules.Allowance, final: int) -> int:
    """Base units the allowance's succeeded charges pulled in transactions mined above `final`: not yet
    taken off the allowance read at `final`. Driven by the mined transactions above it (a partial index),
    a few rows however many charges were ever paid."""
    dt = disbursement_transactions
    return int(await conn.scalar(
        select(func.coalesce(func.sum(payment_intents.c.amount), 0)).select_from(dt)
        .join(charges, charges.c.disbursement_tx_hash == dt.c.tx_hash)
        .join(payment_intents, payment_intents.c.id == charges.c.payment_intent_id).where(
            dt.c.network == allowance.network, dt.c.status.in_(rules.TX_PAID_BY), dt.c.block_number > final,
            charges.c.status == rules.SUCCEEDED, of_allowance(allowance))) or 0)


async def last_approval(conn: AsyncConnection, allowance: rules.Allowance,
                        up_to_block: int) -> Approval | None:
    """The last indexed Approval of the allowance in or before `up_to_block`: the one whose allowance is
    left at that block."""
    ta = token_approvals
    columns = (ta.c.tx_hash, ta.c.block_number, ta.c.block_timestamp, ta.c.amount)
    row = (await conn.execute(select(*columns).where(
        ta.c.network == allowance.network, ta.c.token_address == allowance.token,
        ta.c.owner_address == allowance.owner, ta.c.spender_address == allowance.spender,
        ta.c.block_number <= up_to_block,
    ).order_by(ta.c.block_number.desc(), ta.c.log_index.desc()).limit(1))).first()
    if row is None:
        return None
    return Approval(row.tx_hash, row.block_number, row.block_timestamp, int(row.amount))


async def book(conn: AsyncConnection, allowance: rules.Allowance, final: int) -> Book:
    return Book(await reserved(conn, allowance), await consumed_above(conn, allowance, final),
                await last_approval(conn, allowance, final))


async def waiting(conn: AsyncConnection, allowance: rules.Allowance,
                  now: datetime) -> list[rules.Reservation]:
    """The allowance's intents still waiting for approval, oldest first."""
    rows = await conn.execute(select(payment_intents.c.id, payment_intents.c.amount,
                                     payment_intents.c.organisation_id).where(
        of_allowance(allowance), awaiting(now)).order_by(payment_intents.c.seq))
    return [rules.Reservation(r.id, int(r.amount), r.organisation_id) for r in rows]


async def open_total(conn: AsyncConnection, allowance: rules.Allowance, now: datetime) -> int:
    """Base units every open intent of the allowance still needs from it: those waiting for approval and
    those confirmed and not yet paid. A new intent's instructions ask for this plus its own amount, so
    following them never leaves an earlier intent without cover."""
    return int(await conn.scalar(select(func.coalesce(func.sum(payment_intents.c.amount), 0)).where(
        of_allowance(allowance),
        or_(payment_intents.c.status == rules.APPROVAL_CONFIRMED, awaiting(now)))) or 0)


async def awaited(conn: AsyncConnection, network: str, now: datetime) -> list[rules.Allowance]:
    """The allowances that intents of the network still wait for."""
    rows = await conn.execute(select(
        payment_intents.c.token_address, payment_intents.c.funding_wallet, payment_intents.c.contract_address,
    ).where(payment_intents.c.network == network, awaiting(now)).distinct())
    return [rules.Allowance(network, r.token_address, r.funding_wallet, r.contract_address) for r in rows]


async def reset_awaited(conn: AsyncConnection, allowance: rules.Allowance, other_than: str,
                        now: datetime) -> bool:
    """Whether another intent of the allowance whose instructions begin with approve(0) (USDT) still
    waits for its approval: a reset to 0 seen on chain is then that intent's first step."""
    found = await conn.scalar(select(payment_intents.c.id).where(
        of_allowance(allowance), payment_intents.c.id != other_than,
        payment_intents.c.approval_reset_required.is_(True), awaiting(now)).limit(1))
    return found is not None
