"""Test clocks: a frozen time an organisation owns; its users are verified at that time whatever the
chain's (the service's) clock does, so one test, the example or the demo never changes what another sees.
Real app, real database, the real VIP job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import insert, select

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import indexer_settings, local_network
from tests.support.platforms import load_platforms
from tests.support.verification import indexed_from
from tests.test_api_transactions import add_transfers, add_wallet, transfer
from tests.test_api_verification import FixedClock
from vip.api.jsonio import dumps, loads
from vip.reports.labelling import LabellingJob
from vip.reports.vip_reports import request_report
from vip.reports.worker import VipReportJob
from vip.store.tables import chain_cursors, users, vip_reports

EMPLOYER = "0x" + "e2" * 20
FROZEN = datetime(2026, 3, 3, tzinfo=UTC)


async def call(api: ApiHarness, method: str, path: str, body=None, org: str = "acme"):
    resp = await api.client.request(method, path, data=dumps(body) if body is not None else None,
                                    headers={**await api.headers(org), "Content-Type": "application/json"})
    return resp.status, loads(await resp.text())


async def test_create_read_and_advance_only_forward(api: ApiHarness):
    status, body = await call(api, "POST", "/v1/test-clocks", {"frozen_time": "2026-03-03T00:00:00Z",
                                                               "name": "march"})
    assert status == 201, body
    clock = body["test_clock"]
    assert (clock["frozen_time"], clock["name"]) == ("2026-03-03T00:00:00Z", "march")
    status, body = await call(api, "GET", f"/v1/test-clocks/{clock['id']}")
    assert status == 200 and body["test_clock"] == clock
    status, body = await call(api, "POST", f"/v1/test-clocks/{clock['id']}/advance",
                              {"frozen_time": "2026-03-02T00:00:00Z"})
    assert status == 400 and body["error"]["code"] == "ERR_VALIDATION"
    status, body = await call(api, "POST", f"/v1/test-clocks/{clock['id']}/advance",
                              {"frozen_time": "2026-05-03T00:00:00Z"})
    assert status == 200 and body["test_clock"]["frozen_time"] == "2026-05-03T00:00:00Z"
    # Another organisation neither sees the clock nor creates users on it.
    status, body = await call(api, "GET", f"/v1/test-clocks/{clock['id']}", org="other")
    assert status == 404
    status, body = await call(api, "POST", "/v1/users", {"test_clock": clock["id"]}, org="other")
    assert status == 404
    status, body = await call(api, "POST", "/v1/users", {"test_clock": clock["id"]})
    assert status == 201 and body["user"]["test_clock"] == clock["id"]
    status, body = await call(api, "POST", "/v1/users", {})
    assert status == 201 and "test_clock" not in body["user"]  # production users never carry the field


async def test_refused_outside_development(aiohttp_client, session_chain, database_url, engine):
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    production = indexer_settings(network.model_copy(update={"local": False}))
    async with checked_api(aiohttp_client, production, database_url, engine) as api:
        status, body = await call(api, "POST", "/v1/test-clocks", {})
        assert status == 422 and body["error"]["code"] == "ERR_TEST_CLOCKS_UNAVAILABLE"
        status, body = await call(api, "POST", "/v1/users", {"test_clock": "clk_any"})
        assert status == 422 and body["error"]["code"] == "ERR_TEST_CLOCKS_UNAVAILABLE"


async def test_a_users_vip_is_made_at_its_clocks_time_whatever_the_chain_does(api: ApiHarness):
    """Salaries in January and February 2026; the clock reads 3 March 2026 while the service's clock (the
    chain's) has moved on to 2027. The user's VIP still covers January and February and verifies both;
    once the clock is advanced past them, the window moves with it."""
    status, body = await call(api, "POST", "/v1/test-clocks", {"frozen_time": FROZEN.isoformat()})
    clock = body["test_clock"]["id"]
    status, body = await call(api, "POST", "/v1/users", {"test_clock": clock})
    user = body["user"]["id"]
    wallet = "0x" + "f1" * 20
    await add_wallet(api.engine, "acme", user, wallet)
    paid = [datetime(2026, 1, 25, 12, tzinfo=UTC), datetime(2026, 2, 25, 12, tzinfo=UTC)]
    rows = [transfer(200 + i, 0, EMPLOYER, wallet, 5000 * 10**6) for i in range(len(paid))]
    for row, moment in zip(rows, paid, strict=True):
        row["block_timestamp"] = moment
    await add_transfers(api.engine, rows)
    status, body = await call(api, "POST", "/v1/connect/platform/direct", {
        "user_id": user, "platform": "paystream", "source_type": "payroll", "account_id": "a-clock",
        "data": {"account_holder": "Jane", "currency": "USD", "transaction_history": [
            {"date": f"{m:%Y-%m-%d}", "amount": 5000, "direction": "inbound", "from_reference": EMPLOYER}
            for m in paid]}})
    assert status == 201, body
    service_now = datetime(2027, 1, 10, tzinfo=UTC)  # the chain has moved on (another test, the example)
    async with api.engine.begin() as conn:
        await conn.execute(insert(chain_cursors).values(network="local", chain_id=31337, block_number=1000))
        org = (await conn.execute(select(users.c.organisation_id).where(users.c.id == user))).scalar_one()
    # The wallet's and the payer's history, fetched from before the trace's (a year before the income).
    await indexed_from(api.engine, "local", [wallet], FROZEN - timedelta(days=800), reason="wallet")
    await indexed_from(api.engine, "local", [EMPLOYER], FROZEN - timedelta(days=800))
    job = VipReportJob(api.settings, api.engine, FixedClock(service_now), load_platforms())

    async def vip() -> dict:
        async with api.engine.begin() as conn:
            row, _ = await request_report(conn, organisation_id=org, user_id=user, lookback_months=2,
                                          refresh=True, now=service_now, cache=timedelta(hours=24))
        while await job.run_once():
            pass
        async with api.engine.connect() as conn:
            return (await conn.execute(select(vip_reports.c.report)
                                       .where(vip_reports.c.id == row.id))).scalar_one()

    report = await vip()
    assert (report["status"], report["periods_verified"], report["generated_at"]) == (
        "verified", 2, "2026-03-03T00:00:00Z")
    assert [p["period"] for p in report["verified_periods"]] == ["2026-01", "2026-02"]

    await call(api, "POST", f"/v1/test-clocks/{clock}/advance", {"frozen_time": "2026-05-03T00:00:00Z"})
    moved = await vip()
    assert [p["period"] for p in moved["unverified_periods"]] == ["2026-03", "2026-04"]
    assert (moved["status"], moved["periods_verified"]) == ("unverified", 0)


async def test_personas_are_listed_and_refused_with_clear_errors(api: ApiHarness, aiohttp_client,
                                                                session_chain, database_url, engine):
    status, body = await call(api, "GET", "/v1/dev/personas")
    assert status == 200
    names = {p["name"] for p in body["personas"]}
    assert {"steady_salaried", "variable_gig", "new_job", "partially_verified", "wrong_wallet", "wash_trader",
            "self_funded_salary", "thin_file"} <= names
    status, body = await call(api, "POST", "/v1/dev/personas", {"persona": "millionaire"})
    assert status == 400 and "steady_salaried" in body["error"]["details"]["persona"]
    status, body = await call(api, "POST", "/v1/dev/personas",
                              {"persona": "steady_salaried", "network": "base"})
    # The test stack configures no network called base: unknown, 400 (a configured real one is 422).
    assert (status, body["error"]["code"]) == (400, "ERR_VALIDATION")
    assert "network" in body["error"]["details"]
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    production = indexer_settings(network.model_copy(update={"local": False}))
    async with checked_api(aiohttp_client, production, database_url, engine) as prod:
        status, body = await call(prod, "POST", "/v1/dev/personas", {"persona": "steady_salaried"})
        assert status == 422 and body["error"]["code"] == "ERR_TEST_CLOCKS_UNAVAILABLE"


async def test_a_users_labels_are_worked_out_at_its_clocks_time_without_a_vip(api: ApiHarness):
    """The labelling job labels a user on a clock over the longest VIP's window at the clock's time (3 March
    2026: from March 2025), not at the service's (January 2100, a window that starts after the records;
    far ahead because the queue row is due at the session chain's time, which other tests move on):
    the September 2025 payment is labelled, the salaries are income, and no VIP was asked for."""
    status, body = await call(api, "POST", "/v1/test-clocks", {"frozen_time": FROZEN.isoformat()})
    status, body = await call(api, "POST", "/v1/users", {"test_clock": body["test_clock"]["id"]})
    user = body["user"]["id"]
    wallet, landlord = "0x" + "f2" * 20, "0x" + "1a" * 20
    await add_wallet(api.engine, "acme", user, wallet)
    paid = [datetime(2026, 1, 25, 12, tzinfo=UTC), datetime(2026, 2, 25, 12, tzinfo=UTC)]
    rent = transfer(300, 0, wallet, landlord, 900 * 10**6)
    rent["block_timestamp"] = datetime(2025, 9, 1, 12, tzinfo=UTC)
    rows = [transfer(310 + i, 0, EMPLOYER, wallet, 5000 * 10**6) for i in range(len(paid))]
    for row, moment in zip(rows, paid, strict=True):
        row["block_timestamp"] = moment
    await add_transfers(api.engine, [rent, *rows])
    async with api.engine.begin() as conn:
        await conn.execute(insert(chain_cursors).values(network="local", chain_id=31337, block_number=1000))
    # Every counterparty's history (and the wallet's) is already fetched, from before the longest VIP's
    # trace history (no indexer runs here): the job never waits on a fetch, so the outcome cannot depend
    # on how fast this machine is.
    await indexed_from(api.engine, "local", [wallet], datetime(2023, 1, 1, tzinfo=UTC), reason="wallet")
    await indexed_from(api.engine, "local", [EMPLOYER, landlord], datetime(2023, 1, 1, tzinfo=UTC))
    status, body = await call(api, "POST", "/v1/connect/platform/direct", {
        "user_id": user, "platform": "paystream", "source_type": "payroll", "account_id": "a-clock-labels",
        "data": {"account_holder": "Jane", "currency": "USD", "transaction_history": [
            {"date": f"{m:%Y-%m-%d}", "amount": 5000, "direction": "inbound", "from_reference": EMPLOYER}
            for m in paid]}})
    assert status == 201, body
    job = LabellingJob(api.settings, api.engine, FixedClock(datetime(2100, 1, 10, tzinfo=UTC)),
                       load_platforms())
    while await job.run_once():
        pass
    status, body = await call(api, "GET", f"/v1/transactions?user_id={user}&limit=50")
    assert status == 200, body
    shown = {t["tx_hash"]: t for t in body["transactions"]}
    assert shown[rent["tx_hash"]]["classification"] == "p2p"
    assert {shown[r["tx_hash"]]["classification"] for r in rows} == {"verified_income"}
    assert [shown[r["tx_hash"]]["payroll_match"]["payroll_period"] for r in rows] == ["2026-01", "2026-02"]
    async with api.engine.connect() as conn:
        made = (await conn.execute(select(vip_reports.c.id).where(vip_reports.c.user_id == user))).first()
    assert made is None
