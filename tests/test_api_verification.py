"""GET /v1/vip-report and GET /v1/risk-score: prerequisites, parameters, caching, the job's failure path
(run with `VipReportJob.run_once`) and tenancy, on the real app and database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from api.jsonio import dumps, loads
from indexer.vip_job import VipReportJob
from tests.support.api import ApiHarness
from tests.test_api_transactions import add_wallet
from vip.clock import WallClock
from vip.platforms import load_platforms
from vip.store.tables import connections, outbox_events, vip_reports

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
