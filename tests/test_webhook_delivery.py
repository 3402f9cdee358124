"""Webhook delivery to a real receiver on loopback: signatures, the spec's retry schedule on a clock the
test moves, time-outs, endpoint scoping, rotation, deletion, several workers, replay."""

from __future__ import annotations

import asyncio
import hmac
import json
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.webhooks import (
    DEV_CIPHER,
    START,
    ManualClock,
    Receiver,
    deliveries,
    make_endpoint,
    organisation,
)
from vip.clock import WallClock
from vip.config import WebhookConfig
from vip.devstack.anvil import free_port
from vip.store.outbox import record_event
from vip.webhooks import events, store
from vip.webhooks.worker import DeliveryWorker

CONFIG = WebhookConfig(allow_http=True)
CONNECTION = {"id": "con_1", "user_id": "usr_1", "type": "wallet", "status": "revoked"}


def spec_signature(secret: str, body: bytes) -> str:
    """The spec's rule, written independently of the service: sha256= + lowercase hex HMAC-SHA256 of the
    raw body, keyed with the secret."""
    return "sha256=" + hmac.HMAC(secret.encode("utf-8"), body, digestmod="sha256").hexdigest()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def worker(engine: AsyncEngine, clock: ManualClock):
    w = DeliveryWorker(engine, clock, CONFIG, cipher=DEV_CIPHER)
    yield w
    stop = asyncio.Event()
    stop.set()
    await w.run(stop)  # closes its HTTP session


async def emit(engine: AsyncEngine, org_id: str, event_type: str = "connection.revoked",
               obj: dict | None = None, clock: ManualClock | None = None) -> str:
    async with engine.begin() as conn:
        return await record_event(conn, event_type, obj or CONNECTION, organisation_id=org_id,
                                  created_at=clock.current if clock else START)


def counter(event_type: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("vip_webhook_deliveries_total",
                                     {"event_type": event_type, "outcome": outcome}) or 0.0


async def test_event_is_delivered_signed_with_the_spec_headers(engine, receiver, worker, clock):
    org = await organisation(engine)
    _, secret = await make_endpoint(engine, org, receiver.url)
    obj = {"id": "con_9", "user_id": "usr_9", "amount_usd": 1234.5}
    before = counter("connection.revoked", "delivered")
    event_id = await emit(engine, org, obj=obj)

    await worker.drain()

    [got] = receiver.received
    assert got.all("Service-Signature") == [spec_signature(secret, got.body)]
    assert got.one("Service-Event-Id") == event_id
    assert got.one("Service-Timestamp") == "2026-03-02T09:00:00Z"
    assert got.one("Content-Type") == "application/json"
    payload = json.loads(got.body)
    assert payload == {"id": event_id, "type": "connection.revoked", "created_at": "2026-03-02T09:00:00Z",
                       "api_version": "v1", "data": {"object": obj}}
    [delivery] = await deliveries(engine, event_id)
    assert (delivery.status, delivery.attempts, delivery.delivered_at) == ("delivered", 1, START)
    assert counter("connection.revoked", "delivered") == before + 1


async def test_a_tampered_body_does_not_verify(engine, receiver, worker):
    org = await organisation(engine)
    _, secret = await make_endpoint(engine, org, receiver.url)
    await emit(engine, org)
    await worker.drain()
    [got] = receiver.received
    tampered = got.body.replace(b"revoked", b"active")
    assert spec_signature(secret, tampered) != got.one("Service-Signature")
    assert spec_signature("whsec_other", got.body) != got.one("Service-Signature")


async def test_fails_three_times_then_succeeds_on_the_fourth_attempt(engine, worker, clock):
    receiver = await Receiver(respond=lambda n: 500 if n <= 3 else 204).start()
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, receiver.url)
        event_id = await emit(engine, org)

        await worker.drain()
        # Each retry comes exactly when the schedule says, not a second before.
        for delay in (timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2)):
            [delivery] = await deliveries(engine, event_id)
            assert delivery.status == "pending"
            assert delivery.next_attempt_at == clock.current + delay
            sent = len(receiver.received)
            clock.advance(delay - timedelta(seconds=1))
            await worker.drain()
            assert len(receiver.received) == sent
            clock.advance(timedelta(seconds=1))
            await worker.drain()
            assert len(receiver.received) == sent + 1

        stamps = [r.one("Service-Timestamp") for r in receiver.received]
        assert stamps == ["2026-03-02T09:00:00Z", "2026-03-02T09:05:00Z", "2026-03-02T09:35:00Z",
                          "2026-03-02T11:35:00Z"]
        assert receiver.event_ids() == [event_id] * 4
        [delivery] = await deliveries(engine, event_id)
        assert (delivery.status, delivery.attempts) == ("delivered", 4)
        clock.advance(timedelta(days=2))
        await worker.drain()
        assert len(receiver.received) == 4
    finally:
        await receiver.stop()


