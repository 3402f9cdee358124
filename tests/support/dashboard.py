"""The dashboard in a real browser, for its tests: staff members made directly in the store, and Debian's
Chromium (driven by Playwright, never a downloaded browser) signed in through the real sign-in form.

    async def test_something(dashboard):              # the fixture (tests/conftest.py): on the `api` app
        page = await dashboard.sign_in("analyst")     # a new member of "acme" with that role, signed in
        await page.goto(dashboard.url("/dashboard/borrowers"))

Every page of a browser refuses requests to any other host (the dashboard must work offline) and records
them in `requests_elsewhere`, with console errors in `console_errors`; leaving the context asserts that
nothing was fetched from elsewhere and no script error happened."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.async_api import Browser, Page, async_playwright
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.paths import REPO_ROOT
from vip.accounts import keys
from vip.dashboard import staff as staff_store
from vip.dashboard.session import StaffIdentity

CHROMIUM = Path(os.environ.get("VIP_CHROMIUM", "/usr/bin/chromium"))
AXE = REPO_ROOT / "node_modules" / "axe-core" / "axe.min.js"  # pinned in package.json
SCREENSHOTS = REPO_ROOT / "docs" / "images"
PASSWORD = "correct horse battery staple"  # every test member's, unless a test says otherwise


async def add_staff(engine: AsyncEngine, role: str = "admin", org: str = "acme", email: str | None = None,
                    password: str = PASSWORD) -> StaffIdentity:
    """A new staff member of `org` (created if new) with `role`, made directly in the store."""
    email = email or f"{role}-{secrets.token_hex(4)}@{org}.test"
    async with engine.begin() as conn:
        org_id = await keys.ensure_organisation(conn, org)
        return await staff_store.add_member(conn, org_id, email, password, role)


@dataclass
class DashboardBrowser:
    browser: Browser
    base_url: str  # http://127.0.0.1:port, no trailing slash
    engine: AsyncEngine
    console_errors: list[str] = field(default_factory=list)
    requests_elsewhere: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.base_url + path

    async def new_page(self) -> Page:
        """A page in a context of its own (its own cookies), guarded and recorded."""
        context = await self.browser.new_context(viewport={"width": 1280, "height": 860},
                                                 bypass_csp=False)
        page = await context.new_page()
        served = urlsplit(self.base_url).netloc

        async def only_ours(route):
            if urlsplit(route.request.url).netloc in (served, ""):
                await route.continue_()
            else:
                self.requests_elsewhere.append(route.request.url)
                await route.abort()

        await page.route("**/*", only_ours)
        page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))
        page.on("console",
                lambda message: message.type == "error" and self.console_errors.append(message.text))
        return page

    async def sign_in_as(self, org: str, email: str, password: str = PASSWORD) -> Page:
        """A new page signed in through the sign-in form (it fails the test if the sign-in does)."""
        page = await self.new_page()
        await page.goto(self.url("/dashboard/sign-in"))
        await page.get_by_label("Organisation").fill(org)
        await page.get_by_label("Email").fill(email)
        await page.get_by_label("Password").fill(password)
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_load_state()
        assert "/dashboard/sign-in" not in page.url, await page.locator("main").inner_text()
        return page

    async def sign_in(self, role: str = "admin", org: str = "acme") -> Page:
        """A new member of `org` with `role`, signed in on a new page."""
        member = await add_staff(self.engine, role, org)
        return await self.sign_in_as(org, member.email)


async def serious_accessibility_problems(page: Page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is (one line each: rule, nodes)."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        # evaluated by the browser's debugging protocol, which the pages' script-src 'none' does not stop
        await page.evaluate(AXE.read_text() + "\n;0")
    result = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
            for v in result["violations"] if v["impact"] in ("serious", "critical")]


async def screenshot(page: Page, name: str) -> None:
    """The page as docs/dashboard.md shows it: docs/images/dashboard-<name>.png."""
    await page.screenshot(path=str(SCREENSHOTS / f"dashboard-{name}.png"), full_page=True,
                          animations="disabled", caret="hide")


@asynccontextmanager
async def dashboard_browser(base_url: str, engine: AsyncEngine) -> AsyncIterator[DashboardBrowser]:
    if not CHROMIUM.exists():  # noqa: ASYNC240 (one stat before a browser starts)
        pytest.fail(f"Chromium is missing at {CHROMIUM}: the dashboard's tests need a real browser. Install "
                    "it with `apt-get install -y chromium` (scripts/setup does, as root), or point "
                    "VIP_CHROMIUM at one.")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            session = DashboardBrowser(browser, base_url.rstrip("/"), engine)
            yield session
        finally:
            await browser.close()
    assert session.requests_elsewhere == [], f"pages fetched from elsewhere: {session.requests_elsewhere}"
    assert session.page_errors == [], f"script errors: {session.page_errors}"


@pytest.fixture
async def dashboard(api) -> AsyncIterator[DashboardBrowser]:
    """Chromium on the `api` fixture's application (its dashboard at /dashboard)."""
    async with dashboard_browser(str(api.client.make_url("/")), api.engine) as session:
        yield session
