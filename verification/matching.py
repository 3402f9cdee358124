"""Payroll matching: each off-chain income record against the on-chain inflows of the user's wallets.

A record matches an inbound transfer that (1) comes from the record's origin (`from_reference`, or an
address the platform whitelists), (2) lands between `days_before` and `days_after` around the payout date,
(3) is not flagged wash or circular, and (4) carries the expected amount within a tier: `exact` (0%),
`close` (<= 2%) or `approximate` (<= 5%). Each transfer pays at most one record. Records are taken in date
order; each takes its closest candidate (smallest amount difference, then nearest date, then earliest).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from vip.verification.config import MatchingConfig
from vip.verification.model import (
    CIRCULAR_FLOW,
    EXACT,
    INCOME_MISMATCH,
    INSUFFICIENT_HISTORY,
    UNVERIFIED_SOURCE,
    WASH_TRADE,
    IncomeRecord,
    Transfer,
    TransferKey,
)

CONFIDENCE_ORDER = ("exact", "close", "approximate")
FRACTION_PLACES = Decimal("0.000001")


def variance(expected: Decimal, received: Decimal) -> Decimal:
    """|received - expected| / expected, to 6 decimal places (what the details show)."""
    if expected == 0:
        return Decimal(0) if received == 0 else Decimal(1)
    return EXACT.divide(EXACT.subtract(received, expected).copy_abs(), expected).quantize(
        FRACTION_PLACES, ROUND_HALF_UP)


def tier(expected: Decimal, received: Decimal, config: MatchingConfig) -> str | None:
    """The match confidence of an amount, or None when it is outside every tier. Exact comparisons:
    |received - expected| <= expected x tolerance."""
    # In EXACT's precision: the default context's 28 digits would round a difference of one base unit on an
    # amount of 30 digits away to nothing.
    diff = EXACT.subtract(received, expected).copy_abs()
    if diff == 0:
        return "exact"
    if diff <= EXACT.multiply(expected, config.close_tolerance):
        return "close"
    if diff <= EXACT.multiply(expected, config.approximate_tolerance):
        return "approximate"
    return None


@dataclass(frozen=True)
class RecordMatch:
    record: IncomeRecord
    transfer: Transfer | None
    confidence: str | None
    reasons: tuple[dict[str, Any], ...] = ()


@dataclass
class PeriodResult:
    period: str
    records: list[RecordMatch] = field(default_factory=list)

    @property
    def expected(self) -> Decimal:
        return sum((m.record.amount for m in self.records), Decimal(0))

    @property
    def verified(self) -> bool:
        return bool(self.records) and all(m.transfer is not None for m in self.records)

    @property
    def received(self) -> Decimal:
        return sum((m.transfer.usd() for m in self.records if m.transfer is not None), Decimal(0))

    @property
    def confidence(self) -> str | None:
        tiers = [m.confidence for m in self.records if m.confidence is not None]
        return max(tiers, key=CONFIDENCE_ORDER.index) if tiers and self.verified else None

    @property
    def main(self) -> RecordMatch | None:
        """The largest record's match: its transfer stands for the period."""
        matched = [m for m in self.records if m.transfer is not None]
        return max(matched, key=lambda m: m.record.amount) if matched else None

    def reasons(self) -> list[dict[str, Any]]:
        if not self.records:
            return [{"code": INSUFFICIENT_HISTORY, "message": "no income record for this period"}]
        return [reason for m in self.records for reason in m.reasons]


def match_income(periods: Sequence[str], records: Iterable[IncomeRecord], inflows: Iterable[Transfer],
                 flagged: Mapping[TransferKey, tuple[str, ...]], config: MatchingConfig
                 ) -> list[PeriodResult]:
    """Per period (YYYY-MM, in the given order) the match of each of its inbound income records.

    `inflows`: transfers received by the user's wallets (from outside them); `flagged`: the fraud flags
    of transfers (wash, circular), which are never income.
    """
    wanted = set(periods)
    results = {p: PeriodResult(p) for p in periods}
    inflow_list = sorted(inflows, key=lambda t: (t.timestamp, t.order))
    by_origin: dict[str, list[Transfer]] = defaultdict(list)
    for t in inflow_list:
        by_origin[t.from_address].append(t)
    used: set[TransferKey] = set()
    for record in sorted(records, key=lambda r: (r.record_date, r.amount)):
        if record.period not in wanted:
            continue
        results[record.period].records.append(
            _match_record(record, by_origin, inflow_list, flagged, used, config))
    return [results[p] for p in periods]


