"""The webhook dev loop: `vip listen --forward-to` (a real `vip` process) forwards a triggered event to a
local server, signed as docs/webhooks.md tells a lender to verify; `vip trigger` and
`POST /v1/events/trigger` (sample objects in their resource's schema, `data.test: true`); replay to one
chosen endpoint; endpoints failing for days disabled with an event, and enabled again; an
http://127.0.0.1 endpoint from the CLI in a `vip dev` checkout."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import make_url, update

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import indexer_settings, local_network
from tests.support.event_shapes import envelope_problems
from tests.support.webhooks import (
    DEV_CIPHER,
    START,
    ManualClock,
    Receiver,
    deliveries,
    make_endpoint,
    organisation,
)
from tests.test_webhook_docs import catalogue, receiver_snippet
from vip.accounts.keys import hash_secret
from vip.cli.listen import Message, sse_messages
from vip.clock import WallClock
from vip.config import WebhookConfig
from vip.devstack.anvil import anvil_binary, free_ports
from vip.devstack.console import vip_console_script
from vip.devstack.dev import DEV_ORGANISATION
from vip.store.outbox import record_event
from vip.store.tables import webhook_deliveries
from vip.webhooks.catalogue import EVENT_TYPES
from vip.webhooks.samples import sample_object, sampled_types
from vip.webhooks.worker import DeliveryWorker

WAIT_S = 60  # how long a process may take to answer before the test gives up (not a speed check)


@pytest.fixture
async def hooks(aiohttp_client, database_url, engine, session_chain):
    """The real app with plain-http endpoints allowed (local development), like `vip dev`."""
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    settings = indexer_settings(network).model_copy(update={
        "webhooks": WebhookConfig(allow_http=True, stream_poll_s=0.05, stream_keepalive_s=0.2)})
    async with checked_api(aiohttp_client, settings, database_url, engine) as harness:
        yield harness


async def call(api: ApiHarness, method: str, path: str, org: str = "acme", **kwargs):
    resp = await api.client.request(method, path, headers=await api.headers(org), **kwargs)
    return resp.status, await resp.json()


async def add_endpoint(api: ApiHarness, url: str, **body) -> dict:
    status, answer = await call(api, "POST", "/v1/webhook-endpoints", json={"url": url, **body})
    assert status == 201, answer
    return answer["webhook_endpoint"]


def worker(api: ApiHarness, clock, **config) -> DeliveryWorker:
    settings = api.settings.webhooks.model_copy(update=config)
    return DeliveryWorker(api.engine, clock, settings, cipher=api.settings.api.cipher())


async def drain(api: ApiHarness, clock, **config) -> None:
    w = worker(api, clock, **config)
    try:
        await w.drain()
    finally:
        await w.session.close()


def cli_env() -> dict[str, str]:
    """The environment without configuration overlays or API settings of the machine running the tests."""
    return {k: v for k, v in os.environ.items() if k not in ("VIP_CONFIG", "VIP_API_URL", "VIP_API_KEY")}


async def read_line(stream: asyncio.StreamReader, pattern: str) -> re.Match:
    """The first line of a process's output matching `pattern` (lines before it are skipped)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            line = (await stream.readline()).decode()
            assert line, f"the process ended before printing {pattern!r}"
            found = re.search(pattern, line)
            if found:
                return found


# --- vip listen --forward-to ----------------------------------------------------------------------------

