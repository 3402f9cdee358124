"""The daemon's VIP generation job: takes due `pending` VIP reports (FOR UPDATE SKIP LOCKED, so several
daemons share them), makes sure the transfers the funding trace needs are indexed (`trace_inputs`), runs the
pure verification pipeline and stores the report, the transfer labels (`labels`) and the events in one
transaction."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import structlog
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from structlog.typing import FilteringBoundLogger

from vip import metrics
from vip.accounts import test_clocks
from vip.clock import Clock
from vip.config import PlatformConfig, Settings
from vip.reports import inputs as inputs
from vip.reports import labels, vip_reports
from vip.reports.trace_inputs import TraceCollector, TraceInputs
from vip.run_loop import run_steps
from vip.store.outbox import record_event
from vip.verification.cashflow import average_balance, obligations
from vip.verification.model import EXACT, TransferKey
from vip.verification.pipeline import Outcome, Wallet, verify, vip_report
from vip.verification.profile import income_change, usd, vip_periods

log = structlog.get_logger(__name__)

JOB = "vip_report"
GENERATION_FAILED = "ERR_VIP_GENERATION_FAILED"
RETRY_DELAY = timedelta(seconds=30)


def month_start(period: str) -> datetime:
    year, month = map(int, period.split("-"))
    return datetime(year, month, 1, tzinfo=UTC)


def month_after(period: str) -> datetime:
    start = month_start(period)
    return (start + timedelta(days=32)).replace(day=1)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class VipReportJob:
    """One worker of the VIP job. `run_once` does one step (tests call it directly)."""

    def __init__(self, settings: Settings, engine: AsyncEngine, clock: Clock,
                 platforms: Mapping[str, PlatformConfig]) -> None:
        self.settings = settings
        self.config = settings.verification
        self.engine = engine
        self.clock = clock
        self.platforms = platforms
        self.collector = TraceCollector(settings)

    async def run(self, stop: asyncio.Event) -> None:
        await run_steps(self.run_once, stop, network=None, task=JOB, idle_s=self.config.job_idle_s, log=log)

    async def run_once(self) -> bool:
        """Work one due report; False when there was none (or it is waiting for its counterparties)."""
        now = await self.clock.now()
        async with self.engine.begin() as conn:
            metrics.JOB_OLDEST_PENDING.labels(JOB).set(await vip_reports.oldest_pending_age(conn, now))
            row = await vip_reports.take_due(conn, now)
            if row is None:
                return False
            bound = log.bind(vip_id=row.id, user_id=row.user_id, lookback_months=row.lookback_months)
            started = time.perf_counter()
            try:
                async with conn.begin_nested():  # a failure rolls back to here and is recorded below
                    status = await self._generate(conn, row, now, bound)
            except Exception as exc:
                attempt = row.attempts + 1
                retry = now + RETRY_DELAY * attempt if attempt < self.config.max_attempts else None
                bound.exception("VIP generation failed", attempt=attempt, will_retry=retry is not None)
                metrics.JOB_ERRORS.labels(JOB, type(exc).__name__).inc()
                status = await vip_reports.fail(conn, row, error_code=GENERATION_FAILED, retry_at=retry,
                                                now=now)
                if status == "error":
                    metrics.VIP_REPORTS.labels("error").inc()
                return True
        if status is None or status == "fetching":
            return status == "fetching"
        metrics.VIP_REPORTS.labels(status).inc()
        metrics.VIP_GENERATION_SECONDS.observe(time.perf_counter() - started)
        bound.info("VIP generated", status=status, seconds=round(time.perf_counter() - started, 3))
        return True

    async def _generate(self, conn: AsyncConnection, row: Row[Any], now: datetime,
                        bound: FilteringBoundLogger) -> str | None:
        """The report's final status; "fetching" or None while its counterparties are not indexed yet."""
        config = self.config
        wallets = await inputs.active_wallets(conn, row.user_id)
        # The time the report is made at: the user's test clock's on a development stack, else now. The
        # queue (postpone, events) keeps the service's time.
        as_of = await test_clocks.user_time(conn, row.user_id, now)
        # Every inbound record of the user: the window's last month depends on them (decision 130), and
        # each labels the transfer it matches, in the window or not (decision 131).
        records, platforms = await inputs.income_inputs(conn, row.user_id, self.platforms)
        periods = vip_periods(as_of, row.lookback_months, [r.record_date for r in records])
        start, end = month_start(periods[0]), month_after(periods[-1])
        if not wallets or not platforms:
            # Revoked after the request: the report cannot be made.
            code = "ERR_MISSING_WALLET" if not wallets else "ERR_MISSING_PLATFORM"
            await vip_reports.fail(conn, row, error_code=code, retry_at=None, now=now)
            return "error"
        earliest = min([start, *(datetime.combine(r.record_date, datetime.min.time(), UTC) for r in records)])
        since = earliest - timedelta(days=config.matching.days_before + config.funding_trace.history_days)

        async def fetch_requested(at: datetime) -> None:
            await vip_reports.mark_fetch_requested(conn, row.id, at)

        gathered = await self.collector.gather(conn, wallets, since, row.fetch_requested_at, fetch_requested,
                                               bound)
        if not isinstance(gathered, TraceInputs):
            # Behind every report due before now, so one waiting report never holds up the others.
            await vip_reports.postpone(conn, row.id, now)
            return gathered  # "fetching" counts as work done; None (waiting) lets the worker idle
        await labels.lock_user_labels(conn, row.user_id)
        prior = await labels.prior_flags(conn, wallets)
        outcome = verify(wallets, gathered.transfers, records, platforms, periods, config,
                         known=gathered.known, capped=gathered.capped, prior_flags=prior, history_from=since,
                         openings=gathered.openings)
        await labels.store_labels(conn, user_id=row.user_id, organisation_id=row.organisation_id,
                                  outcome=outcome, now=now)
        cashflow = await self._cashflow(conn, wallets, outcome, periods, start, min(as_of, end))
        body = vip_report(outcome, vip_id=row.id, user_id=row.user_id, generated_at=as_of, config=config)
        await vip_reports.finish(conn, row, body, cashflow, now)
        await self._income_change(conn, row, body, now)
        status: str = body["status"]
        return status

    async def _cashflow(self, conn: AsyncConnection, wallets: list[Wallet], outcome: Outcome,
                        periods: list[str], start: datetime, end: datetime) -> dict[str, Any]:
        balances = await inputs.usdc_balances(conn, wallets)
        total = Decimal(0)
        for wallet in wallets:
            known = balances.get(wallet)
            flows = await inputs.usdc_flows(conn, wallet, start if known is not None else None)
            end_balance = known if known is not None else sum(delta for _, delta in flows)
            total += average_balance(end_balance, flows, start, end)
        homes = {(w.network, w.address) for w in wallets}
        outbound = []
        for wallet_labels in outcome.labels.values():
            outbound += [key for key, label in wallet_labels.items() if label.classification == "p2p"]
        keys: set[TransferKey] = set(outbound)
        spent = [t for t in outcome.own_transfers if t.key in keys and (t.network, t.from_address) in homes
                 and (t.network, t.to_address) not in homes]
        lending = {a for addresses in self.config.lending_addresses.values() for a in addresses}
        found = obligations(spent, periods, lending, min_months=self.config.scoring.recurring_min_months,
                            tolerance=self.config.scoring.recurring_amount_tolerance)
        return {"average_usdc_balance": usd(total.scaleb(-6, EXACT)),
                "obligations": [{"counterparty": o.counterparty, "network": o.network,
                                 "monthly_usd": usd(o.monthly_usd), "months": o.months,
                                 "lending_protocol": o.lending_protocol, "total_usd": usd(o.total_usd),
                                 "transfers": o.transfers} for o in found]}

    async def _income_change(self, conn: AsyncConnection, row: Row[Any], body: dict[str, Any],
                             now: datetime) -> None:
        if body["status"] not in ("verified", "partially_verified"):
            return
        previous = await vip_reports.previous_finished(conn, row.user_id, row.id)
        if previous is None or previous.verified_monthly_income is None:
            return
        change = income_change(Decimal(previous.verified_monthly_income), body["verified_monthly_income_usd"])
        if change is None or abs(change) <= self.config.income_change_threshold:
            return
        await record_event(conn, "income.change_detected", {
            "user_id": row.user_id, "vip_id": row.id, "previous_vip_id": previous.id,
            "previous_verified_monthly_income_usd": usd(Decimal(previous.verified_monthly_income)),
            "verified_monthly_income_usd": body["verified_monthly_income_usd"], "change_pct": change,
            "detected_at": _iso(now)}, created_at=now, organisation_id=row.organisation_id)

