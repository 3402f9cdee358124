"""Verification end to end on Anvil through the HTTP API: salaries, shortfalls, wash trades, circles, DEX
swaps, unknown origins and a reorg, each generating a real VIP in the real daemon (indexer + VIP job) and
read back through GET /v1/vip-report, GET /v1/transactions and GET /v1/risk-score."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal

import pytest
from eth_account import Account
from eth_utils import to_checksum_address
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import ApiHarness
from tests.support.chain import ChainDriver
from tests.support.indexer import running_indexer, wait_synced
from tests.support.payments import lender, post_json, register_funding_wallet
from tests.support.platforms import load_platforms
from tests.support.verification import (
    DEX,
    USDC,
    Borrower,
    month_after,
    months_after,
    new_borrower,
    noon,
    verification_api,
    vip_when_synced,
)
from tests.support.wallets import connect
from vip.api.jsonio import loads
from vip.clock import clock_for
from vip.reports.worker import VipReportJob
from vip.store.outbox import envelope
from vip.store.tables import outbox_events, vip_reports
from vip.webhooks.signing import encode_body

SALARY = Decimal(5000)


@pytest.fixture
async def harness(aiohttp_client, chain: ChainDriver, database_url: str,
                  engine: AsyncEngine) -> AsyncIterator[tuple[ApiHarness, str]]:
    """The real app on this test's own Anvil (its time moves) and database, checked against OpenAPI."""
    async with verification_api(aiohttp_client, chain, database_url, engine) as harness:
        yield harness, database_url


async def salaries(b: Borrower, amounts: list[Decimal | None], *, to: str | None = None) -> list[str]:
    """One payout per month after the start (None: not paid that month); the chain then moves past the
    last month and the platform's records for every month are pushed."""
    days = months_after(b.start, len(amounts))
    hashes = []
    for day, amount in zip(days, amounts, strict=True):
        if amount is not None:
            hashes.append(b.pay("USDC", b.employer, to or b.wallet, int(amount * USDC), noon(day)))
            # Ordinary spending after payday.
            b.pay("USDC", b.wallet, b.others[-1], 120 * USDC, noon(day) + timedelta(days=2))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days])
    return hashes


run_vip = vip_when_synced


async def txs(b: Borrower, **params) -> list[dict]:
    status, body = await b.get("/v1/transactions", user_id=b.user_id, limit=200, **params)
    assert status == 200, body
    return body["transactions"]


