"""What an analyst reads first on a borrower's page, in words: the recommendation and score, the verified
income, the reasons, and any fraud; and the fraud flags grouped into the round trips they make, with
totals.

Pure: the VIP report, the score and the flagged transfers (as the indexer holds them) in; sentences and
groups out. Amounts stay Decimal."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from vip.dashboard.income_chart import REASON_LABEL, amount, money
from vip.formats import checksummed


def usd(value: Any) -> str:
    return f"{money(amount(value))} USD"


@dataclass(frozen=True)
class Leg:
    """One flagged transfer: money leaving the borrower's wallet (out) or reaching it (in)."""

    flag: Mapping[str, Any]
    transfer: Mapping[str, Any] | None  # as the indexer holds it (None: a reorg removed it)
    direction: str  # "out" | "in" | "?" (the transfer is gone, so its direction is unknown)
    counterparty: str | None
    amount_usd: Decimal


@dataclass
class RoundTrip:
    """Money that went to a counterparty and came back (or came and went back): its legs in chain order."""

    counterparty: str | None
    legs: list[Leg] = field(default_factory=list)

    @property
    def out_usd(self) -> Decimal:
        return sum((leg.amount_usd for leg in self.legs if leg.direction == "out"), Decimal(0))

    @property
    def in_usd(self) -> Decimal:
        return sum((leg.amount_usd for leg in self.legs if leg.direction != "out"), Decimal(0))

    @property
    def net_usd(self) -> Decimal:
        return self.in_usd - self.out_usd


@dataclass
class FlagGroup:
    """The flags of one kind with one counterparty (wash trades), or one self-funded payout (circular)."""

    fraud_type: str  # wash_trade | circular
    code: str
    counterparty: str | None
    trips: list[RoundTrip]
    evidence: Mapping[str, Any] | None = None  # circular: the funding trace's evidence
    path: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def legs(self) -> list[Leg]:
        return [leg for trip in self.trips for leg in trip.legs]

    @property
    def out_usd(self) -> Decimal:
        return sum((t.out_usd for t in self.trips), Decimal(0))

    @property
    def in_usd(self) -> Decimal:
        return sum((t.in_usd for t in self.trips), Decimal(0))


def _leg(flag: Mapping[str, Any], transfer: Mapping[str, Any] | None) -> Leg:
    wallet = str(flag.get("wallet_address") or "").lower()
    direction, counterparty = "?", None
    if transfer is not None:
        sender, receiver = str(transfer["from_address"]).lower(), str(transfer["to_address"]).lower()
        if sender == wallet:
            direction, counterparty = "out", checksummed(receiver)
        elif receiver == wallet:
            direction, counterparty = "in", checksummed(sender)
    return Leg(flag, transfer, direction, counterparty, amount(flag.get("amount_usd")))


def _order(leg: Leg) -> tuple[Any, ...]:
    t = leg.transfer or {}
    return (str(leg.flag.get("block_timestamp") or ""), t.get("block_number") or 0, t.get("log_index") or 0)


def round_trips(legs: Sequence[Leg]) -> list[RoundTrip]:
    """Legs with one counterparty, in chain order, cut into round trips: a trip is a run of legs one way
    followed by the legs back; the next leg the first way starts a new trip."""
    trips: list[RoundTrip] = []
    first_way: str | None = None
    turned = False
    for leg in sorted(legs, key=_order):
        if not trips or (turned and leg.direction == first_way):
            trips.append(RoundTrip(leg.counterparty))
            first_way, turned = leg.direction, False
        elif leg.direction != first_way:
            turned = True
        trips[-1].legs.append(leg)
    return trips


def group_flags(flags: Sequence[Mapping[str, Any]], transfers: Sequence[Mapping[str, Any] | None],
                paths: Sequence[Sequence[Mapping[str, Any]]]) -> list[FlagGroup]:
    """The report's fraud flags (with, at the same index, each one's transfer and funding path) as groups:
    wash trades by counterparty, cut into round trips; each self-funded (circular) payout on its own."""
    wash: dict[tuple[str, str | None], list[Leg]] = defaultdict(list)
    groups: list[FlagGroup] = []
    for flag, transfer, path in zip(flags, transfers, paths, strict=True):
        leg = _leg(flag, transfer)
        if flag.get("fraud_type") == "circular":
            groups.append(FlagGroup("circular", str(flag.get("code")), leg.counterparty,
                                    [RoundTrip(leg.counterparty, [leg])], flag.get("evidence"), list(path)))
        else:
            wash[(str(flag.get("code")), leg.counterparty)].append(leg)
    for (code, counterparty), legs in wash.items():
        groups.insert(0, FlagGroup("wash_trade", code, counterparty, round_trips(legs)))
    return groups


