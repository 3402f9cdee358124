"""Signing in to the dashboard in Chromium: the form signs a member in and shows the pages of their role;
a wrong password is refused with the same words as an unknown email; a page opened without a session
sends the browser to the sign-in form and back after it."""

from __future__ import annotations

import pytest

from tests.support.dashboard import add_staff


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