async def test_six_honest_salaries_verify_and_score(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    paid = await salaries(b, [SALARY] * 6)
    vip = await run_vip(b, url)
    assert vip["status"] == "verified"
    assert vip["periods_verified"] == vip["periods_requested"] == 6
    assert vip["verified_monthly_income_usd"] == 5000 and vip["average_verified_amount"] == 5000
    assert vip["income_variance"] == 0 and vip["consistency_rate"] == 1
    assert vip["verification_method"] == "deterministic_match"
    assert vip["data_source_type"] == "payroll" and vip["data_source_platform"] == "paystream"
    assert vip["wallet_address"] == to_checksum_address(b.wallet) and vip["network"] == "local"
    assert {p["tx_hash"] for p in vip["verified_periods"]} == set(paid)
    assert all(p["match_confidence"] == "exact" and p["origin_address"] == to_checksum_address(b.employer)
               for p in vip["verified_periods"])
    assert vip["unverified_periods"] == [] and vip["fraud_flags"] == [] and vip["error_code"] is None

    income = await txs(b, classification="verified_income")
    assert {t["tx_hash"] for t in income} == set(paid)
    assert all(t["payroll_match"]["matched"] and t["payroll_match"]["origin_platform"] == "paystream"
               for t in income)
    assert {t["classification"] for t in await txs(b, direction="outbound")} == {"p2p"}

    status, body = await b.get("/v1/risk-score", user_id=b.user_id)
    assert status == 200, body
    score = body["risk_score"]
    assert score["vip_id"] == vip["id"] and score["score_range"] == {"min": 0, "max": 1000}
    pillars = score["pillars"]
    assert pillars["consistency"]["score"] == 1000 and pillars["volume"]["score"] == 500
    assert pillars["volume"]["details"]["income_tier"] == "mid"
    expected = round(sum(Decimal(p["score"]) * Decimal(str(p["weight"])) for p in pillars.values()))
    assert score["composite_score"] == expected
    assert score["recommendation"] == "approve" and score["adverse_action_reasons"] == []
    assert score["suggested_credit_limit_usd"] == 10000
    # Asked again: the stored score, one event.
    status, again = await b.get("/v1/risk-score", user_id=b.user_id, vip_id=vip["id"])
    assert status == 200 and again["risk_score"]["id"] == score["id"]
    assert [t for t, _ in await b.events("risk_score.")] == ["risk_score.generated"]
    assert [t for t, _ in await b.events("vip.")] == ["vip.generating", "vip.verified"]
    # Cached: the same report again without a new generation.
    status, cached = await b.get("/v1/vip-report", user_id=b.user_id)
    assert status == 200 and cached["vip_report"]["id"] == vip["id"]


async def test_one_month_missing_is_partially_verified(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    await salaries(b, [SALARY, SALARY, None, SALARY, SALARY, SALARY])
    vip = await run_vip(b, url)
    assert vip["status"] == "partially_verified"
    assert vip["periods_verified"] == 5 and vip["consistency_rate"] == Decimal("0.8333")
    (missing,) = vip["unverified_periods"]
    assert missing["period"] == f"{months_after(b.start, 3)[2]:%Y-%m}"
    assert missing["reason_codes"] == ["ERR_INCOME_MISMATCH"]
    assert missing["reasons"][0]["details"]["received_amount"] == 0
    assert [t for t, _ in await b.events("vip.")] == ["vip.generating", "vip.partially_verified"]
    status, body = await b.get("/v1/risk-score", user_id=b.user_id)
    assert status == 200
    consistency = body["risk_score"]["pillars"]["consistency"]
    assert consistency["details"] == {"periods_verified": 5, "periods_missed": 1,
                                      "consistency_rate": Decimal("0.8333"), "longest_streak_months": 3}


async def test_salary_to_an_unconnected_wallet_is_unverified(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    await salaries(b, [SALARY] * 3, to=b.others[0])
    vip = await run_vip(b, url, lookback_months=3)
    assert vip["status"] == "unverified" and vip["error_code"] == "ERR_INSUFFICIENT_HISTORY"
    assert vip["periods_verified"] == 0 and len(vip["unverified_periods"]) == 3
    assert [t for t, _ in await b.events("vip.")] == ["vip.generating", "vip.unverified"]
    status, body = await b.get("/v1/risk-score", user_id=b.user_id)
    assert status == 422 and body["error"]["code"] == "ERR_INSUFFICIENT_HISTORY"


async def test_shortfalls_close_approximate_and_mismatch(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    await salaries(b, [Decimal("4925"), Decimal("4800"), Decimal("4650")])  # 1.5%, 4%, 7% short
    vip = await run_vip(b, url, lookback_months=3)
    assert vip["status"] == "partially_verified"
    assert [p["match_confidence"] for p in vip["verified_periods"]] == ["close", "approximate"]
    (short,) = vip["unverified_periods"]
    assert short["reason_codes"] == ["ERR_INCOME_MISMATCH"]
    details = short["reasons"][0]["details"]
    assert (details["expected_amount"], details["received_amount"], details["tolerance_pct"],
            details["actual_variance_pct"]) == (5000, 4650, Decimal("0.05"), Decimal("0.07"))


async def test_wash_round_trip_is_flagged_excluded_and_caps_the_score(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 3)
    peer = b.others[1]
    b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[0]))
    b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[1]))
    washed = [b.pay("USDC", peer, b.wallet, 2000 * USDC, noon(days[1]) + timedelta(days=3)),
              b.pay("USDC", b.wallet, peer, 1990 * USDC, noon(days[1]) + timedelta(days=4))]
    b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[2]))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days])
    async with running_indexer(api.settings, url):
        await wait_synced(api.engine, chain, "local")
        vip = await b.vip(3)
        assert vip["status"] == "verified"
        assert {(f["tx_hash"], f["fraud_type"], f["code"]) for f in vip["fraud_flags"]} == {
            (h, "wash_trade", "ERR_WASH_TRADE_DETECTED") for h in washed}
        # refresh=true re-runs the whole pipeline: a new report, the same flags, no second fraud.flagged.
        again = await b.vip(3, refresh="true")
        assert again["id"] != vip["id"] and len(again["fraud_flags"]) == 2
    flagged = await b.events("fraud.flagged")
    assert sorted(obj["tx_hash"] for _, obj in flagged) == sorted(washed)
    assert all(obj["fraud_type"] == "wash_trade" and obj["details"] and obj["amount_usd"] in (2000, 1990)
               for _, obj in flagged)
    assert [t for t, _ in await b.events("vip.")] == ["vip.generating", "vip.verified"] * 2
    assert not {t["tx_hash"] for t in await txs(b)} & set(washed)  # excluded by default
    shown = [t for t in await txs(b, include_filtered="true") if t["tx_hash"] in washed]
    assert {t["classification"] for t in shown} == {"wash_trade"}
    assert all(t["fraud_flags"] == ["ERR_WASH_TRADE_DETECTED"] for t in shown)
    status, body = await b.get("/v1/risk-score", user_id=b.user_id)
    assert status == 200
    score = body["risk_score"]
    assert score["vip_id"] == again["id"]
    assert score["recommendation"] == "refer"  # approve on the numbers, capped by the fraud flags
    assert score["adverse_action_reasons"][0]["code"] == "AA_FRAUD_SIGNALS"


