"""The borrowers and networks pages in Chromium, on a VIP made from real data: salaries and a wash round
trip paid on Anvil, followed by the real indexer, verified by the real VIP job, pushed records read through
the API. An analyst finds the borrower by external_id and reads the chart, the flags with their transfers,
the risk score and the transactions, filtered as the API filters them; another organisation's analyst
finds nothing; an operator may not open borrowers but sees the indexer's figures. The screenshots in
docs/images are taken here."""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from eth_account import Account
from playwright.async_api import Page
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.dashboard import SCREENSHOTS, dashboard_browser, screenshot, serious_accessibility_problems
from tests.support.indexer import running_indexer, wait_synced
from tests.support.verification import USDC, Borrower, month_after, months_after, noon
from tests.support.wallets import connect
from vip.store.tables import chain_cursors, risk_scores
from vip.verification.config import VerificationConfig

SALARY = Decimal(5000)
PAID = [Decimal(5000), Decimal(4925), Decimal(4800), Decimal(4650)]  # exact, close, approximate, 7% short
EXPECTED_TIERS = ["exact", "close", "approximate", "unverified"]


@pytest.fixture
async def harness(aiohttp_client, chain: ChainDriver, database_url: str,
                  engine: AsyncEngine) -> AsyncIterator[ApiHarness]:
    """The real app on this test's own Anvil (its time moves) and database."""
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    fast = VerificationConfig(job_idle_s=0.05)
    settings = indexer_settings(network).model_copy(update={"verification": fast})
    async with checked_api(aiohttp_client, settings, database_url, engine) as api:
        yield api


async def borrower_with_a_vip(api: ApiHarness, chain: ChainDriver, database_url: str,
                              external_id: str) -> tuple[Borrower, dict, list[str]]:
    """Four months of salary (the second with a wash round trip), the records pushed, the VIP made by the
    daemon. Returns the borrower, the VIP and the washed transfers' hashes."""
    accounts = chain.accounts
    chain.fund([accounts[i] for i in range(2, 10)])
    user_id = await api.user(external_id=external_id)
    await connect(api, user_id, Account.from_key(chain.node.private_keys[3]))
    head = chain.node.call("eth_getBlockByNumber", ["latest", False])
    b = Borrower(api, chain, user_id, accounts[3], accounts[2], accounts[4:10],
                 datetime.fromtimestamp(int(head["timestamp"], 16), UTC))
    days = months_after(b.start, len(PAID))
    washed = []
    for i, (day, amount) in enumerate(zip(days, PAID, strict=True)):
        b.pay("USDC", b.employer, b.wallet, int(amount * USDC), noon(day))
        if i == 1:
            peer = b.others[1]
            washed += [b.pay("USDC", peer, b.wallet, 2000 * USDC, noon(day) + timedelta(days=3)),
                       b.pay("USDC", b.wallet, peer, 1990 * USDC, noon(day) + timedelta(days=4))]
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days])
    async with running_indexer(api.settings, database_url):
        await wait_synced(api.engine, chain, "local")
        vip = await b.vip(len(PAID))
    return b, vip, washed


async def listed(page: Page) -> list[str]:
    """The transaction hashes of the page's transactions table, in order."""
    rows = page.locator("table.transactions tbody tr")
    return await rows.evaluate_all("rows => rows.map(r => r.dataset.tx)")


async def labelled_fields(page: Page) -> None:
    """Every visible form field has a label a screen reader announces."""
    unlabelled = await page.evaluate(
        "() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]"
        ".filter(f => !(f.labels && f.labels.length) && !f.getAttribute('aria-label')).map(f => f.name)")
    assert unlabelled == []


async def summary_above_the_fold(dashboard, url: str) -> None:
    """At 1280x800, the page opens with the decision: recommendation, score, income and the fraud in
    words, all inside the first screen, before the chart and the detail."""
    page = await dashboard.sign_in("analyst")
    await page.set_viewport_size({"width": 1280, "height": 800})
    await page.goto(url)
    summary = page.locator("section.summary")
    box = await summary.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800, box
    text = await summary.inner_text()
    assert "Fraud found" in text and "Wash trading with" in text and "None of it counts as income" in text
    assert "2,000.00 USD in from them and 1,990.00 USD out to them" in text
    assert re.search(r"\b(Refer|Decline): fraud found\b", text), text
    assert re.search(r"\d+ of 1,000", text) and "preview" in text
    assert "a month, 3 of 4 months verified" in text
    chart = await page.locator("svg.income-chart").bounding_box()
    assert chart is not None and chart["y"] > box["y"] + box["height"]  # the detail comes after
    await page.screenshot(path=str(SCREENSHOTS / "dashboard-borrower-summary.png"), animations="disabled")