async def test_always_failing_endpoint_is_failed_after_five_attempts_and_replay_delivers(engine, worker,
                                                                                          clock):
    answers = {"status": 503}
    receiver = await Receiver(respond=lambda n: answers["status"]).start()
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, receiver.url)
        event_id = await emit(engine, org)
        failed_before = counter("connection.revoked", "failed")

        await worker.drain()
        for delay in (timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2), timedelta(hours=8)):
            clock.advance(delay)
            await worker.drain()
        stamps = [r.one("Service-Timestamp") for r in receiver.received]
        assert stamps == ["2026-03-02T09:00:00Z", "2026-03-02T09:05:00Z", "2026-03-02T09:35:00Z",
                          "2026-03-02T11:35:00Z", "2026-03-02T19:35:00Z"]
        [delivery] = await deliveries(engine, event_id)
        assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("failed", 5, None)
        assert counter("connection.revoked", "failed") == failed_before + 1

        clock.advance(timedelta(days=30))
        await worker.drain()
        assert len(receiver.received) == 5  # never retried on its own

        answers["status"] = 200
        async with engine.begin() as conn:
            assert await events.replay(conn, org, event_id, clock.current) == 1
        # Waiting counts from the replay, not from the event's first fan-out 30 days ago.
        assert await worker.oldest_undelivered() == clock.current
        await worker.drain()
        assert len(receiver.received) == 6
        assert receiver.event_ids() == [event_id] * 6
        [delivery] = await deliveries(engine, event_id)
        assert (delivery.status, delivery.attempts) == ("delivered", 1)
    finally:
        await receiver.stop()


async def test_connection_refused_is_a_failed_attempt(engine, worker, clock):
    org = await organisation(engine)
    await make_endpoint(engine, org, f"http://127.0.0.1:{free_port()}/hook")
    event_id = await emit(engine, org)
    await worker.drain()
    [delivery] = await deliveries(engine, event_id)
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.next_attempt_at == START + timedelta(minutes=5)
    async with engine.connect() as conn:
        [(_, [attempt])] = await events.deliveries_of(conn, event_id)
    assert attempt.status_code is None and "Connect" in attempt.error


async def test_slow_receiver_fails_after_ten_seconds_without_delaying_another_endpoint(engine, clock):
    slow = await Receiver(respond=lambda n: None).start()  # never answers until released
    fast = await Receiver().start()
    worker = DeliveryWorker(engine, clock, WebhookConfig(allow_http=True), cipher=DEV_CIPHER)  # 10 s time-out
    assert worker.config.timeout_s == 10
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, slow.url)
        await make_endpoint(engine, org, fast.url)
        event_id = await emit(engine, org)
        slow_done = None
        while slow_done is None:
            rows = {r.endpoint_id: r for r in await deliveries(engine, event_id)}
            statuses = sorted(r.status + str(r.attempts) for r in rows.values())
            if statuses == ["delivered1", "pending1"]:
                slow_done = True
            elif statuses == ["delivered1", "pending0"]:
                # The fast endpoint is done while the slow one's first attempt still hangs.
                assert len(slow.received) == 1 and len(fast.received) == 1
            await asyncio.sleep(0.05)
        async with engine.connect() as conn:
            attempts = {row.url: a for row, a in await events.deliveries_of(conn, event_id)}
        [slow_attempt] = attempts[slow.url]
        assert slow_attempt.status_code is None
        assert slow_attempt.error == "no answer within 10 s"
        assert slow_attempt.duration_ms >= 10_000
        assert [a.status_code for a in attempts[fast.url]] == [200]
        assert fast.received[0].at < slow.received[0].at + 10
    finally:
        stop.set()
        await running
        await slow.stop()
        await fast.stop()


async def test_endpoints_receive_only_their_event_types_and_organisation(engine, worker):
    receivers = [await Receiver().start() for _ in range(3)]
    try:
        acme, other = await organisation(engine, "acme"), await organisation(engine, "other")
        await make_endpoint(engine, acme, receivers[0].url, ["connection.revoked"])
        await make_endpoint(engine, acme, receivers[1].url)  # every type
        await make_endpoint(engine, other, receivers[2].url)
        revoked = await emit(engine, acme, "connection.revoked")
        created = await emit(engine, acme, "connection.wallet.created")
        verified = await emit(engine, acme, "vip.verified")
        await worker.drain()
        assert receivers[0].event_ids() == [revoked]
        assert sorted(receivers[1].event_ids()) == sorted([revoked, created, verified])
        assert receivers[2].event_ids() == []
        assert await deliveries(engine, verified) and len(await deliveries(engine, revoked)) == 2
    finally:
        for r in receivers:
            await r.stop()


