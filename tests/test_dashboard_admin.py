"""The admin pages of the dashboard in Chromium, against the real application on loopback: an admin
creates an API key and uses it (a real HTTP call), revokes it (the call is then refused), registers an
endpoint on a local receiver, sends a test event and replays it (the receiver gets deliveries signed with
the secret the page showed once), and reads it all in the audit log. Another organisation's admin sees
none of it and cannot act on it; a post without the CSRF token is refused and changes nothing; a session
ends at sign-out; sign-in attempts are limited. Each page is screenshotted for docs/dashboard.md and
checked with axe-core (no serious or critical violation)."""

from __future__ import annotations

import asyncio
import hmac
import re

import pytest
from sqlalchemy import func, select

from tests.support.dashboard import (
    PASSWORD,
    add_staff,
    dashboard_browser,
    screenshot,
    serious_accessibility_problems,
)
from vip.clock import WallClock
from vip.dashboard.session import COOKIE
from vip.store.tables import api_keys, audit_log
from vip.webhooks.worker import DeliveryWorker

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
async def browser(hooks):
    async with dashboard_browser(str(hooks.client.make_url("/")), hooks.engine) as session:
        yield session


async def deliver(api) -> None:
    """What the daemon's delivery worker does, until nothing is due."""
    worker = DeliveryWorker(api.engine, WallClock(), api.settings.webhooks, cipher=api.settings.api.cipher())
    try:
        await worker.drain()
    finally:
        await worker.session.close()


def signed_by(secret: str, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, "sha256").hexdigest()
    return hmac.compare_digest(expected, header)


async def accessible(page) -> None:
    problems = await serious_accessibility_problems(page)
    assert problems == [], f"{page.url}: {problems}"


async def api_status(api, secret: str, path: str = "/v1/events") -> int:
    resp = await api.client.get(path, headers={"Authorization": f"Bearer {secret}"})
    return resp.status


async def test_an_admin_manages_keys_and_webhooks_and_reads_the_audit_log(hooks, browser, receiver):
    member = await add_staff(hooks.engine, "admin", "acme", "ada@acme.test")
    page = await browser.new_page()
    await page.goto(browser.url("/dashboard/sign-in"))
    await screenshot(page, "sign-in")
    await accessible(page)
    page = await browser.sign_in_as("acme", member.email)
    await accessible(page)

    # --- an API key: created with the admin scope, its secret shown once, used against the API ---------
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    await page.get_by_label("Description").fill("underwriting bot")
    await page.get_by_label("admin").check()
    await page.get_by_role("button", name="Create key").click()
    secret = await page.get_by_label("Secret").input_value()
    assert secret.startswith("vip_sk_")
    await screenshot(page, "key-created")
    await accessible(page)
    assert await api_status(hooks, secret) == 200

    await page.get_by_role("link", name="Back to API keys").click()
    row = page.get_by_role("row").filter(has_text="underwriting bot")
    assert "read, admin" in await row.inner_text()
    await screenshot(page, "keys")
    await accessible(page)
    await row.get_by_role("button", name="Revoke").click()
    # A page asks first (no script: the button's form answers it); the key still works meanwhile.
    assert await page.get_by_role("heading", name="Revoke this API key?").is_visible()
    assert "underwriting bot" in await page.locator("main").inner_text()
    assert await api_status(hooks, secret) == 200
    await screenshot(page, "confirm-revoke")
    await accessible(page)
    await page.get_by_role("button", name="Revoke the key").click()
    assert "revoked" in await page.get_by_role("row").filter(has_text="underwriting bot").inner_text()
    for _ in range(50):  # every API process drops the key at the revocation's commit (NOTIFY)
        if await api_status(hooks, secret) == 401:
            break
        await asyncio.sleep(0.1)
    assert await api_status(hooks, secret) == 401

    # --- a webhook endpoint on the local receiver: secret shown once, test event, replay --------------
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Webhooks").click()
    await page.get_by_label("URL").fill(receiver.url)
    await page.get_by_label("Description").fill("receiver on loopback")
    await page.get_by_role("button", name="Add endpoint").click()
    endpoint_secret = await page.get_by_label("Secret").input_value()
    assert endpoint_secret.startswith("whsec_")
    await page.get_by_role("link", name="Back to webhooks").click()

    await page.get_by_label("Test event type").select_option("vip.verified")
    await page.get_by_role("button", name="Send test event").click()
    event_id = re.search(r"/events/(evt_[0-9a-f]+)", page.url).group(1)
    await deliver(hooks)
    assert receiver.event_ids() == [event_id]
    first = receiver.received[0]
    assert signed_by(endpoint_secret, first.body, first.one("Service-Signature"))

    await page.reload()
    choices = await page.get_by_label("Endpoint").locator("option").all_inner_texts()
    [choice] = [c for c in choices if c.startswith(receiver.url)]
    await page.get_by_label("Endpoint").select_option(label=choice)
    await page.get_by_role("button", name="Replay to this endpoint").click()
    assert "Replay queued" in await page.get_by_role("status").inner_text()
    await deliver(hooks)
    assert receiver.event_ids() == [event_id, event_id]
    again = receiver.received[1]
    assert again.body == first.body and signed_by(endpoint_secret, again.body, again.one("Service-Signature"))
    await page.reload()
    attempts = page.get_by_role("table", name=f"Attempts to {receiver.url}")
    assert await attempts.get_by_role("row").count() == 3  # header and two attempts, both answered 200
    assert (await attempts.inner_text()).count("Delivered: the receiver answered 200 OK.") == 2
    await accessible(page)

    await page.goto(browser.url("/dashboard/webhooks"))
    await screenshot(page, "webhooks")
    await accessible(page)
    await page.get_by_role("link", name=f"Edit {receiver.url}").click()
    await page.get_by_label("Description").fill("receiver, renamed")
    await screenshot(page, "endpoint-edit")
    await accessible(page)
    await page.get_by_role("button", name="Save changes").click()
    assert await page.get_by_role("row").filter(has_text=receiver.url).get_by_text("healthy").is_visible()
    assert "receiver, renamed" in await page.get_by_role("row").filter(has_text=receiver.url).inner_text()
    await page.get_by_role("button", name=f"Rotate secret of {receiver.url}").click()
    rotated = await page.get_by_label("Secret").input_value()
    assert rotated.startswith("whsec_") and rotated != endpoint_secret

    # --- the audit log: every change, by whom, newest first ---------------------------------------------
    await page.goto(browser.url("/dashboard/audit"))
    actions = await page.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert actions == ["endpoint.secret_rotated", "endpoint.updated", "event.replayed", "event.test_sent",
                       "endpoint.created", "key.revoked", "key.created", "staff.signed_in"]
    assert "ada@acme.test" in await page.locator("tbody").inner_text()
    await screenshot(page, "audit")
    await accessible(page)
    await page.goto(browser.url("/dashboard"))  # its screenshot: tests/test_dashboard_webhooks.py
    await accessible(page)

    # --- another organisation's admin sees none of it and cannot act on it -----------------------------
    async with hooks.engine.connect() as conn:
        key_id = await conn.scalar(select(api_keys.c.id).where(api_keys.c.description == "underwriting bot"))
    globex = await browser.sign_in("admin", org="globex")
    for path in ("/dashboard/keys", "/dashboard/webhooks", "/dashboard/audit"):
        await globex.goto(browser.url(path))
        text = await globex.locator("main").inner_text()
        assert "underwriting bot" not in text and receiver.url not in text and "ada@acme.test" not in text
    answer = await globex.goto(browser.url(f"/dashboard/webhooks/events/{event_id}"))
    assert answer.status == 404
    token = await globex.locator("input[name=csrf_token]").first.input_value()
    refused = await globex.request.post(browser.url(f"/dashboard/keys/{key_id}/revoke"),
                                        form={"csrf_token": token}, max_redirects=0)
    assert refused.status == 404
    replay = await globex.request.post(browser.url(f"/dashboard/webhooks/events/{event_id}/replay"),
                                       form={"csrf_token": token, "endpoint_id": "whe_none"}, max_redirects=0)
    assert replay.status == 404