def _short(address: str | None) -> str:
    return f"{address[:6]}…{address[-4:]}" if address else "an address no longer indexed"


def fraud_in_words(groups: Sequence[FlagGroup]) -> list[str]:
    """One sentence per group: what the money did, with totals."""
    lines = []
    for g in groups:
        if g.fraud_type == "wash_trade":
            trips = len(g.trips)
            lines.append(
                f"Wash trading with {_short(g.counterparty)}: {trips} round trip{'s' if trips != 1 else ''} "
                f"({len(g.legs)} transfers), {usd(g.in_usd)} in from them and {usd(g.out_usd)} out to them. "
                "None of it counts as income.")
        else:
            share = (g.evidence or {}).get("self_funded_share")
            funded = f"{Decimal(str(share)) * 100:.0f}% " if share is not None else ""
            leg = g.legs[0]
            lines.append(
                f"A payout of {usd(leg.amount_usd)} from {_short(g.counterparty)} on "
                f"{str(leg.flag.get('block_timestamp') or '')[:10]} was {funded}the borrower's own money, "
                f"sent round through {len(g.path) - 1 if g.path else 'other'} "
                f"intermediar{'y' if len(g.path) == 2 else 'ies'}: not income.")
    return lines


@dataclass(frozen=True)
class Summary:
    """The top of the borrower page."""

    headline: str  # the decision in a few words
    recommendation: str | None
    score: int | None
    score_is_preview: bool
    income: str | None  # "2,000.00 USD a month, 6 of 6 months verified"
    credit_limit: str | None
    reasons: list[str]
    fraud: list[str]
    next_step: str | None  # what would make a decision possible, when none is


def _unverified_reasons(report: Mapping[str, Any]) -> list[str]:
    counts: dict[str, int] = defaultdict(int)
    for period in report.get("unverified_periods") or ():
        for reason in period.get("reasons") or ({"code": "ERR_INSUFFICIENT_HISTORY"},):
            counts[REASON_LABEL.get(str(reason.get("code")), str(reason.get("code")))] += 1
    return [f"{n} month{'s' if n != 1 else ''} unverified: {label}" for label, n in counts.items()]


def summarise(report: Mapping[str, Any] | None, score: Mapping[str, Any] | None, score_stored: bool,
              groups: Sequence[FlagGroup], *, has_wallet: bool, has_platform: bool,
              score_problem: str | None) -> Summary:
    """The summary of a borrower from their latest VIP and its score (either may be missing)."""
    fraud = fraud_in_words(groups)
    if report is None:
        if not has_wallet:
            step = ("No VIP can be made yet: the borrower has connected no wallet (GET /v1/vip-report "
                    "answers 422 ERR_MISSING_WALLET until they sign in with one).")
        elif not has_platform:
            step = ("No VIP can be made yet: the borrower has connected no income platform (GET "
                    "/v1/vip-report answers 422 ERR_MISSING_PLATFORM until one is connected or pushed).")
        else:
            step = "No VIP yet: ask for one with GET /v1/vip-report; it is made in the background."
        return Summary("No decision yet", None, None, False, None, None, [], fraud, step)
    status = str(report.get("status"))
    if status in ("pending", "error"):
        step = ("The VIP is being generated; this page shows it once it is done." if status == "pending" else
                f"The VIP could not be made ({report.get('error_code')}): ask for a new one with "
                "GET /v1/vip-report?refresh=true.")
        return Summary("No decision yet", None, None, False, None, None, [], fraud, step)
    income = (f"{usd(report.get('verified_monthly_income_usd'))} a month, "
              f"{report.get('periods_verified')} of {report.get('periods_requested')} months verified")
    reasons = [str(r.get("text")) for r in (score or {}).get("adverse_action_reasons") or ()]
    reasons += _unverified_reasons(report)
    if score is None:
        return Summary(f"No score: {score_problem or 'not available'}", None, None, False, income, None,
                       reasons, fraud, None)
    recommendation = str(score["recommendation"])
    headline = recommendation.replace("_", " ").capitalize()
    if fraud:
        headline += ": fraud found"
    return Summary(headline, recommendation, int(score["composite_score"]), not score_stored, income,
                   usd(score.get("suggested_credit_limit_usd")), reasons, fraud, None)
