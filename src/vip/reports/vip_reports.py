"""VIP report rows: asked for by the API (cached 24 hours per user and lookback), worked by the daemon's
job (the `pending` row is the job), finished with their events in the same transaction."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.formats import iso
from vip.ids import new_id
from vip.store.outbox import record_event
from vip.store.tables import vip_reports

FINISHED = ("verified", "partially_verified", "unverified")
STATUS_EVENTS = {"verified": "vip.verified", "partially_verified": "vip.partially_verified",
                 "unverified": "vip.unverified", "error": "vip.failed"}
VIP_FIELDS = ("id", "user_id", "generated_at", "status", "verified_monthly_income_usd", "income_currency",
              "verification_method", "data_source_type", "data_source_platform", "payroll_platform",
              "periods_verified", "periods_requested", "consistency_rate", "average_verified_amount",
              "income_variance", "verified_periods", "unverified_periods", "fraud_flags", "wallet_address",
              "network", "error_code")



def placeholder_body(row: Row[Any], status: str, error_code: str | None = None) -> dict[str, Any]:
    """A VIP without results yet (`pending`) or without any (`error`): every field present."""
    body: dict[str, Any] = dict.fromkeys(VIP_FIELDS)
    body.update(id=row.id, user_id=row.user_id, status=status, income_currency="USD",
                verification_method="deterministic_match", periods_verified=0,
                periods_requested=row.lookback_months, verified_periods=[], unverified_periods=[],
                fraud_flags=[], error_code=error_code, generated_at=iso(row.generated_at))
    return body


def report_body(row: Row[Any]) -> dict[str, Any]:
    """The spec's VIP report of a stored row."""
    if row.report is not None:
        report: dict[str, Any] = row.report
        return report
    return placeholder_body(row, row.status, row.error_code)


async def lock_user(conn: AsyncConnection, user_id: str) -> None:
    """Serialise VIP requests of one user (two concurrent first calls make one report, not two)."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                       {"k": f"vip-report:{user_id}"})


async def latest(conn: AsyncConnection, user_id: str, lookback_months: int) -> Row[Any] | None:
    return (await conn.execute(select(vip_reports).where(
        vip_reports.c.user_id == user_id, vip_reports.c.lookback_months == lookback_months)
        .order_by(vip_reports.c.seq.desc()).limit(1))).first()


async def request_report(conn: AsyncConnection, *, organisation_id: str, user_id: str, lookback_months: int,
                         refresh: bool, now: datetime, cache: timedelta) -> tuple[Row[Any], bool]:
    """The report to answer with: the cached one (any status but error, less than `cache` old), or the
    pending one already running, or a new pending one (event `vip.generating`). Returns (row, created)."""
    await lock_user(conn, user_id)
    current = await latest(conn, user_id, lookback_months)
    if current is not None and current.status == "pending":
        return current, False
    if (current is not None and not refresh and current.status != "error"
            and current.requested_at > now - cache):
        return current, False
    row = (await conn.execute(vip_reports.insert().values(
        id=new_id("vip"), organisation_id=organisation_id, user_id=user_id, lookback_months=lookback_months,
        status="pending", requested_at=now, next_attempt_at=now).returning(*vip_reports.c))).one()
    await record_event(conn, "vip.generating", placeholder_body(row, "pending"), created_at=now,
                       organisation_id=organisation_id)
    return row, True


async def find(conn: AsyncConnection, user_id: str, vip_id: str | None) -> Row[Any] | None:
    """A user's VIP by id, or its most recent (a finished one before a pending one)."""
    query = select(vip_reports).where(vip_reports.c.user_id == user_id)
    if vip_id is not None:
        return (await conn.execute(query.where(vip_reports.c.id == vip_id))).first()
    rows = (await conn.execute(query.order_by(vip_reports.c.seq.desc()).limit(50))).all()
    finished = [r for r in rows if r.status != "pending"]
    return finished[0] if finished else (rows[0] if rows else None)


# --- the job ---------------------------------------------------------------------------------------------

async def take_due(conn: AsyncConnection, now: datetime) -> Row[Any] | None:
    """The next due pending report, locked for this transaction; other workers skip it."""
    return (await conn.execute(select(vip_reports).where(
        vip_reports.c.status == "pending", vip_reports.c.next_attempt_at <= now)
        .order_by(vip_reports.c.next_attempt_at, vip_reports.c.seq).limit(1)
        .with_for_update(skip_locked=True))).first()


async def oldest_pending_age(conn: AsyncConnection, now: datetime) -> float:
    oldest = await conn.scalar(select(func.min(vip_reports.c.requested_at))
                               .where(vip_reports.c.status == "pending"))
    return max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0


async def mark_fetch_requested(conn: AsyncConnection, vip_id: str, at: datetime) -> None:
    await conn.execute(update(vip_reports).where(vip_reports.c.id == vip_id).values(fetch_requested_at=at))


async def postpone(conn: AsyncConnection, vip_id: str, until: datetime) -> None:
    await conn.execute(update(vip_reports).where(vip_reports.c.id == vip_id).values(next_attempt_at=until))


async def previous_finished(conn: AsyncConnection, user_id: str, before_id: str) -> Row[Any] | None:
    return (await conn.execute(select(vip_reports).where(
        vip_reports.c.user_id == user_id, vip_reports.c.id != before_id,
        vip_reports.c.status.in_(("verified", "partially_verified")))
        .order_by(vip_reports.c.seq.desc()).limit(1))).first()


async def finish(conn: AsyncConnection, row: Row[Any], body: dict[str, Any], cashflow: dict[str, Any],
                 now: datetime) -> None:
    """Store the finished report and fire its status event (and `income.change_detected`)."""
    await conn.execute(update(vip_reports).where(vip_reports.c.id == row.id).values(
        status=body["status"], generated_at=now, report=body, cashflow=cashflow,
        error_code=body.get("error_code"), verified_monthly_income=body["verified_monthly_income_usd"]))
    await record_event(conn, STATUS_EVENTS[body["status"]], body, created_at=now,
                       organisation_id=row.organisation_id)


async def fail(conn: AsyncConnection, row: Row[Any], *, error_code: str, retry_at: datetime | None,
               now: datetime) -> str:
    """Count a failed attempt: retry later, or (out of attempts) move to `error` with `vip.failed`."""
    attempts = row.attempts + 1
    if retry_at is not None:
        await conn.execute(update(vip_reports).where(vip_reports.c.id == row.id).values(
            attempts=attempts, next_attempt_at=retry_at))
        return "pending"
    await conn.execute(update(vip_reports).where(vip_reports.c.id == row.id).values(
        attempts=attempts, status="error", error_code=error_code, generated_at=now))
    failed = (await conn.execute(select(vip_reports).where(vip_reports.c.id == row.id))).one()
    await record_event(conn, "vip.failed", placeholder_body(failed, "error", error_code), created_at=now,
                       organisation_id=row.organisation_id)
    return "error"