async def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(hooks, browser):
    page = await browser.sign_in("admin")
    await page.goto(browser.url("/dashboard/keys"))
    for form in ({"scopes": "read"}, {"scopes": "read", "csrf_token": "forged"}):
        answer = await page.request.post(browser.url("/dashboard/keys"), form=form, max_redirects=0)
        assert answer.status == 403
        assert "security token" in await answer.text()
    # A NUL in a field (PostgreSQL text cannot hold one) is a 400 page, never a 500.
    token = await page.locator("input[name=csrf_token]").first.input_value()
    answer = await page.request.post(browser.url("/dashboard/keys"), max_redirects=0,
                                     form={"scopes": "read", "csrf_token": token, "description": "a\x00b"})
    assert answer.status == 400 and "NUL" in await answer.text()
    signed_out = await browser.new_page()
    await signed_out.goto(browser.url("/dashboard/sign-in"))
    token = await signed_out.locator("input[name=csrf_token]").input_value()
    answer = await signed_out.request.post(browser.url("/dashboard/sign-in"), max_redirects=0, form={
        "csrf_token": token, "organisation": "acme\x00", "email": "a\x00@acme.test", "password": "x\x00"})
    assert answer.status == 401 and "Wrong organisation, email or password." in await answer.text()
    async with hooks.engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(api_keys)) == 0
        assert await conn.scalar(select(func.count()).select_from(audit_log)
                                 .where(audit_log.c.action != "staff.signed_in")) == 0


async def test_a_session_ends_at_sign_out(hooks, browser):
    page = await browser.sign_in("admin")
    [cookie] = [c for c in await page.context.cookies() if c["name"] == COOKIE]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    await page.get_by_role("button", name="Sign out").click()
    assert "/dashboard/sign-in" in page.url
    # The old cookie, sent again by hand, opens nothing: the session's row is gone.
    answer = await hooks.client.get("/dashboard/keys", headers={"Cookie": f"{COOKIE}={cookie['value']}"},
                                    allow_redirects=False)
    assert answer.status == 303 and answer.headers["Location"].startswith("/dashboard/sign-in")


async def test_sign_in_attempts_are_limited_per_email(hooks, browser):
    member = await add_staff(hooks.engine, "admin")
    page = await browser.new_page()
    messages = []
    for attempt in range(11):
        await page.goto(browser.url("/dashboard/sign-in"))
        await page.get_by_label("Organisation").fill("acme")
        await page.get_by_label("Email").fill(member.email)
        await page.get_by_label("Password").fill(f"wrong password {attempt}")
        await page.get_by_role("button", name="Sign in").click()
        messages.append(await page.get_by_role("alert").inner_text())
    assert messages[:10] == ["Wrong organisation, email or password."] * 10
    assert messages[10].startswith("Too many sign-in attempts")
    # Even the right password waits now.
    await page.goto(browser.url("/dashboard/sign-in"))
    await page.get_by_label("Organisation").fill("acme")
    await page.get_by_label("Email").fill(member.email)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    assert (await page.get_by_role("alert").inner_text()).startswith("Too many sign-in attempts")