async def the_list_filters_and_exports(dashboard, api: ApiHarness, b: Borrower) -> None:
    """The list's filters, its search by part of an id, and its CSV export (a cell a spreadsheet would run
    as a formula is written as text)."""
    other = await api.user(external_id='=HYPERLINK("http://evil.example","click")', metadata={"tier": "+1"})
    page = await dashboard.sign_in("analyst")

    async def shown(query: str) -> list[str]:
        await page.goto(dashboard.url(f"/dashboard/borrowers?{query}"))
        return await page.locator("table.borrowers tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.borrower)")

    assert set(await shown("")) == {b.user_id, other}
    row = page.locator(f"tr[data-borrower={b.user_id}]")
    assert "partially verified" in await row.inner_text() and "preview" in await row.inner_text()
    assert await row.locator("strong.flag-count").inner_text() == "2"
    assert await shown("flagged=yes") == [b.user_id]
    assert await shown("flagged=no") == [other]
    assert await shown("status=none") == [other]
    assert await shown("status=verified") == []
    assert await shown("recommendation=unscored") == [b.user_id]
    assert await shown("q=applicant") == [b.user_id]  # part of an external id: a list, not a redirect
    assert await shown(f"q={b.user_id[4:14]}") == [b.user_id]  # part of an id
    assert await shown("sort=flags") == [b.user_id, other]
    assert await shown("sort=oldest") == [b.user_id, other]
    today = datetime.now(UTC).date()
    assert await shown(f"vip_from={(today - timedelta(days=3)).isoformat()}") == [b.user_id]
    assert await shown(f"vip_to={(today - timedelta(days=3650)).isoformat()}") == []
    # Pages of one, by keyset: every borrower once, in order.
    seen: list[str] = []
    url: str | None = "/dashboard/borrowers?sort=oldest&per_page=1"
    while url:
        seen += await shown(url.split("?", 1)[1])
        following = page.get_by_role("link", name="Next page")
        url = await following.get_attribute("href") if await following.count() else None
    assert seen == [b.user_id, other]
    # The export: the filtered rows, as the list orders them, in a file.
    await page.goto(dashboard.url("/dashboard/borrowers?sort=flags"))
    await labelled_fields(page)
    assert await serious_accessibility_problems(page) == []
    async with page.expect_download() as download_info:
        await page.get_by_role("link", name="Export these as CSV").click()
    download = await download_info.value
    assert re.fullmatch(r"borrowers-\d{8}T\d{6}Z\.csv", download.suggested_filename)
    saved = await download.path()
    rows = list(csv.DictReader(io.StringIO(await asyncio.to_thread(Path(saved).read_text))))
    assert [r["borrower_id"] for r in rows] == [b.user_id, other]
    flagged, formula = rows
    assert flagged["fraud_flags"] == "2" and flagged["vip_status"] == "partially_verified"
    assert flagged["score_source"] == "preview" and flagged["external_id"] == "loan-applicant-7"
    assert formula["external_id"] == "'" + '=HYPERLINK("http://evil.example","click")'
    assert formula["metadata"] == '{"tier":"+1"}' and formula["vip_status"] == "none"
    filtered = await page.request.get(dashboard.url("/dashboard/borrowers.csv?flagged=no"))
    assert filtered.status == 200 and filtered.headers["content-type"].startswith("text/csv")
    assert [r["borrower_id"] for r in csv.DictReader(io.StringIO(await filtered.text()))] == [other]


