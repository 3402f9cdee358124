"""docs/webhooks.md stays true: its receiver snippet verifies real deliveries (and refuses forged ones,
and drops duplicates), and its catalogue has an example envelope for every event type we emit."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.event_shapes import envelope_problems
from tests.support.webhooks import DEV_CIPHER, ManualClock, Receiver, make_endpoint, organisation
from vip.config import WebhookConfig
from vip.store.outbox import record_event
from vip.webhooks import store
from vip.webhooks.catalogue import EVENT_TYPES
from vip.webhooks.worker import DeliveryWorker

DOC = (Path(__file__).resolve().parent.parent / "docs" / "webhooks.md").read_text()


def receiver_snippet() -> dict:
    after = DOC.split("<!-- receiver-snippet -->", 1)[1]
    code = re.search(r"```python\n(.*?)```", after, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)  # our own documentation
    return namespace


def catalogue() -> dict[str, dict]:
    examples = {}
    for heading, body in re.findall(r"^### (\S+)\n.*?```json\n(.*?)```", DOC, re.S | re.M):
        examples[heading] = json.loads(body, parse_float=Decimal)
    return examples


async def test_the_documented_receiver_verifies_real_deliveries(engine):
    receiver = await Receiver().start()
    clock = ManualClock()
    worker = DeliveryWorker(engine, clock, WebhookConfig(allow_http=True), cipher=DEV_CIPHER)
    try:
        org = await organisation(engine)
        endpoint_id, secret = await make_endpoint(engine, org, receiver.url)
        async with engine.begin() as conn:
            await record_event(conn, "connection.revoked", {"id": "con_1"}, created_at=clock.current,
                               organisation_id=org)
        await worker.drain()
        async with engine.begin() as conn:
            new_secret, _ = await store.rotate_secret(conn, org, endpoint_id, clock.current,
                                                      timedelta(hours=1), cipher=DEV_CIPHER)
            await record_event(conn, "vip.verified", {"id": "vip_1"}, created_at=clock.current,
                               organisation_id=org)
        await worker.drain()
    finally:
        await worker.session.close()
        await receiver.stop()
    plain, rotated = receiver.received

    ns = receiver_snippet()
    processed: list[dict] = []
    ns["process"] = processed.append
    ns["SECRETS"] = [secret]
    handle = ns["handle_webhook"]
    event_id = plain.one("Service-Event-Id")
    assert handle(plain.body, plain.all("Service-Signature"), event_id) == 200
    assert handle(plain.body, plain.all("Service-Signature"), event_id) == 200  # a retry: dropped
    assert [e["id"] for e in processed] == [event_id]
    assert handle(plain.body.replace(b"con_1", b"con_2"), plain.all("Service-Signature"), "evt_x") == 400
    ns["SECRETS"] = ["whsec_someone_else"]
    assert handle(plain.body, plain.all("Service-Signature"), "evt_y") == 400

    # During the overlap either secret verifies, with separate headers or merged into one.
    signatures = rotated.all("Service-Signature")
    assert len(signatures) == 2
    for secrets in ([secret], [new_secret]):
        for headers in (signatures, [", ".join(signatures)]):
            assert ns["signature_is_valid"](rotated.body, headers, secrets)


def test_every_event_type_has_a_documented_example():
    examples = catalogue()
    assert sorted(examples) == sorted(EVENT_TYPES)
    for event_type, example in examples.items():
        assert set(example) == {"id", "type", "created_at", "api_version", "data"}, event_type
        assert example["type"] == event_type and example["api_version"] == "v1"
        assert example["id"].startswith("evt_") and example["created_at"].endswith("Z")
        assert isinstance(example["data"]["object"], dict) and set(example["data"]) == {"object"}


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_examples_follow_the_schema_of_their_object(event_type):
    """The OpenAPI schema of the resource (no field it does not name), the spec's shape of fraud.flagged,
    the spec's fields of vip.verified, our shape of income.change_detected."""
    assert envelope_problems(catalogue()[event_type]) == []