async def test_circle_through_two_intermediaries(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 2)
    a, c = b.others[1], b.others[2]
    b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[0]))
    out = b.pay("USDC", b.wallet, a, 3000 * USDC, noon(days[0]) + timedelta(days=2))
    b.pay("USDC", a, c, 2995 * USDC, noon(days[0]) + timedelta(days=3))
    back = b.pay("USDC", c, b.wallet, 2990 * USDC, noon(days[0]) + timedelta(days=4))
    b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[1]))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days])
    vip = await run_vip(b, url, lookback_months=2)
    assert {(f["tx_hash"], f["fraud_type"]) for f in vip["fraud_flags"]} == {(out, "circular"),
                                                                              (back, "circular")}
    shown = {t["tx_hash"]: t for t in await txs(b, classification="circular", include_filtered="true")}
    assert set(shown) == {out, back}
    assert all(t["fraud_flags"] == ["ERR_CIRCULAR_FLOW"] for t in shown.values())


async def test_dex_swap_and_unknown_origin(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 1)
    stranger = b.others[3]
    # The "pool": an address with no key, driven by impersonation, holding USDT to pay out.
    chain.node.call("anvil_impersonateAccount", [DEX])
    chain.node.call("anvil_setBalance", [DEX, hex(10**18)])
    chain.mint("USDT", DEX, 10**12)
    b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[0]))
    swap_out = b.pay("USDC", b.wallet, DEX, 700 * USDC, noon(days[0]) + timedelta(days=1))
    swap_in = b.pay("USDT", DEX, b.wallet, 699 * USDC, noon(days[0]) + timedelta(days=1, minutes=1))
    gift = b.pay("USDC", stranger, b.wallet, 150 * USDC, noon(days[0]) + timedelta(days=3))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(days[0], SALARY)])
    vip = await run_vip(b, url, lookback_months=1)
    assert vip["status"] == "verified" and vip["fraud_flags"] == []
    listed = {t["tx_hash"]: t for t in await txs(b)}
    assert listed[swap_out]["classification"] == "dex_trade"
    assert listed[swap_in]["classification"] == "dex_trade"
    assert listed[gift]["classification"] == "unknown"
    assert listed[gift]["fraud_flags"] == ["ERR_UNVERIFIED_SOURCE"]
    assert {t["tx_hash"] for t in await txs(b, classification="unknown")} >= {gift}


async def test_reorg_removes_a_salary_before_finality(harness, chain):
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 3)
    early = [b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(day)) for day in days[:2]]
    last = b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[2]))
    async with running_indexer(api.settings, url):
        await wait_synced(api.engine, chain, "local")
        assert last in {t["tx_hash"] for t in await txs(b)}  # indexed while not yet final
        chain.node.call("anvil_reorg", [1, []])  # the salary's block is replaced by an empty one
        b.settle(noon(month_after(days[-1])) + timedelta(days=1))
        await b.push_records([(d, SALARY) for d in days])
        await wait_synced(api.engine, chain, "local")
        assert last not in {t["tx_hash"] for t in await txs(b)}
        vip = await b.vip(3)
    assert vip["status"] == "partially_verified" and vip["periods_verified"] == 2
    assert [p["tx_hash"] for p in vip["verified_periods"]] == early
    assert vip["unverified_periods"][0]["period"] == f"{days[2]:%Y-%m}"


async def report_status(api: ApiHarness, vip_id: str) -> str | None:
    async with api.engine.connect() as conn:
        return await conn.scalar(select(vip_reports.c.status).where(vip_reports.c.id == vip_id))


