"""Risk scores: computed once per VIP from its stored report and cash-flow facts, then answered from here."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.formats import iso
from vip.ids import new_id
from vip.store.outbox import record_event
from vip.store.tables import risk_scores
from vip.verification.cashflow import Obligation
from vip.verification.config import ScoringConfig
from vip.verification.scoring import ScoreInputs, risk_score


def score_inputs(report: dict[str, Any], cashflow: dict[str, Any]) -> ScoreInputs:
    verified = [p["period"] for p in report["verified_periods"]]
    requested = report["periods_requested"]
    # The longest run of consecutive verified months, from the report's periods in order.
    flags = sorted([(p["period"], True) for p in report["verified_periods"]]
                   + [(p["period"], False) for p in report["unverified_periods"]])
    best = run = 0
    for _, ok in flags:
        run = run + 1 if ok else 0
        best = max(best, run)
    obligations = [Obligation(o["counterparty"], o["network"], Decimal(o["monthly_usd"]), o["months"],
                              o["lending_protocol"], Decimal(o["total_usd"]), o["transfers"])
                   for o in cashflow.get("obligations", [])]
    return ScoreInputs(periods_requested=requested, periods_verified=len(verified),
                       consistency_rate=Decimal(report["consistency_rate"]), longest_streak_months=best,
                       verified_monthly_income=Decimal(report["verified_monthly_income_usd"]),
                       average_usdc_balance=Decimal(cashflow.get("average_usdc_balance", 0)),
                       obligations=obligations, fraud_flag_count=len(report["fraud_flags"]))


async def stored(conn: AsyncConnection, vip_id: str) -> Row[Any] | None:
    return (await conn.execute(select(risk_scores).where(risk_scores.c.vip_id == vip_id))).first()


async def score_for(conn: AsyncConnection, vip_row: Row[Any], config: ScoringConfig, now: datetime
                    ) -> tuple[dict[str, Any], bool]:
    """The VIP's stored score, or a new one (stored, with `risk_score.generated`). Returns (body, new)."""
    existing = await stored(conn, vip_row.id)
    if existing is not None:
        score: dict[str, Any] = existing.score
        return score, False
    score_id = new_id("rsk")
    body = risk_score(score_inputs(vip_row.report, vip_row.cashflow or {}), vip_row.report["fraud_flags"],
                      config, score_id=score_id, user_id=vip_row.user_id, vip_id=vip_row.id,
                      generated_at=iso(now))
    inserted = await conn.scalar(pg_insert(risk_scores).values(
        id=score_id, organisation_id=vip_row.organisation_id, user_id=vip_row.user_id, vip_id=vip_row.id,
        generated_at=now, score=body).on_conflict_do_nothing(index_elements=["vip_id"])
        .returning(risk_scores.c.id))
    if inserted is None:  # a concurrent request scored it first: answer with that one
        first = await stored(conn, vip_row.id)
        if first is None:  # the conflicting insert's row is committed, so this cannot be
            raise LookupError(f"the risk score of {vip_row.id} conflicted but is not stored")
        theirs: dict[str, Any] = first.score
        return theirs, False
    await record_event(conn, "risk_score.generated", body, created_at=now,
                       organisation_id=vip_row.organisation_id)
    return body, True
