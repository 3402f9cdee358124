"""The reference page in a real browser: Debian's Chromium, driven by Playwright (never a downloaded
browser), opens /docs of the API served on loopback, Redoc renders the document from our own route with
nothing fetched from elsewhere, and a request example is visible. The screenshot it takes is the one the
README and docs/api.md show (docs/images/reference.png).

Chromium is required, not optional: scripts/setup installs it where it can (root with apt-get), and
without it this test fails saying so."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.async_api import async_playwright

from tests.support.paths import REPO_ROOT

CHROMIUM = Path(os.environ.get("VIP_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOT = REPO_ROOT / "docs" / "images" / "reference.png"


@pytest.fixture
def chromium() -> str:
    if not CHROMIUM.exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}: the reference page test needs a real browser. "
                    "Install it with `apt-get install -y chromium` (scripts/setup does, as root), or point "
                    "VIP_CHROMIUM at one.")
    return str(CHROMIUM)


@pytest.mark.e2e
@pytest.mark.timeout(180)
async def test_the_reference_page_shows_a_request_example_in_chromium(api, chromium):
    base = str(api.client.make_url("/"))
    served = urlsplit(base).netloc
    elsewhere: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium)
        try:
            page = await browser.new_page(viewport={"width": 1440, "height": 900})

            async def only_ours(route):
                if urlsplit(route.request.url).netloc in (served, ""):
                    await route.continue_()
                else:  # the page must work offline: anything from elsewhere is refused and recorded
                    elsewhere.append(route.request.url)
                    await route.abort()

            await page.route("**/*", only_ours)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            # a refused fetch or a Content-Security-Policy violation shows as a console error
            page.on("console", lambda message: message.type == "error" and errors.append(message.text))
            await page.goto(base + "docs#operation/createPaymentIntent")
            # Redoc renders the operation with its request sample (the example from the document).
            section = page.locator("[data-section-id='operation/createPaymentIntent']")
            await section.wait_for(timeout=60_000)
            sample = section.get_by_text('"recipient_wallet"').first
            await sample.wait_for(state="visible", timeout=30_000)
            assert await section.get_by_text("Request samples").is_visible()
            borrower = section.get_by_text('"0x90F79bf6EB2c4f870365E785982E1f101E93b906"').first
            assert await borrower.is_visible()
            # The navigation: the feature groups and the webhook events.
            menu = page.locator(".menu-content")
            for label in ("Income verification", "Disbursement", "Webhook events"):
                assert await menu.get_by_text(label, exact=True).first.is_visible(), label
            await sample.scroll_into_view_if_needed()
            await page.wait_for_load_state("networkidle")
            shot = await page.screenshot(path=str(SCREENSHOT), animations="disabled", caret="hide")
        finally:
            await browser.close()
    assert elsewhere == [], f"the page fetched from elsewhere: {elsewhere}"
    assert errors == []
    assert len(shot) > 20_000
