"""What the borrower pages show, gathered through the feature services and queries the API answers with,
always within one organisation (another organisation's borrower is not found, as in the API).

Read-only: nothing here writes. The API computes and stores a risk score on its first read (with the
event `risk_score.generated`); a page looked at by an analyst must not fire a lender's webhook, so a VIP
not scored yet is scored here by the same pure function without storing it, and shown as a preview
(decision 203).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import Row, desc, func, or_, select, true, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts.users import load_user
from vip.config import Settings
from vip.connections import store as connection_store
from vip.connections.resource import connection_json
from vip.dashboard.borrower_summary import FlagGroup, Summary, group_flags, summarise
from vip.dashboard.income_chart import income_chart_svg, period_rows
from vip.formats import checksummed, iso, token_units
from vip.payments.records import Charge, PaymentIntent
from vip.payments.shapes import charge_json, intent_json
from vip.reports import risk_scores, vip_reports
from vip.store.tables import charges, payment_intents, token_transfers, users, wallets
from vip.store.tables import vip_reports as vip_reports_table
from vip.transactions.query import Filters, active_wallets, transactions_json
from vip.transactions.service import transactions_page
from vip.verification.scoring import risk_score

RECENT_BORROWERS = 50
INTENTS_SHOWN = 50


@dataclass(frozen=True)
class BorrowerSummary:
    """A line of the borrowers list."""

    id: str
    external_id: str | None
    created_at: str | None
    vip_status: str | None
    verified_monthly_income_usd: Decimal | None


@dataclass(frozen=True)
class FlagView:
    """A fraud flag of the VIP with the transactions behind it: the flagged transfer as indexed, and the
    funding trace's path back to the user's own money (when the trace found it)."""

    flag: dict[str, Any]
    transfer: dict[str, Any] | None  # None when the indexer no longer holds it (a reorg removed it)
    path: list[dict[str, Any]]


@dataclass(frozen=True)
class RiskView:
    score: dict[str, Any]
    stored: bool  # False: a preview of the score the API will store on its first read


@dataclass
class BorrowerView:
    user: Row[Any]
    connections: list[dict[str, Any]]
    wallets: list[dict[str, Any]]  # active wallets, for the transaction filter
    vip: dict[str, Any] | None = None
    vip_chart: str | None = None
    vip_rows: list[dict[str, Any]] = field(default_factory=list)
    flags: list[FlagView] = field(default_factory=list)
    risk: RiskView | None = None
    risk_problem: str | None = None  # why there is no score (no VIP, pending, unverified...)
    intents: list[dict[str, Any]] = field(default_factory=list)
    flag_groups: list[FlagGroup] = field(default_factory=list)  # the flags as round trips, with totals
    summary: Summary | None = None  # what the page opens with


# --- finding borrowers -------------------------------------------------------------------------------------

async def find_borrower(engine: AsyncEngine, organisation_id: str, wanted: str) -> str | None:
    """The id of the organisation's user whose id or external_id is `wanted` (an id first), else None."""
    wanted = wanted.strip()
    if not wanted:
        return None
    async with engine.connect() as conn:
        rows = (await conn.execute(select(users.c.id, users.c.external_id).where(
            users.c.organisation_id == organisation_id,
            or_(users.c.id == wanted, users.c.external_id == wanted)))).all()
    by_id = [r.id for r in rows if r.id == wanted]
    return by_id[0] if by_id else (rows[0].id if rows else None)


async def recent_borrowers(engine: AsyncEngine, organisation_id: str,
                           limit: int = RECENT_BORROWERS) -> list[BorrowerSummary]:
    """The organisation's newest users, each with its latest VIP's status and verified income."""
    latest = (select(vip_reports_table.c.status, vip_reports_table.c.verified_monthly_income)
              .where(vip_reports_table.c.user_id == users.c.id)
              .order_by(vip_reports_table.c.seq.desc()).limit(1).lateral("latest_vip"))
    query = (select(users.c.id, users.c.external_id, users.c.created_at, latest.c.status,
                    latest.c.verified_monthly_income)
             .select_from(users.outerjoin(latest, true()))
             .where(users.c.organisation_id == organisation_id)
             .order_by(desc(users.c.created_at), desc(users.c.id)).limit(limit))
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [BorrowerSummary(r.id, r.external_id, iso(r.created_at), r.status,
                            Decimal(r.verified_monthly_income) if r.verified_monthly_income is not None
                            else None) for r in rows]


# --- one borrower ---------------------------------------------------------------------------------------

