"""Signing in to the dashboard in Chromium: the form signs a member in (with the keyboard alone) and shows
the pages of their role, and another role's page is refused; a wrong password is refused with the same
words as an unknown email; a page opened without a session sends the browser to the sign-in form and
back after it; a session ends when idle or old."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from tests.support.dashboard import PASSWORD, add_staff
from vip.dashboard import staff
from vip.store.tables import staff_sessions


@pytest.mark.timeout(180)
async def test_a_member_signs_in_and_sees_the_pages_of_their_role(api, dashboard):
    page = await dashboard.sign_in("admin")
    assert await page.get_by_role("heading", name="acme").is_visible()
    nav = page.get_by_role("navigation", name="Main")
    for label in ("API keys", "Webhooks", "Audit log", "Borrowers", "Networks"):
        assert await nav.get_by_role("link", name=label).is_visible(), label

    analyst = await dashboard.sign_in("analyst")
    links = await analyst.get_by_role("navigation", name="Main").get_by_role("link").all_inner_texts()
    assert links == ["Borrowers"]


@pytest.mark.timeout(180)
async def test_wrong_password_and_unknown_email_get_the_same_answer(api, dashboard):
    member = await add_staff(api.engine, "admin")
    answers = []
    for email, password in ((member.email, "not the password at all"), ("nobody@acme.test", "whatever12345")):
        page = await dashboard.new_page()
        await page.goto(dashboard.url("/dashboard/sign-in"))
        await page.get_by_label("Organisation").fill("acme")
        await page.get_by_label("Email").fill(email)
        await page.get_by_label("Password").fill(password)
        await page.get_by_role("button", name="Sign in").click()
        answers.append(await page.get_by_role("alert").inner_text())
        assert page.url.endswith("/dashboard/sign-in")
    assert answers == ["Wrong organisation, email or password."] * 2


@pytest.mark.timeout(180)
async def test_a_page_without_a_session_goes_through_the_sign_in_form_and_back(api, dashboard):
    member = await add_staff(api.engine, "admin")
    page = await dashboard.new_page()
    await page.goto(dashboard.url("/dashboard/audit"))
    assert "/dashboard/sign-in?next=" in page.url
    await page.get_by_label("Organisation").fill("acme")
    await page.get_by_label("Email").fill(member.email.upper())  # emails are matched in any case
    await page.get_by_label("Password").fill("correct horse battery staple")
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(dashboard.url("/dashboard/audit"))


@pytest.mark.timeout(180)
async def test_the_keyboard_alone_signs_in_and_a_role_cannot_open_another_roles_page(api, dashboard):
    member = await add_staff(api.engine, "operator")
    page = await dashboard.new_page()
    await page.goto(dashboard.url("/dashboard/sign-in"))
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
    await page.keyboard.press("Enter")  # past the header, into the main content
    assert await page.evaluate("document.activeElement.id") == "main"
    for text in ("acme", member.email, PASSWORD):  # organisation, email, password in tab order
        await page.keyboard.press("Tab")
        await page.keyboard.type(text)
    await page.keyboard.press("Enter")
    await page.wait_for_url(dashboard.url("/dashboard"))
    for path in ("/dashboard/keys", "/dashboard/webhooks", "/dashboard/audit"):
        answer = await page.goto(dashboard.url(path))
        assert answer.status == 403, path
        assert await page.get_by_role("heading", name="Not allowed").is_visible()


async def test_a_session_ends_when_idle_or_too_old(engine):
    member = await add_staff(engine, "admin")
    async with engine.begin() as conn:
        idle, _ = await staff.open_session(conn, member)
        old, _ = await staff.open_session(conn, member)
        live, _ = await staff.open_session(conn, member)
        assert all([await staff.find_session(conn, t) for t in (idle, old, live)])
        row = staff_sessions.c.token_hash
        await conn.execute(update(staff_sessions).where(row == staff._token_hash(idle))
                           .values(last_seen_at=func.now() - staff.SESSION_IDLE - timedelta(seconds=1)))
        await conn.execute(update(staff_sessions).where(row == staff._token_hash(old))
                           .values(expires_at=func.now() - timedelta(seconds=1)))
    async with engine.begin() as conn:
        assert await staff.find_session(conn, idle) is None
        assert await staff.find_session(conn, old) is None
        found = await staff.find_session(conn, live)
        assert found is not None and found.staff == member
        await staff.prune_sessions(conn)
        assert await conn.scalar(select(func.count()).select_from(staff_sessions)) == 1


@pytest.mark.timeout(180)
async def test_an_unknown_dashboard_path_is_a_page_saying_so(api, dashboard):
    page = await dashboard.new_page()
    response = await page.goto(dashboard.url("/dashboard/no/such/<page>"))
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert await page.get_by_role("heading", name="Not found").is_visible()
    assert "/dashboard/no/such/" in await page.get_by_text("There is no dashboard page").inner_text()


async def test_dashboard_pages_have_a_rate_limit_bucket_of_their_own(api):
    """An office's staff share one address: the dashboard's pages count in their own bucket per address
    (600 a minute), never in the API's keyless one (120), and the stylesheet is not counted."""
    limits = api.settings.api.rate_limits
    assert limits.dashboard_per_client > limits.default_per_key
    api_before = await api.client.get("/v1/transactions")  # no key: 401, counted in the address's bucket
    assert api_before.status == 401
    for _ in range(limits.default_per_key + 5):
        page = await api.client.get("/dashboard/sign-in")
        assert page.status == 200
    assert int(page.headers["X-RateLimit-Limit"]) == limits.dashboard_per_client
    # (a minute's window may turn during the loop: at most this many spent, at least one)
    spent = limits.dashboard_per_client - int(page.headers["X-RateLimit-Remaining"])
    assert 1 <= spent <= limits.default_per_key + 5
    style = await api.client.get("/dashboard/static/dashboard.css")
    assert style.status == 200 and "X-RateLimit-Limit" not in style.headers
    api_after = await api.client.get("/v1/transactions")
    assert api_after.status == 401  # not 429: the pages spent none of the API's budget
    assert (int(api_after.headers["X-RateLimit-Remaining"])
            >= int(api_before.headers["X-RateLimit-Remaining"]) - 1)