def _window(record: IncomeRecord, config: MatchingConfig) -> tuple[datetime, datetime]:
    start = datetime.combine(record.record_date - timedelta(days=config.days_before), datetime.min.time())
    end = datetime.combine(record.record_date + timedelta(days=config.days_after + 1), datetime.min.time())
    return start, end


def _in_window(t: Transfer, window: tuple[datetime, datetime]) -> bool:
    moment = t.timestamp.replace(tzinfo=None) if t.timestamp.tzinfo else t.timestamp
    return window[0] <= moment < window[1]


def _match_record(record: IncomeRecord, by_origin: Mapping[str, list[Transfer]], inflows: list[Transfer],
                  flagged: Mapping[TransferKey, tuple[str, ...]], used: set[TransferKey],
                  config: MatchingConfig) -> RecordMatch:
    window = _window(record, config)
    origins = ({record.from_reference} if record.from_reference else set()) | set(record.whitelist)
    candidates = [t for origin in origins for t in by_origin.get(origin, ())
                  if t.key not in used and _in_window(t, window)]
    clean = [t for t in candidates if not flagged.get(t.key)]
    reasons: list[dict[str, Any]] = []
    for code in sorted({c for t in candidates for c in flagged.get(t.key, ())}):
        tx = next(t for t in candidates if code in flagged.get(t.key, ()))
        reasons.append({"code": code, "message": _FLAG_TEXT[code], "details": {
            "tx_hash": tx.tx_hash, "received_amount": tx.usd()}})

    def closeness(t: Transfer) -> tuple[Decimal, timedelta, datetime]:
        return (abs(t.usd() - record.amount), abs(t.timestamp.date() - record.record_date), t.timestamp)

    if clean:
        best = min(clean, key=closeness)
        confidence = tier(record.amount, best.usd(), config)
        if confidence is not None:
            used.add(best.key)
            return RecordMatch(record, best, confidence)
        reasons.append(_mismatch(record, best.usd(), config, tx_hash=best.tx_hash))
        return RecordMatch(record, None, None, tuple(reasons))
    if not reasons:
        # Nothing from the platform's origins: an inflow of the right amount from elsewhere is named.
        elsewhere = [t for t in inflows if t.key not in used and not flagged.get(t.key)
                     and _in_window(t, window) and tier(record.amount, t.usd(), config) is not None]
        if elsewhere:
            t = min(elsewhere, key=closeness)
            reasons.append({"code": UNVERIFIED_SOURCE, "message": "the payout arrived from an origin the "
                            "platform does not whitelist", "details": {
                                "tx_hash": t.tx_hash, "origin_address": t.from_address,
                                "received_amount": t.usd()}})
        reasons.append(_mismatch(record, Decimal(0), config))
    return RecordMatch(record, None, None, tuple(reasons))


def _mismatch(record: IncomeRecord, received: Decimal, config: MatchingConfig, tx_hash: str | None = None
              ) -> dict[str, Any]:
    details: dict[str, Any] = {"expected_amount": record.amount, "received_amount": received,
               "tolerance_pct": config.approximate_tolerance,
               "actual_variance_pct": variance(record.amount, received)}
    if tx_hash is not None:
        details["tx_hash"] = tx_hash
    return {"code": INCOME_MISMATCH, "message": "on-chain inflow differs from the income record by more "
            "than the tolerance" if received else "no on-chain inflow matches the income record",
            "details": details}


_FLAG_TEXT = {
    WASH_TRADE: "the inflow is part of a wash trade and is not counted as income",
    CIRCULAR_FLOW: "the inflow is part of a circular flow and is not counted as income",
}
