"""Webhook endpoints and the events API over real HTTP: create (secret once), list, delete, rotate; URL
and event-type checks; events listed, filtered, paginated, with deliveries and attempts; replay. Events
the API already emits (wallet and platform connections, revocation) are provoked end to end and
received by a real receiver."""

from __future__ import annotations

import hmac
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from eth_account import Account

from tests.support.api import ApiHarness
from tests.support.wallets import connect
from tests.support.webhooks import ManualClock, Receiver
from vip.clock import WallClock
from vip.store.outbox import record_event
from vip.webhooks.worker import DeliveryWorker

CREATED = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


async def call(api: ApiHarness, method: str, path: str, org: str = "acme", scopes=None, **kwargs):
    resp = await api.client.request(method, path, headers=await api.headers(org, scopes), **kwargs)
    return resp.status, await resp.json()


async def add_endpoint(api: ApiHarness, url: str, org: str = "acme", **body) -> dict:
    status, answer = await call(api, "POST", "/v1/webhook-endpoints", org, json={"url": url, **body})
    assert status == 201, answer
    return answer["webhook_endpoint"]


async def org_id(api: ApiHarness, org: str = "acme") -> str:
    await api.key(org)
    async with api.engine.connect() as conn:
        return (await conn.exec_driver_sql("select id from organisations where name = %s", (org,))).scalar()


async def emit(api: ApiHarness, event_type: str, obj: dict, org: str = "acme",
               created_at: datetime = CREATED) -> str:
    organisation = await org_id(api, org)
    async with api.engine.begin() as conn:
        return await record_event(conn, event_type, obj, created_at=created_at, organisation_id=organisation)


async def drain(api: ApiHarness, clock=None) -> None:
    worker = DeliveryWorker(api.engine, clock or WallClock(), api.settings.webhooks,
                            cipher=api.settings.api.cipher())
    try:
        await worker.drain()
    finally:
        await worker.session.close()


def verify(secret: str, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, "sha256").hexdigest()
    return hmac.compare_digest(expected, header)


async def test_endpoint_lifecycle(hooks):
    created = await add_endpoint(hooks, "https://hooks.example.com/vip", description="prod",
                                 event_types=["vip.verified", "connection.revoked", "vip.verified"])
    assert created["secret"].startswith("whsec_") and len(created["secret"]) > 40
    assert created["event_types"] == ["connection.revoked", "vip.verified"]  # catalogue order, no repeats
    assert (created["status"], created["description"]) == ("enabled", "prod")
    every = await add_endpoint(hooks, "http://127.0.0.1:9/hook")
    assert every["event_types"] == ["*"]

    status, listing = await call(hooks, "GET", "/v1/webhook-endpoints")
    assert status == 200
    assert [e["id"] for e in listing["webhook_endpoints"]] == [created["id"], every["id"]]
    assert all("secret" not in e for e in listing["webhook_endpoints"])
    # Another organisation sees none of them and cannot touch them.
    status, other = await call(hooks, "GET", "/v1/webhook-endpoints", "other")
    assert other["webhook_endpoints"] == []
    for method, path in (("DELETE", f"/v1/webhook-endpoints/{created['id']}"),
                         ("POST", f"/v1/webhook-endpoints/{created['id']}/rotate-secret")):
        status, answer = await call(hooks, method, path, "other")
        assert (status, answer["error"]["code"]) == (404, "ERR_NOT_FOUND")

    status, rotated = await call(hooks, "POST", f"/v1/webhook-endpoints/{created['id']}/rotate-secret")
    assert status == 200
    rotated = rotated["webhook_endpoint"]
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != created["secret"]
    overlap_end = datetime.fromisoformat(rotated["previous_secret_expires_at"])
    assert overlap_end - datetime.fromisoformat(created["created_at"]) >= timedelta(hours=24)

    status, deleted = await call(hooks, "DELETE", f"/v1/webhook-endpoints/{created['id']}")
    assert status == 200 and deleted["webhook_endpoint"]["status"] == "deleted"
    status, listing = await call(hooks, "GET", "/v1/webhook-endpoints")
    assert [e["id"] for e in listing["webhook_endpoints"]] == [every["id"]]
    status, answer = await call(hooks, "DELETE", f"/v1/webhook-endpoints/{created['id']}")
    assert status == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"url": "ftp://hooks.example.com/x"}, "url"),
    ({"url": "https://user:pw@hooks.example.com/x"}, "url"),
    ({"url": "https://token@hooks.example.com/x"}, "url"),
    ({"url": "hooks.example.com/x"}, "url"),
    ({"url": "https:///x"}, "url"),
    ({"url": "https://hooks.example.com:99999/x"}, "url"),
    ({"url": "https://hooks.example.com/x", "event_types": ["vip.generated"]}, "event_types"),
    ({"url": "https://hooks.example.com/x", "event_types": []}, "event_types"),
    ({"url": "https://hooks.example.com/x", "event_types": ["*", "vip.verified"]}, "event_types"),
    ({"url": "https://hooks.example.com/x", "secret": "mine"}, "secret"),
])
async def test_bad_endpoints_are_refused(hooks, body, field):
    status, answer = await call(hooks, "POST", "/v1/webhook-endpoints", json=body)
    assert status == 400, answer
    assert answer["error"]["code"] == "ERR_VALIDATION" and field in answer["error"]["details"]
    status, listing = await call(hooks, "GET", "/v1/webhook-endpoints")
    assert listing["webhook_endpoints"] == []


