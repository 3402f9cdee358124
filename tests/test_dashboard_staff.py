"""An organisation's staff, managed in the dashboard by its admins (Chromium): a member added with a first
password shown once signs in with it and replaces it (their other sessions end); a role change applies
from the member's next page; a removed member's session opens nothing; the organisation always keeps an
admin; another organisation's member ids are not found; every change is in the audit log."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from tests.support.dashboard import add_staff, screenshot, serious_accessibility_problems
from vip.store.tables import audit_log

pytestmark = pytest.mark.timeout(240)
NEW_PASSWORD = "a much better passphrase"


async def member_row(page, email: str):
    return page.get_by_role("row").filter(has_text=email)


async def confirm(page, button: str) -> None:
    """The confirmation page a change asks first (nothing changed yet), then its button."""
    assert (await page.get_by_role("heading", level=1).inner_text()).endswith("?")
    await page.get_by_role("button", name=button).click()


async def test_an_admin_adds_a_member_who_replaces_the_first_password(api, dashboard):
    admin = await dashboard.sign_in("admin")
    await admin.goto(dashboard.url("/dashboard/staff"))
    assert await serious_accessibility_problems(admin) == []
    await admin.get_by_label("Email").fill("Ana@Acme.test")
    await admin.get_by_label("Role", exact=True).select_option("analyst")
    await admin.get_by_role("button", name="Add member").click()
    first_password = await admin.get_by_test_id("secret").input_value()
    assert len(first_password) >= 12
    await screenshot(admin, "staff-added")

    ana = await dashboard.sign_in_as("acme", "ana@acme.test", first_password)
    links = await ana.get_by_role("navigation", name="Main").get_by_role("link").all_inner_texts()
    assert links == ["Borrowers"]
    elsewhere = await dashboard.sign_in_as("acme", "ana@acme.test", first_password)  # a second session
    await ana.get_by_role("link", name="Password").click()
    await ana.get_by_label("Current password").fill("not it at all, sorry")
    await ana.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    await ana.get_by_label("New password again").fill(NEW_PASSWORD)
    await ana.get_by_role("button", name="Change password").click()
    assert await ana.get_by_role("alert").inner_text() == "The current password is not right."
    await ana.get_by_label("Current password").fill(first_password)
    await ana.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    await ana.get_by_label("New password again").fill(NEW_PASSWORD)
    await ana.get_by_role("button", name="Change password").click()
    assert "other sessions were signed out" in await ana.get_by_role("status").inner_text()
    await elsewhere.goto(dashboard.url("/dashboard/borrowers"))
    assert "/dashboard/sign-in" in elsewhere.url  # the session opened with the old password ended
    await ana.goto(dashboard.url("/dashboard/borrowers"))
    assert ana.url.endswith("/dashboard/borrowers")  # the one that changed it goes on

    # A sign-in with the first password is refused now; the new one works.
    refused = await dashboard.new_page()
    await refused.goto(dashboard.url("/dashboard/sign-in"))
    await refused.get_by_label("Organisation").fill("acme")
    await refused.get_by_label("Email").fill("ana@acme.test")
    await refused.get_by_label("Password").fill(first_password)
    await refused.get_by_role("button", name="Sign in").click()
    assert await refused.get_by_role("alert").inner_text() == "Wrong organisation, email or password."
    await dashboard.sign_in_as("acme", "ana@acme.test", NEW_PASSWORD)

    async with api.engine.connect() as conn:
        actions = [tuple(r) for r in await conn.execute(
            select(audit_log.c.member_email, audit_log.c.action).order_by(audit_log.c.id))]
    assert ("ana@acme.test", "staff.password_changed") in actions
    assert any(action == "staff.added" for _, action in actions)


async def test_roles_change_members_go_and_an_admin_always_stays(api, dashboard):
    admin_member = await add_staff(api.engine, "admin")
    operator = await add_staff(api.engine, "operator")
    admin = await dashboard.sign_in_as("acme", admin_member.email)
    op_page = await dashboard.sign_in_as("acme", operator.email)

    await admin.goto(dashboard.url("/dashboard/staff"))
    row = await member_row(admin, operator.email)
    await row.get_by_label(f"Role of {operator.email}", exact=True).select_option("analyst")
    await row.get_by_role("button", name=f"Change role of {operator.email}").click()
    await op_page.goto(dashboard.url("/dashboard/networks"))
    assert op_page.url.endswith("/dashboard/networks")  # asked, not changed yet
    await confirm(admin, "Make them analyst")
    assert "applies from the member's next page" in await admin.get_by_role("status").inner_text()
    await op_page.goto(dashboard.url("/dashboard/networks"))
    assert await op_page.get_by_role("heading", name="Not allowed").is_visible()  # an analyst now
    await op_page.goto(dashboard.url("/dashboard/borrowers"))
    assert op_page.url.endswith("/dashboard/borrowers")

    # The only admin can neither step down nor be removed.
    row = await member_row(admin, admin_member.email)
    await row.get_by_label(f"Role of {admin_member.email}", exact=True).select_option("operator")
    await row.get_by_role("button", name=f"Change role of {admin_member.email}").click()
    await confirm(admin, "Make them operator")
    assert "only admin" in await admin.get_by_role("alert").inner_text()
    row = await member_row(admin, admin_member.email)
    await row.get_by_role("button", name=f"Remove {admin_member.email}").click()
    await confirm(admin, "Remove the member")
    assert "only admin" in await admin.get_by_role("alert").inner_text()

    row = await member_row(admin, operator.email)
    await row.get_by_role("button", name=f"Remove {operator.email}").click()
    await confirm(admin, "Remove the member")
    assert "removed and signed out" in await admin.get_by_role("status").inner_text()
    assert await admin.get_by_role("cell", name=operator.email).count() == 0
    await op_page.goto(dashboard.url("/dashboard/borrowers"))
    assert "/dashboard/sign-in" in op_page.url

    # Another organisation's admin cannot touch acme's members: not found, nothing changed.
    other = await dashboard.sign_in("admin", org="globex")
    async with api.engine.connect() as conn:
        before = list(await conn.execute(select(audit_log.c.action).where(
            audit_log.c.target == admin_member.member_id)))
    await other.goto(dashboard.url("/dashboard/staff"))
    assert await other.get_by_text(admin_member.email).count() == 0
    response = await other.request.post(dashboard.url(f"/dashboard/staff/{admin_member.member_id}/remove"),
                                        form={"csrf_token": await other.locator(
                                            "input[name=csrf_token]").first.input_value()})
    assert response.status == 404
    async with api.engine.connect() as conn:
        after = list(await conn.execute(select(audit_log.c.action).where(
            audit_log.c.target == admin_member.member_id)))
    assert after == before
    await admin.goto(dashboard.url("/dashboard/staff"))
    assert await (await member_row(admin, admin_member.email)).count() == 1  # still there
    await screenshot(admin, "staff")

    # A second admin may then step the first one down.
    second = await add_staff(api.engine, "admin")
    second_page = await dashboard.sign_in_as("acme", second.email)
    await second_page.goto(dashboard.url("/dashboard/staff"))
    row = await member_row(second_page, admin_member.email)
    await row.get_by_label(f"Role of {admin_member.email}", exact=True).select_option("operator")
    await row.get_by_role("button", name=f"Change role of {admin_member.email}").click()
    await confirm(second_page, "Make them operator")
    assert await second_page.get_by_role("status").is_visible()
    async with api.engine.connect() as conn:
        details = await conn.scalar(select(audit_log.c.details).where(
            audit_log.c.action == "staff.role_changed", audit_log.c.target == admin_member.member_id))
    assert details == {"email": admin_member.email, "from": "admin", "to": "operator"}
