"""Every catalogued event type, provoked through the real API and daemon and received by a real webhook
receiver on loopback: an endpoint registered with POST /v1/webhook-endpoints, the daemon (`run_daemon`,
whose delivery worker sends them) running on a fresh Anvil. Each delivery is checked with an independent
HMAC of the raw body, its headers and body against the schemas of the OpenAPI document's `webhooks` entry
for its type (the spec's envelope; `data.object` in the schema of its resource, in the status the event
announces, or the spec's shape for `fraud.flagged`, our documented one for `income.change_detected`),
against what the API answers for that resource, and against the field set of its example in
docs/webhooks.md. Between them the two scenarios emit every catalogued type, so every entry of `webhooks`
is checked against real deliveries.

Which test provokes which type:
- test_verification_events_reach_the_lender: connection.wallet.created (SIWE sign-in),
  connection.platform.created (direct push), vip.generating (each GET /v1/vip-report that starts one),
  fraud.flagged (a wash round trip), vip.partially_verified (an unpaid month), vip.verified and
  income.change_detected (the last month alone: income 7,000 against 6,000), risk_score.generated
  (GET /v1/risk-score), vip.unverified (a month later, that month's salary never came),
  connection.revoked (DELETE /v1/connections/{id}) and vip.failed (the wallet revoked while its VIP was
  pending).
- test_disbursement_events_reach_the_lender: connection.wallet.created, payment_intent.created,
  payment_intent.approval_confirmed (approve() with the intent's calldata), charge.succeeded
  (POST /v1/charges), charge.failed (the allowance revoked after confirmation), payment_intent.expired
  (an intent left unapproved past `expires_at` on the chain's clock).
tests/test_lender_flow_example.py also receives connection.wallet.created, connection.platform.created,
vip.generating, vip.verified, risk_score.generated, payment_intent.created,
payment_intent.approval_confirmed and charge.succeeded, over public HTTP against `vip dev`.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select

from tests.support.api import ApiHarness
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.event_shapes import envelope_problems, header_problems
from tests.support.indexer import running_indexer, wait_synced
from tests.support.openapi_check import conformance_middleware
from tests.support.payments import (
    approve,
    borrower,
    create_intent,
    disbursement_settings,
    lender,
    post_json,
    wait_intent_status,
)
from tests.support.verification import USDC, month_after, months_after, new_borrower, noon
from tests.support.webhooks import Receiver
from tests.test_webhook_docs import catalogue
from vip.api.app import create_app
from vip.api.jsonio import loads
from vip.config import Settings, WebhookConfig
from vip.store.tables import outbox_events, vip_reports
from vip.verification.config import CircularFlowConfig, VerificationConfig
from vip.webhooks.catalogue import ENDPOINT_DISABLED, EVENT_TYPES
from vip.webhooks.signing import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER

HOOKS = WebhookConfig(allow_http=True, poll_interval_s=0.05)
VERIFICATION_TYPES = {
    "connection.wallet.created", "connection.platform.created", "vip.generating", "fraud.flagged",
    "vip.partially_verified", "vip.verified", "income.change_detected", "risk_score.generated",
    "vip.unverified", "connection.revoked", "vip.failed"}
DISBURSEMENT_TYPES = {
    "connection.wallet.created", "payment_intent.created", "payment_intent.approval_confirmed",
    "charge.succeeded", "charge.failed", "payment_intent.expired"}


def spec_signature(secret: str, body: bytes) -> str:
    """The spec's rule, written apart from the service: sha256= + lowercase hex HMAC-SHA256 of the raw
    body, keyed with the endpoint's secret."""
    return "sha256=" + hmac.HMAC(secret.encode("utf-8"), body, digestmod="sha256").hexdigest()


