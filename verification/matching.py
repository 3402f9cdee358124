"""Payroll matching: each off-chain income record against the on-chain inflows of the user's wallets,
matching money, not transfers.

A record is settled by one or more inbound transfers of one payer (a batch, a second token account, a fee
split: up to `max_parts`) that (1) come from the record's origin (`from_reference`, or an address the
platform whitelists), (2) land between `days_before` and `days_after` around the payout date, (3) are not
flagged wash or circular, and (4) carry the expected amount in their sum within a tier: `exact` (0%),
`close` (<= 2%) or `approximate` (<= 5%). One transfer may settle several records at once (their sum).
A transfer counted for one settlement is never counted again. Records are taken in date order; each takes
its best settlement (best tier, then smallest amount difference, fewest parts, nearest dates, earliest).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from itertools import combinations
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
    """How one record was settled: by `transfers` (every one of them, in chain order; none when it was
    not), `received` the part of their money counted for this record (their sum, or this record's share
    when one transfer settled several records), at `confidence`; or why not (`reasons`)."""

    record: IncomeRecord
    transfers: tuple[Transfer, ...] = ()
    confidence: str | None = None
    received: Decimal = Decimal(0)
    reasons: tuple[dict[str, Any], ...] = ()

    @property
    def transfer(self) -> Transfer | None:
        """The first transfer that settled the record (None: not settled)."""
        return self.transfers[0] if self.transfers else None


@dataclass
class PeriodResult:
    period: str
    records: list[RecordMatch] = field(default_factory=list)

    @property
    def expected(self) -> Decimal:
        return sum((m.record.amount for m in self.records), Decimal(0))

    @property
    def verified(self) -> bool:
        return bool(self.records) and all(m.transfers for m in self.records)

    @property
    def received(self) -> Decimal:
        return sum((m.received for m in self.records if m.transfers), Decimal(0))

    @property
    def confidence(self) -> str | None:
        tiers = [m.confidence for m in self.records if m.confidence is not None]
        return max(tiers, key=CONFIDENCE_ORDER.index) if tiers and self.verified else None

    @property
    def main(self) -> RecordMatch | None:
        """The largest record's match: its first transfer stands for the period."""
        matched = [m for m in self.records if m.transfers]
        return max(matched, key=lambda m: m.record.amount) if matched else None

    @property
    def transfers(self) -> list[Transfer]:
        """Every transfer that settled a record of the period, once each, in chain order."""
        found = {t.key: t for m in self.records for t in m.transfers}
        return sorted(found.values(), key=lambda t: t.order)

    def reasons(self) -> list[dict[str, Any]]:
        if not self.records:
            return [{"code": INSUFFICIENT_HISTORY, "message": "no income record for this period"}]
        return [reason for m in self.records for reason in m.reasons]


def match_income(periods: Sequence[str], records: Iterable[IncomeRecord], inflows: Iterable[Transfer],
                 flagged: Mapping[TransferKey, tuple[str, ...]], config: MatchingConfig
                 ) -> list[PeriodResult]:
    """Per period (YYYY-MM, in the given order) the match of each of its inbound income records.

    `inflows`: transfers received by the user's wallets (from outside them); `flagged`: the fraud flags
    of transfers (wash, circular), which are never income. Records are taken in date order; each is settled
    by the best settlement still open (`_Matcher.settle`), and a transfer counted for one settlement is
    never counted again.
    """
    wanted = set(periods)
    pending = sorted((r for r in records if r.period in wanted), key=lambda r: (r.record_date, r.amount))
    matcher = _Matcher(pending, inflows, flagged, config)
    for i in range(len(pending)):
        matcher.settle(i)
    results = {p: PeriodResult(p) for p in periods}
    for i, record in enumerate(pending):
        results[record.period].records.append(matcher.matches[i])
    return [results[p] for p in periods]


def possible_settlements(records: Iterable[IncomeRecord], inflows: Iterable[Transfer], config: MatchingConfig
                         ) -> set[tuple[Transfer, ...]]:
    """Every group of inflows some settlement of some record could count, fraud flags aside: what could
    pass for income. A transfer from a record's origin in its window is in one when it is the record's
    amount within a tier, or a part of a sum that is (a salary in two transfers), or pays it with other
    records at once; a refund or a loan from the same payer that no sum needs is in none."""
    ordered = sorted(records, key=lambda r: (r.record_date, r.amount))
    matcher = _Matcher(ordered, inflows, {}, config)
    found: set[tuple[Transfer, ...]] = set()
    for i, record in enumerate(ordered):
        clean = matcher.candidates(record)
        found.update(option.transfers for option in [*matcher.by_sums(record, clean),
                                                     *matcher.by_shared(i, clean)])
    return found


