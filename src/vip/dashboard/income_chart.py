"""A VIP report as a chart an analyst reads at a glance: per month, the pay the income records expected
against the pay that arrived on chain, each month's tolerance tier, and why an unverified month is not income.

Pure: a report (the stored body, as the API answers it) in, an inline SVG string and table rows out. The
SVG is drawn for people who do not see colour or do not see at all: every tier has a fill pattern and a
text label under its bar, the legend repeats both, the image has a title and a description, each bar a
tooltip, and `period_rows` gives the same figures as a table (the page shows it under the chart).

Amounts stay Decimal from the report to the pixel: a bar's height is its amount times the plot height
over the axis top, rounded half up to a whole pixel (at least 1 for any amount above zero, so a payout of
cents is still drawn). Geometry is in integers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from html import escape
from typing import Any

EXACT, CLOSE, APPROXIMATE, UNVERIFIED = "exact", "close", "approximate", "unverified"
TIERS = (EXACT, CLOSE, APPROXIMATE, UNVERIFIED)

# What a tier means, as the legend and the table say it (the spec's tolerances, decision 200).
TIER_TEXT = {
    EXACT: "Exact (received = expected)",
    CLOSE: "Close (within 2%)",
    APPROXIMATE: "Approximate (within 5%)",
    UNVERIFIED: "Unverified (not income)",
}
# The word under each month's bars: readable without the colour.
TIER_LABEL = {EXACT: "exact", CLOSE: "close", APPROXIMATE: "approx.", UNVERIFIED: "unverified"}
# Fill colour (each at least 3:1 against white, the plot's background) and pattern of each tier.
TIER_COLOUR = {EXACT: "#1a7f37", CLOSE: "#0a6c8c", APPROXIMATE: "#8a5a00", UNVERIFIED: "#c4232f"}
EXPECTED_STROKE = "#4d5560"

# Why a month is unverified, in a few words under its bars (the table gives the service's message).
REASON_LABEL = {
    "ERR_INCOME_MISMATCH": "amount off",
    "ERR_WASH_TRADE_DETECTED": "wash trade",
    "ERR_CIRCULAR_FLOW": "circular flow",
    "ERR_UNVERIFIED_SOURCE": "other payer",
    "ERR_INSUFFICIENT_HISTORY": "no record",
}
NO_INFLOW = "no inflow"  # ERR_INCOME_MISMATCH with nothing received

# Layout, in SVG user units (pixels at 100%).
PLOT_HEIGHT = 200
LEFT, RIGHT, TOP = 88, 16, 64
BELOW = 80  # period, tier and up to MAX_REASON_LINES reasons under the plot
MAX_REASON_LINES = 3
GROUP, MAX_GROUP = 72, 150  # one month: two bars and the gap between months
MAX_BAR = 40
MIN_WIDTH = 880
TICKS = 4


@dataclass(frozen=True)
class Reason:
    code: str
    message: str


@dataclass(frozen=True)
class ChartPeriod:
    """One month of the report, as the chart and its table show it."""

    period: str  # YYYY-MM
    expected: Decimal
    received: Decimal
    tier: str  # exact | close | approximate | unverified
    reasons: tuple[Reason, ...]
    tx_hash: str | None  # the matched payout (verified) or the inflow a reason names
    # What arrived on chain: `received` plus the inflows the reasons name and refused (short of the
    # tolerance, washed back, from another payer). The bar shows it: an analyst sees 4,650 of 5,000
    # arrived, not a bare zero; the report counts only `received` as income.
    arrived: Decimal = Decimal(0)

    @property
    def difference(self) -> Decimal:
        return self.arrived - self.expected

    @property
    def not_counted(self) -> Decimal:
        return self.arrived - self.received

    @property
    def short_reasons(self) -> tuple[str, ...]:
        labels: list[str] = []
        for reason in self.reasons:
            label = REASON_LABEL.get(reason.code, reason.code)
            if reason.code == "ERR_INCOME_MISMATCH" and self.arrived == 0:
                label = NO_INFLOW
            if label not in labels:
                labels.append(label)
        return tuple(labels)


def amount(value: Any) -> Decimal:
    """A report's amount as a Decimal. A float is refused: it may already have lost digits."""
    if isinstance(value, bool | float):
        raise TypeError(f"an amount must be exact (Decimal, int or a decimal string), not {value!r}")
    if value is None:
        return Decimal(0)
    exact = Decimal(value) if isinstance(value, Decimal | int) else Decimal(str(value))
    if not exact.is_finite():
        raise ValueError(f"an amount must be a finite number, not {value!r}")
    return exact


def _reason(item: Mapping[str, Any]) -> Reason:
    return Reason(str(item.get("code", "")), str(item.get("message", "")))