@pytest.mark.e2e
async def test_listen_forwards_a_triggered_event_signed_to_a_local_server(hooks, receiver, tmp_path):
    base_url = str(hooks.client.make_url("")).rstrip("/")
    key = await hooks.key()
    env = cli_env()
    listen = await asyncio.create_subprocess_exec(
        vip_console_script(), "listen", "--forward-to", receiver.url, "--api-url", base_url, "--api-key", key,
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        ready = await read_line(listen.stdout, r"^Ready! Your webhook signing secret is (whsec_\S+)")
        secret = ready.group(1)

        trigger = await asyncio.create_subprocess_exec(
            vip_console_script(), "trigger", "charge.succeeded", "--api-url", base_url, "--api-key", key,
            cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await trigger.communicate()
        assert trigger.returncode == 0, err
        event_id = re.search(r"triggered charge\.succeeded (evt_\w+)", out.decode()).group(1)

        shown = await read_line(listen.stdout, rf"charge\.succeeded\s+{event_id}\s+(\S+)")
        assert shown.group(1) == sample_object("charge.succeeded")["id"]
        forwarded = await read_line(listen.stdout, r"<-- \[(\d+)\] POST (\S+)")
        assert forwarded.groups() == ("200", receiver.url)
    finally:
        listen.terminate()
        await listen.wait()

    [got] = receiver.received
    # Verified the way docs/webhooks.md tells a lender to: its own snippet, on the raw body.
    verify = receiver_snippet()["signature_is_valid"]
    assert verify(got.body, got.all("Service-Signature"), [secret])
    assert not verify(got.body, got.all("Service-Signature"), ["whsec_not_this_session"])
    assert got.one("Service-Event-Id") == event_id and got.one("Service-Timestamp").endswith("Z")
    event = json.loads(got.body, parse_float=Decimal)
    assert envelope_problems(event) == []
    assert (event["id"], event["type"], event["data"]["test"]) == (event_id, "charge.succeeded", True)
    assert event["data"]["object"] == sample_object("charge.succeeded")
    # The same bytes the API stores and a webhook delivery would carry.
    status, stored = await call(hooks, "GET", f"/v1/events/{event_id}")
    assert status == 200 and stored["event"]["data"]["test"] is True


@pytest.mark.e2e
async def test_listen_needs_a_key_that_the_api_accepts(hooks, tmp_path):
    base_url = str(hooks.client.make_url("")).rstrip("/")
    listen = await asyncio.create_subprocess_exec(
        vip_console_script(), "listen", "--api-url", base_url, "--api-key", "vip_sk_not_a_key",
        cwd=tmp_path, env=cli_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(WAIT_S):
        out, err = await listen.communicate()
    assert listen.returncode == 1
    assert "401 ERR_UNAUTHORIZED" in err.decode() and not out


@pytest.mark.e2e
async def test_listen_ends_when_its_key_is_revoked(hooks, engine, tmp_path):
    base_url = str(hooks.client.make_url("")).rstrip("/")
    key = await hooks.key("listener")
    listen = await asyncio.create_subprocess_exec(
        vip_console_script(), "listen", "--api-url", base_url, "--api-key", key,
        cwd=tmp_path, env=cli_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    await read_line(listen.stdout, r"^Ready! ")
    async with engine.begin() as conn:
        await conn.exec_driver_sql("update api_keys set revoked_at = now() where secret_hash = %s",
                                   (hash_secret(key),))
    async with asyncio.timeout(WAIT_S):
        _, err = await listen.communicate()
    assert listen.returncode == 1
    assert "ERR_UNAUTHORIZED: the API key was revoked" in err.decode()


def test_listen_reads_server_sent_events_however_they_are_chunked():
    body = (b": keep-alive\n\nevent: ready\ndata: {\"secret\":\"whsec_x\"}\n\n"
            b"id: evt_1\r\nevent: event\r\ndata: {\"a\":1}\r\n\r\n")

    async def messages(size: int) -> list[Message]:
        async def chunks():
            for i in range(0, len(body), size):
                yield body[i:i + size]
        return [m async for m in sse_messages(chunks())]

    expected = [Message("ready", b'{"secret":"whsec_x"}', None), Message("event", b'{"a":1}', "evt_1")]
    for size in (1, 7, len(body)):
        assert asyncio.run(messages(size)) == expected


# --- vip trigger / POST /v1/events/trigger ---------------------------------------------------------------

@pytest.mark.e2e
def test_vip_trigger_refuses_an_unknown_type_in_one_line(tmp_path):
    done = subprocess.run([vip_console_script(), "trigger", "charge.exploded"], cwd=tmp_path,
                          env=cli_env(), capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 2 and not done.stdout
    [line] = done.stderr.splitlines()
    assert "unknown event type 'charge.exploded'" in line
    assert all(t in line for t in EVENT_TYPES)


@pytest.mark.e2e
@pytest.mark.parametrize(("args", "says"), [
    (["--forward-to", "127.0.0.1:4242/hooks"], "--forward-to takes an http:// or https:// URL"),
    (["--events", "vip.verified,vip.exploded"], "unknown event types vip.exploded"),
])
def test_vip_listen_refuses_bad_arguments_in_one_line(tmp_path, args, says):
    done = subprocess.run([vip_console_script(), "listen", *args, "--api-key", "unused"], cwd=tmp_path,
                          env=cli_env(), capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 2 and not done.stdout
    [line] = done.stderr.splitlines()
    assert says in line


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_every_type_has_a_sample_in_its_schema_equal_to_the_documented_delivery(event_type):
    assert set(sampled_types()) == set(EVENT_TYPES)
    envelope = {**catalogue()[event_type], "data": {"object": sample_object(event_type), "test": True}}
    assert envelope_problems(envelope) == []
    assert sample_object(event_type) == catalogue()[event_type]["data"]["object"]


async def test_trigger_records_a_test_event_delivered_to_subscribed_endpoints(hooks, receiver):
    await add_endpoint(hooks, receiver.url, event_types=["vip.verified"])
    status, answer = await call(hooks, "POST", "/v1/events/trigger", json={"type": "vip.verified"})
    assert status == 201, answer
    event = answer["event"]
    assert event["type"] == "vip.verified" and event["data"]["test"] is True
    assert event["data"]["object"]["status"] == "verified"
    status, answer = await call(hooks, "POST", "/v1/events/trigger", json={"type": "charge.failed"})
    assert status == 201
    await drain(hooks, ManualClock())
    assert receiver.event_ids() == [event["id"]]  # the endpoint takes vip.verified only
    body = json.loads(receiver.received[0].body, parse_float=Decimal)
    assert envelope_problems(body) == [] and body["data"]["test"] is True
    # Amounts stay exact.
    assert body["data"]["object"]["verified_monthly_income_usd"] == \
        sample_object("vip.verified")["verified_monthly_income_usd"]

    status, answer = await call(hooks, "POST", "/v1/events/trigger", json={"type": "vip.exploded"})
    assert (status, answer["error"]["code"]) == (400, "ERR_VALIDATION")
    assert "vip.verified" in answer["error"]["message"]
    # Another organisation sees none of it.
    status, page = await call(hooks, "GET", "/v1/events", "other")
    assert status == 200 and page["events"] == []


# --- replay to one endpoint --------------------------------------------------------------------------------

async def test_replay_to_one_chosen_endpoint(hooks):
    first, second = await Receiver().start(), await Receiver().start()
    try:
        a = await add_endpoint(hooks, first.url)
        b = await add_endpoint(hooks, second.url)
        only_fraud = await add_endpoint(hooks, second.url + "?fraud", event_types=["fraud.flagged"])
        status, answer = await call(hooks, "POST", "/v1/events/trigger", json={"type": "charge.succeeded"})
        event_id = answer["event"]["id"]
        clock = WallClock()  # replays are due at once on the wall clock
        await drain(hooks, clock)
        assert (first.event_ids(), second.event_ids()) == ([event_id], [event_id])

        status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay",
                                    json={"endpoint_id": b["id"]})
        assert status == 202, answer
        states = {d["endpoint_id"]: d["status"] for d in answer["event"]["deliveries"]}
        assert states == {a["id"]: "delivered", b["id"]: "pending"}
        await drain(hooks, clock)
        assert (first.event_ids(), second.event_ids()) == ([event_id], [event_id, event_id])

        for body, expected in (({"endpoint_id": "whe_missing"}, (404, "ERR_NOT_FOUND")),
                               ({"endpoint_id": only_fraud["id"]}, (422, "ERR_NO_WEBHOOK_ENDPOINT")),
                               ({"endpoint_id": ""}, (400, "ERR_VALIDATION"))):
            status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay", json=body)
            assert (status, answer["error"]["code"]) == expected, answer
        # Another organisation's endpoint is not found.
        status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay", "other",
                                    json={"endpoint_id": b["id"]})
        assert status == 404

        # Without a body: every subscribed endpoint, as the spec has it.
        status, answer = await call(hooks, "POST", f"/v1/events/{event_id}/replay")
        assert status == 202
        await drain(hooks, clock)
        assert (len(first.received), len(second.received)) == (2, 3)
    finally:
        await first.stop()
        await second.stop()


# --- endpoints failing for days are disabled ---------------------------------------------------------------

async def test_an_endpoint_failing_for_days_is_disabled_with_an_event_and_enabled_again(hooks):
    answers = {"status": 500}
    failing = await Receiver(respond=lambda n: answers["status"]).start()
    healthy = await Receiver().start()
    try:
        bad = await add_endpoint(hooks, failing.url)
        await add_endpoint(hooks, healthy.url)
        clock = ManualClock(START)

        async def day(n: float, *, status: int = 500) -> str:
            """Move to day `n` after START, fire an event, run the worker."""
            answers["status"] = status
            clock.set(START + timedelta(days=n))
            _, answer = await call(hooks, "POST", "/v1/events/trigger", json={"type": "fraud.flagged"})
            await drain(hooks, clock, disable_after_days=3)
            return answer["event"]["id"]

        async def bad_status() -> str:
            _, listing = await call(hooks, "GET", "/v1/webhook-endpoints")
            return {e["id"]: e["status"] for e in listing["webhook_endpoints"]}[bad["id"]]

        await day(0)
        await day(2)
        await day(2.5, status=200)  # one delivery: the failing days start again
        await day(3)
        await day(5)
        assert await bad_status() == "enabled"  # 2 days of failures since the last delivery
        await day(6.5)  # more than 3 days of only failures: disabled at the first attempt that sees it
        assert await bad_status() == "disabled"
        sent = len(failing.received)

        # The organisation's other endpoint was told, with the endpoint as GET lists it.
        disabled_events = [json.loads(r.body, parse_float=Decimal) for r in healthy.received
                           if b"webhook_endpoint.disabled" in r.body]
        [notice] = disabled_events
        assert envelope_problems(notice) == []
        obj = notice["data"]["object"]
        assert (obj["id"], obj["status"], obj["url"]) == (bad["id"], "disabled", failing.url)
        assert obj["disabled_reason"] == ("every delivery attempt failed since "
                                          f"{(START + timedelta(days=3)).isoformat().replace('+00:00', 'Z')} "
                                          "(more than 3 days)")
        assert set(obj) == set(catalogue()["webhook_endpoint.disabled"]["data"]["object"])
        _, listing = await call(hooks, "GET", "/v1/webhook-endpoints")
        assert {e["id"]: e for e in listing["webhook_endpoints"]}[bad["id"]] == obj

        # Nothing more is sent to it, retries included, however long it stays.
        await day(7)
        clock.set(START + timedelta(days=10))
        await drain(hooks, clock, disable_after_days=3)
        assert len(failing.received) == sent
        status, answer = await call(hooks, "GET", "/v1/events", params={"delivery_status": "pending"})
        assert answer["events"] == []

        # Enabled again through the API: delivered to from the next event on.
        status, answer = await call(hooks, "POST", f"/v1/webhook-endpoints/{bad['id']}/enable")
        assert status == 200 and answer["webhook_endpoint"]["status"] == "enabled"
        assert answer["webhook_endpoint"]["disabled_at"] is None
        event_id = await day(11, status=200)
        assert failing.event_ids()[-1] == event_id
        status, answer = await call(hooks, "POST", "/v1/webhook-endpoints/whe_missing/enable")
        assert status == 404
    finally:
        await failing.stop()
        await healthy.stop()


async def test_replay_to_a_disabled_endpoint_is_refused(hooks, receiver, engine):
    endpoint = await add_endpoint(hooks, receiver.url)
    _, answer = await call(hooks, "POST", "/v1/events/trigger", json={"type": "fraud.flagged"})
    async with engine.begin() as conn:
        await conn.exec_driver_sql("update webhook_endpoints set disabled_at = now() where id = %s",
                                   (endpoint["id"],))
    status, answer = await call(hooks, "POST", f"/v1/events/{answer['event']['id']}/replay",
                                json={"endpoint_id": endpoint["id"]})
    assert (status, answer["error"]["code"]) == (409, "ERR_WEBHOOK_ENDPOINT_DISABLED")


# --- vip webhooks in a `vip dev` checkout ------------------------------------------------------------------

def vip_webhooks(*args: str, cwd: Path, database_url: str) -> subprocess.CompletedProcess:
    env = {**cli_env(), "DATABASE_URL": database_url}
    return subprocess.run([vip_console_script(), "webhooks", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=WAIT_S)


@pytest.mark.e2e
def test_cli_registers_a_loopback_http_endpoint_in_a_dev_checkout(database_url, tmp_path):
    url = "http://127.0.0.1:4242/hooks"
    # Not a dev checkout: production rules.
    refused = vip_webhooks("create", "--org", "acme", "--url", url, cwd=tmp_path, database_url=database_url)
    assert refused.returncode == 2 and "https" in refused.stderr

    # What `vip dev` writes in its data directory (vip.devstack.dev).
    data_dir = tmp_path / ".vip-dev"
    data_dir.mkdir()
    (data_dir / "service.local.toml").write_text(
        f"database_url = {json.dumps(database_url)}\n\n[webhooks]\nallow_http = true\n")
    created = vip_webhooks("create", "--org", "acme", "--url", url, cwd=tmp_path, database_url=database_url)
    assert created.returncode == 0, created.stderr
    assert url in created.stdout and "whsec_" in created.stdout
    endpoint_id = created.stdout.split()[1]

    # A command given another database does not take the dev stack's overlay.
    another = make_url(database_url).update_query_dict({"application_name": "other"})
    other = vip_webhooks("create", "--org", "acme", "--url", url, cwd=tmp_path,
                         database_url=another.render_as_string(hide_password=False))
    assert other.returncode == 2

    listed = vip_webhooks("list", "--org", "acme", cwd=tmp_path, database_url=database_url)
    assert endpoint_id in listed.stdout and "disabled" not in listed.stdout
    enabled = vip_webhooks("enable", endpoint_id, "--org", "acme", cwd=tmp_path, database_url=database_url)
    assert enabled.returncode == 0 and f"enabled {endpoint_id}" in enabled.stdout


@pytest.mark.e2e
async def test_cli_replays_to_one_endpoint(database_url, engine, tmp_path):
    org = await organisation(engine)
    first, _ = await make_endpoint(engine, org, "https://one.example.com/hooks")
    second, _ = await make_endpoint(engine, org, "https://two.example.com/hooks")
    async with engine.begin() as conn:
        event_id = await record_event(conn, "fraud.flagged", sample_object("fraud.flagged"), created_at=START,
                                      organisation_id=org)
    await DeliveryWorker(engine, ManualClock(), WebhookConfig(), cipher=DEV_CIPHER).fan_out()
    async with engine.begin() as conn:  # as after both were delivered
        await conn.execute(update(webhook_deliveries).values(status="delivered", next_attempt_at=None))

    done = vip_webhooks("replay", event_id, "--org", "acme", "--endpoint", second, cwd=tmp_path,
                        database_url=database_url)
    assert done.returncode == 0, done.stderr
    assert f"replaying {event_id} to 1 endpoint(s)" in done.stdout
    assert {d.endpoint_id: d.status for d in await deliveries(engine, event_id)} == {
        first: "delivered", second: "pending"}
    missing = vip_webhooks("replay", event_id, "--org", "acme", "--endpoint", "whe_missing", cwd=tmp_path,
                           database_url=database_url)
    assert missing.returncode == 1 and "no endpoint whe_missing" in missing.stderr


# --- the whole loop in a `vip dev` checkout ----------------------------------------------------------------

@pytest.mark.e2e
async def test_the_loop_in_a_vip_dev_checkout_needs_no_address_nor_key(tmp_path, receiver):
    """In a directory where `vip dev` runs: `vip webhooks create --url http://127.0.0.1:...`, then
    `vip listen --forward-to` and `vip trigger` with no address or key find the stack."""
    # The checkout's Anvil (a lender's project has its own node_modules).
    env = {k: v for k, v in cli_env().items() if k != "DATABASE_URL"}
    env["VIP_ANVIL_BIN"] = str(anvil_binary())
    ports = [str(p) for p in free_ports(3)]
    state_file, log = tmp_path / "state.json", tmp_path / "vip-dev.out"
    with log.open("w") as out:
        dev = await asyncio.create_subprocess_exec(
            vip_console_script(), "dev", "--no-demo", "--state-file", str(state_file), "--anvil-port",
            ports[0], "--api-port", ports[1], "--metrics-port", ports[2], cwd=tmp_path, env=env,
            stdout=out, stderr=subprocess.STDOUT)
    listen = None
    registered = await Receiver().start()
    try:
        async with asyncio.timeout(240):
            while not state_file.exists():
                assert dev.returncode is None, f"vip dev exited early:\n{log.read_text()}"
                await asyncio.sleep(0.5)

        async def vip(*args: str) -> str:
            proc = await asyncio.create_subprocess_exec(
                vip_console_script(), *args, cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            async with asyncio.timeout(WAIT_S):
                out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            return out.decode()

        created = await vip("webhooks", "create", "--org", DEV_ORGANISATION, "--url", registered.url)
        endpoint_secret = created.split("store it now): ", 1)[1].strip()

        listen = await asyncio.create_subprocess_exec(
            vip_console_script(), "listen", "--forward-to", receiver.url, cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        ready = await read_line(listen.stdout, r"^Ready! Your webhook signing secret is (whsec_\S+)")
        secret = ready.group(1)
        triggered = await vip("trigger", "payment_intent.created")
        event_id = re.search(r"(evt_\w+)", triggered).group(1)
        await read_line(listen.stdout, rf"payment_intent\.created\s+{event_id}")
        await read_line(listen.stdout, r"<-- \[200\] POST ")
        # The endpoint registered with a loopback http URL gets it from the stack's daemon as well.
        async with asyncio.timeout(WAIT_S):
            while event_id not in registered.event_ids():
                assert dev.returncode is None, f"vip dev exited:\n{log.read_text()}"
                await asyncio.sleep(0.2)
    finally:
        await registered.stop()
        if listen is not None:
            listen.terminate()
            await listen.wait()
        if dev.returncode is None:
            dev.send_signal(signal.SIGINT)
            async with asyncio.timeout(WAIT_S):
                await dev.wait()
    verify = receiver_snippet()["signature_is_valid"]
    [forwarded] = receiver.received
    assert forwarded.one("Service-Event-Id") == event_id
    assert verify(forwarded.body, forwarded.all("Service-Signature"), [secret])
    [delivered] = registered.received
    assert delivered.body == forwarded.body  # the same bytes, signed with the endpoint's own secret
    assert verify(delivered.body, delivered.all("Service-Signature"), [endpoint_secret])
    assert not verify(delivered.body, delivered.all("Service-Signature"), [secret])
