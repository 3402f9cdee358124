"""GET /v1/vip-report and GET /v1/risk-score: prerequisites, parameters, caching, the job's failure path
(run with `VipReportJob.run_once`) and tenancy, on the real app and database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import insert, select, update

from tests.support.api import ApiHarness
from tests.support.platforms import load_platforms
from tests.support.verification import indexed_from
from tests.test_api_transactions import add_transfers, add_wallet, transfer
from vip.api.jsonio import dumps, loads
from vip.clock import WallClock
from vip.reports.vip_reports import request_report
from vip.reports.worker import VipReportJob
from vip.store.tables import chain_cursors, connections, outbox_events, users, vip_reports

EMPLOYER = "0x" + "e1" * 20


async def get(api: ApiHarness, path: str, org: str = "acme", **params):
    resp = await api.client.get(path, params={k: str(v) for k, v in params.items()},
                                headers=await api.headers(org))
    return resp.status, loads(await resp.text())


async def push_platform(api: ApiHarness, user_id: str) -> None:
    body = {"user_id": user_id, "platform": "paystream", "source_type": "payroll", "account_id": "a-1",
            "data": {"account_holder": "Jane", "currency": "USD", "transaction_history": [
                {"date": "2025-01-25", "amount": 5000, "direction": "inbound", "from_reference": EMPLOYER}]}}
    resp = await api.client.post("/v1/connect/platform/direct", data=dumps(body),
                                 headers={**await api.headers(), "Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()


async def test_prerequisites_parameters_and_cache(api: ApiHarness):
    user = await api.user()
    status, body = await get(api, "/v1/vip-report", user_id=user)
    assert (status, body["error"]["code"]) == (422, "ERR_MISSING_WALLET")
    await add_wallet(api.engine, "acme", user, "0x" + "ab" * 20)
    status, body = await get(api, "/v1/vip-report", user_id=user)
    assert (status, body["error"]["code"]) == (422, "ERR_MISSING_PLATFORM")
    await push_platform(api, user)
    for bad in ("13", "six"):  # (the VIP endpoint allows 10 calls a minute per user)
        status, body = await get(api, "/v1/vip-report", user_id=user, lookback_months=bad)
        assert status == 400 and "lookback_months" in body["error"]["details"]
    status, body = await get(api, "/v1/vip-report", user_id=user, refresh="yes")
    assert status == 400
    status, body = await get(api, "/v1/risk-score", user_id=user)
    assert (status, body["error"]["code"]) == (404, "ERR_NO_VIP")

    status, first = await get(api, "/v1/vip-report", user_id=user)
    assert status == 202 and first["vip_report"]["status"] == "pending"
    assert first["vip_report"]["periods_requested"] == 6
    status, again = await get(api, "/v1/vip-report", user_id=user, refresh="true")
    assert status == 202 and again["vip_report"]["id"] == first["vip_report"]["id"]  # still running
    status, other = await get(api, "/v1/vip-report", user_id=user, lookback_months=3)
    assert status == 202 and other["vip_report"]["id"] != first["vip_report"]["id"]
    status, body = await get(api, "/v1/risk-score", user_id=user)
    assert (status, body["error"]["code"]) == (422, "ERR_VIP_PENDING")
    status, body = await get(api, "/v1/risk-score", user_id=user, vip_id="vip_nope")
    assert (status, body["error"]["code"]) == (404, "ERR_NO_VIP")
    # Another organisation sees nothing of this user.
    status, body = await get(api, "/v1/vip-report", org="other", user_id=user)
    assert status == 404
    async with api.engine.connect() as conn:
        generating = (await conn.execute(select(outbox_events.c.data).where(
            outbox_events.c.type == "vip.generating"))).all()
    assert len(generating) == 2


async def test_job_fails_a_report_whose_wallet_was_revoked(api: ApiHarness):
    user = await api.user()
    wallet = await add_wallet(api.engine, "acme", user, "0x" + "cd" * 20)
    await push_platform(api, user)
    status, body = await get(api, "/v1/vip-report", user_id=user)
    assert status == 202
    vip_id = body["vip_report"]["id"]
    async with api.engine.begin() as conn:
        await conn.execute(update(connections).where(connections.c.id == wallet.connection_id)
                           .values(status="revoked"))
        # Due now by the wall clock the job runs on here.
        await conn.execute(update(vip_reports).where(vip_reports.c.id == vip_id)
                           .values(next_attempt_at=datetime.now(UTC) - timedelta(seconds=1)))
    job = VipReportJob(api.settings, api.engine, WallClock(), load_platforms())
    assert await job.run_once()
    assert not await job.run_once()  # nothing left to do
    async with api.engine.connect() as conn:
        row = (await conn.execute(select(vip_reports).where(vip_reports.c.id == vip_id))).one()
        failed = (await conn.execute(select(outbox_events.c.data).where(
            outbox_events.c.type == "vip.failed"))).scalars().all()
    assert (row.status, row.error_code) == ("error", "ERR_MISSING_WALLET")
    assert [e["object"]["id"] for e in failed] == [vip_id]
    assert failed[0]["object"]["error_code"] == "ERR_MISSING_WALLET"
    status, body = await get(api, "/v1/risk-score", user_id=user)
    assert (status, body["error"]["code"]) == (422, "ERR_VIP_FAILED")


class FixedClock:
    def __init__(self, now: datetime) -> None:
        self.moment = now

    async def now(self) -> datetime:
        return self.moment


async def test_income_change_against_the_previous_vip_fires_an_event(api: ApiHarness):
    """Transfers written as the indexer would (final blocks of network `local`); two VIPs by the job."""
    user = await api.user()
    wallet = "0x" + "ef" * 20
    await add_wallet(api.engine, "acme", user, wallet)
    now = datetime(2026, 3, 3, tzinfo=UTC)
    paid = {datetime(2026, 1, 25, 12, tzinfo=UTC): 5000, datetime(2026, 2, 25, 12, tzinfo=UTC): 7000}
    rows = [transfer(100 + i, 0, EMPLOYER, wallet, amount * 10**6) for i, amount in enumerate(paid.values())]
    for row, moment in zip(rows, paid, strict=True):
        row["block_timestamp"] = moment
    await add_transfers(api.engine, rows)
    body = {"user_id": user, "platform": "paystream", "source_type": "payroll", "account_id": "a-2",
            "data": {"account_holder": "Jane", "currency": "USD", "transaction_history": [
                {"date": f"{moment:%Y-%m-%d}", "amount": amount, "direction": "inbound",
                 "from_reference": EMPLOYER} for moment, amount in paid.items()]}}
    resp = await api.client.post("/v1/connect/platform/direct", data=dumps(body),
                                 headers={**await api.headers(), "Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()
    async with api.engine.begin() as conn:
        await conn.execute(insert(chain_cursors).values(network="local", chain_id=31337, block_number=1000))
        org = (await conn.execute(select(users.c.organisation_id).where(users.c.id == user))).scalar_one()
    # The wallet's and the payer's history, as the indexer leaves them once fetched from before the
    # trace's history (a year before the earliest income).
    await indexed_from(api.engine, "local", [wallet], now - timedelta(days=800), reason="wallet")
    await indexed_from(api.engine, "local", [EMPLOYER], now - timedelta(days=800))
    job = VipReportJob(api.settings, api.engine, FixedClock(now), load_platforms())
    ids = []
    for lookback in (2, 1):  # median of 5,000 and 7,000 = 6,000; then the last month alone: 7,000
        async with api.engine.begin() as conn:
            row, created = await request_report(conn, organisation_id=org, user_id=user,
                                                lookback_months=lookback, refresh=False, now=now,
                                                cache=timedelta(hours=24))
        assert created
        ids.append(row.id)
        while await job.run_once():
            pass
    async with api.engine.connect() as conn:
        incomes = [(await conn.execute(select(vip_reports.c.status, vip_reports.c.verified_monthly_income)
                                       .where(vip_reports.c.id == i))).one() for i in ids]
        changes = (await conn.execute(select(outbox_events.c.data).where(
            outbox_events.c.type == "income.change_detected"))).scalars().all()
    assert [(s, int(v)) for s, v in incomes] == [("verified", 6000), ("verified", 7000)]
    (change,) = changes
    assert change["object"]["vip_id"] == ids[1] and change["object"]["previous_vip_id"] == ids[0]
    assert change["object"]["change_pct"] == Decimal("0.166667")


async def test_a_user_id_postgresql_cannot_store_is_a_400_not_a_500(api: ApiHarness):
    """Found by schemathesis: a NUL in user_id reached the per-user rate-limit bucket (a text column)."""
    for path in ("/v1/vip-report", "/v1/risk-score"):
        resp = await api.client.get(path, params={"user_id": "\x00usr"}, headers=await api.headers())
        assert resp.status == 400, await resp.text()
        body = loads(await resp.text())
        assert body["error"]["code"] == "ERR_VALIDATION" and "user_id" in body["error"]["details"]