async def test_rotation_signs_with_both_secrets_during_the_overlap(engine, receiver, worker, clock):
    org = await organisation(engine)
    endpoint_id, old = await make_endpoint(engine, org, receiver.url)
    async with engine.begin() as conn:
        new, endpoint = await store.rotate_secret(conn, org, endpoint_id, clock.current, timedelta(hours=1),
                                                  cipher=DEV_CIPHER)
    assert new != old and endpoint.previous_secret_expires_at == START + timedelta(hours=1)

    await emit(engine, org)
    await worker.drain()
    got = receiver.received[-1]
    assert got.all("Service-Signature") == [spec_signature(new, got.body), spec_signature(old, got.body)]

    clock.advance(timedelta(hours=1))
    await emit(engine, org, clock=clock)
    await worker.drain()
    got = receiver.received[-1]
    assert got.all("Service-Signature") == [spec_signature(new, got.body)]


async def test_deleted_endpoint_gets_nothing_more(engine, worker, clock):
    receiver = await Receiver(respond=lambda n: 500).start()
    try:
        org = await organisation(engine)
        endpoint_id, _ = await make_endpoint(engine, org, receiver.url)
        event_id = await emit(engine, org)
        await worker.drain()
        async with engine.begin() as conn:
            assert await store.delete_endpoint(conn, org, endpoint_id, clock.current) is not None
        later = await emit(engine, org)
        clock.advance(timedelta(days=1))
        await worker.drain()
        assert receiver.event_ids() == [event_id]
        [delivery] = await deliveries(engine, event_id)
        assert delivery.status == "cancelled"
        assert await deliveries(engine, later) == []
    finally:
        await receiver.stop()


async def test_several_workers_share_the_deliveries_without_sending_twice(engine, receiver, clock):
    org = await organisation(engine)
    await make_endpoint(engine, org, receiver.url)
    await make_endpoint(engine, org, receiver.url)
    ids = [await emit(engine, org) for _ in range(40)]
    workers = [DeliveryWorker(engine, clock, WebhookConfig(allow_http=True, fanout_batch=7,
                                                           max_in_flight=5), cipher=DEV_CIPHER)
               for _ in range(3)]
    try:
        await asyncio.gather(*(w.drain() for w in workers))
    finally:
        for w in workers:
            await w.session.close()
    assert sorted(receiver.event_ids()) == sorted(ids * 2)
    assert {d.status for d in await deliveries(engine)} == {"delivered"}


async def test_oldest_undelivered_age(engine, worker, clock):
    receiver = await Receiver(respond=lambda n: 500).start()
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, receiver.url)
        assert await worker.oldest_undelivered() is None
        await emit(engine, org)
        assert await worker.oldest_undelivered() == START  # committed, not fanned out yet
        await worker.drain()
        assert await worker.oldest_undelivered() == START  # retrying
        clock.advance(timedelta(minutes=10))
        await worker._refresh_oldest(force=True)
        assert REGISTRY.get_sample_value("vip_webhook_oldest_undelivered_seconds") == 600
    finally:
        await receiver.stop()


async def test_every_catalogue_type_is_delivered_to_its_subscribers(engine, worker):
    """Delivery is generic over event types: each type of the catalogue, recorded as the branches that own
    it record it, reaches an endpoint subscribed to that type alone and one subscribed to all."""
    from vip.webhooks.catalogue import EVENT_TYPES

    every, single = await Receiver().start(), await Receiver().start()
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, every.url)
        singles = {}
        for event_type in EVENT_TYPES:
            singles[event_type] = await make_endpoint(engine, org, f"{single.url}?t={event_type}",
                                                      [event_type])
        ids = {t: await emit(engine, org, t, {"id": f"obj_{n}"}) for n, t in enumerate(EVENT_TYPES)}
        await worker.drain()
        assert sorted(every.event_ids()) == sorted(ids.values())
        assert sorted(single.event_ids()) == sorted(ids.values())
        for got in every.received:
            payload = json.loads(got.body)
            assert ids[payload["type"]] == payload["id"] == got.one("Service-Event-Id")
    finally:
        await every.stop()
        await single.stop()


async def test_a_commit_wakes_the_idle_daemon_worker_without_waiting_for_the_poll(engine, receiver):
    # An hour between polls: only the commit's notification can make this delivery happen.
    worker = DeliveryWorker(engine, WallClock(), WebhookConfig(allow_http=True, poll_interval_s=3600),
                            cipher=DEV_CIPHER)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, receiver.url)
        await asyncio.wait_for(worker.listening.wait(), 30)
        for n in range(3):
            event_id = await emit(engine, org, obj={"n": n})
            async with asyncio.timeout(30):  # a liveness bound, far above the milliseconds it takes
                while event_id not in receiver.event_ids():  # noqa: ASYNC110 - another task delivers
                    await asyncio.sleep(0.01)
    finally:
        stop.set()
        await running