async def test_a_vip_waits_for_the_wallets_own_history(harness, chain):
    """Asked for before the indexer has backfilled the just-connected wallet, the VIP stays pending (a
    report made then would miss every payout), and is verified once the history is in."""
    api, url = harness
    b = await new_borrower(api, chain)
    await salaries(b, [SALARY] * 6)
    status, body = await b.get("/v1/vip-report", user_id=b.user_id)
    assert status == 202
    job = VipReportJob(api.settings, api.engine, clock_for(api.settings), load_platforms())
    try:
        # No indexer has run: the job waits for the wallet's backfill. It may first ask for more of the
        # wallet's history than the year its connection backfilled: the window reaches past that year when
        # the wallet connected in a month's last two days (matching looks back two days before the first
        # month), as the chain's clock does on those days. Either way the second step only waits.
        await job.run_once()
        assert not await job.run_once()
    finally:
        await job.clock.close()
    async with api.engine.connect() as conn:
        row = (await conn.execute(select(vip_reports).where(
            vip_reports.c.id == body["vip_report"]["id"]))).one()
    assert row.status == "pending" and row.report is None
    async with running_indexer(api.settings, url):
        await wait_synced(api.engine, chain, "local")
        deadline = time.monotonic() + 60
        # The report's row is watched, not the endpoint: polling it ten times a second meets its rate limit.
        while await report_status(api, body["vip_report"]["id"]) == "pending":
            assert time.monotonic() < deadline, "the VIP never finished"
            await asyncio.sleep(0.1)
    status, body = await b.get("/v1/vip-report", user_id=b.user_id)
    assert body["vip_report"]["status"] == "verified" and body["vip_report"]["periods_verified"] == 6


async def test_own_money_paid_back_as_salary_by_the_payer_the_records_name_is_never_income(harness, chain):
    """The issue's borrower: each month they send their own money out, it comes back through two other
    addresses as "salary", and the platform's records name the last of them as the payer. Every month is
    self-funded: flagged circular with the path as evidence, and not one period verifies."""
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 3)
    first, payer = b.others[1], b.others[2]
    loops = []
    for day in days:
        out = b.pay("USDC", b.wallet, first, int(SALARY * USDC), noon(day) - timedelta(days=3))
        hop = b.pay("USDC", first, payer, int(SALARY * USDC), noon(day) - timedelta(days=1))
        back = b.pay("USDC", payer, b.wallet, int(SALARY * USDC), noon(day))
        loops.append((out, hop, back))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days], origin=payer)
    vip = await run_vip(b, url, lookback_months=3)
    assert vip["status"] == "unverified" and vip["periods_verified"] == 0
    assert all("ERR_CIRCULAR_FLOW" in p["reason_codes"] for p in vip["unverified_periods"])
    flagged = {f["tx_hash"]: f for f in vip["fraud_flags"]}
    assert set(flagged) == {h for out, _, back in loops for h in (out, back)}
    for out, hop, back in loops:
        evidence = flagged[back]["evidence"]
        assert flagged[back]["fraud_type"] == "circular" and evidence["rule"] == "funding_trace"
        assert evidence["self_funded_share"] == 1 and evidence["intermediaries"] == 2
        assert [step["tx_hash"] for step in evidence["path"]] == [out, hop, back]
        assert [step["from_address"] for step in evidence["path"]] == [
            to_checksum_address(a) for a in (b.wallet, first, payer)]
        assert all(step["amount_usd"] == SALARY for step in evidence["path"])
    trace = vip["fraud_trace"]
    assert trace["self_funded"] == 3 and trace["fetch_cap_hit"] is False and trace["untraced"] == []
    assert {t["classification"] for t in await txs(b, include_filtered="true")
            if t["tx_hash"] in flagged} == {"circular"}
    status, body = await b.get("/v1/risk-score", user_id=b.user_id)
    assert status == 422 and body["error"]["code"] == "ERR_INSUFFICIENT_HISTORY"


