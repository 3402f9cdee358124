"""Personas: preset borrowers for integrators' tests (Plaid's sandbox users, here on a local chain), each
the script of six months of on-chain money and the platform's records of it, with the outcome it must
produce. Pure data; `vip.personas.builder` plays a script on a development stack.

Months are 0 (oldest) to 5 (the month before the persona's test clock reads); a payment or record names
the parties by role, and each role is a fresh address per persona, so personas never share history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

BORROWER = "borrower"  # the wallet the user signs in with
STASH = "stash"  # a second wallet of the same user (connected too)
EMPLOYER = "employer"
GIG_PLATFORM = "gig_platform"
FRIEND = "friend"
INTERMEDIARY = "intermediary"
ELSEWHERE = "elsewhere"  # an address of the borrower's the service is never told about


@dataclass(frozen=True)
class Payment:
    """One on-chain USDC transfer of the script."""

    month: int
    day: int
    sender: str
    recipient: str
    amount: Decimal
    hour: int = 9


@dataclass(frozen=True)
class Record:
    """One inbound record the payroll platform pushes (dated the payment's day)."""

    month: int
    day: int
    amount: Decimal
    payer: str = EMPLOYER


@dataclass(frozen=True)
class Persona:
    name: str
    summary: str
    status: str  # the VIP status it must produce
    recommendation: str | None  # the risk score's recommendation; None when there is no score (unverified)
    flags: frozenset[str] = frozenset()  # fraud flag codes the VIP must carry
    payments: tuple[Payment, ...] = ()
    records: tuple[Record, ...] = ()
    wallets: tuple[str, ...] = (BORROWER,)
    funded: dict[str, Decimal] = field(default_factory=dict)  # USDC minted to each role before month 0
    periods_verified: int = 0


def _salary(months: range, amount: Decimal, day: int = 25, payer: str = EMPLOYER,
            to: str = BORROWER) -> tuple[tuple[Payment, ...], tuple[Record, ...]]:
    return (tuple(Payment(m, day, payer, to, amount) for m in months),
            tuple(Record(m, day, amount, payer) for m in months))


_STEADY = _salary(range(6), Decimal("4200"))
_NEW_JOB = _salary(range(3, 6), Decimal("3800"))
_GIG_AMOUNTS = (Decimal("1850"), Decimal("3400"), Decimal("2250"), Decimal("2900"), Decimal("1600"),
                Decimal("3150"))
_GIG_DAYS = (6, 14, 22, 9, 27, 17)
_PARTIAL_RECORDED = Decimal("3000")
_PARTIAL_PAID = (Decimal("3000"), Decimal("2100"), Decimal("3000"), Decimal("3000"), Decimal("1800"),
                 Decimal("3000"))
_WASH_SALARY, _WASH = Decimal("2500"), Decimal("2000")
_SELF_FUNDED = Decimal("3500")

PERSONAS: dict[str, Persona] = {p.name: p for p in (
    Persona(
        "steady_salaried", "4,200 USDC salary on the 25th of every month, matched by the payroll records",
        status="verified", recommendation="approve", periods_verified=6,
        payments=_STEADY[0], records=_STEADY[1], funded={EMPLOYER: Decimal("4200") * 6}),
    Persona(
        "variable_gig", "gig income of 1,600 to 3,400 USDC a month, on varying days, each payout recorded",
        status="verified", recommendation="approve", periods_verified=6,
        payments=tuple(Payment(m, d, GIG_PLATFORM, BORROWER, a)
                       for m, (d, a) in enumerate(zip(_GIG_DAYS, _GIG_AMOUNTS, strict=True))),
        records=tuple(Record(m, d, a, GIG_PLATFORM)
                      for m, (d, a) in enumerate(zip(_GIG_DAYS, _GIG_AMOUNTS, strict=True))),
        funded={GIG_PLATFORM: sum(_GIG_AMOUNTS, Decimal(0))}),
    Persona(
        "new_job", "started a job three months ago: 3,800 USDC salary for the last three months only",
        status="partially_verified", recommendation="refer", periods_verified=3,
        payments=_NEW_JOB[0], records=_NEW_JOB[1], funded={EMPLOYER: Decimal("3800") * 3}),
    Persona(
        "partially_verified", "3,000 USDC recorded every month, but two months' payouts fell well short",
        status="partially_verified", recommendation="approve_with_conditions", periods_verified=4,
        payments=tuple(Payment(m, 25, EMPLOYER, BORROWER, a) for m, a in enumerate(_PARTIAL_PAID)),
        records=tuple(Record(m, 25, _PARTIAL_RECORDED) for m in range(6)),
        funded={EMPLOYER: sum(_PARTIAL_PAID, Decimal(0))}),
    Persona(
        "wrong_wallet", "the payroll records six salaries, but they were paid to a wallet never connected",
        status="unverified", recommendation=None,
        payments=_salary(range(6), Decimal("3600"), to=ELSEWHERE)[0],
        records=_salary(range(6), Decimal("3600"))[1], funded={EMPLOYER: Decimal("3600") * 6}),
    Persona(
        "wash_trader", "2,500 USDC salary, and each month 2,000 USDC in from a friend and straight back",
        status="verified", recommendation="refer", flags=frozenset({"ERR_WASH_TRADE_DETECTED"}),
        periods_verified=6,
        payments=_salary(range(6), _WASH_SALARY)[0]
        + tuple(Payment(m, 27, FRIEND, BORROWER, _WASH) for m in range(6))
        + tuple(Payment(m, 29, BORROWER, FRIEND, _WASH) for m in range(6)),
        records=_salary(range(6), _WASH_SALARY)[1],
        funded={EMPLOYER: _WASH_SALARY * 6, FRIEND: _WASH}),
    Persona(
        "self_funded_salary", "a 'salary' of 3,500 USDC a month that is the borrower's own money, sent from "
        "a second wallet of theirs through an intermediary the payroll records name as payer",
        status="unverified", recommendation=None, flags=frozenset({"ERR_WASH_TRADE_DETECTED"}),
        wallets=(BORROWER, STASH),
        payments=tuple(Payment(m, 22, STASH, INTERMEDIARY, _SELF_FUNDED) for m in range(6))
        + tuple(Payment(m, 25, INTERMEDIARY, BORROWER, _SELF_FUNDED) for m in range(6)),
        records=tuple(Record(m, 25, _SELF_FUNDED, INTERMEDIARY) for m in range(6)),
        funded={STASH: _SELF_FUNDED * 6}),
    Persona(
        "thin_file", "one 3,200 USDC salary, last month: a single verified period",
        status="partially_verified", recommendation="decline", periods_verified=1,
        payments=_salary(range(5, 6), Decimal("3200"))[0], records=_salary(range(5, 6), Decimal("3200"))[1],
        funded={EMPLOYER: Decimal("3200")}),
)}