async def test_https_is_required_outside_local_development(api):
    assert api.settings.webhooks.allow_http is False
    status, answer = await call(api, "POST", "/v1/webhook-endpoints", json={"url": "http://hooks.example.com/x"})
    assert status == 400 and "https" in answer["error"]["details"]["url"]
    status, _ = await call(api, "POST", "/v1/webhook-endpoints", json={"url": "https://hooks.example.com/x"})
    assert status == 201


@pytest.mark.parametrize("url", ["https://localhost:8443/hook", "https://169.254.169.254/latest/meta-data",
                                 "https://10.0.0.7/hook", "https://[::ffff:127.0.0.1]/hook"])
async def test_inward_urls_are_refused_outside_local_development(api, url):
    """SSRF: an endpoint naming or resolving to our own network is refused at registration."""
    assert api.settings.webhooks.allow_http is False
    status, answer = await call(api, "POST", "/v1/webhook-endpoints", json={"url": url})
    assert status == 400 and answer["error"]["code"] == "ERR_VALIDATION", answer
    assert "public" in answer["error"]["details"]["url"]
    status, listing = await call(api, "GET", "/v1/webhook-endpoints")
    assert listing["webhook_endpoints"] == []


async def test_webhook_and_event_routes_need_the_admin_scope(hooks):
    event_id = await emit(hooks, "vip.verified", {"id": "vip_1"})
    for method, path in (("POST", "/v1/webhook-endpoints"), ("GET", "/v1/webhook-endpoints"),
                         ("DELETE", "/v1/webhook-endpoints/whe_x"),
                         ("POST", "/v1/webhook-endpoints/whe_x/rotate-secret"), ("GET", "/v1/events"),
                         ("GET", f"/v1/events/{event_id}"), ("POST", f"/v1/events/{event_id}/replay")):
        status, answer = await call(hooks, method, path, scopes=["read", "write", "disburse"],
                                    json={"url": "https://hooks.example.com/x"} if method == "POST" else None)
        assert (status, answer["error"]["code"]) == (403, "ERR_FORBIDDEN"), (method, path)


async def test_events_are_listed_newest_first_filtered_and_paginated(hooks):
    ids = [await emit(hooks, "vip.verified" if n % 2 else "connection.revoked", {"n": n},
                      created_at=CREATED + timedelta(minutes=n)) for n in range(5)]
    await emit(hooks, "vip.verified", {"n": "other org"}, org="other")

    seen, cursor = [], None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        status, page = await call(hooks, "GET", "/v1/events", params=params)
        assert status == 200
        seen += [e["id"] for e in page["events"]]
        if not page["pagination"]["has_more"]:
            assert page["pagination"]["cursor"] is None
            break
        cursor = page["pagination"]["cursor"]
    assert seen == ids[::-1]

    status, page = await call(hooks, "GET", "/v1/events", params={"type": "vip.verified"})
    assert [e["id"] for e in page["events"]] == [ids[3], ids[1]]
    first = page["events"][0]
    assert first == {"id": ids[3], "type": "vip.verified", "created_at": "2026-01-05T12:03:00Z",
                     "api_version": "v1", "data": {"object": {"n": 3}}, "delivery_status": "pending"}
    window = {"created_from": "2026-01-05T12:01:00Z", "created_to": "2026-01-05T12:03:00"}
    status, page = await call(hooks, "GET", "/v1/events", params=window)
    assert [e["id"] for e in page["events"]] == [ids[2], ids[1]]

    await drain(hooks)  # no endpoint: nothing to deliver
    status, page = await call(hooks, "GET", "/v1/events", params={"delivery_status": "none"})
    assert len(page["events"]) == 5
    for params in ({"cursor": "not-a-cursor"}, {"limit": "500"}, {"delivery_status": "lost"},
                   {"created_from": "yesterday"}, {"colour": "red"}):
        status, answer = await call(hooks, "GET", "/v1/events", params=params)
        assert (status, answer["error"]["code"]) == (400, "ERR_VALIDATION"), params


