"""Webhooks never reach into our own network outside local development (SSRF): URLs naming or resolving
to loopback, private, link-local, multicast or reserved addresses are refused when registered and again
at every delivery, after resolution, so a name that later resolves inward (DNS rebinding) is caught; and
redirects are never followed. Real receivers on loopback, real HTTP, the real worker and database."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.webhooks import DEV_CIPHER, ManualClock, deliveries, make_endpoint, organisation
from vip.config import WebhookConfig
from vip.store.outbox import record_event
from vip.webhooks import events, sender
from vip.webhooks.urls import check_endpoint_host, check_endpoint_url, refused_address_reason
from vip.webhooks.worker import DeliveryWorker

PRODUCTION = WebhookConfig(allow_http=False)
LOCAL = WebhookConfig(allow_http=True)
PUBLIC = "93.184.215.14"


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "0.0.0.0", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1",
    "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1",
    "::ffff:169.254.169.254", "2002:7f00:1::", "2002:a00:1::", "64:ff9b::a00:1"])
def test_inward_addresses_are_refused(address):
    assert refused_address_reason(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", PUBLIC, "2606:4700:4700::1111", "::ffff:8.8.8.8",
                                     "2002:808:808::", "64:ff9b::808:808"])
def test_public_addresses_are_accepted(address):
    assert refused_address_reason(address) is None


@pytest.mark.parametrize("url", ["https://127.0.0.1/x", "https://10.0.0.5/x", "https://[::1]:8443/x",
                                 "https://[::ffff:10.0.0.1]/x", "https://169.254.169.254/latest/meta-data",
                                 "https://localhost/x", "https://LOCALHOST./x", "https://db.internal/x",
                                 "https://printer.local/x"])
def test_registration_refuses_inward_hosts_outside_local_development(url):
    with pytest.raises(ValueError, match="public"):
        check_endpoint_url(url, allow_http=False)
    assert check_endpoint_url(url.replace("https", "http"), allow_http=True)  # `vip dev`: anything local


async def test_registration_resolves_the_name():
    # A name the system resolver answers with loopback is refused after resolution (the name itself is
    # not looked at here); a name that does not resolve is left to the delivery-time check.
    with pytest.raises(ValueError, match=r"localhost resolves to \S+, a loopback address"):
        await check_endpoint_host("https://localhost/x", allow_http=False)
    await check_endpoint_host("https://hooks.example.invalid/x", allow_http=False)
    await check_endpoint_host("http://localhost/x", allow_http=True)


class Rebinding(AbstractResolver):
    """A DNS answer that changes: a public address first (as when the endpoint was registered), then
    the loopback address of our receiver."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.asked = 0

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        address = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return [ResolveResult(hostname=host, host=address, port=port, family=socket.AF_INET, proto=0,
                              flags=socket.AI_NUMERICHOST)]

    async def close(self) -> None:
        pass


async def emit(engine: AsyncEngine, org_id: str) -> str:
    async with engine.begin() as conn:
        return await record_event(conn, "connection.revoked", {"id": "con_1", "status": "revoked"},
                                  organisation_id=org_id, created_at=ManualClock().current)


async def deliver_once(engine: AsyncEngine, config: WebhookConfig, session=None) -> None:
    worker = DeliveryWorker(engine, ManualClock(), config, session=session, cipher=DEV_CIPHER)
    try:
        await worker.drain()
    finally:
        stop = asyncio.Event()
        stop.set()
        await worker.run(stop)
        if session is not None:
            await session.close()


async def only_attempt(engine: AsyncEngine, event_id: str):
    async with engine.connect() as conn:
        [(_, [attempt])] = await events.deliveries_of(conn, event_id)
    return attempt


async def test_delivery_to_a_name_resolving_to_loopback_is_refused(engine, receiver):
    # Stored as it could have been when the name still resolved elsewhere: the check at delivery stands
    # on its own.
    port = receiver.url.split(":")[2].split("/")[0]
    org = await organisation(engine)
    await make_endpoint(engine, org, f"http://localhost:{port}/hook")
    event_id = await emit(engine, org)
    await deliver_once(engine, PRODUCTION)
    attempt = await only_attempt(engine, event_id)
    assert attempt.status_code is None and "resolves to" in attempt.error and "loopback" in attempt.error
    assert receiver.received == []
    [delivery] = await deliveries(engine, event_id)
    assert (delivery.status, delivery.attempts) == ("pending", 1)  # a failed attempt on the schedule

    # The same endpoint in local development is delivered to: the refusal above is the guard's doing.
    await make_endpoint(engine, await organisation(engine, "local"), f"http://localhost:{port}/hook")
    local_event = await emit(engine, await organisation(engine, "local"))
    await deliver_once(engine, LOCAL)
    assert receiver.event_ids() == [local_event]


async def test_delivery_to_an_inward_ip_literal_is_refused(engine, receiver):
    org = await organisation(engine)
    await make_endpoint(engine, org, receiver.url)  # http://127.0.0.1:port/hook
    event_id = await emit(engine, org)
    await deliver_once(engine, PRODUCTION)
    attempt = await only_attempt(engine, event_id)
    assert "127.0.0.1 is a loopback address" in attempt.error
    assert receiver.received == []


async def test_dns_rebinding_is_caught_at_delivery(engine, receiver):
    """The name resolved to a public address when registered, and resolves to our loopback receiver when
    the delivery connects: the guard checks the addresses the connection uses, not an earlier answer."""
    port = int(receiver.url.split(":")[2].split("/")[0])
    org = await organisation(engine)
    await make_endpoint(engine, org, f"http://rebind.example:{port}/hook")
    event_id = await emit(engine, org)

    control = Rebinding(["127.0.0.1"])  # without the guard this answer reaches the receiver
    await deliver_once(engine, LOCAL, sender.new_session(guarded=False, resolver=control))
    assert receiver.event_ids() == [event_id] and control.asked == 1

    org2 = await organisation(engine, "victim")
    await make_endpoint(engine, org2, f"http://rebind.example:{port}/hook")
    event2 = await emit(engine, org2)
    rebinding = Rebinding([PUBLIC, "127.0.0.1"])
    assert await rebinding.resolve("rebind.example", port)  # the registration-time answer: public
    await deliver_once(engine, PRODUCTION, sender.new_session(guarded=True, resolver=rebinding))
    attempt = await only_attempt(engine, event2)
    assert "rebind.example resolves to 127.0.0.1, a loopback address" in attempt.error
    assert receiver.event_ids() == [event_id]  # nothing more reached it


async def test_redirects_are_not_followed(engine, receiver):
    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(receiver.url)

    app = web.Application()
    app.router.add_post("/hook", redirect)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, f"http://127.0.0.1:{port}/hook")
        event_id = await emit(engine, org)
        await deliver_once(engine, LOCAL)
        attempt = await only_attempt(engine, event_id)
        assert (attempt.status_code, attempt.error) == (302, "HTTP 302")
        assert receiver.received == []
    finally:
        await runner.cleanup()