def chart_periods(report: Mapping[str, Any]) -> list[ChartPeriod]:
    """The report's months, oldest first, verified and unverified together."""
    periods = []
    for item in report.get("verified_periods") or ():
        tier = item.get("match_confidence")
        received = amount(item.get("received_amount"))
        periods.append(ChartPeriod(
            period=item["period"], expected=amount(item.get("expected_amount")), received=received,
            tier=tier if tier in (EXACT, CLOSE, APPROXIMATE) else APPROXIMATE, reasons=(),
            tx_hash=item.get("tx_hash"), arrived=received))
    for item in report.get("unverified_periods") or ():
        reasons = tuple(_reason(r) for r in item.get("reasons") or ())
        if not reasons:
            reasons = tuple(Reason(code, "") for code in item.get("reason_codes") or ())
        refused: dict[str, Decimal] = {}  # tx hash -> amount, each inflow once
        for r in item.get("reasons") or ():
            details = r.get("details")
            if isinstance(details, Mapping) and details.get("tx_hash"):
                refused[str(details["tx_hash"])] = amount(details.get("received_amount"))
        received = amount(item.get("received_amount"))
        periods.append(ChartPeriod(
            period=item["period"], expected=amount(item.get("expected_amount")), received=received,
            tier=UNVERIFIED, reasons=reasons, tx_hash=next(iter(refused), None),
            arrived=received + sum(refused.values(), Decimal(0))))
    periods.sort(key=lambda p: p.period)
    return periods


def axis_top(largest: Decimal) -> Decimal:
    """The smallest of 1, 2, 2.5, 5 or 10 times a power of ten that is at least `largest` (1 for none)."""
    if largest <= 0:
        return Decimal(1)
    magnitude = Decimal(1).scaleb(largest.adjusted())
    for step in (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5), Decimal(10)):
        if largest <= step * magnitude:
            return step * magnitude
    raise AssertionError("unreachable: 10 x magnitude exceeds any number of that magnitude")


def bar_height(value: Decimal, top: Decimal, plot_height: int = PLOT_HEIGHT) -> int:
    """Pixels for `value` on an axis from 0 to `top`, rounded half up; at least 1 above zero."""
    if value <= 0:
        return 0
    pixels = int((value * plot_height / top).to_integral_value(ROUND_HALF_UP))
    return max(1, min(plot_height, pixels))


def money(value: Decimal | int | str) -> str:
    """A USD amount with thousands separators, at least 2 and at most 6 decimals, never rounded
    (the report carries 6)."""
    value = amount(value)
    exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)  # finite (amount() refuses NaN and infinities)
    digits = max(2, min(6, -exponent)) if value != value.to_integral() else 2
    return f"{value:,.{digits}f}"


def percent(fraction: Decimal) -> str:
    return f"{(fraction * 100).quantize(Decimal('0.01'), ROUND_HALF_UP)}%"


