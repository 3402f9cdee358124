"""The VIP chart of the borrower page: reports made by the real verification pipeline (and stored as the
database stores them) drawn as SVG whose bars, tiers and reasons say what the report says, in exact
amounts, readable without colour."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest
import simplejson

from vip.dashboard.income_chart import (
    PLOT_HEIGHT,
    amount,
    axis_top,
    bar_height,
    chart_periods,
    income_chart_svg,
    money,
    period_rows,
)
from vip.verification.config import VerificationConfig
from vip.verification.model import IncomeRecord, Transfer
from vip.verification.pipeline import Platform, Wallet, verify, vip_report

SVG = "{http://www.w3.org/2000/svg}"
USDC = 10**6
ME = "0x" + "a" * 40
EMPLOYER = "0x" + "e" * 40
FRIEND = "0x" + "f" * 40
PLATFORM = Platform("paystream", "payroll", frozenset({EMPLOYER}))
T0 = datetime(2026, 7, 1, tzinfo=UTC)


class Chain:
    def __init__(self) -> None:
        self.block = 0

    def t(self, frm: str, to: str, units: int, at: datetime) -> Transfer:
        self.block += 1
        digest = hashlib.sha256(f"local{self.block}".encode()).hexdigest()
        return Transfer("local", "0x" + digest, 0, self.block, at, "USDC", frm, to, units)


def stored(body: dict) -> dict:
    """The report as it comes back from its JSONB column (vip.store.engine's serialiser)."""
    return simplejson.loads(simplejson.dumps(body, use_decimal=True), use_decimal=True)


def pipeline_report(received: list[Decimal | None], expected: Decimal, *, washed_month: int | None = None
                    ) -> dict:
    """A report of the pure pipeline: one record of `expected` per month from January 2026, paid
    `received` (None: nothing paid); in `washed_month` the salary goes straight back to the employer."""
    chain = Chain()
    transfers, records, periods = [], [], []
    for m, paid in enumerate(received, start=1):
        day = date(2026, m, 25)
        periods.append(f"2026-{m:02d}")
        records.append(IncomeRecord("paystream", "payroll", day, expected, EMPLOYER, PLATFORM.whitelist))
        at = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=12)
        if paid is not None:
            transfers.append(chain.t(EMPLOYER, ME, int(paid * USDC), at))
            if m == washed_month:
                transfers.append(chain.t(ME, EMPLOYER, int(paid * USDC), at + timedelta(hours=2)))
    outcome = verify([Wallet("wal_1", ME, "local")], transfers, records, [PLATFORM], periods,
                     VerificationConfig())
    return stored(vip_report(outcome, vip_id="vip_1", user_id="usr_1", generated_at=T0))


