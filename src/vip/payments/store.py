"""Payment intents and charges in PostgreSQL: reads, state changes with their events (one transaction
each), what approval confirmation reads and locks of an allowance, the lease an executor holds on a
pending charge, and the lookups of other features' rows that intents and charges are checked against
(users' wallets, organisations' funding wallets, indexed approvals)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Interval, and_, bindparam, case, delete, exists, func, not_, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.expression import ColumnElement, Exists, Select

from vip import metrics
from vip.payments import rules
from vip.payments.records import Charge, FundingWallet, PaymentIntent, UnfinalSuccess
from vip.payments.shapes import charge_json, intent_json
from vip.store.outbox import record_event
from vip.store.sets import any_of
from vip.store.tables import (
    charge_executors,
    charges,
    connections,
    disbursement_transactions,
    funding_wallets,
    organisations,
    payment_intents,
    token_approvals,
)

CHARGE_DUE_CHANNEL = "vip_charge_due"  # payload: the charge id; sent at the commit of a new charge


# --- reads ---------------------------------------------------------------------------------------------

async def load_intent(conn: AsyncConnection, intent_id: str, *, organisation_id: str | None = None,
                      lock: bool = False) -> PaymentIntent | None:
    query = select(payment_intents).where(payment_intents.c.id == intent_id)
    if organisation_id is not None:
        query = query.where(payment_intents.c.organisation_id == organisation_id)
    if lock:
        query = query.with_for_update()
    row = (await conn.execute(query)).first()
    return PaymentIntent.of(row) if row is not None else None


async def intent_of_charge(conn: AsyncConnection, charge: Charge) -> PaymentIntent:
    """The intent a charge pays (there is one: the charge's foreign key)."""
    return PaymentIntent.of((await conn.execute(select(payment_intents).where(
        payment_intents.c.id == charge.payment_intent_id))).one())


async def load_charge(conn: AsyncConnection, charge_id: str, *,
                      organisation_id: str | None = None) -> Charge | None:
    query = select(charges).where(charges.c.id == charge_id)
    if organisation_id is not None:
        query = query.where(charges.c.organisation_id == organisation_id)
    row = (await conn.execute(query)).first()
    return Charge.of(row) if row is not None else None


async def existing_charge(conn: AsyncConnection, charge_id: str) -> Charge:
    """A charge known to exist (charges are never deleted)."""
    return Charge.of((await conn.execute(select(charges).where(charges.c.id == charge_id))).one())


async def charge_of_intent(conn: AsyncConnection, intent_id: str) -> Charge | None:
    row = (await conn.execute(select(charges).where(charges.c.payment_intent_id == intent_id))).first()
    return Charge.of(row) if row is not None else None


# --- what an intent or a charge is checked against -----------------------------------------------------

async def default_funding_wallet(conn: AsyncConnection, organisation_id: str) -> str | None:
    return await conn.scalar(select(organisations.c.default_funding_wallet)
                             .where(organisations.c.id == organisation_id))


async def funding_wallet(conn: AsyncConnection, address: str) -> FundingWallet | None:
    """The registration of a funding wallet (lowercase address), or None; share-locked until the
    transaction ends, so the wallet cannot be removed under an intent being created with it."""
    row = (await conn.execute(select(funding_wallets).where(funding_wallets.c.address == address)
                              .with_for_update(read=True))).first()
    return FundingWallet.of(row) if row is not None else None


async def is_connected_wallet(conn: AsyncConnection, user_id: str, network: str, address: str) -> bool:
    """Whether `address` (lowercase) is an active wallet connection of the user on the network."""
    found = await conn.scalar(select(connections.c.id).where(
        connections.c.user_id == user_id, connections.c.type == "wallet", connections.c.status == "active",
        connections.c.network == network, connections.c.identifier == address))
    return found is not None


async def is_indexed_approval(conn: AsyncConnection, intent: PaymentIntent, tx_hash: str) -> bool:
    """Whether `tx_hash` (lowercase) holds an indexed Approval of the intent's funding wallet to its
    contract for its token."""
    found = await conn.scalar(select(token_approvals.c.tx_hash).where(
        token_approvals.c.network == intent.network, token_approvals.c.tx_hash == tx_hash,
        token_approvals.c.token_address == intent.token_address,
        token_approvals.c.owner_address == intent.funding_wallet,
        token_approvals.c.spender_address == intent.contract_address).limit(1))
    return found is not None


# --- approvals mined in time: they keep an intent alive past `expires_at` until they are final ---------

def _approval_in_time(above_block: int | None = None) -> Exists:
    """EXISTS an indexed Approval of the intent's funding wallet to its spender for its token, of at least
    its amount, mined before its `expires_at` (and, given `above_block`, not final yet)."""
    ta = token_approvals
    conditions = [ta.c.network == payment_intents.c.network,
                  ta.c.token_address == payment_intents.c.token_address,
                  ta.c.owner_address == payment_intents.c.funding_wallet,
                  ta.c.spender_address == payment_intents.c.contract_address,
                  ta.c.block_timestamp < payment_intents.c.expires_at,
                  ta.c.amount >= payment_intents.c.amount]
    if above_block is not None:
        conditions.append(ta.c.block_number > above_block)
    return exists().where(*conditions)


def awaiting(now: datetime) -> ColumnElement[bool]:
    """A `pending_approval` intent still waits for its approval: before `expires_at`, or after it when an
    approval was mined in time (decision 167)."""
    return and_(payment_intents.c.status == rules.PENDING_APPROVAL,
                or_(payment_intents.c.expires_at > now, _approval_in_time()))


async def approved_in_time(conn: AsyncConnection, intent_id: str) -> bool:
    """Whether an Approval of the intent mined before its `expires_at` is indexed (final or not)."""
    return bool(await conn.scalar(select(_approval_in_time()).where(payment_intents.c.id == intent_id)))


# --- intents -------------------------------------------------------------------------------------------

async def create_intent(conn: AsyncConnection, values: dict[str, Any], now: datetime) -> PaymentIntent:
    row = PaymentIntent.of((await conn.execute(payment_intents.insert().values(
        **values, status=rules.PENDING_APPROVAL, chain_intent_id=rules.chain_intent_id(values["id"]),
        created_at=now, updated_at=now).returning(*payment_intents.c))).one())
    await record_event(conn, "payment_intent.created", intent_json(row), created_at=now,
                       organisation_id=row.organisation_id)
    metrics.PAYMENT_INTENTS.labels(row.network, rules.PENDING_APPROVAL).inc()
    return row


async def confirm_intents(conn: AsyncConnection, intent_ids: list[str], approval_tx_hash: str | None,
                          approval_block: int | None, approval_time: datetime | None, now: datetime) -> int:
    """Confirm waiting intents, naming the Approval whose allowance covers them (None: an allowance older
    than anything indexed). Coverage is `approval` when that Approval was mined after the intent was
    created (given for it, or for a later one: above the node's latest block at creation, or, when that
    block is unknown, in a block timed after the creation), `standing_allowance` when the allowance was
    there first."""
    coverage: Any = rules.COVERED_BY_STANDING
    if approval_block is not None and approval_time is not None:
        after = case((payment_intents.c.created_block.is_not(None),
                      payment_intents.c.created_block < approval_block),
                     else_=payment_intents.c.created_at < approval_time)
        coverage = case((after, rules.COVERED_BY_APPROVAL), else_=rules.COVERED_BY_STANDING)
    rows = [PaymentIntent.of(r) for r in await conn.execute(update(payment_intents).where(
        payment_intents.c.id.in_(intent_ids), payment_intents.c.status == rules.PENDING_APPROVAL,
    ).values(status=rules.APPROVAL_CONFIRMED, approval_tx_hash=approval_tx_hash, approval_coverage=coverage,
             approval_confirmed_at=now, updated_at=now).returning(*payment_intents.c))]
    for row in rows:
        await record_event(conn, "payment_intent.approval_confirmed", intent_json(row), created_at=now,
                           organisation_id=row.organisation_id)
        metrics.PAYMENT_INTENTS.labels(row.network, rules.APPROVAL_CONFIRMED).inc()
    return len(rows)


async def expire_due(conn: AsyncConnection, now: datetime, limit: int = 500) -> int:
    """Intents still waiting for approval at their expiry become `expired` (several daemons share it);
    not those with an approval mined in time: approval confirmation expires them once it is final and
    does not cover them (`expire_late`)."""
    due = select(payment_intents.c.id).where(
        payment_intents.c.status == rules.PENDING_APPROVAL, payment_intents.c.expires_at <= now,
        not_(_approval_in_time()),
    ).limit(limit).with_for_update(skip_locked=True)
    return await _expire(conn, due, now)


async def expire_late(conn: AsyncConnection, allowance: rules.Allowance, final: int, now: datetime) -> int:
    """The allowance's intents past `expires_at` whose approvals mined in time are all final, and which
    confirmation (just run, under the same allowance lock) did not confirm, become `expired`."""
    due = select(payment_intents.c.id).where(
        of_allowance(allowance), payment_intents.c.status == rules.PENDING_APPROVAL,
        payment_intents.c.expires_at <= now, not_(_approval_in_time(above_block=final)),
    ).with_for_update(skip_locked=True)
    return await _expire(conn, due, now)


async def _expire(conn: AsyncConnection, due: Select[str], now: datetime) -> int:
    rows = [PaymentIntent.of(r) for r in await conn.execute(
        update(payment_intents).where(payment_intents.c.id.in_(due.scalar_subquery()))
        .values(status=rules.EXPIRED, updated_at=now).returning(*payment_intents.c))]
    for row in rows:
        await record_event(conn, "payment_intent.expired", intent_json(row), created_at=now,
                           organisation_id=row.organisation_id)
        metrics.PAYMENT_INTENTS.labels(row.network, rules.EXPIRED).inc()
    return len(rows)


async def oldest_pending_approval(conn: AsyncConnection, now: datetime) -> datetime | None:
    oldest: datetime | None = await conn.scalar(select(func.min(payment_intents.c.created_at))
                                                .where(awaiting(now)))
    return oldest


# --- allowances: the condition naming one allowance's intents (vip.payments.ledger keeps the rest) ------

def of_allowance(allowance: rules.Allowance) -> ColumnElement[bool]:
    """The intents of one allowance (SQL condition)."""
    return and_(payment_intents.c.network == allowance.network,
                payment_intents.c.token_address == allowance.token,
                payment_intents.c.funding_wallet == allowance.owner,
                payment_intents.c.contract_address == allowance.spender)


# --- charges -------------------------------------------------------------------------------------------

def _db_now_plus(seconds: float) -> ColumnElement[datetime]:
    """The database's now plus a duration, bound as an interval (leases run on the database clock, which
    every API process and daemon shares)."""
    return func.now() + bindparam(None, timedelta(seconds=seconds), type_=Interval())


async def insert_charge(conn: AsyncConnection, values: dict[str, Any]) -> Charge:
    """A new pending charge, due now and leased to nobody, and the daemons' wake-up: NOTIFY is delivered
    at the commit (never for a rolled-back insert), so an idle daemon claims it at once."""
    row = Charge.of((await conn.execute(charges.insert().values(
        **values, status=rules.CHARGE_PENDING, locked_until=None, next_attempt_at=func.now(),
    ).returning(*charges.c))).one())
    await conn.execute(select(func.pg_notify(CHARGE_DUE_CHANNEL, row.id)))
    return row


async def charge_status(conn: AsyncConnection, charge_id: str) -> str | None:
    return await conn.scalar(select(charges.c.status).where(charges.c.id == charge_id))


async def claim_charge(conn: AsyncConnection, charge_id: str, lease_s: float) -> bool:
    """Take the lease of a pending charge if nobody holds it."""
    claimed = await conn.scalar(update(charges).where(
        charges.c.id == charge_id, charges.c.status == rules.CHARGE_PENDING,
        (charges.c.locked_until.is_(None)) | (charges.c.locked_until < func.now()),
    ).values(locked_until=_db_now_plus(lease_s),
             attempts=charges.c.attempts + 1).returning(charges.c.id))
    return claimed is not None


async def claim_due_charges(conn: AsyncConnection, networks: Sequence[str], lease_s: float,
                            limit: int) -> list[str]:
    """Pending charges of `networks` (those the calling daemon follows with its operator key: it can
    execute nothing else) due for another look whose lease lapsed (or never existed), leased to the
    caller."""
    due = select(charges.c.id).where(
        charges.c.status == rules.CHARGE_PENDING, any_of(charges.c.network, networks),
        charges.c.next_attempt_at <= func.now(),
        (charges.c.locked_until.is_(None)) | (charges.c.locked_until < func.now()),
    ).order_by(charges.c.next_attempt_at).limit(limit).with_for_update(skip_locked=True)
    rows = await conn.execute(update(charges).where(charges.c.id.in_(due.scalar_subquery())).values(
        locked_until=_db_now_plus(lease_s),
        attempts=charges.c.attempts + 1).returning(charges.c.id))
    return [r.id for r in rows]


async def release_charge(conn: AsyncConnection, charge_id: str, retry_in_s: float) -> None:
    await conn.execute(update(charges).where(charges.c.id == charge_id).values(
        locked_until=None, next_attempt_at=_db_now_plus(retry_in_s)))


async def finish_charge(conn: AsyncConnection, charge_id: str, *, succeeded: bool, now: datetime,
                        tx_hash: str | None, executed_at: datetime | None = None,
                        failure_code: str | None = None, failure_message: str | None = None
                        ) -> Charge | None:
    """Settle a pending charge and its intent, with the event, once. Returns the charge, or None when it
    was already settled (by another process)."""
    status = rules.SUCCEEDED if succeeded else rules.FAILED
    row = (await conn.execute(update(charges).where(
        charges.c.id == charge_id, charges.c.status == rules.CHARGE_PENDING,
    ).values(status=status, disbursement_tx_hash=tx_hash, executed_at=executed_at,
             failure_code=failure_code, failure_message=failure_message, locked_until=None,
             ).returning(*charges.c))).first()
    if row is None:
        return None
    charge = Charge.of(row)
    intent = PaymentIntent.of((await conn.execute(update(payment_intents).where(
        payment_intents.c.id == charge.payment_intent_id).values(status=status, updated_at=now)
        .returning(*payment_intents.c))).one())
    await record_event(conn, f"charge.{status}", charge_json(charge, intent), created_at=now,
                       organisation_id=charge.organisation_id)
    metrics.CHARGES.labels(charge.network, status).inc()
    metrics.PAYMENT_INTENTS.labels(intent.network, status).inc()
    return charge


async def unfinal_successes(conn: AsyncConnection, network: str, final: int,
                            limit: int = 200) -> list[UnfinalSuccess]:
    """Succeeded charges of the network paid by a transaction mined above `final`, ours or one recorded
    as `external` (charge_id, tx_hash, block_number): a reorg may still remove them, so they are
    re-checked until final."""
    dt = disbursement_transactions
    # Driven by the mined transactions above the final block (a partial index): a few rows, however many
    # charges have ever succeeded.
    rows = await conn.execute(select(charges.c.id.label("charge_id"), dt.c.tx_hash, dt.c.block_number)
                              .select_from(dt).join(charges, charges.c.id == dt.c.charge_id).where(
        dt.c.network == network, dt.c.status.in_(rules.TX_PAID_BY), dt.c.block_number > final,
        charges.c.status == rules.SUCCEEDED, charges.c.disbursement_tx_hash == dt.c.tx_hash,
    ).order_by(dt.c.block_number).limit(limit))
    return [UnfinalSuccess(r.charge_id, r.tx_hash, r.block_number) for r in rows]


async def move_mined(conn: AsyncConnection, tx_hash: str, block_number: int) -> None:
    """A reorg moved a mined transaction of ours to another block (it is still paid)."""
    await conn.execute(update(disbursement_transactions).where(
        disbursement_transactions.c.tx_hash == tx_hash).values(block_number=block_number))


async def reopen_charge(conn: AsyncConnection, charge_id: str, tx_hash: str) -> bool:
    """A reorg removed the transaction that paid a succeeded charge: the charge is `pending` again (its
    intent `approval_confirmed`), due now, and its transaction counts as broadcast from now, so the executor
    waits `drop_grace_s` for the node to mine it again, then re-sends the same intent with the same nonce
    (the contract pays an intent id once: at most once still holds). No event: the next
    `charge.succeeded` (a new transaction hash) or `charge.failed` tells the lender (decision 165). A
    transaction we did not sign becomes `external_removed`: we hold no signed bytes to send again, so
    the executor pays the intent itself (the contract still pays an intent id once; decision 211)."""
    charge = (await conn.execute(update(charges).where(
        charges.c.id == charge_id, charges.c.status == rules.SUCCEEDED,
        charges.c.disbursement_tx_hash == tx_hash,
    ).values(status=rules.CHARGE_PENDING, disbursement_tx_hash=None, executed_at=None, locked_until=None,
             next_attempt_at=func.now()).returning(*charges.c))).first()
    if charge is None:
        return False
    await conn.execute(update(payment_intents).where(payment_intents.c.id == charge.payment_intent_id)
                       .values(status=rules.APPROVAL_CONFIRMED, updated_at=func.now()))
    dt = disbursement_transactions
    await conn.execute(update(dt).where(dt.c.tx_hash == tx_hash, dt.c.status == "external")
                       .values(status="external_removed", block_number=None))
    await conn.execute(update(dt).where(dt.c.tx_hash == tx_hash, dt.c.status != "external_removed")
                       .values(status="broadcast", block_number=None, broadcast_at=func.now()))
    await conn.execute(select(func.pg_notify(CHARGE_DUE_CHANNEL, charge_id)))
    metrics.CHARGES.labels(charge.network, "reopened").inc()
    return True


async def oldest_pending_charge(conn: AsyncConnection, networks: Sequence[str]) -> datetime | None:
    oldest: datetime | None = await conn.scalar(select(func.min(charges.c.requested_at)).where(
        charges.c.status == rules.CHARGE_PENDING, any_of(charges.c.network, networks)))
    return oldest


# --- charge executors: which daemons hold the operator key, per network ------------------------------

async def beat_executor(conn: AsyncConnection, instance_id: str, networks: list[str],
                        operator_address: str) -> None:
    """This daemon executes charges on `networks` with the operator at `operator_address` (public)."""
    for network in networks:
        await conn.execute(pg_insert(charge_executors).values(
            instance_id=instance_id, network=network, operator_address=operator_address.lower(),
            started_at=func.now(), seen_at=func.now(),
        ).on_conflict_do_update(index_elements=["instance_id", "network"],
                                set_={"seen_at": func.now(), "operator_address": operator_address.lower()}))


async def forget_executor(conn: AsyncConnection, instance_id: str) -> None:
    await conn.execute(delete(charge_executors).where(charge_executors.c.instance_id == instance_id))


async def live_executor(conn: AsyncConnection, network: str, stale_s: float) -> str | None:
    """The operator address of a daemon that executed charges on `network` within `stale_s`, or None."""
    fresh = func.now() - bindparam(None, timedelta(seconds=stale_s), type_=Interval())
    return await conn.scalar(select(charge_executors.c.operator_address).where(
        charge_executors.c.network == network, charge_executors.c.seen_at > fresh,
    ).order_by(charge_executors.c.seen_at.desc()).limit(1))
