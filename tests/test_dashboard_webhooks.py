"""Webhooks an integrator can debug, in Chromium: an event's page shows the payload as delivered, each
attempt's request headers, status, latency and the receiver's own answer (escaped: a receiver's HTML is
text here), and the outcome in words; the endpoints list shows each endpoint's health; the home page
lists what needs attention; deleting an endpoint asks on a page first."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from tests.support.dashboard import add_staff, dashboard_browser, screenshot, serious_accessibility_problems
from tests.support.webhooks import make_endpoint
from vip.accounts import keys
from vip.clock import WallClock
from vip.dashboard.webhook_view import error_in_words
from vip.store.tables import webhook_attempts, webhook_endpoints
from vip.webhooks import service
from vip.webhooks.worker import DeliveryWorker

pytestmark = pytest.mark.timeout(300)
HOSTILE_ANSWER = '<h1>Internal error</h1><script>alert("x")</script> database "ledger" is down'


@pytest.fixture
async def browser(hooks):
    async with dashboard_browser(str(hooks.client.make_url("/")), hooks.engine) as session:
        yield session


async def deliver(api) -> None:
    worker = DeliveryWorker(api.engine, WallClock(), api.settings.webhooks, cipher=api.settings.api.cipher())
    try:
        await worker.drain()
    finally:
        await worker.session.close()


async def test_an_events_page_shows_the_payload_and_what_the_receiver_answered(hooks, browser, receiver):
    receiver.respond = lambda n: 500
    receiver.answer = HOSTILE_ANSWER
    member = await add_staff(hooks.engine, "admin", "acme")
    async with hooks.engine.begin() as conn:
        org_id = await keys.ensure_organisation(conn, "acme")
    endpoint_id, _ = await make_endpoint(hooks.engine, org_id, receiver.url, now=datetime.now(UTC),
                                         cipher=hooks.settings.api.cipher())
    event = await service.trigger_event(hooks.engine, org_id, "vip.verified")
    await deliver(hooks)
    assert receiver.event_ids() == [event.id]
    sent = receiver.received[0]

    page = await browser.sign_in_as("acme", member.email)
    await page.goto(browser.url(f"/dashboard/webhooks/events/{event.id}"))
    # The payload: the very body the receiver got, indented.
    shown = await page.locator("pre.payload").inner_text()
    assert json.loads(shown) == json.loads(sent.body)
    assert json.loads(shown)["data"]["test"] is True
    # The attempt: status, latency, the outcome in words.
    attempts = page.get_by_role("table", name=f"Attempts to {receiver.url}")
    row = attempts.get_by_role("row").nth(1)
    assert "500" in await row.inner_text() and " ms" in await row.inner_text()
    assert error_in_words(500, "HTTP 500") in await row.inner_text()
    # What was sent: every header, the signature the receiver got among them.
    headers = page.get_by_role("table", name="Headers of attempt 1")
    header_text = await headers.inner_text()
    assert sent.one("Service-Signature") in header_text and event.id in header_text
    assert "Service-Timestamp" in header_text and "vip-webhooks/1" in header_text
    # What came back: the receiver's answer as text, never as markup of our page.
    answer = page.locator("pre.answer")
    assert await answer.inner_text() == HOSTILE_ANSWER
    assert await page.locator("main h1").all_inner_texts() == [f"Event {event.id}"]
    assert await page.locator("main script").count() == 0
    problems = await serious_accessibility_problems(page)
    assert problems == [], problems
    await screenshot(page, "event")

    # The endpoint is failing: its health says so on the webhooks page and on the home page.
    await page.goto(browser.url("/dashboard/webhooks"))
    health = await page.get_by_role("row").filter(has_text=receiver.url).locator("td.health").inner_text()
    assert "failing since" in health and "0 of 1 attempts delivered (0%)" in health
    assert "The receiver answered 500 Internal Server Error" in health
    await page.goto(browser.url("/dashboard"))
    attention = page.get_by_role("region", name="Needs attention")
    assert receiver.url in await attention.inner_text()
    await screenshot(page, "home")

    # Deleting it asks first; Cancel leaves it be; the confirmed form deletes it.
    await page.goto(browser.url("/dashboard/webhooks"))
    await page.get_by_role("button", name=f"Delete {receiver.url}").click()
    assert await page.get_by_role("heading", name="Delete this endpoint?").is_visible()
    await page.get_by_role("link", name="Cancel").click()
    async with hooks.engine.connect() as conn:
        assert await conn.scalar(select(webhook_endpoints.c.deleted_at)
                                 .where(webhook_endpoints.c.id == endpoint_id)) is None
    await page.get_by_role("button", name=f"Delete {receiver.url}").click()
    await page.get_by_role("button", name="Delete the endpoint").click()
    assert "Endpoint deleted" in await page.get_by_role("status").inner_text()
    async with hooks.engine.connect() as conn:
        assert await conn.scalar(select(webhook_endpoints.c.deleted_at)
                                 .where(webhook_endpoints.c.id == endpoint_id)) is not None


async def test_a_receivers_answer_is_kept_short(hooks, receiver):
    receiver.respond = lambda n: 200
    receiver.answer = "x" * 100_000
    async with hooks.engine.begin() as conn:
        org_id = await keys.ensure_organisation(conn, "acme")
    await make_endpoint(hooks.engine, org_id, receiver.url, now=datetime.now(UTC),
                        cipher=hooks.settings.api.cipher())
    await service.trigger_event(hooks.engine, org_id, "vip.verified")
    await deliver(hooks)
    async with hooks.engine.connect() as conn:
        kept = (await conn.execute(select(webhook_attempts.c.response_body,
                                          webhook_attempts.c.request_headers))).one()
    assert kept.response_body == "x" * 2048
    assert re.fullmatch(r"sha256=[0-9a-f]{64}", kept.request_headers["Service-Signature"])


@pytest.mark.parametrize(("status", "error", "words"), [
    (200, None, "Delivered: the receiver answered 200 OK."),
    (401, "HTTP 401", "current signing secret"),
    (404, "HTTP 404", "nothing handles POST at this URL"),
    (302, "HTTP 302", "redirects are not followed"),
    (None, "no answer within 10 s", "No answer within 10 s: the receiver took too long"),
    (None, "ClientConnectorError: Cannot connect to host 127.0.0.1:9 ssl:default [Connect call failed "
           "('127.0.0.1', 9)]", "Could not connect at 127.0.0.1:9: nothing accepted the connection"),
    (None, "RefusedAddress: the URL's host 10.0.0.1 is private", "private or reserved address"),
    (None, "ClientConnectorDNSError: Cannot connect to host nowhere.invalid:443 ssl:default [Name or "
           "service not known]", "the URL's host name does not resolve"),
    (None, "ServerDisconnectedError: Server disconnected", "closed the connection without answering"),
])
def test_delivery_errors_are_said_in_words(status, error, words):
    assert words in error_in_words(status, error)