@pytest.mark.timeout(400)
async def test_an_analyst_reads_a_borrower_s_vip_flags_score_and_transactions(harness, chain, database_url):
    api = harness
    b, vip, washed = await borrower_with_a_vip(api, chain, database_url, "loan-applicant-7")
    assert vip["status"] == "partially_verified"
    assert {f["tx_hash"] for f in vip["fraud_flags"]} == set(washed)
    months = sorted(vip["verified_periods"] + vip["unverified_periods"], key=lambda p: p["period"])

    async with dashboard_browser(str(api.client.make_url("/")), api.engine) as dashboard:
        page = await dashboard.sign_in("analyst")
        await page.goto(dashboard.url("/dashboard/borrowers"))
        assert await page.get_by_role("link", name=b.user_id).is_visible()  # in the newest borrowers
        await labelled_fields(page)
        assert await serious_accessibility_problems(page) == []
        await screenshot(page, "borrowers")

        # Found by external_id, with the keyboard.
        await page.get_by_label("Id or external id (or part of one)").fill("loan-applicant-7")
        await page.keyboard.press("Enter")
        await page.wait_for_url(dashboard.url(f"/dashboard/borrowers/{b.user_id}"))
        assert await page.get_by_role("heading", level=1).inner_text() == "Borrower loan-applicant-7"
        await summary_above_the_fold(dashboard, page.url)
        await the_list_filters_and_exports(dashboard, api, b)

        # The chart: one group per month with the report's numbers, its tier and reason.
        bars = page.locator("svg.income-chart g.period")
        assert await bars.count() == len(PAID)
        for i, month in enumerate(months):
            bar = bars.nth(i)
            assert await bar.get_attribute("data-period") == month["period"]
            assert Decimal(await bar.get_attribute("data-expected")) == month["expected_amount"] == SALARY
            assert Decimal(await bar.get_attribute("data-received")) == month["received_amount"]
            assert await bar.get_attribute("data-tier") == EXPECTED_TIERS[i]
            assert Decimal(await bar.get_attribute("data-arrived")) == PAID[i]
            height = int(await bar.locator("rect.received").get_attribute("height"))
            assert height == int(PAID[i] * 200 / 5000 + Decimal("0.5"))  # axis 0..5,000: 200 pixels
        tiers = await page.locator("svg.income-chart text.tier").all_text_contents()
        assert tiers == ["exact", "close", "approx.", "unverified"]
        assert await page.locator("svg.income-chart text.reasons").all_text_contents() == ["amount off"]
        # ... and the same as a table.
        short = page.locator("table.vip-months tr[data-tier=unverified]")
        assert "ERR_INCOME_MISMATCH" in await short.inner_text()
        assert "4,650.00" in await short.inner_text()

        # The fraud flags: one counterparty, one round trip of its two legs (each as indexed), with totals.
        flags = page.locator("article.flag")
        assert await flags.count() == 1
        text = await page.locator("section[aria-labelledby=flags]").inner_text()
        for tx_hash in washed:
            assert tx_hash in text
        assert "ERR_WASH_TRADE_DETECTED" in text and "2,000.00 USDC" in text and "1,990.00 USDC" in text
        assert "1 round trip, 2 transfers" in text
        assert "in from them 2,000.00 USD, out to them 1,990.00 USD" in text

        # Before the lender asked for it, the score is a preview: shown, not stored, no event fired.
        risk = await page.locator("section[aria-labelledby=risk]").inner_text()
        assert "Not requested through the API yet" in risk
        async with api.engine.connect() as conn:
            assert await conn.scalar(select(func.count()).select_from(risk_scores)) == 0
        assert await b.events("risk_score.") == []
        preview = await page.locator(".score").inner_text()
        # The score the API gives, the same, pillar by pillar, and why it is not an approval.
        status, body = await b.get("/v1/risk-score", user_id=b.user_id)
        assert status == 200, body
        score = body["risk_score"]
        assert preview == str(score["composite_score"])
        await page.reload()
        risk = await page.locator("section[aria-labelledby=risk]").inner_text()
        assert "Not requested through the API yet" not in risk and score["id"] in risk
        assert str(score["composite_score"]) in risk and score["recommendation"].replace("_", " ") in risk
        for name, pillar in score["pillars"].items():
            row = page.locator(f"table.pillars tr[data-pillar={name}]")
            assert str(pillar["score"]) in await row.inner_text()
        assert score["adverse_action_reasons"][0]["code"] == "AA_FRAUD_SIGNALS"
        assert "AA_FRAUD_SIGNALS" in risk
        await labelled_fields(page)
        assert await serious_accessibility_problems(page) == []
        await screenshot(page, "borrower")

        # Transactions: the wash trades are left out, as the API leaves them out, until asked for.
        listed_all = await listed(page)
        assert len(listed_all) > 2 and not set(listed_all) & set(washed)
        await page.get_by_label("Classification").select_option("wash_trade")
        await page.get_by_label("Include wash trades and circular flows").check()
        await page.get_by_role("button", name="Filter").click()
        await page.wait_for_load_state()
        assert sorted(await listed(page)) == sorted(washed)
        # A filter the API refuses is refused here with its words, and nothing is listed.
        await page.goto(dashboard.url(f"/dashboard/borrowers/{b.user_id}?classification=wash_trade"))
        assert "include_filtered=true" in await page.get_by_role("alert").inner_text()
        # Paging: one transaction a page, the next page's link follows the signed cursor.
        await page.goto(dashboard.url(f"/dashboard/borrowers/{b.user_id}?limit=1"))
        first = await listed(page)
        await page.get_by_role("link", name="Next page").click()
        await page.wait_for_load_state()
        second = await listed(page)
        assert len(first) == len(second) == 1 and first != second and first[0] == listed_all[0]
        assert second[0] == listed_all[1]
        assert await page.get_by_role("link", name="First page").is_visible()

        # Another organisation's analyst: not found, as the API would say.
        other = await dashboard.sign_in("analyst", org="globex")
        response = await other.goto(dashboard.url(f"/dashboard/borrowers/{b.user_id}"))
        assert response is not None and response.status == 404
        await other.goto(dashboard.url("/dashboard/borrowers?q=loan-applicant-7"))
        assert "No borrower of globex" in await other.get_by_role("alert").inner_text()

        # An operator may not read borrowers, but sees the networks.
        operator = await dashboard.sign_in("operator")
        response = await operator.goto(dashboard.url(f"/dashboard/borrowers/{b.user_id}"))
        assert response is not None and response.status == 403
        response = await operator.goto(dashboard.url("/dashboard/networks"))
        assert response is not None and response.status == 200
        async with api.engine.connect() as conn:
            cursor = (await conn.execute(select(chain_cursors)
                                         .where(chain_cursors.c.network == "local"))).one()
        head, _ = chain.head()
        row = operator.locator("tr[data-network=local]")
        assert await row.locator("[data-figure=indexed]").inner_text() == str(cursor.block_number)
        assert await row.locator("[data-figure=head]").inner_text() == str(head)
        assert await row.locator("[data-figure=lag-blocks]").inner_text() == str(head - cursor.block_number)
        assert await row.locator("[data-figure=final]").inner_text() == str(cursor.final_block)
        assert await row.locator("[data-figure=reorgs]").inner_text() == "0"
        waiting = operator.locator("tr[data-queue=vip_report] [data-figure=waiting]")
        assert await waiting.inner_text() == "0"  # the VIP was made
        # The score's event waits for the daemon (stopped): acme's queue shows it, another lender's not.
        webhooks = "tr[data-queue=webhooks] [data-figure=waiting]"
        assert int(await operator.locator(webhooks).inner_text()) >= 1
        stranger = await dashboard.sign_in("operator", org="globex")
        await stranger.goto(dashboard.url("/dashboard/networks"))
        assert await stranger.locator(webhooks).inner_text() == "0"
        assert await stranger.locator("tr[data-network=local] [data-figure=indexed]").inner_text() == str(
            cursor.block_number)
        assert await serious_accessibility_problems(operator) == []
        await screenshot(operator, "networks")