async def test_money_parked_for_weeks_then_paid_back_as_salary_is_a_wash_and_refunds_stay_clean(harness,
                                                                                                 chain):
    """One intermediary, the money parked there for three weeks before it comes back as the recorded
    salary: wash_trade. A refund of a purchase (the user's money back, no record claims it) is not."""
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 2)
    parking, shop = b.others[1], b.others[2]
    honest = b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[0]))
    bought = b.pay("USDC", b.wallet, shop, 250 * USDC, noon(days[0]) + timedelta(days=1))
    refund = b.pay("USDC", shop, b.wallet, 250 * USDC, noon(days[0]) + timedelta(days=3))
    parked = b.pay("USDC", b.wallet, parking, int(SALARY * USDC), noon(days[1]) - timedelta(days=21))
    back = b.pay("USDC", parking, b.wallet, int(SALARY * USDC), noon(days[1]))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(days[0], SALARY)])
    await b.push_records([(days[1], SALARY)], platform="paystream-2", origin=parking)
    vip = await run_vip(b, url, lookback_months=2)
    assert vip["status"] == "partially_verified" and vip["periods_verified"] == 1
    assert [p["tx_hash"] for p in vip["verified_periods"]] == [honest]
    assert {(f["tx_hash"], f["fraud_type"]) for f in vip["fraud_flags"]} == {(parked, "wash_trade"),
                                                                              (back, "wash_trade")}
    evidence = next(f["evidence"] for f in vip["fraud_flags"] if f["tx_hash"] == back)
    assert [s["tx_hash"] for s in evidence["path"]] == [parked, back] and evidence["intermediaries"] == 1
    listed = {t["tx_hash"]: t for t in await txs(b)}
    assert listed[refund]["classification"] == "unknown" and listed[bought]["classification"] == "p2p"
    assert listed[refund]["fraud_flags"] == ["ERR_UNVERIFIED_SOURCE"]


async def test_money_from_the_users_second_wallet_back_as_salary_is_a_wash(harness, chain):
    """Several wallets of one user: the money leaves the second connected wallet and comes back into the
    first through the address the records name. Every one of the user's active wallets counts as theirs."""
    api, url = harness
    b = await new_borrower(api, chain)
    second = Account.from_key(chain.node.private_keys[9])
    await connect(api, b.user_id, second)
    second_address = second.address.lower()
    days = months_after(b.start, 2)
    payer = b.others[1]
    honest = b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[0]))
    out = b.pay("USDC", second_address, payer, int(SALARY * USDC), noon(days[1]) - timedelta(days=4))
    back = b.pay("USDC", payer, b.wallet, int(SALARY * USDC), noon(days[1]))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(days[0], SALARY)])
    await b.push_records([(days[1], SALARY)], platform="paystream-2", origin=payer)
    vip = await run_vip(b, url, lookback_months=2)
    assert vip["status"] == "partially_verified"
    assert [p["tx_hash"] for p in vip["verified_periods"]] == [honest]
    flags = {f["tx_hash"]: f for f in vip["fraud_flags"]}
    assert set(flags) == {out, back} and {f["fraud_type"] for f in flags.values()} == {"wash_trade"}
    assert flags[out]["wallet_address"] == to_checksum_address(second_address)
    assert [s["from_address"] for s in flags[back]["evidence"]["path"]] == [
        to_checksum_address(a) for a in (second_address, payer)]


async def test_rent_to_a_coworker_and_a_payroll_fee_stay_clean(harness, chain):
    """Honest look-alikes on the chain: the borrower pays rent to a landlord whom the same employer pays,
    and a small fee into the employer's wallet before payday; the salaries verify, nothing is flagged."""
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 3)
    landlord = b.others[2]
    for day in days:
        b.pay("USDC", b.employer, landlord, 3000 * USDC, noon(day) - timedelta(days=10))
        b.pay("USDC", b.wallet, landlord, 1500 * USDC, noon(day) - timedelta(days=9))
        b.pay("USDC", b.wallet, b.employer, 40 * USDC, noon(day) - timedelta(hours=6))
        b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(day))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days])
    vip = await run_vip(b, url, lookback_months=3)
    assert vip["status"] == "verified" and vip["periods_verified"] == 3
    assert vip["fraud_flags"] == [] and vip["fraud_trace"]["self_funded"] == 0


ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def addresses_in(obj, path: str = "") -> list[tuple[str, str]]:
    """Every (path, string) of `obj` that is an address (0x and 40 hex digits)."""
    if isinstance(obj, str):
        return [(path, obj)] if ADDRESS.fullmatch(obj) else []
    if isinstance(obj, dict):
        return [found for k, v in obj.items() for found in addresses_in(v, f"{path}.{k}")]
    if isinstance(obj, list):
        return [found for i, v in enumerate(obj) for found in addresses_in(v, f"{path}.{i}")]
    return []