@asynccontextmanager
async def serving(aiohttp_client, settings: Settings, database_url: str, engine) -> AsyncIterator[ApiHarness]:
    """The real app on loopback, every response checked against the OpenAPI document."""
    app = create_app(settings, database_url)
    violations: list = []
    app.middlewares.insert(0, conformance_middleware(violations, settings.api.public_base_url))
    client = await aiohttp_client(app)
    yield ApiHarness(client, engine, settings)
    assert not violations, "responses that break the OpenAPI document:\n" + "\n".join(map(str, violations))


async def register(api: ApiHarness, receiver: Receiver) -> str:
    """An endpoint for every event type, pointing at the receiver; its signing secret."""
    resp = await api.client.post("/v1/webhook-endpoints", json={
        "url": receiver.url, "event_types": ["*"], "description": "end-to-end receiver"},
        headers=await api.headers())
    assert resp.status == 201, await resp.text()
    return (await resp.json())["webhook_endpoint"]["secret"]


async def deliveries(api: ApiHarness, receiver: Receiver, secret: str,
                     timeout_s: float = 30.0) -> dict[str, list[dict[str, Any]]]:
    """Once every recorded event has reached the receiver: the objects received, by event type. Every
    delivery is signed by the spec's rule, carries its event id and the spec's envelope, and is the event
    the service recorded."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with api.engine.connect() as conn:
            recorded = {r.id: r for r in await conn.execute(select(
                outbox_events.c.id, outbox_events.c.type, outbox_events.c.created_at))}
        missing = set(recorded) - set(receiver.event_ids())
        if not missing:
            break
        assert time.monotonic() < deadline, f"not received after {timeout_s}s: {sorted(missing)}"
        await asyncio.sleep(0.05)
    objects: dict[str, list[dict[str, Any]]] = defaultdict(list)
    seen = set()
    for got in receiver.received:
        assert got.all("Service-Signature") == [spec_signature(secret, got.body)]
        envelope = loads(got.body)  # exact numbers, as a lender should read them
        assert got.one("Service-Event-Id") == envelope["id"]
        assert got.one("Content-Type") == "application/json"
        assert envelope_problems(envelope) == [], (envelope["type"], envelope_problems(envelope))
        headers = {name: got.all(name) for name in (SIGNATURE_HEADER, EVENT_ID_HEADER, TIMESTAMP_HEADER)}
        assert header_problems(envelope["type"], headers) == [], envelope["type"]
        row = recorded[envelope["id"]]
        assert envelope["type"] == row.type
        assert datetime.fromisoformat(envelope["created_at"]) == row.created_at.astimezone(UTC)
        if envelope["id"] not in seen:  # at least once: a retry may repeat an event, never change it
            seen.add(envelope["id"])
            objects[envelope["type"]].append(envelope["data"]["object"])
    return objects


def assert_documented(objects: dict[str, list[dict[str, Any]]]) -> None:
    """docs/webhooks.md shows, for each type, an object with exactly the fields the service sends."""
    examples = catalogue()
    for event_type, received in objects.items():
        documented = set(examples[event_type]["data"]["object"])
        for obj in received:
            assert set(obj) == documented, (event_type, set(obj) ^ documented)


def test_the_two_scenarios_cover_every_catalogued_type():
    # webhook_endpoint.disabled is provoked end to end in tests/test_webhook_dev_loop.py.
    assert set(EVENT_TYPES) == VERIFICATION_TYPES | DISBURSEMENT_TYPES | {ENDPOINT_DISABLED}


async def test_verification_events_reach_the_lender(aiohttp_client, chain: ChainDriver, database_url,
                                                    engine, receiver):
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    verification = VerificationConfig(job_idle_s=0.05, circular_flow=CircularFlowConfig(fetch_wait_s=60))
    settings = indexer_settings(network).model_copy(update={"webhooks": HOOKS, "verification": verification})
    async with serving(aiohttp_client, settings, database_url, engine) as api:
        secret = await register(api, receiver)
        b = await new_borrower(api, chain)
        days = months_after(b.start, 4)
        peer = b.others[1]
        b.pay("USDC", b.employer, b.wallet, 5000 * USDC, noon(days[0]))
        washed = [b.pay("USDC", peer, b.wallet, 2000 * USDC, noon(days[0]) + timedelta(days=3)),
                  b.pay("USDC", b.wallet, peer, 1990 * USDC, noon(days[0]) + timedelta(days=4))]
        # days[1]: the salary never came.
        b.pay("USDC", b.employer, b.wallet, 7000 * USDC, noon(days[2]))
        b.settle(noon(month_after(days[2])) + timedelta(days=1))
        salaries = [(days[0], Decimal(5000)), (days[1], Decimal(5000)), (days[2], Decimal(7000))]
        await b.push_records(salaries)
        async with running_indexer(settings, database_url):
            await wait_synced(api.engine, chain, "local")
            partial = await b.vip(3)  # 5,000 and 7,000 verified: median 6,000
            verified = await b.vip(1)  # 7,000 alone
            status, body = await b.get("/v1/risk-score", user_id=b.user_id)
            assert status == 200, body
            score = body["risk_score"]
            # A month later: that month's salary is on the payroll record, never on chain.
            b.settle(noon(month_after(days[3])) + timedelta(days=1))
            await b.push_records([*salaries, (days[3], Decimal(5000))])  # the same account: no new event
            await wait_synced(api.engine, chain, "local")
            unverified = await b.vip(1)
        # Asked for while no daemon runs, and the wallet revoked before one does: the report fails.
        status, body = await b.get("/v1/vip-report", user_id=b.user_id, lookback_months=2)
        assert status == 202, body
        doomed = body["vip_report"]["id"]
        status, body = await b.get("/v1/connections", user_id=b.user_id)
        [wallet_connection] = [c for c in body["connections"] if c["type"] == "wallet"]
        resp = await api.client.delete(f"/v1/connections/{wallet_connection['id']}",
                                       headers=await api.headers())
        assert resp.status == 200, await resp.text()
        revoked = loads(await resp.text())["connection"]
        async with running_indexer(settings, database_url):
            deadline = time.monotonic() + 30
            while True:
                async with api.engine.connect() as conn:
                    state = await conn.scalar(select(vip_reports.c.status).where(vip_reports.c.id == doomed))
                if state != "pending":
                    break
                assert time.monotonic() < deadline, "the daemon did not fail the VIP"
                await asyncio.sleep(0.05)
            objects = await deliveries(api, receiver, secret)

    assert set(objects) == VERIFICATION_TYPES
    [created] = objects["connection.wallet.created"]
    assert created == {**revoked, "status": "active"}
    assert objects["connection.revoked"] == [revoked]
    [platform] = objects["connection.platform.created"]
    assert (platform["user_id"], platform["type"], platform["provider"], platform["source_type"]) == (
        b.user_id, "platform", "paystream", "payroll")
    generating = objects["vip.generating"]
    # (Concurrent attempts may reorder deliveries: compared as sets.)
    assert sorted(g["id"] for g in generating) == sorted([partial["id"], verified["id"], unverified["id"],
                                                          doomed])
    assert all(g["status"] == "pending" and g["user_id"] == b.user_id for g in generating)
    # The finished reports are exactly what GET /v1/vip-report answers.
    assert objects["vip.partially_verified"] == [partial]
    assert objects["vip.verified"] == [verified]
    assert objects["vip.unverified"] == [unverified]
    assert partial["status"] == "partially_verified" and partial["verified_monthly_income_usd"] == 6000
    assert verified["verified_monthly_income_usd"] == 7000 and unverified["periods_verified"] == 0
    [failed] = objects["vip.failed"]
    assert (failed["id"], failed["error_code"]) == (doomed, "ERR_MISSING_WALLET")
    assert objects["risk_score.generated"] == [score]
    assert score["vip_id"] == verified["id"]
    [change] = objects["income.change_detected"]
    assert change == {"user_id": b.user_id, "vip_id": verified["id"], "previous_vip_id": partial["id"],
                      "previous_verified_monthly_income_usd": 6000, "verified_monthly_income_usd": 7000,
                      "change_pct": Decimal("0.166667"), "detected_at": verified["generated_at"]}
    flagged = objects["fraud.flagged"]
    assert sorted(f["tx_hash"] for f in flagged) == sorted(washed)
    flags = {f["tx_hash"]: f for f in partial["fraud_flags"]}
    for f in flagged:
        assert (f["user_id"], f["fraud_type"], f["flagged_at"]) == (b.user_id, "wash_trade",
                                                                    partial["generated_at"])
        assert (f["wallet_id"], f["amount_usd"]) == (flags[f["tx_hash"]]["wallet_id"],
                                                     flags[f["tx_hash"]]["amount_usd"])
    assert sorted(f["amount_usd"] for f in flagged) == [1990, 2000]
    assert_documented(objects)


async def test_disbursement_events_reach_the_lender(aiohttp_client, chain: ChainDriver, database_url,
                                                    engine, receiver):
    settings = disbursement_settings(chain).model_copy(update={
        "webhooks": HOOKS, "verification": VerificationConfig(job_idle_s=0.05)})
    async with serving(aiohttp_client, settings, database_url, engine) as api:
        secret = await register(api, receiver)
        who = await borrower(api)
        intents, funding = {}, {}
        for name, index, amount in (("expiring", 5, "5"), ("paid", 6, "250.5"), ("refused", 7, "40")):
            funding[name] = lender(chain, index)  # one funding wallet each: one allowance each
            intents[name] = await create_intent(api, who, funding[name], amount)
        approvals = {name: approve(chain, intents[name], funding[name]) for name in ("paid", "refused")}
        async with running_indexer(settings, database_url):
            for name in approvals:
                await wait_intent_status(api, intents[name]["id"], "approval_confirmed")
            charges = {}
            for name in approvals:
                if name == "refused":  # the lender changes its mind after the confirmation
                    spender = intents[name]["approval_calldata"]["spender"]  # the organisation's own
                    chain.approve("USDC", funding[name].lower(), spender, 0)
                resp = await post_json(api, "/v1/charges", {"payment_intent_id": intents[name]["id"],
                                                            "approval_tx_hash": approvals[name]})
                assert resp.status == 201, await resp.text()
                charges[name] = loads(await resp.text())["charge"]
            chain.node.call("evm_increaseTime", [settings.disbursement.intent_ttl_s + 1])
            chain.mine()
            await wait_intent_status(api, intents["expiring"]["id"], "expired")
            objects = await deliveries(api, receiver, secret)
        resp = await api.client.get(f"/v1/payment-intents/{intents['expiring']['id']}",
                                    headers=await api.headers())
        expired_now = loads(await resp.text())["payment_intent"]

    assert set(objects) == DISBURSEMENT_TYPES
    [connected] = objects["connection.wallet.created"]
    assert (connected["user_id"], connected["identifier"]) == (who.user_id, who.wallet)
    by_id = {i["id"]: i for i in objects["payment_intent.created"]}
    assert by_id == {i["id"]: i for i in intents.values()}  # as POST answered
    confirmed = {i["id"]: i for i in objects["payment_intent.approval_confirmed"]}
    assert set(confirmed) == {intents["paid"]["id"], intents["refused"]["id"]}
    for name, tx in approvals.items():
        assert confirmed[intents[name]["id"]]["status"] == "approval_confirmed"
        assert confirmed[intents[name]["id"]]["approval_tx_hash"] == tx
    assert objects["payment_intent.expired"] == [expired_now]
    assert expired_now["status"] == "expired" and expired_now["approval_tx_hash"] is None
    assert objects["charge.succeeded"] == [charges["paid"]]
    assert charges["paid"]["status"] == "succeeded" and charges["paid"]["amount_usd"] == Decimal("250.5")
    assert objects["charge.failed"] == [charges["refused"]]
    assert charges["refused"]["failure_code"] == "ERR_INSUFFICIENT_ALLOWANCE"  # revoked after confirmation
    assert_documented(objects)

