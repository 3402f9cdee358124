"""The daemon's VIP generation job: takes due `pending` VIP reports (FOR UPDATE SKIP LOCKED, so several
daemons share them), makes sure the transfers the funding trace needs are indexed (the payers of the
wallets' inflows, then theirs, hop by hop, at most `funding_trace.max_addresses` per network), runs the
pure verification pipeline and stores the report, the transfer labels and the events in one transaction."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip import metrics
from vip.accounts import test_clocks
from vip.clock import Clock
from vip.config import PlatformConfig, Settings
from vip.reports import inputs as inputs
from vip.reports import vip_reports
from vip.run_loop import run_steps
from vip.store.outbox import record_event
from vip.verification.cashflow import average_balance, obligations
from vip.verification.fraud import ZERO_ADDRESS, FundingLedger
from vip.verification.model import EXACT, FRAUD_TYPES, Transfer, TransferKey
from vip.verification.pipeline import Outcome, Wallet, verify, vip_report
from vip.verification.profile import income_change, usd, vip_periods

log = structlog.get_logger(__name__)

JOB = "vip_report"
GENERATION_FAILED = "ERR_VIP_GENERATION_FAILED"
RETRY_DELAY = timedelta(seconds=30)
# `_trace_ready` gave up waiting for the trace's backfills: verify with what is indexed, as it is.
TIMED_OUT = "timed_out"
# Per payment traced, the trace's fetch also follows this many of the payer's largest inflows in the
# window before it (the pool accounting may find the user's money there), besides what last in first out
# attributes the payment to.
POOL_FOLLOW = 16
FRAUD_DETAILS = {
    "wash_trade": "the user's own money came back through one intermediary, or value returned to the "
                  "counterparty it came from within the wash-trade window",
    "circular": "the user's own money left the wallet and came back through two or more intermediaries",
}


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

    async def _generate(self, conn: AsyncConnection, row, now: datetime, bound) -> str | None:
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
        trace = config.funding_trace
        earliest = min([start, *(datetime.combine(r.record_date, datetime.min.time(), UTC) for r in records)])
        since = earliest - timedelta(days=config.matching.days_before + trace.window_days)
        finals = await inputs.final_blocks(conn, self.settings, {w.network for w in wallets})
        # The wallets' own history first: a report made while a just-connected wallet is still being
        # backfilled would miss its payouts (and its payers). It waits, however long that takes:
        # a wrong report is worse than a late one (the job-queue-age alert watches the wait).
        for network in sorted({w.network for w in wallets}):
            if await inputs.pending_backfills(conn, network, sorted(w.address for w in wallets
                                                                    if w.network == network)):
                await vip_reports.postpone(conn, row.id, now)
                return None
        own, wanted, fetched, capped = await self._collect(conn, wallets, finals, since)
        ready = await self._trace_ready(conn, row, wanted, since, bound)
        if ready is not True and ready != TIMED_OUT:
            # Behind every report due before now, so one waiting report never holds up the others.
            await vip_reports.postpone(conn, row.id, now)
            return ready  # "fetching" counts as work done; "waiting" lets the worker idle
        if ready is True:
            # The histories above were read before the backfills were seen finished, and one may have
            # committed in between: read them again, now that each is complete, and go round once more
            # if the money leads to an address not fetched yet.
            own, again, fetched, capped = await self._collect(conn, wallets, finals, since)
            if any(set(addresses) - set(wanted.get(network, [])) for network, addresses in again.items()):
                await vip_reports.postpone(conn, row.id, now)
                return "fetching"

        transfers: list[Transfer] = []
        known: dict[str, set[str]] = {}
        for network, items in own.items():
            seen = {t.key for t in items}
            transfers += items + [t for t in fetched[network] if t.key not in seen]
            known[network] = {w.address for w in wallets if w.network == network} | await inputs.backfilled(
                conn, network, wanted[network])
        outcome = verify(wallets, transfers, records, platforms, periods, config, known=known, capped=capped)
        await self._store_labels(conn, row, outcome, now)
        cashflow = await self._cashflow(conn, wallets, outcome, periods, start, min(as_of, end))
        body = vip_report(outcome, vip_id=row.id, user_id=row.user_id, generated_at=as_of, config=config)
        await vip_reports.finish(conn, row, body, cashflow, now)
        await self._income_change(conn, row, body, now)
        return body["status"]

    async def _collect(self, conn: AsyncConnection, wallets: list[Wallet], finals: dict[str, int],
                       since: datetime) -> tuple[dict[str, list[Transfer]], dict[str, list[str]],
                                                 dict[str, list[Transfer]], set[str]]:
        """Per network: the wallets' own transfers, the addresses the trace wants, their transfers indexed
        now; and the networks where the cap cut the trace."""
        own: dict[str, list[Transfer]] = {}
        wanted: dict[str, list[str]] = {}
        fetched: dict[str, list[Transfer]] = {}
        capped: set[str] = set()
        for network in sorted({w.network for w in wallets}):
            if network not in finals:
                continue
            home = {w.address for w in wallets if w.network == network}
            own[network] = await inputs.transfers_touching(conn, network, sorted(home), since,
                                                           finals[network])
            wanted[network], fetched[network], hit = await self._trace_frontier(
                conn, network, home, own[network], since, finals[network])
            if hit:
                capped.add(network)
        return own, wanted, fetched, capped

    async def _trace_frontier(self, conn: AsyncConnection, network: str, home: set[str], own: list[Transfer],
                              since: datetime, final: int) -> tuple[list[str], list[Transfer], bool]:
        """The addresses the funding trace needs fetched, the transfers of them indexed now, and whether
        the `max_addresses` cap cut the list. Level by level, as far as what is indexed now shows: the
        payers into the wallets; then, in each payer's history, the senders of the inflows that funded
        those payments (the trace's own last-in-first-out attribution: a busy payer adds only the few
        senders whose money reached it last before it paid the user, not its thousands), and so on
        `max_hops` deep. No address is left out but the zero address, whose transfers are mints."""
        trace = self.config.funding_trace
        window = timedelta(days=trace.window_days)
        wanted: list[str] = []
        fetched: list[Transfer] = []
        excluded = set(home) | {ZERO_ADDRESS}
        payments = [t for t in own if t.to_address in home and t.from_address not in excluded]
        capped = False
        for hop in range(1, trace.max_hops + 1):
            level = inputs.payers(payments, {t.to_address for t in payments}, excluded)
            room = trace.max_addresses - len(wanted)
            if len(level) > room:
                capped, level = True, level[:room]
            if not level:
                break
            wanted += level
            excluded |= set(level)
            fetched += await inputs.transfers_touching(conn, network, level, since, final)
            if hop == trace.max_hops:
                break
            ledger = FundingLedger([*own, *fetched], trace.max_pieces)
            chosen = set(level)
            received: dict[str, list[Transfer]] = defaultdict(list)
            for t in fetched:
                if t.to_address in chosen:
                    received[t.to_address].append(t)
            following: dict[TransferKey, Transfer] = {}
            for p in payments:
                if p.from_address not in chosen:
                    continue
                # What last in first out attributes the payment to, and (for the pool) the largest
                # inflows of the payer in the window before it.
                before = [t for t in received[p.from_address]
                          if t.order < p.order and t.timestamp >= p.timestamp - window]
                largest = sorted(before, key=lambda t: (-t.amount, t.order))[:POOL_FOLLOW]
                for inflow in [*(i for i, _ in ledger.pieces(p)), *largest]:
                    if inflow.timestamp >= p.timestamp - window and inflow.from_address not in home:
                        following[inflow.key] = inflow
            payments = list(following.values())
        return wanted, fetched, capped

    async def _trace_ready(self, conn, row, wanted: dict[str, list[str]], since: datetime,
                           bound) -> bool | str | None:
        """True when the history of every address the trace needs is indexed. Otherwise asks the indexer
        for the ones it does not watch yet ("fetching": a run after their backfills may find the next
        hop's) or keeps waiting (None), at most `fetch_wait_s` of wall-clock time after the first ask
        (then TIMED_OUT: verify with what is indexed)."""
        wall = datetime.now(UTC)
        added = 0
        for network, addresses in wanted.items():
            added += await inputs.watch_missing(conn, network, addresses, since)
        if row.fetch_requested_at is None:
            await vip_reports.mark_fetch_requested(conn, row.id, wall)
        elif (wall - row.fetch_requested_at).total_seconds() >= self.config.circular_flow.fetch_wait_s:
            bound.warning("trace backfills still running; verifying with what is indexed")
            return TIMED_OUT
        if added:
            bound.info("fetching the trace's addresses", addresses=added)
            return "fetching"
        return True if await self._backfills_done(conn, wanted) else None

    async def _backfills_done(self, conn, wanted: dict[str, list[str]]) -> bool:
        for network, addresses in wanted.items():
            if await inputs.pending_backfills(conn, network, addresses):
                return False
        return True

    async def _store_labels(self, conn: AsyncConnection, row, outcome: Outcome, now: datetime) -> None:
        flagged: dict[Wallet, list] = {}
        for finding in outcome.findings:
            flagged.setdefault(finding.wallet, []).append(finding)
        for wallet, labels in outcome.labels.items():
            findings = flagged.get(wallet, [])
            before = await inputs.existing_flags(conn, wallet, [f.transfer.key for f in findings])
            await inputs.write_labels(conn, wallet, labels, now)
            for f in findings:
                if f.code in before.get(f.transfer.key, ()):
                    continue  # flagged by an earlier run: one event per flagged transfer
                fraud_type = FRAUD_TYPES[f.code]
                await record_event(conn, "fraud.flagged", {
                    "user_id": row.user_id, "wallet_id": wallet.id, "tx_hash": f.transfer.tx_hash,
                    "fraud_type": fraud_type, "amount_usd": usd(f.transfer.usd()), "flagged_at": _iso(now),
                    "details": FRAUD_DETAILS[fraud_type]},
                    created_at=now, organisation_id=row.organisation_id)

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
        for labels in outcome.labels.values():
            outbound += [key for key, label in labels.items() if label.classification == "p2p"]
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

    async def _income_change(self, conn: AsyncConnection, row, body: dict[str, Any], now: datetime) -> None:
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