def in_record_windows(records: Iterable[IncomeRecord], inflows: Iterable[Transfer], config: MatchingConfig
                      ) -> frozenset[TransferKey]:
    """The inflows some record could be describing, whatever their amount: from an origin it accepts,
    within its date window (a salary paid short is still the salary, not a loan)."""
    matcher = _Matcher(list(records), inflows, {}, config)
    return frozenset(t.key for record in matcher.records for t in matcher.candidates(record))


@dataclass(frozen=True, order=True)
class _Settlement:
    """One way to settle a record: some transfers of one payer against it and, when a single transfer
    pays several, the other records it settles too. Ordered best first: better tier, closer amount, fewer
    parts (an exact single transfer before any sum), nearer dates, earlier."""

    rank: int  # the tier's index in CONFIDENCE_ORDER
    difference: Decimal
    parts: int  # transfers + records
    days_off: int
    first: tuple[int, int]
    transfers: tuple[Transfer, ...] = field(compare=False)
    others: tuple[int, ...] = field(compare=False, default=())  # indexes of the other records


class _Matcher:
    """The greedy settlement of records in date order over the user's inflows."""

    def __init__(self, records: list[IncomeRecord], inflows: Iterable[Transfer],
                 flagged: Mapping[TransferKey, tuple[str, ...]], config: MatchingConfig) -> None:
        self.records, self.flagged, self.config = records, flagged, config
        self.inflows = sorted(inflows, key=lambda t: (t.timestamp, t.order))
        self.by_origin: dict[str, list[Transfer]] = defaultdict(list)
        for t in self.inflows:
            self.by_origin[t.from_address].append(t)
        self.used: set[TransferKey] = set()
        self.matches: dict[int, RecordMatch] = {}

    def settle(self, i: int) -> None:
        if i in self.matches:
            return  # settled with an earlier record, by one transfer
        record = self.records[i]
        candidates = self.candidates(record)
        clean = [t for t in candidates if not self.flagged.get(t.key)]
        options = [*self.by_sums(record, clean), *self.by_shared(i, clean)]
        if not options:
            self.matches[i] = RecordMatch(record, reasons=self._reasons(record, candidates, clean))
            return
        best = min(options)
        self.used.update(t.key for t in best.transfers)
        received = sum((t.usd() for t in best.transfers), Decimal(0))
        confidence = CONFIDENCE_ORDER[best.rank]
        group = sorted([i, *best.others], key=lambda j: self.records[j].amount)
        # One transfer for several records: each counts its own amount, the largest what is left.
        for j in group[:-1]:
            self.matches[j] = RecordMatch(self.records[j], best.transfers, confidence, self.records[j].amount)
            received -= self.records[j].amount
        self.matches[group[-1]] = RecordMatch(self.records[group[-1]], best.transfers, confidence, received)

    def candidates(self, record: IncomeRecord) -> list[Transfer]:
        """Unused inflows from the record's origins within its date window."""
        window = _window(record, self.config)
        origins = ({record.from_reference} if record.from_reference else set()) | set(record.whitelist)
        return [t for origin in sorted(origins) for t in self.by_origin.get(origin, ())
                if t.key not in self.used and _in_window(t, window)]

    def _nearest(self, record: IncomeRecord, transfers: Iterable[Transfer]) -> list[Transfer]:
        return sorted(transfers, key=lambda t: (abs(t.timestamp.date() - record.record_date), t.order)
                      )[:self.config.max_candidates]

    def by_sums(self, record: IncomeRecord, clean: list[Transfer]) -> list[_Settlement]:
        """Settlements of the record by one to `max_parts` transfers of one payer, their sum in a tier."""
        by_payer: dict[str, list[Transfer]] = defaultdict(list)
        for t in clean:
            by_payer[t.from_address].append(t)
        options = []
        for items in by_payer.values():
            nearest = self._nearest(record, items)
            for size in range(1, min(self.config.max_parts, len(nearest)) + 1):
                for combo in combinations(nearest, size):
                    option = self._option(record.amount, combo, [record])
                    if option is not None:
                        options.append(option)
        return options

    def by_shared(self, i: int, clean: list[Transfer]) -> list[_Settlement]:
        """Settlements of the record and up to `max_parts - 1` other open records by one transfer."""
        if self.config.max_parts < 2:
            return []
        options = []
        for t in clean:
            others = [j for j, r in enumerate(self.records) if j != i and j not in self.matches
                      and r.accepts_origin(t.from_address) and _in_window(t, _window(r, self.config))]
            for size in range(1, min(self.config.max_parts - 1, len(others)) + 1):
                for combo in combinations(others, size):
                    group = [self.records[i], *(self.records[j] for j in combo)]
                    expected = sum((r.amount for r in group), Decimal(0))
                    option = self._option(expected, (t,), group, combo)
                    if option is not None:
                        options.append(option)
        return options

    def _option(self, expected: Decimal, transfers: tuple[Transfer, ...], records: list[IncomeRecord],
                others: tuple[int, ...] = ()) -> _Settlement | None:
        received = sum((t.usd() for t in transfers), Decimal(0))
        confidence = tier(expected, received, self.config)
        if confidence is None:
            return None
        days_off = max(abs((t.timestamp.date() - r.record_date).days) for t in transfers for r in records)
        ordered = tuple(sorted(transfers, key=lambda t: t.order))
        return _Settlement(CONFIDENCE_ORDER.index(confidence), abs(received - expected),
                           len(transfers) + len(records), days_off, ordered[0].order, ordered, others)

    def _reasons(self, record: IncomeRecord, candidates: list[Transfer], clean: list[Transfer]
                 ) -> tuple[dict[str, Any], ...]:
        """Why the record could not be settled: flagged candidates, the closest sum of one payer's clean
        transfers (a mismatch), or nothing from its origins (and an inflow of the right amount from
        elsewhere, named)."""
        reasons: list[dict[str, Any]] = []
        for code in sorted({c for t in candidates for c in self.flagged.get(t.key, ())}):
            tx = next(t for t in candidates if code in self.flagged.get(t.key, ()))
            reasons.append({"code": code, "message": _FLAG_TEXT[code], "details": {
                "tx_hash": tx.tx_hash, "received_amount": tx.usd()}})
        if clean:
            closest = self._closest_sum(record, clean)
            reasons.append(_mismatch(record, sum((t.usd() for t in closest), Decimal(0)), self.config,
                                     transfers=closest))
            return tuple(reasons)
        if not reasons:
            reasons += self._elsewhere(record)
            reasons.append(_mismatch(record, Decimal(0), self.config))
        return tuple(reasons)

    def _closest_sum(self, record: IncomeRecord, clean: list[Transfer]) -> tuple[Transfer, ...]:
        by_payer: dict[str, list[Transfer]] = defaultdict(list)
        for t in clean:
            by_payer[t.from_address].append(t)
        combos = [tuple(sorted(combo, key=lambda t: t.order)) for items in by_payer.values()
                  for size in range(1, min(self.config.max_parts, len(items)) + 1)
                  for combo in combinations(self._nearest(record, items), size)]
        return min(combos, key=lambda c: (abs(sum((t.usd() for t in c), Decimal(0)) - record.amount),
                                          len(c), c[0].order))

    def _elsewhere(self, record: IncomeRecord) -> list[dict[str, Any]]:
        """An inflow of the right amount from an origin the platform does not know, named."""
        window = _window(record, self.config)
        elsewhere = [t for t in self.inflows if t.key not in self.used and not self.flagged.get(t.key)
                     and _in_window(t, window) and tier(record.amount, t.usd(), self.config) is not None]
        if not elsewhere:
            return []
        t = min(elsewhere, key=lambda t: (abs(t.usd() - record.amount),
                                         abs(t.timestamp.date() - record.record_date), t.timestamp))
        return [{"code": UNVERIFIED_SOURCE, "message": "the payout arrived from an origin the platform does "
                 "not whitelist", "details": {"tx_hash": t.tx_hash, "origin_address": t.from_address,
                                              "received_amount": t.usd()}}]