def period_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chart's figures as table rows (strings ready to show): the chart's text alternative."""
    rows = []
    for p in chart_periods(report):
        share = percent(p.difference / p.expected) if p.expected else None
        rows.append({"period": p.period, "expected": money(p.expected), "arrived": money(p.arrived),
                     "counted": money(p.received), "difference": money(p.difference),
                     "difference_pct": share, "tier": p.tier,
                     "tier_text": TIER_TEXT[p.tier], "reasons": p.reasons, "tx_hash": p.tx_hash})
    return rows


# --- the SVG ----------------------------------------------------------------------------------------------

def _attr(value: object) -> str:
    return escape(str(value), quote=True)


def _defs(prefix: str) -> str:
    """A pattern per tier (solid, stripes, dots, cross-hatch): the tiers differ without colour too."""
    c = TIER_COLOUR
    return (
        "<defs>"
        f'<pattern id="{prefix}-close" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{c[CLOSE]}"/>'
        '<rect width="2" height="6" fill="#ffffff"/></pattern>'
        f'<pattern id="{prefix}-approximate" width="6" height="6" patternUnits="userSpaceOnUse">'
        f'<rect width="6" height="6" fill="{c[APPROXIMATE]}"/><circle cx="3" cy="3" r="1.5" fill="#ffffff"/>'
        "</pattern>"
        f'<pattern id="{prefix}-unverified" width="8" height="8" patternUnits="userSpaceOnUse">'
        f'<rect width="8" height="8" fill="{c[UNVERIFIED]}"/>'
        '<path d="M0 0L8 8M8 0L0 8" stroke="#ffffff" stroke-width="1.5"/></pattern>'
        "</defs>"
    )


def _fill(tier: str, prefix: str) -> str:
    return TIER_COLOUR[EXACT] if tier == EXACT else f"url(#{prefix}-{tier})"


def _legend(prefix: str) -> str:
    items = [("expected", "Expected (income record)")] + [(t, TIER_TEXT[t]) for t in TIERS]
    parts = ['<g class="legend" aria-hidden="true">']
    x = LEFT
    for i, (key, text) in enumerate(items):
        row_x = x + (i % 3) * 210
        row_y = 8 + (i // 3) * 22
        if key == "expected":
            swatch = (f'<rect x="{row_x}" y="{row_y}" width="14" height="14" fill="#ffffff" '
                      f'stroke="{EXPECTED_STROKE}" stroke-width="2" stroke-dasharray="4 2"/>')
        else:
            swatch = f'<rect x="{row_x}" y="{row_y}" width="14" height="14" fill="{_fill(key, prefix)}"/>'
        parts.append(swatch + f'<text x="{row_x + 20}" y="{row_y + 12}">{escape(text)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _summary(periods: Sequence[ChartPeriod]) -> str:
    if not periods:
        return "The report has no months to show."
    counts = {t: sum(1 for p in periods if p.tier == t) for t in TIERS}
    verified = len(periods) - counts[UNVERIFIED]
    tiers = ", ".join(f"{counts[t]} {t}" for t in (EXACT, CLOSE, APPROXIMATE) if counts[t])
    text = (f"Expected against received pay for {len(periods)} months, {periods[0].period} to "
            f"{periods[-1].period}: {verified} verified")
    text += f" ({tiers})" if tiers else ""
    text += f", {counts[UNVERIFIED]} unverified."
    missed = [f"{p.period} ({', '.join(p.short_reasons) or 'no reason given'})" for p in periods
              if p.tier == UNVERIFIED]
    if missed:
        text += " Unverified: " + "; ".join(missed) + "."
    return text + " The table below the chart lists every figure."


def income_chart_svg(report: Mapping[str, Any], *, id_prefix: str = "vipchart") -> str:
    """The report as an inline SVG (escaped: safe to insert into a page as it is)."""
    periods = chart_periods(report)
    top = axis_top(max([p.expected for p in periods] + [p.arrived for p in periods], default=Decimal(0)))
    # A few months spread over the minimum width; many take GROUP each (the figure then scrolls).
    group = min(MAX_GROUP, max(GROUP, (MIN_WIDTH - LEFT - RIGHT) // max(1, len(periods))))
    bar = min(MAX_BAR, (group - 24) // 2)
    width = max(MIN_WIDTH, LEFT + group * len(periods) + RIGHT)
    height = TOP + PLOT_HEIGHT + BELOW
    base = TOP + PLOT_HEIGHT
    title_id, desc_id = f"{id_prefix}-title", f"{id_prefix}-desc"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="income-chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="{title_id} {desc_id}" '
        'font-family="system-ui, sans-serif" font-size="12" fill="#1f2328">',
        f'<title id="{title_id}">Income per month: expected against received pay (USD)</title>',
        f'<desc id="{desc_id}">{escape(_summary(periods))}</desc>',
        _defs(id_prefix),
        _legend(id_prefix),
        '<g class="axis" aria-hidden="true">',
    ]
    for i in range(TICKS + 1):
        value = top * i / TICKS
        y = base - bar_height(value, top) if i else base
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y}" y2="{y}" stroke="#d0d7de"/>'
                     f'<text x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{escape(money(value))}</text>')
    parts.append("</g>")
    for i, p in enumerate(periods):
        x = LEFT + group * i + (group - 2 * bar - 4) // 2
        expected_h, received_h = bar_height(p.expected, top), bar_height(p.arrived, top)
        reasons = ", ".join(p.short_reasons)
        tip = (f"{p.period}: received {money(p.arrived)} USD, expected {money(p.expected)} USD"
               + (f" ({money(p.not_counted)} USD not counted as income)" if p.not_counted else "")
               + f"; {TIER_TEXT[p.tier]}" + (f": {reasons}" if reasons else ""))
        centre = x + bar + 2
        parts.append(
            f'<g class="period" data-period="{_attr(p.period)}" data-expected="{_attr(p.expected)}" '
            f'data-received="{_attr(p.received)}" data-arrived="{_attr(p.arrived)}" '
            f'data-tier="{_attr(p.tier)}">'
            f"<title>{escape(tip)}</title>"
            f'<rect class="expected" x="{x}" y="{base - expected_h}" width="{bar}" height="{expected_h}" '
            f'fill="#ffffff" stroke="{EXPECTED_STROKE}" stroke-width="2" stroke-dasharray="4 2"/>'
            f'<rect class="received" x="{x + bar + 4}" y="{base - received_h}" width="{bar}" '
            f'height="{received_h}" fill="{_fill(p.tier, id_prefix)}"/>'
            f'<text x="{centre}" y="{base + 16}" text-anchor="middle">{escape(p.period)}</text>'
            f'<text class="tier" x="{centre}" y="{base + 32}" text-anchor="middle" font-weight="600">'
            f"{escape(TIER_LABEL[p.tier])}</text>")
        # One line per reason: a month is 72 units wide when there are many, too narrow for two side by side.
        for line, reason in enumerate(p.short_reasons[:MAX_REASON_LINES]):
            parts.append(f'<text class="reasons" x="{centre}" y="{base + 48 + 12 * line}" '
                         f'text-anchor="middle" font-size="10">{escape(reason)}</text>')
        parts.append("</g>")
    parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{base}" y2="{base}" stroke="#1f2328"/>')
    parts.append("</svg>")
    return "".join(parts)
