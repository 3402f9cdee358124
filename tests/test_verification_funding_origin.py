"""Where income money came from, through the real job on Anvil and PostgreSQL (indexer, trace fetch, VIP job,
HTTP API): money parked with a payer for months and paid back as salary is never income, whatever the
delay, with the path as evidence; a salary paid in several transfers, and several records paid by one, is
income with every transfer labelled; and the property: a payer funded mostly by the user's wallets, through
up to `max_hops` addresses and after any delay within the lookback, is never income."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal

import pytest
from eth_utils import to_checksum_address
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import ApiHarness
from tests.support.chain import ChainDriver
from tests.support.verification import (
    USDC,
    Borrower,
    fresh_address,
    fresh_borrower,
    month_after,
    months_after,
    noon,
    verification_api,
    vip_when_synced,
)
from vip.verification.config import FundingTraceConfig

SALARY = Decimal(5000)
MAX_HOPS = FundingTraceConfig().max_hops


@pytest.fixture
async def vapi(aiohttp_client, chain: ChainDriver, database_url: str,
               engine: AsyncEngine) -> AsyncIterator[ApiHarness]:
    async with verification_api(aiohttp_client, chain, database_url, engine, unmetered=True) as harness:
        yield harness


async def income_labels(b: Borrower) -> dict[str, dict]:
    status, body = await b.get("/v1/transactions", user_id=b.user_id, classification="verified_income",
                               limit=200)
    assert status == 200, body
    return {t["tx_hash"]: t for t in body["transactions"]}


@pytest.mark.parametrize("months_parked", [2, 6])
async def test_money_parked_for_months_then_paid_back_as_salary_is_never_income(vapi, chain, database_url,
                                                                               months_parked):
    """The issue's patient borrower: three months of "salary" parked in one transfer with a fresh address,
    which pays it back month by month from two (or six) months later, as the records it is named in say.
    The payer holds only the user's money: every month is wash_trade, with [park, payout] as the path."""
    b = await fresh_borrower(vapi, chain)
    days = months_after(b.start, months_parked + 3)
    escrow = b.others[0]
    parked = b.pay("USDC", b.wallet, escrow, int(3 * SALARY * USDC), noon(days[0]) - timedelta(days=3))
    payouts = days[months_parked:]
    paid = [b.pay("USDC", escrow, b.wallet, int(SALARY * USDC), noon(d)) for d in payouts]
    b.settle(noon(month_after(payouts[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in payouts], origin=escrow)
    vip = await vip_when_synced(b, database_url, lookback_months=3)
    assert vip["status"] == "unverified" and vip["periods_verified"] == 0
    assert [p["reason_codes"] for p in vip["unverified_periods"]] == [["ERR_WASH_TRADE_DETECTED"]] * 3
    flags = {f["tx_hash"]: f for f in vip["fraud_flags"]}
    assert set(flags) == {parked, *paid}
    for tx in paid:
        evidence = flags[tx]["evidence"]
        assert flags[tx]["fraud_type"] == "wash_trade" and evidence["rule"] == "funding_trace"
        assert evidence["self_funded_share"] == 1 and evidence["intermediaries"] == 1
        assert [step["tx_hash"] for step in evidence["path"]] == [parked, tx]
        assert [step["from_address"] for step in evidence["path"]] == [
            to_checksum_address(b.wallet), to_checksum_address(escrow)]
    trace = vip["fraud_trace"]
    assert trace["history_days"] == 365 and trace["history_from"] < flags[parked]["block_timestamp"]
    assert trace["untraced"] == [] and trace["self_funded"] == 3
    assert await income_labels(b) == {}


async def test_a_salary_in_two_or_three_transfers_and_two_records_in_one_are_income_every_transfer_labelled(
        vapi, chain, database_url):
    """Batching, a second token account, a fee split: each month's record is settled by the sum of two or
    three transfers of the employer minutes apart; the last month's salary and a reimbursement recorded
    apart are paid by one transfer. The VIP is verified, each period lists every transfer that settled it
    (the first is its tx_hash) and every one is verified_income in GET /v1/transactions."""
    b = await fresh_borrower(vapi, chain)
    chain.mint("USDT", b.employer, 10**12)
    days = months_after(b.start, 4)
    splits = [[2500, 2500], [3000, 1500, 500], [4950, 50]]
    paid = []
    for day, split in zip(days[:3], splits, strict=True):
        paid.append([b.pay("USDT" if i % 2 else "USDC", b.employer, b.wallet, amount * USDC,
                           noon(day) + timedelta(minutes=4 * i)) for i, amount in enumerate(split)])
    paid.append([b.pay("USDC", b.employer, b.wallet, 5250 * USDC, noon(days[3]))])
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days] + [(days[3] - timedelta(days=1), Decimal(250))])
    vip = await vip_when_synced(b, database_url, lookback_months=4)
    assert vip["status"] == "verified" and vip["periods_verified"] == 4 and vip["fraud_flags"] == []
    assert vip["verified_monthly_income_usd"] == 5000  # the median of 5000, 5000, 5000, 5250
    for period, hashes in zip(vip["verified_periods"], paid, strict=True):
        assert period["tx_hash"] == hashes[0]
        assert [t["tx_hash"] for t in period["transfers"]] == hashes
        assert sum(t["amount_usd"] for t in period["transfers"]) == period["received_amount"]
        assert period["match_confidence"] == "exact"
    labelled = await income_labels(b)
    assert set(labelled) == {tx for hashes in paid for tx in hashes}
    for day, hashes in zip(days, paid, strict=True):
        assert {labelled[tx]["payroll_match"]["payroll_period"] for tx in hashes} == {f"{day:%Y-%m}"}


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(hops=st.integers(1, MAX_HOPS), own=st.integers(1000, 20_000), waited=st.integers(0, 180),
       outside=st.integers(0, 45), outside_first=st.booleans(), parts=st.integers(1, 3))