def _window(record: IncomeRecord, config: MatchingConfig) -> tuple[datetime, datetime]:
    start = datetime.combine(record.record_date - timedelta(days=config.days_before), datetime.min.time())
    end = datetime.combine(record.record_date + timedelta(days=config.days_after + 1), datetime.min.time())
    return start, end


def _in_window(t: Transfer, window: tuple[datetime, datetime]) -> bool:
    moment = t.timestamp.replace(tzinfo=None) if t.timestamp.tzinfo else t.timestamp
    return window[0] <= moment < window[1]


def _mismatch(record: IncomeRecord, received: Decimal, config: MatchingConfig,
              transfers: tuple[Transfer, ...] = ()) -> dict[str, Any]:
    details: dict[str, Any] = {"expected_amount": record.amount, "received_amount": received,
                               "tolerance_pct": config.approximate_tolerance,
                               "actual_variance_pct": variance(record.amount, received)}
    if transfers:
        details["tx_hash"] = transfers[0].tx_hash
    if len(transfers) > 1:
        details["tx_hashes"] = [t.tx_hash for t in transfers]
    return {"code": INCOME_MISMATCH, "message": "on-chain inflow differs from the income record by more "
            "than the tolerance" if received else "no on-chain inflow matches the income record",
            "details": details}


_FLAG_TEXT = {
    WASH_TRADE: "the inflow is part of a wash trade and is not counted as income",
    CIRCULAR_FLOW: "the inflow is part of a circular flow and is not counted as income",
}