@pytest.mark.timeout(180)
async def test_a_borrower_with_nothing_yet_has_a_page_that_says_so(api, dashboard):
    user_id = await api.user(external_id="just-signed-up")
    page = await dashboard.sign_in("analyst")
    await page.goto(dashboard.url("/dashboard/borrowers?q=just-signed-up"))
    await page.wait_for_url(dashboard.url(f"/dashboard/borrowers/{user_id}"))
    text = await page.locator("main").inner_text()
    for words in ("No connections", "No VIP yet", "No score: no VIP yet", "No transactions match",
                  "No payment intents", "connected no wallet", "ERR_MISSING_WALLET"):
        assert words in text, words
    assert "ask for one with GET /v1/vip-report" not in text  # which would answer 422 without a wallet
    assert await page.locator("svg.income-chart").count() == 0
    await labelled_fields(page)
    assert await serious_accessibility_problems(page) == []
    # An id the organisation does not have, and a search that finds nothing.
    response = await page.goto(dashboard.url("/dashboard/borrowers/usr_doesnotexist"))
    assert response is not None and response.status == 404
    response = await page.goto(dashboard.url("/dashboard/borrowers?q=nobody-by-that-name"))
    assert response is not None and response.status == 404
    assert "No borrower of acme" in await page.get_by_role("alert").inner_text()
    # A NUL (which PostgreSQL text cannot hold) anywhere is a 400 page, never a server error.
    for path in ("/dashboard/borrowers?q=a%00b", "/dashboard/borrowers/usr_a%00b",
                 f"/dashboard/borrowers/{user_id}?from_date=2026-01-01%00"):
        response = await page.goto(dashboard.url(path))
        assert response is not None and response.status == 400, path