def groups(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return root.findall(f"{SVG}g[@class='period']")


def test_each_month_is_drawn_with_the_report_s_amounts_tier_and_reasons():
    # 5,000 expected each month: paid exactly, 1.5% short, 4% short, 7% short, nothing, washed back.
    paid = [Decimal(5000), Decimal(4925), Decimal(4800), Decimal(4650), None, Decimal(5000)]
    report = pipeline_report(paid, Decimal(5000), washed_month=6)
    assert report["status"] == "partially_verified"
    svg = income_chart_svg(report)
    root = ET.fromstring(svg)
    drawn = groups(svg)
    assert [g.get("data-period") for g in drawn] == [f"2026-0{m}" for m in range(1, 7)]
    assert [g.get("data-tier") for g in drawn] == ["exact", "close", "approximate", "unverified",
                                                   "unverified", "unverified"]
    # The report's numbers, exactly, and the bars in proportion to what arrived on a 0..5000 axis: a
    # verified month's received amount; for an unverified one, the inflow its reason names and refused.
    by_period = {p["period"]: p for p in report["verified_periods"] + report["unverified_periods"]}
    for g in drawn:
        item = by_period[g.get("data-period")]
        assert Decimal(g.get("data-received")) == item["received_amount"]
        assert Decimal(g.get("data-expected")) == item["expected_amount"]
        named = {r["details"]["tx_hash"]: r["details"]["received_amount"] for r in item.get("reasons", ())
                 if "tx_hash" in r.get("details", {})}
        arrived = item["received_amount"] + sum(named.values(), Decimal(0))
        assert Decimal(g.get("data-arrived")) == arrived
        received = g.find(f"{SVG}rect[@class='received']")
        expected = g.find(f"{SVG}rect[@class='expected']")
        assert int(received.get("height")) == int(
            (arrived * PLOT_HEIGHT / 5000).to_integral_value(ROUND_HALF_UP))
        assert int(expected.get("height")) == PLOT_HEIGHT
    heights = [int(g.find(f"{SVG}rect[@class='received']").get("height")) for g in drawn]
    assert heights == [200, 197, 192, 186, 0, 200]
    assert [Decimal(g.get("data-received")) for g in drawn][3:] == [0, 0, 0]  # none of it is income
    # Tiers read without colour: a word under each month, a distinct fill (solid or a pattern).
    tier_words = [g.find(f"{SVG}text[@class='tier']").text for g in drawn]
    assert tier_words == ["exact", "close", "approx.", "unverified", "unverified", "unverified"]
    fills = {g.get("data-tier"): g.find(f"{SVG}rect[@class='received']").get("fill") for g in drawn}
    assert len(set(fills.values())) == 4
    # Why each unverified month is not income, in words under it.
    lines = [g.find(f"{SVG}text[@class='reasons']") for g in drawn]
    reasons = [(g.get("data-period"), line.text if line is not None else None)
               for g, line in zip(drawn, lines, strict=True)]
    assert reasons == [("2026-01", None), ("2026-02", None), ("2026-03", None),
                       ("2026-04", "amount off"), ("2026-05", "no inflow"), ("2026-06", "wash trade")]
    # For a screen reader: a title and a description that sum the months up, a tooltip per month.
    assert root.get("role") == "img"
    title_id, desc_id = root.get("aria-labelledby").split()
    assert root.find(f"{SVG}title").get("id") == title_id
    desc = root.find(f"{SVG}desc")
    assert desc.get("id") == desc_id
    assert desc.text.startswith("Expected against received pay for 6 months, 2026-01 to 2026-06: 3 verified "
                                "(1 exact, 1 close, 1 approximate), 3 unverified.")
    assert "2026-05 (no inflow)" in desc.text and "2026-06 (wash trade)" in desc.text
    assert drawn[1].find(f"{SVG}title").text == (
        "2026-02: received 4,925.00 USD, expected 5,000.00 USD; Close (within 2%)")
    assert drawn[3].find(f"{SVG}title").text == (
        "2026-04: received 4,650.00 USD, expected 5,000.00 USD (4,650.00 USD not counted as income); "
        "Unverified (not income): amount off")
    # The legend names every tier with its tolerance.
    legend = " ".join(t.text for t in root.iter(f"{SVG}text") if t.text)
    for words in ("Expected (income record)", "Exact", "Close (within 2%)", "Approximate (within 5%)",
                  "Unverified (not income)"):
        assert words in legend


def test_the_table_alternative_has_every_figure_and_reason():
    report = pipeline_report([Decimal("3000"), Decimal("2100")], Decimal("3000"))
    rows = period_rows(report)
    assert [(r["period"], r["expected"], r["arrived"], r["counted"], r["difference"], r["difference_pct"],
             r["tier"]) for r in rows] == [
        ("2026-01", "3,000.00", "3,000.00", "3,000.00", "0.00", "0.00%", "exact"),
        ("2026-02", "3,000.00", "2,100.00", "0.00", "-900.00", "-30.00%", "unverified")]
    (reason,) = rows[1]["reasons"]
    assert reason.code == "ERR_INCOME_MISMATCH" and "differs" in reason.message
    assert rows[0]["tx_hash"] == report["verified_periods"][0]["tx_hash"]
    assert rows[1]["tx_hash"] == report["unverified_periods"][0]["reasons"][0]["details"]["tx_hash"]


def test_amounts_stay_exact_beyond_float_precision():
    huge = Decimal("12345678901234567890.123456")
    assert money(huge) == "12,345,678,901,234,567,890.123456"
    top = axis_top(huge)
    assert top == Decimal("2E+19")
    # Heights are worked out in Decimal: a millionth below the top of a 2E+19 axis is still full height.
    assert bar_height(top - Decimal("0.000001"), top) == PLOT_HEIGHT
    assert bar_height(top / 2, top) == PLOT_HEIGHT // 2
    assert bar_height(Decimal("0.01"), Decimal(5000)) == 1  # a few cents still show
    assert bar_height(Decimal(0), Decimal(5000)) == 0
    with pytest.raises(TypeError):
        amount(3250.5)
    with pytest.raises(ValueError, match="finite"):
        amount("NaN")


@pytest.mark.parametrize(("largest", "top"), [
    (Decimal("3250"), Decimal("5000")), (Decimal("5000"), Decimal("5000")), (Decimal("5000.01"),
                                                                               Decimal("1E+4")),
    (Decimal("2100"), Decimal("2500")), (Decimal("180"), Decimal("200")), (Decimal("0.4"), Decimal("0.5")),
    (Decimal(0), Decimal(1)),
])
def test_axis_top_is_a_round_number_at_or_above_the_largest_amount(largest, top):
    assert axis_top(largest) == top


def test_money_keeps_the_report_s_decimals():
    assert money(Decimal("3250.000000")) == "3,250.00"
    assert money(Decimal("2100.5")) == "2,100.50"
    assert money(Decimal("0.000001")) == "0.000001"
    assert money(Decimal("-900")) == "-900.00"


def test_a_pending_report_draws_an_empty_chart_that_says_so():
    pending = {"id": "vip_1", "status": "pending", "verified_periods": [], "unverified_periods": []}
    svg = income_chart_svg(pending)
    assert groups(svg) == []
    assert ET.fromstring(svg).find(f"{SVG}desc").text == "The report has no months to show."


def test_text_from_the_report_is_escaped():
    report = {"verified_periods": [], "unverified_periods": [{
        "period": "2026-01<script>", "expected_amount": "10", "received_amount": "0", "verified": False,
        "reason_codes": ["X"], "reasons": [{"code": "<b>X</b>", "message": "a & b"}]}]}
    svg = income_chart_svg(report)
    assert "<script>" not in svg and "<b>" not in svg
    (g,) = groups(svg)  # still well-formed XML
    assert g.get("data-period") == "2026-01<script>"
    assert chart_periods(report)[0].reasons[0].message == "a & b"


def test_each_reason_of_a_month_has_its_own_line():
    """A month whose washed inflow and whose short clean one both failed (the pipeline gives both)."""
    report = {"verified_periods": [], "unverified_periods": [{
        "period": "2026-03", "expected_amount": Decimal(5000), "received_amount": Decimal(0),
        "verified": False,
        "reason_codes": ["ERR_INCOME_MISMATCH", "ERR_WASH_TRADE_DETECTED"],
        "reasons": [
            {"code": "ERR_WASH_TRADE_DETECTED", "message": "washed",
             "details": {"tx_hash": "0x" + "1" * 64, "received_amount": Decimal(2000)}},
            {"code": "ERR_INCOME_MISMATCH", "message": "short",
             "details": {"tx_hash": "0x" + "2" * 64, "received_amount": Decimal(2500)}}]}]}
    (g,) = groups(income_chart_svg(report))
    lines = g.findall(f"{SVG}text[@class='reasons']")
    assert [line.text for line in lines] == ["wash trade", "amount off"]
    assert len({line.get("y") for line in lines}) == 2
    assert Decimal(g.get("data-arrived")) == 4500  # both inflows arrived; neither is income
