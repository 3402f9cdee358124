"""Cash-flow facts for the risk pillars: the time-weighted average balance over a window, recurring
outbound obligations and repayments to lending protocols."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from vip.verification.fraud import within
from vip.verification.model import EXACT, Transfer
from vip.verification.profile import median


def average_balance(end_balance: int, flows: Iterable[tuple[datetime, int]], start: datetime,
                    end: datetime) -> Decimal:
    """Time-weighted mean of a balance over [start, end), in base units.

    `end_balance` is the balance at `end`; `flows` are signed changes (+ in, - out) with their moments.
    The history is rebuilt backwards from the end, so it needs no opening balance; a balance that would
    go below zero (history older than the indexed window) counts as zero.
    """
    span = int((end - start).total_seconds() * 1_000_000)
    if span <= 0:
        return Decimal(max(end_balance, 0))
    area = 0
    balance = end_balance
    cursor = end
    for moment, delta in sorted(flows, key=lambda f: f[0], reverse=True):
        if moment >= end:
            balance -= delta  # after the window: undo it to get the balance at `end`
            continue
        if moment < start:
            break
        area += max(balance, 0) * int((cursor - moment).total_seconds() * 1_000_000)
        balance -= delta
        cursor = moment
    area += max(balance, 0) * int((cursor - start).total_seconds() * 1_000_000)
    return EXACT.divide(Decimal(area), Decimal(span))


@dataclass(frozen=True)
class Obligation:
    counterparty: str
    network: str
    monthly_usd: Decimal
    months: int
    lending_protocol: bool
    total_usd: Decimal
    transfers: int


def obligations(outbound: Sequence[Transfer], periods: Sequence[str], lending: Collection[str], *,
                min_months: int, tolerance: Decimal) -> list[Obligation]:
    """Recurring payments (one counterparty paid in at least `min_months` of the periods, each month's
    total within `tolerance` of their median: rent, a loan, a subscription) and every repayment to a
    lending protocol (averaged over the periods)."""
    wanted = set(periods)
    monthly: dict[tuple[str, str], dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for t in outbound:
        month = f"{t.timestamp:%Y-%m}"
        if month in wanted:
            monthly[(t.network, t.to_address)][month] += t.usd()
            counts[(t.network, t.to_address)] += 1
    found = []
    for (network, counterparty), months in monthly.items():
        total = sum(months.values(), Decimal(0))
        if counterparty in lending:
            found.append(Obligation(counterparty, network, EXACT.divide(total, Decimal(len(periods))),
                                    len(months), True, total, counts[(network, counterparty)]))
            continue
        if len(months) < min_months:
            continue
        typical = median(list(months.values()))
        scale = 10**6
        if all(within(int(v * scale), int(typical * scale), tolerance) for v in months.values()):
            found.append(Obligation(counterparty, network, typical, len(months), False, total,
                                    counts[(network, counterparty)]))
    return sorted(found, key=lambda o: (-o.monthly_usd, o.counterparty))