def assert_checksummed(obj, where: str) -> int:
    found = addresses_in(obj)
    wrong = [(path, value) for path, value in found if value != to_checksum_address(value)]
    assert not wrong, f"{where}: not EIP-55: {wrong[:5]}"
    return len(found)


async def test_this_months_paid_salary_is_in_the_window(harness, chain):
    """Decision 130 through the real job: two days after this month's payday (dated before now on the
    chain's clock), the six-month window ends with this month and the borrower is 6/6."""
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 6)
    paid = [b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(d)) for d in days]
    b.settle(noon(days[-1]) + timedelta(days=2))
    await b.push_records([(d, SALARY) for d in days])
    vip = await run_vip(b, url)
    assert vip["status"] == "verified", vip
    assert vip["periods_requested"] == vip["periods_verified"] == 6
    assert [p["period"] for p in vip["verified_periods"]] == [f"{d:%Y-%m}" for d in days]
    assert [p["tx_hash"] for p in vip["verified_periods"]] == paid


async def test_income_outside_the_window_is_labelled_self_funding_never_and_addresses_are_checksummed(
        harness, chain):
    """Decision 131: every payout matching a record of the user is verified_income in GET
    /v1/transactions, also outside the VIP's window; the one the user funded is wash_trade. Decision 132:
    every address in every response (and in the webhook payloads) is EIP-55, and the VIP's wallet
    address is accepted back as a payment intent's recipient_wallet."""
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 6)
    # The first "salary" is the borrower's own money, sent to the payer two hours before it pays.
    b.pay("USDC", b.wallet, b.employer, int(SALARY * USDC), noon(days[0]) - timedelta(hours=2))
    paid = [b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(d)) for d in days]
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days])
    vip = await run_vip(b, url, lookback_months=3)
    assert vip["status"] == "verified" and vip["periods_verified"] == 3
    assert [p["period"] for p in vip["verified_periods"]] == [f"{d:%Y-%m}" for d in days[3:]]

    income = await txs(b, classification="verified_income")
    assert sorted(t["tx_hash"] for t in income) == sorted(paid[1:])
    periods = {t["tx_hash"]: t["payroll_match"]["payroll_period"] for t in income}
    assert periods == {tx: f"{d:%Y-%m}" for tx, d in zip(paid[1:], days[1:], strict=True)}
    washed = await txs(b, classification="wash_trade", include_filtered="true")
    assert paid[0] in {t["tx_hash"] for t in washed}
    flag = next(f for f in vip["fraud_flags"] if f["tx_hash"] == paid[0])
    assert flag["evidence"]["path"], flag

    # Every address the API answers is EIP-55: the VIP (wallet, origins, flags and their evidence),
    # transactions, wallets, connections, events; and what a webhook would deliver.
    assert vip["wallet_address"] == to_checksum_address(b.wallet) != b.wallet
    seen = assert_checksummed(vip, "vip-report")
    for path, params in [("/v1/transactions", {"user_id": b.user_id, "include_filtered": "true"}),
                         ("/v1/wallets", {"user_id": b.user_id}),
                         ("/v1/connections", {"user_id": b.user_id}),
                         ("/v1/events", {"limit": 100}),
                         ("/v1/risk-score", {"user_id": b.user_id})]:
        status, body = await b.get(path, **params)
        assert status == 200, (path, body)
        seen += assert_checksummed(body, path)
    async with api.engine.connect() as conn:
        rows = (await conn.execute(select(outbox_events))).all()
    for row in rows:
        delivered = loads(encode_body(envelope(row)))
        seen += assert_checksummed(delivered, f"webhook {row.type}")
    assert seen > 20

    # Fed back as it was answered (and in lower case), the VIP's wallet is a recipient.
    funding = lender(chain, 1)
    registered = await register_funding_wallet(api, funding)
    assert registered.status == 201, await registered.text()
    for recipient in (vip["wallet_address"], vip["wallet_address"].lower()):
        resp = await post_json(api, "/v1/payment-intents", {
            "user_id": b.user_id, "amount_usd": Decimal(100), "token": "USDC", "network": "local",
            "recipient_wallet": recipient, "funding_wallet": funding})
        assert resp.status == 201, await resp.text()
        intent = (await resp.json())["payment_intent"]
        assert intent["recipient_wallet"] == vip["wallet_address"]
        assert_checksummed(intent, "payment intent")
    for path in (f"/v1/payment-intents/{intent['id']}", "/v1/funding-wallets"):
        status, body = await b.get(path)
        assert status == 200, (path, body)
        assert assert_checksummed(body, path) >= 1
