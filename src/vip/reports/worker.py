"""The daemon's VIP generation job: takes due `pending` VIP reports (FOR UPDATE SKIP LOCKED, so several
daemons share them), makes sure the transfers the funding trace needs are indexed (`trace_inputs`), runs the
pure verification pipeline and stores the report, the transfer labels (`labels`) and the events in one
transaction."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import structlog
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection
from structlog.typing import FilteringBoundLogger

from vip import metrics
from vip.accounts import test_clocks
from vip.formats import iso
from vip.reports import inputs as inputs
from vip.reports import labels, vip_reports
from vip.reports.queue_job import RETRY_DELAY, QueueJob, history_from, month_after, month_start
from vip.reports.trace_inputs import TraceInputs
from vip.store.outbox import record_event
from vip.verification.cashflow import average_balance, obligations
from vip.verification.model import EXACT, TransferKey
from vip.verification.pipeline import Outcome, Wallet, vip_report
from vip.verification.profile import income_change, usd, vip_periods

log: FilteringBoundLogger = structlog.get_logger(__name__)

JOB = "vip_report"
GENERATION_FAILED = "ERR_VIP_GENERATION_FAILED"


class VipReportJob(QueueJob):
    """One worker of the VIP job. `run_once` does one step (tests call it directly)."""

    job, log, failure_message, queue = JOB, log, "VIP generation failed", vip_reports

    def bind(self, row: Any) -> FilteringBoundLogger:
        return log.bind(vip_id=row.id, user_id=row.user_id, lookback_months=row.lookback_months)

    async def failed(self, conn: AsyncConnection, row: Any, now: datetime, attempt: int,
                     will_retry: bool) -> None:
        retry = now + RETRY_DELAY * attempt if will_retry else None
        status = await vip_reports.fail(conn, row, error_code=GENERATION_FAILED, retry_at=retry, now=now)
        if status == "error":
            metrics.VIP_REPORTS.labels("error").inc()

    def finished(self, result: Any, seconds: float, bound: FilteringBoundLogger) -> bool:
        """A report made counts as work; "fetching" too, None (waiting for its counterparties) does not."""
        if result is None or result == "fetching":
            return bool(result == "fetching")
        metrics.VIP_REPORTS.labels(result).inc()
        metrics.VIP_GENERATION_SECONDS.observe(seconds)
        bound.info("VIP generated", status=result, seconds=round(seconds, 3))
        return True

    async def work(self, conn: AsyncConnection, row: Row[Any], now: datetime,
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
        since = history_from(periods, records, config)

        async def fetch_requested(at: datetime) -> None:
            await vip_reports.mark_fetch_requested(conn, row.id, at)

        gathered = await self.collector.gather(conn, wallets, since, row.fetch_requested_at, fetch_requested,
                                               bound)
        if not isinstance(gathered, TraceInputs):
            # Behind every report due before now, so one waiting report never holds up the others.
            await vip_reports.postpone(conn, row.id, now)
            return gathered  # "fetching" counts as work done; None (waiting) lets the worker idle
        await labels.lock_user_labels(conn, row.user_id)
        outcome = await self.verify(conn, wallets, gathered, records, platforms, periods, since)
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
            "detected_at": iso(now)}, created_at=now, organisation_id=row.organisation_id)