async def test_failed_event_shows_its_attempts_and_replay_delivers_it(hooks):
    answers = {"status": 500}
    receiver = await Receiver(respond=lambda n: answers["status"]).start()
    try:
        endpoint = await add_endpoint(hooks, receiver.url, event_types=["vip.verified"])
        event_id = await emit(hooks, "vip.verified", {"id": "vip_1", "verified_monthly_income_usd":
                                                      Decimal("4200.123456")})
        clock = ManualClock(datetime.now(UTC))
        await drain(hooks, clock)
        for delay in (timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2), timedelta(hours=8)):
            clock.advance(delay)
            await drain(hooks, clock)
        assert len(receiver.received) == 5

        status, answer = await call(hooks, "GET", f"/v1/events/{event_id}")
        assert status == 200
        event = answer["event"]
        assert event["delivery_status"] == "failed"
        assert event["data"]["object"]["verified_monthly_income_usd"] == 4200.123456
        [delivery] = event["deliveries"]
        assert (delivery["endpoint_id"], delivery["url"], delivery["status"]) == (
            endpoint["id"], receiver.url, "failed")
        assert delivery["attempt_count"] == 5 and delivery["next_attempt_at"] is None
        assert [a["status_code"] for a in delivery["attempts"]] == [500] * 5
        assert [a["error"] for a in delivery["attempts"]] == ["HTTP 500"] * 5
        status, page = await call(hooks, "GET", "/v1/events", params={"delivery_status": "failed"})
        assert [e["id"] for e in page["events"]] == [event_id]
        # The exact decimal went over the wire, signed.
        got = receiver.received[0]
        assert b'"verified_monthly_income_usd":4200.123456' in got.body
        assert verify(endpoint["secret"], got.body, got.one("Service-Signature"))

        answers["status"] = 200
        status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay")
        assert status == 202
        assert answer["event"]["delivery_status"] == "pending"
        assert answer["event"]["deliveries"][0]["attempt_count"] == 0
        await drain(hooks)
        assert receiver.event_ids() == [event_id] * 6
        status, answer = await call(hooks, "GET", f"/v1/events/{event_id}")
        event = answer["event"]
        assert event["delivery_status"] == "delivered"
        assert [a["status_code"] for a in event["deliveries"][0]["attempts"]] == [500] * 5 + [200]
    finally:
        await receiver.stop()


async def test_replay_needs_an_event_of_the_organisation_and_an_endpoint(hooks, receiver):
    event_id = await emit(hooks, "fraud.flagged", {"user_id": "usr_1"})
    status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay", "other")
    assert status == 404
    await drain(hooks)
    status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay")
    assert (status, answer["error"]["code"]) == (422, "ERR_NO_WEBHOOK_ENDPOINT")
    # An endpoint registered after the event gets it on replay.
    await add_endpoint(hooks, receiver.url)
    status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay")
    assert status == 202
    await drain(hooks)
    assert receiver.event_ids() == [event_id]


async def test_connection_events_emitted_by_the_api_are_received(hooks, receiver):
    """connection.wallet.created, connection.platform.created and connection.revoked, provoked through
    the API and received, signed, by a real receiver."""
    endpoint = await add_endpoint(hooks, receiver.url)
    user = await hooks.user()
    wallet = await connect(hooks, user, Account.create())
    status, platform = await call(hooks, "POST", "/v1/connect/platform/direct", json={
        "user_id": user, "platform": "acme_neobank", "source_type": "neobank_account", "account_id": "A-1",
        "data": {"account_holder": "holder-1", "currency": "usdc", "transaction_history": [
            {"date": "2025-01-31", "amount": 4200, "direction": "inbound", "from_reference": "ACME LTD"}]}})
    assert status == 201, platform
    status, revoked = await call(hooks, "DELETE", f"/v1/connections/{wallet['id']}")
    assert status == 200

    await drain(hooks)
    received = sorted(((r, json.loads(r.body)) for r in receiver.received), key=lambda rp: rp[0].at)
    by_type = {p["type"]: p["data"]["object"] for _, p in received}
    assert by_type == {"connection.wallet.created": wallet, "connection.platform.created":
                       platform["connection"], "connection.revoked": revoked["connection"]}
    for r, payload in received:
        assert verify(endpoint["secret"], r.body, r.one("Service-Signature"))
        assert r.one("Service-Event-Id") == payload["id"]
    status, page = await call(hooks, "GET", "/v1/events", params={"delivery_status": "delivered"})
    assert [e["type"] for e in page["events"]] == ["connection.revoked", "connection.platform.created",
                                                   "connection.wallet.created"]