async def test_a_payer_funded_mostly_by_the_users_wallets_is_never_income_through_the_job(
        vapi, chain, database_url, hops, own, waited, outside, outside_first, parts):
    """The user's `own` USDC goes through `hops` fresh addresses, the last of which also gets `outside`% of
    it from a stranger (before or after the user's money); the money waits `waited` days in all (within
    the six-month lookback) and the last pays the user as one record's salary, in one to three transfers.
    Whatever the delay and the route, every payout is flagged and the month is not verified."""
    b = await fresh_borrower(vapi, chain)
    route = [fresh_address(chain) for _ in range(hops)]
    stranger = fresh_address(chain)
    chain.mint("USDC", stranger, 10**12)
    # The schedule: each hop `waited / hops` days (and ten minutes) after the previous one.
    start, step = b.start + timedelta(days=1), timedelta(days=waited) / hops + timedelta(minutes=10)
    moves = [(start, b.wallet, route[0], own * USDC)]
    moves += [(start + step * i, route[i - 1], route[i], own * USDC) for i in range(1, hops)]
    arrived = moves[-1][0]  # the user's money reaches the last address
    extra = own * USDC * outside // 100
    if extra:
        moves.append((arrived + timedelta(minutes=-5 if outside_first else 5), stranger, route[-1], extra))
    total = own * USDC + extra
    paid_at = arrived + step
    shares = [total // parts] * (parts - 1) + [total - (parts - 1) * (total // parts)]
    moves += [(paid_at + timedelta(minutes=7 * k), route[-1], b.wallet, share)
              for k, share in enumerate(shares)]
    sent = {moment: b.pay("USDC", sender, to, amount, moment) for moment, sender, to, amount in sorted(moves)}
    payouts = [sent[paid_at + timedelta(minutes=7 * k)] for k in range(parts)]
    b.settle(paid_at + timedelta(days=1))
    await b.push_records([(paid_at.date(), Decimal(total) / USDC)], origin=route[-1])
    vip = await vip_when_synced(b, database_url)
    assert vip["status"] == "unverified" and vip["verified_periods"] == []
    flags = {f["tx_hash"]: f for f in vip["fraud_flags"]}
    assert set(payouts) <= set(flags)
    assert {flags[tx]["fraud_type"] for tx in payouts} == {"wash_trade" if hops == 1 else "circular"}
    assert await income_labels(b) == {}
