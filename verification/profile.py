"""The VIP figures from the per-period match results: status, consistency, income, its spread."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal

from vip.verification.matching import PeriodResult
from vip.verification.model import EXACT

RATE_PLACES = Decimal("0.0001")
USD_PLACES = Decimal("0.000001")


def months_ending(year: int, month: int, months: int) -> list[str]:
    """The `months` calendar months ending with (year, month), oldest first (YYYY-MM)."""
    periods = []
    for _ in range(months):
        periods.append(f"{year:04d}-{month:02d}")
        month -= 1
        if month == 0:
            year, month = year - 1, 12
    return periods[::-1]


def lookback_periods(now: datetime, months: int) -> list[str]:
    """The `months` complete calendar months before `now`'s month, oldest first (YYYY-MM)."""
    year, month = (now.year, now.month - 1) if now.month > 1 else (now.year - 1, 12)
    return months_ending(year, month, months)


def vip_periods(now: datetime, months: int, payout_dates: Iterable[date]) -> list[str]:
    """The VIP's window (decision 130): the `months` calendar months ending with `now`'s month when the
    platform records hold a payout dated in that month on or before `now` (the salary of this month is
    already paid: a lender expects to see it), else ending with the month before. A record dated after
    `now` (a payout announced for later this month) does not count: it is not money received yet.
    `now` is the service clock (UTC); the count is always `months`."""
    today = now.astimezone(UTC).date() if now.tzinfo is not None else now.date()
    if any(d.year == today.year and d.month == today.month and d <= today for d in payout_dates):
        return months_ending(today.year, today.month, months)
    return lookback_periods(datetime(today.year, today.month, today.day), months)


def longest_streak(flags: Sequence[bool]) -> int:
    best = run = 0
    for ok in flags:
        run = run + 1 if ok else 0
        best = max(best, run)
    return best


def median(values: Sequence[Decimal]) -> Decimal:
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return EXACT.divide(ordered[mid - 1] + ordered[mid], Decimal(2))


def population_stdev(values: Sequence[Decimal]) -> Decimal:
    if not values:
        return Decimal(0)
    mean = EXACT.divide(sum(values, Decimal(0)), Decimal(len(values)))
    square = EXACT.divide(sum(((v - mean) ** 2 for v in values), Decimal(0)), Decimal(len(values)))
    return square.sqrt(EXACT)


def usd(value: Decimal) -> Decimal:
    return value.quantize(USD_PLACES, ROUND_HALF_UP)


@dataclass(frozen=True)
class Figures:
    status: str  # verified | partially_verified | unverified
    periods_requested: int
    periods_verified: int
    consistency_rate: Decimal
    longest_streak_months: int
    verified_monthly_income: Decimal  # median of the verified periods' received amounts
    average_verified_amount: Decimal  # their mean
    income_variance: Decimal  # their population standard deviation


def figures(results: Sequence[PeriodResult]) -> Figures:
    verified = [r.received for r in results if r.verified]
    requested = len(results)
    if not verified:
        status = "unverified"
    elif len(verified) == requested:
        status = "verified"
    else:
        status = "partially_verified"
    rate = EXACT.divide(Decimal(len(verified)), Decimal(requested)) if requested else Decimal(0)
    mean = EXACT.divide(sum(verified, Decimal(0)), Decimal(len(verified))) if verified else Decimal(0)
    return Figures(
        status=status, periods_requested=requested, periods_verified=len(verified),
        consistency_rate=rate.quantize(RATE_PLACES, ROUND_HALF_UP),
        longest_streak_months=longest_streak([r.verified for r in results]),
        verified_monthly_income=usd(median(verified)) if verified else Decimal(0),
        average_verified_amount=usd(mean), income_variance=usd(population_stdev(verified)))


def income_change(previous: Decimal, current: Decimal) -> Decimal | None:
    """The relative change of verified monthly income (None when there was none before)."""
    if previous <= 0:
        return None
    return EXACT.divide(current - previous, previous).quantize(USD_PLACES, ROUND_HALF_UP)