async def borrower_view(engine: AsyncEngine, settings: Settings, organisation_id: str,
                        user_id: str) -> BorrowerView:
    """Everything on the borrower page but the transactions (`transactions`: paged on their own).
    404 (vip.errors.NotFound) for a user not of the organisation."""
    async with engine.connect() as conn:
        user = await load_user(conn, organisation_id, user_id)
        rows = await connection_store.user_connections(conn, organisation_id, user_id)
        view = BorrowerView(user=user, connections=[connection_json(r) for r in rows],
                            wallets=await _active_wallets(conn, organisation_id, user_id))
        vip_row = await vip_reports.find(conn, user_id, None)
        if vip_row is not None:
            view.vip = vip_reports.report_body(vip_row)
            view.vip_chart = income_chart_svg(view.vip, id_prefix=f"vip-{vip_row.id}")
            view.vip_rows = period_rows(view.vip)
            view.flags = await _flags_with_transfers(conn, view.vip.get("fraud_flags") or [])
            view.risk, view.risk_problem = await _risk(conn, settings, vip_row)
        else:
            view.risk_problem = "no VIP yet"
        view.intents = await _intents(conn, organisation_id, user_id)
    view.flag_groups = group_flags([f.flag for f in view.flags], [f.transfer for f in view.flags],
                                   [f.path for f in view.flags])
    active = [c for c in view.connections if c["status"] == "active"]
    view.summary = summarise(view.vip, view.risk.score if view.risk else None,
                             view.risk.stored if view.risk else False, view.flag_groups,
                             has_wallet=any(c["type"] == "wallet" for c in active),
                             has_platform=any(c["type"] != "wallet" for c in active),
                             score_problem=view.risk_problem)
    return view


async def _active_wallets(conn: AsyncConnection, organisation_id: str, user_id: str) -> list[dict[str, Any]]:
    rows = await conn.execute(active_wallets(organisation_id, user_id).order_by(wallets.c.created_at))
    return [{"id": r.id, "address": checksummed(r.address), "network": r.network} for r in rows]


async def _flags_with_transfers(conn: AsyncConnection, flags: list[dict[str, Any]]) -> list[FlagView]:
    """Each flag of the report with its transfer as the indexer holds it (one query for all)."""
    keys = {(f["network"], f["tx_hash"], f["log_index"]) for f in flags if f.get("tx_hash")}
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    if keys:
        t = token_transfers
        rows = await conn.execute(select(t).where(
            tuple_(t.c.network, t.c.tx_hash, t.c.log_index).in_(sorted(keys))))
        for r in rows:
            found[(r.network, r.tx_hash, r.log_index)] = {
                "network": r.network, "tx_hash": r.tx_hash, "log_index": r.log_index,
                "block_number": r.block_number, "block_timestamp": iso(r.block_timestamp), "token": r.token,
                "from_address": checksummed(r.from_address), "to_address": checksummed(r.to_address),
                # USDC and USDT have 6 decimals on every configured network (the report's amount_usd too)
                "amount": token_units(int(r.amount), 6)}
    views = []
    for f in flags:
        evidence = f.get("evidence") or {}
        path = [{**step, "from_address": checksummed(step["from_address"]),
                 "to_address": checksummed(step["to_address"])} for step in evidence.get("path") or ()]
        views.append(FlagView(flag=f, transfer=found.get((f.get("network"), f.get("tx_hash"),
                                                            f.get("log_index"))), path=path))
    return views


async def _risk(conn: AsyncConnection, settings: Settings, vip_row: Row[Any]
                ) -> tuple[RiskView | None, str | None]:
    if vip_row.status == "pending":
        return None, "the VIP is being generated"
    if vip_row.status == "error":
        return None, f"the VIP could not be generated ({vip_row.error_code})"
    if vip_row.status == "unverified":
        return None, "no income period could be verified: no score (at least 1 verified period is needed)"
    existing = await risk_scores.stored(conn, vip_row.id)
    if existing is not None:
        return RiskView(existing.score, stored=True), None
    preview = risk_score(risk_scores.score_inputs(vip_row.report, vip_row.cashflow or {}),
                         vip_row.report["fraud_flags"], settings.verification.scoring,
                         score_id="(not stored yet)", user_id=vip_row.user_id, vip_id=vip_row.id,
                         generated_at=iso(vip_row.generated_at) or "")
    return RiskView(preview, stored=False), None


async def _intents(conn: AsyncConnection, organisation_id: str, user_id: str) -> list[dict[str, Any]]:
    """The user's payment intents, newest first, each with its charge (the API's shapes)."""
    rows = (await conn.execute(
        select(payment_intents)
        .where(payment_intents.c.organisation_id == organisation_id, payment_intents.c.user_id == user_id)
        .order_by(payment_intents.c.created_at.desc(), payment_intents.c.id.desc())
        .limit(INTENTS_SHOWN))).all()
    by_intent = {}
    if rows:
        ids = [r.id for r in rows]
        found = await conn.execute(select(charges).where(charges.c.payment_intent_id.in_(ids)))
        by_intent = {c.payment_intent_id: c for c in found}
    intents = [PaymentIntent.of(r) for r in rows]
    return [{"intent": intent_json(i),
             "charge": charge_json(Charge.of(by_intent[i.id]), i) if i.id in by_intent else None}
            for i in intents]


# --- transactions -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TransactionsView:
    transactions: list[dict[str, Any]]
    cursor: str | None
    has_more: bool


async def transactions(engine: AsyncEngine, settings: Settings, organisation_id: str, filters: Filters,
                       cursor: str | None, limit: int) -> TransactionsView:
    """A page of the user's transactions, exactly as GET /v1/transactions lists them (same filters, same
    signed cursor)."""
    page = await transactions_page(engine, settings, organisation_id, filters, cursor, limit)
    return TransactionsView(transactions_json(page.rows, filters.user_id, settings), page.cursor,
                            page.has_more)


async def borrower_count(engine: AsyncEngine, organisation_id: str) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(users)
                                 .where(users.c.organisation_id == organisation_id)) or 0
