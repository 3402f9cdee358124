"""An adversarial corpus for the fraud rules: borrowers who fake income the ways a fraudster would, and
honest borrowers whose money looks like it. Run on the pure pipeline (`vip.verification.pipeline.verify`)
over every transfer the job's fetch would gather for them (their own, their payers', their payers' payers',
and the busy hubs' traffic around the borrower's use of them), with the opening balances the job reads
from the index for the addresses funded before the history read.

Fraud strategies faked a month at a time (a fake month's platform record names the address that pays it):
  one_hop          own money to an address, back as salary from it
  multi_hop        out and back through 2 to 4 intermediaries
  payer_in_loop    the named payer has an honest-looking history of its own (small payments from others)
  split            own money split over 2-3 addresses that all pay the named payer, who pays the salary
  merged_biweekly  one transfer out, back as two bi-weekly salaries (two records a month)
  several_wallets  sent from the user's second connected wallet, salary into the first
  parked           the money waits 2 to 4 weeks at the intermediary before it comes back
  busy_hub         through an exchange's hot wallet (thousands of deposits and withdrawals around it):
                   deposited, withdrawn at once to an intermediary, paid back as salary
  deep_hub         busy_hub with three intermediaries after the exchange (four in all, the trace's reach)
  mixed_salary     the named payer mixes a real salary part (30-45%) with the user's money
  swap_laundering  out in USDC, swapped to USDT through a DEX router by the intermediary, back in USDT
  chain_then_split out through two intermediaries, the last pays the salary in two transfers a month
  payer_with_business  the named payer runs a small business of its own: strangers pay it and it pays
                   strangers a few times a day, before, between and after the user's money and the salary
  late_round_trip  the same payer, the money back 8 to 20 days later (past the wash window), 85-115% of it
  split_payout     the user's money paid back as one record's salary in two or three transfers
  shared_transfer  a salary and a bonus record paid by one transfer of the user's money
Fraud strategies faked all at once (every fake month's money leaves before the first is paid):
  patient_escrow   one transfer parked with a fresh address 2 to 6 months before it pays month by month
  escrow_chain     the lump through one more address: passed on at once, or month by month
  drip_escrow      a quarter of a salary dripped into the payer every week from two months before
  dusted_escrow    the escrow, the payer made to look busy with 300 small payments from strangers
Self-funding no on-chain trace can see (must be named in fraud_trace.opaque, not guessed):
  escrow_via_exchange  the lump deposited at a busy exchange, an accomplice withdrawing each salary

Honest look-alikes (all six months paid by the employer):
  hub_user         salary from a busy payroll provider; deposits to and withdrawals from a busy exchange
                   (some the size of the salary)
  rent_coworker    pays rent to a landlord whom the same employer also pays
  refund           purchases refunded in full a few days later (no record claims them)
  loan_repaid      lends a friend money, repaid within weeks (no record claims it)
  own_savings      moves money to a second connected wallet and back
  client_customer  a freelancer paid by clients the borrower also buys from
  dex_swapper      swaps salary on a DEX router now and then
  salary_advance   the employer advances 30-100% of a salary mid-month; given back days later, the day
                   before payday or the day after
  buys_from_employer   buys 5-45% of a salary's worth from the employer a month, now and then the day
                   before payday
  exchange_savings 20-60% of each salary parked with a busy exchange the employer funds its payroll from;
                   some withdrawn months later, some taken out and put back within days
  split_salary     each salary in two or three transfers minutes apart (USDC and USDT)
  merged_records   a salary and a reimbursement recorded apart, paid by one transfer
  employer_loan    the employer lends two to three salaries once; repaid in monthly instalments
  quiet_employer   the employer's treasury is older than the history read; the user buys from it

Prints, per family, precision and recall of the fraud flags (a transfer is positive when it is flagged
wash_trade or circular; truth: the salaries a fraudster funded and the payments that funded them), the
share of honest look-alike borrowers with any flag, the VIP status accuracy, how many of the hidden
payouts are named as opaque, and the pure pipeline's time for one 12-month borrower with
`--big-transfers` transfers.

Run (from the repository root):
    .venv/bin/python bench/verification_adversarial.py
    .venv/bin/python bench/verification_adversarial.py --per-family 100 --seed 7
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vip.verification.config import VerificationConfig
from vip.verification.model import CIRCULAR_FLOW, WASH_TRADE, IncomeRecord, Transfer
from vip.verification.pipeline import Platform, Wallet, verify

NETWORK = "bench"
UNIT = 10**6
NOW = datetime(2026, 7, 3, 12, tzinfo=UTC)
PERIODS = ["2026-01", "2026-02", "2026-03", "2026-04", "2026-05", "2026-06"]
# Faked one month at a time (a record per fake month names the address that pays it).
PER_MONTH = ("one_hop", "multi_hop", "payer_in_loop", "split", "merged_biweekly", "several_wallets", "parked",
             "busy_hub", "mixed_salary", "swap_laundering", "chain_then_split", "payer_with_business",
             "split_payout", "shared_transfer", "late_round_trip", "deep_hub")
# Faked all at once: the money of every fake month leaves the user before the first of them is paid.
AT_ONCE = ("patient_escrow", "escrow_chain", "drip_escrow", "dusted_escrow")
FRAUD = PER_MONTH + AT_ONCE
# Strategies the rules are known to miss in part (docs/performance.md says how much, and why).
KNOWN_LIMITS: tuple[str, ...] = ()
# Self-funding no on-chain trace can see (the money waits inside an exchange's omnibus wallet): the VIP
# must name every faked payout in `fraud_trace.opaque` instead of pretending to know.
OPAQUE = ("escrow_via_exchange",)
HONEST = ("hub_user", "rent_coworker", "refund", "loan_repaid", "own_savings", "client_customer",
          "dex_swapper", "salary_advance", "buys_from_employer", "exchange_savings", "split_salary",
          "merged_records", "employer_loan", "quiet_employer")
FLAGS = {WASH_TRADE, CIRCULAR_FLOW}


@dataclass
class Case:
    family: str
    rng: random.Random
    wallets: list[str]
    employer: str
    dex: str
    exchange: str = "0x" + "b0" * 20
    pending: list[tuple[datetime, str, str, str, int, bool]] = field(default_factory=list)
    records: list[IncomeRecord] = field(default_factory=list)
    fraud_txs: set[str] = field(default_factory=set)
    hidden_txs: set[str] = field(default_factory=set)  # faked payouts the trace cannot see (OPAQUE)
    # What addresses held when the history read begins, as the job works it out from the index's balances
    # (10^-18 USD): given for the addresses funded before it.
    openings: dict[str, int] = field(default_factory=dict)
    expected_status: str = "verified"
    seq: int = 0

    def address(self) -> str:
        return "0x" + self.rng.randbytes(20).hex()

    def send(self, frm: str, to: str, amount: int, at: datetime, *, token: str = "USDC",
             fraud: bool = False) -> str:
        self.seq += 1
        tx = "0x" + hashlib.sha256(f"{id(self)}-{self.seq}-{self.rng.random()}".encode()).hexdigest()
        self.pending.append((at, tx, frm, to, amount, token == "USDT"))
        if fraud:
            self.fraud_txs.add(tx)
        return tx

    def record(self, day: date, amount: Decimal, origin: str) -> None:
        self.records.append(IncomeRecord("paystream", "payroll", day, amount, origin))

    def hub_traffic(self, hub: str, around: datetime, *, hours: int = 36, every_min: int = 12) -> None:
        """A busy hub: deposits and withdrawals of strangers every few minutes around `around`."""
        at = around - timedelta(hours=hours)
        while at < around + timedelta(hours=hours):
            at += timedelta(minutes=self.rng.randint(1, 2 * every_min))
            amount = self.rng.randint(20, 20_000) * UNIT
            if self.rng.random() < 0.5:
                self.send(self.address(), hub, amount, at)
            else:
                self.send(hub, self.address(), amount, at)

    def transfers(self) -> list[Transfer]:
        out = []
        ordered = sorted(self.pending, key=lambda p: p[0])
        for block, (at, tx, frm, to, amount, usdt) in enumerate(ordered):
            out.append(Transfer(NETWORK, tx, 0, block + 1, at, "USDT" if usdt else "USDC", frm, to, amount))
        return out


def payday(period: str, day: int = 25) -> datetime:
    year, month = map(int, period.split("-"))
    return datetime(year, month, day, 14, tzinfo=UTC)


def spend(case: Case, merchants: list[str]) -> None:
    for period in PERIODS:
        for _ in range(8):
            at = payday(period, 1) + timedelta(minutes=case.rng.randint(0, 27 * 24 * 60))
            case.send(case.wallets[0], case.rng.choice(merchants), case.rng.randint(5, 400) * UNIT, at)


def build(family: str, rng: random.Random, merchants: list[str], hubs: dict[str, str]) -> Case:
    c = Case(family, rng, ["0x" + rng.randbytes(20).hex()], "0x" + rng.randbytes(20).hex(), hubs["dex"],
             hubs["exchange"])
    salary = rng.randrange(1500, 12000, 50)
    spend(c, merchants)
    if family not in ("quiet_employer", "exchange_savings"):
        # The employer is funded by its company before every payroll.
        for period in PERIODS:
            c.send(c.address(), c.employer, 50 * salary * UNIT, payday(period) - timedelta(days=2))
    if family in FRAUD or family in OPAQUE:
        real = set(rng.sample(PERIODS, rng.choice((0, 0, 1, 2, 3))))
        c.expected_status = "partially_verified" if real else "unverified"
    else:
        real = set(PERIODS)
    fake = [p for p in PERIODS if p not in real]
    if family in OPAQUE:  # the trace cannot see it: the fake months verify, and are named as opaque
        c.expected_status = "verified"
    for period in sorted(real):
        if family not in HONEST_PAYOUTS:
            c.send(c.employer, c.wallets[0], salary * UNIT, payday(period))
            c.record(payday(period).date(), Decimal(salary), c.employer)
    if family in PER_MONTH:
        for period in fake:
            PER_MONTH_FAKES[family](c, period, salary)
    elif fake:
        AT_ONCE_FAKES[family](c, fake, salary)
    if family in HONEST:
        HONEST_EXTRAS[family](c, salary, merchants, hubs)
    return c


def leaving(c: Case, pay_at: datetime) -> datetime:
    return pay_at - timedelta(days=c.rng.randint(1, 6), hours=c.rng.randint(0, 20))


def paid_at(c: Case, period: str) -> datetime:
    return payday(period) + timedelta(hours=c.rng.randint(0, 30))


# --- fraud, one month at a time ----------------------------------------------------------------------------

def fake_one_hop(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    x = c.address()
    c.send(w, x, amount, leaving(c, pay_at), fraud=True)
    c.send(x, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), x)


def fake_through_hops(c: Case, period: str, salary: int) -> None:
    """multi_hop, payer_in_loop, parked: out and back through intermediaries."""
    rng, w, amount, pay_at = c.rng, c.wallets[0], salary * UNIT, paid_at(c, period)
    leave = leaving(c, pay_at)
    hops = [c.address() for _ in range(rng.randint(2, 4) if c.family != "parked" else 1)]
    if c.family == "parked":
        leave = pay_at - timedelta(days=rng.randint(14, 28))
    if c.family == "payer_in_loop":
        for _ in range(5):  # an honest-looking history: small payments from others, earlier
            c.send(c.address(), hops[-1], rng.randint(10, 200) * UNIT,
                   leave - timedelta(days=rng.randint(1, 20)))
    c.send(w, hops[0], amount, leave, fraud=True)
    step = (pay_at - leave) / (len(hops) + 1)
    for i in range(len(hops) - 1):
        c.send(hops[i], hops[i + 1], amount - (i + 1) * rng.randint(0, 3) * UNIT, leave + step * (i + 1))
    c.send(hops[-1], w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), hops[-1])


def fake_split(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    leave = leaving(c, pay_at)
    payer = c.address()
    parts = c.rng.choice((2, 3))
    share = amount // parts
    for i in range(parts):
        mule = c.address()
        c.send(w, mule, share, leave + timedelta(hours=i), fraud=True)
        c.send(mule, payer, share, leave + timedelta(hours=12 + i))
    c.send(payer, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), payer)


def fake_merged_biweekly(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    x = c.address()
    half = amount // 2
    first = pay_at - timedelta(days=14)
    c.send(w, x, amount, first - timedelta(days=2), fraud=True)
    c.send(x, w, half, first, fraud=True)
    c.send(x, w, half, pay_at, fraud=True)
    c.record(first.date(), Decimal(half) / UNIT, x)
    c.record(pay_at.date(), Decimal(half) / UNIT, x)


def fake_several_wallets(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    if len(c.wallets) == 1:
        c.wallets.append(c.address())
        c.send(c.address(), c.wallets[1], 100 * amount, payday(PERIODS[0], 1) - timedelta(days=5))
    x = c.address()
    c.send(c.wallets[1], x, amount, leaving(c, pay_at), fraud=True)
    c.send(x, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), x)


def fake_busy_hub(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    hub, x = c.exchange, c.address()
    deposit_at = leaving(c, pay_at)
    c.hub_traffic(hub, deposit_at, every_min=3)
    c.send(w, hub, amount, deposit_at, fraud=True)
    c.send(hub, x, amount, deposit_at + timedelta(seconds=c.rng.randint(12, 60)))
    c.send(x, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), x)


def fake_deep_hub(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    hub, x3, x2, x1 = c.exchange, c.address(), c.address(), c.address()
    deposit_at = leaving(c, pay_at)
    c.hub_traffic(hub, deposit_at, every_min=3)
    c.send(w, hub, amount, deposit_at, fraud=True)
    c.send(hub, x3, amount, deposit_at + timedelta(seconds=c.rng.randint(12, 60)))
    c.send(x3, x2, amount, deposit_at + timedelta(hours=2))
    c.send(x2, x1, amount, deposit_at + timedelta(hours=5))
    c.send(x1, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), x1)


def fake_mixed_salary(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    leave = leaving(c, pay_at)
    payer = c.address()
    real = amount * c.rng.randint(30, 45) // 100
    c.send(c.employer, payer, real, leave - timedelta(days=1))
    c.send(w, payer, amount - real, leave, fraud=True)
    c.send(payer, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), payer)


def fake_swap_laundering(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    leave = leaving(c, pay_at)
    x = c.address()
    c.send(w, x, amount, leave, fraud=True)
    swap_at = leave + timedelta(hours=c.rng.randint(1, 20))
    c.send(x, c.dex, amount, swap_at)
    c.send(c.dex, x, amount, swap_at + timedelta(seconds=1), token="USDT")
    c.send(x, w, amount - amount // 1000, pay_at, token="USDT", fraud=True)
    c.record(pay_at.date(), Decimal(salary), x)


def business(c: Case, payer: str, start: datetime, end: datetime) -> None:
    """Strangers pay the payer and it pays strangers, every 2 to 10 hours."""
    at = start
    while at < end:
        at += timedelta(hours=c.rng.randint(2, 10))
        if c.rng.random() < 0.5:
            c.send(c.address(), payer, c.rng.randint(50, 1500) * UNIT, at)
        else:
            c.send(payer, c.address(), c.rng.randint(50, 1500) * UNIT, at)


def fake_payer_with_business(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    leave = leaving(c, pay_at)
    payer = c.address()
    business(c, payer, leave - timedelta(days=3), pay_at + timedelta(days=2))
    c.send(w, payer, amount, leave, fraud=True)
    c.send(payer, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), payer)


def fake_late_round_trip(c: Case, period: str, salary: int) -> None:
    """The named payer runs a business of its own; the user's money comes back 8 to 20 days later (past
    the wash window), 85 to 115% of what was sent."""
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    leave = pay_at - timedelta(days=c.rng.randint(8, 20))
    payer = c.address()
    business(c, payer, leave - timedelta(days=3), pay_at + timedelta(days=2))
    c.send(w, payer, amount * c.rng.randint(85, 115) // 100, leave, fraud=True)
    c.send(payer, w, amount, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), payer)


def fake_chain_then_split(c: Case, period: str, salary: int) -> None:
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    leave = leaving(c, pay_at)
    a, payer = c.address(), c.address()
    half = amount // 2
    c.send(w, a, amount, leave, fraud=True)
    c.send(a, payer, amount, leave + timedelta(hours=6))
    c.send(payer, w, half, pay_at - timedelta(hours=1), fraud=True)
    c.send(payer, w, half, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(half) / UNIT, payer)
    c.record(pay_at.date(), Decimal(half) / UNIT, payer)


def fake_split_payout(c: Case, period: str, salary: int) -> None:
    """The user's own money paid back as one record's salary in two or three transfers minutes apart."""
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    x = c.address()
    c.send(w, x, amount, leaving(c, pay_at), fraud=True)
    parts = c.rng.choice((2, 3))
    for i in range(parts):
        part = amount // parts if i < parts - 1 else amount - (parts - 1) * (amount // parts)
        c.send(x, w, part, pay_at + timedelta(minutes=7 * i), fraud=True)
    c.record(pay_at.date(), Decimal(salary), x)


def fake_shared_transfer(c: Case, period: str, salary: int) -> None:
    """A salary and a bonus record of the same day, both paid by one transfer of the user's own money."""
    w, amount, pay_at = c.wallets[0], salary * UNIT, paid_at(c, period)
    x = c.address()
    bonus = salary // 5
    c.send(w, x, amount + bonus * UNIT, leaving(c, pay_at), fraud=True)
    c.send(x, w, amount + bonus * UNIT, pay_at, fraud=True)
    c.record(pay_at.date(), Decimal(salary), x)
    c.record(pay_at.date(), Decimal(bonus), x)


PER_MONTH_FAKES: dict[str, Callable[[Case, str, int], None]] = {
    "one_hop": fake_one_hop, "multi_hop": fake_through_hops, "payer_in_loop": fake_through_hops,
    "parked": fake_through_hops, "split": fake_split, "merged_biweekly": fake_merged_biweekly,
    "several_wallets": fake_several_wallets, "busy_hub": fake_busy_hub, "deep_hub": fake_deep_hub,
    "mixed_salary": fake_mixed_salary,
    "swap_laundering": fake_swap_laundering, "payer_with_business": fake_payer_with_business,
    "late_round_trip": fake_late_round_trip, "chain_then_split": fake_chain_then_split,
    "split_payout": fake_split_payout, "shared_transfer": fake_shared_transfer,
}


# --- fraud, all at once -----------------------------------------------------------------------------------

def monthly(c: Case, payer: str, fake: list[str], salary: int) -> None:
    """The payer pays the user each fake month's salary, as the records it is named in say."""
    for period in fake:
        pay_at = paid_at(c, period)
        c.send(payer, c.wallets[0], salary * UNIT, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), payer)


def fake_patient_escrow(c: Case, fake: list[str], salary: int) -> None:
    """Every fake month's salary parked in one transfer with a fresh address 2 to 6 months before the
    first is paid back, month by month."""
    x = c.address()
    parked = payday(fake[0]) - timedelta(days=c.rng.randint(60, 180))
    c.send(c.wallets[0], x, salary * UNIT * len(fake), parked, fraud=True)
    monthly(c, x, fake, salary)


def fake_escrow_chain(c: Case, fake: list[str], salary: int) -> None:
    """The lump goes to one address, which passes it on to the payer: at once, or month by month."""
    a, payer = c.address(), c.address()
    parked = payday(fake[0]) - timedelta(days=c.rng.randint(60, 180))
    c.send(c.wallets[0], a, salary * UNIT * len(fake), parked, fraud=True)
    if c.rng.random() < 0.5:
        c.send(a, payer, salary * UNIT * len(fake), parked + timedelta(days=c.rng.randint(5, 40)))
    else:
        for period in fake:
            c.send(a, payer, salary * UNIT, payday(period) - timedelta(days=c.rng.randint(2, 9)))
    monthly(c, payer, fake, salary)


def fake_drip_escrow(c: Case, fake: list[str], salary: int) -> None:
    """The user drips a quarter of a salary into the payer every week from two months before the first
    fake payout, until every fake month is covered."""
    x = c.address()
    at = payday(fake[0]) - timedelta(days=60)
    for _ in range(4 * len(fake)):
        c.send(c.wallets[0], x, salary * UNIT // 4, at, fraud=True)
        at += timedelta(days=7)
    monthly(c, x, fake, salary)


def fake_dusted_escrow(c: Case, fake: list[str], salary: int) -> None:
    """The patient escrow, the payer made to look busy: hundreds of small payments from strangers."""
    x = c.address()
    parked = payday(fake[0]) - timedelta(days=c.rng.randint(60, 180))
    c.send(c.wallets[0], x, salary * UNIT * len(fake), parked, fraud=True)
    for _ in range(300):
        c.send(c.address(), x, c.rng.randint(1, 5000) * UNIT // 1000,
               parked + timedelta(minutes=c.rng.randint(1, int((NOW - parked).total_seconds() // 60))))
    monthly(c, x, fake, salary)


def fake_escrow_via_exchange(c: Case, fake: list[str], salary: int) -> None:
    """The lump deposited at a busy exchange; the payer withdraws each salary from it and pays it on. The
    chain cannot tell whose money the exchange pays out: the VIP must say so."""
    x, hub = c.address(), c.exchange
    parked = payday(fake[0]) - timedelta(days=c.rng.randint(60, 180))
    c.hub_traffic(hub, parked, hours=12, every_min=3)
    c.send(c.wallets[0], hub, salary * UNIT * len(fake), parked)
    for period in fake:
        pay_at = paid_at(c, period)
        out = pay_at - timedelta(hours=c.rng.randint(2, 40))
        c.hub_traffic(hub, out, hours=12, every_min=3)
        c.send(hub, x, salary * UNIT, out)
        c.hidden_txs.add(c.send(x, c.wallets[0], salary * UNIT, pay_at))
        c.record(pay_at.date(), Decimal(salary), x)


AT_ONCE_FAKES: dict[str, Callable[[Case, list[str], int], None]] = {
    "patient_escrow": fake_patient_escrow, "escrow_chain": fake_escrow_chain,
    "drip_escrow": fake_drip_escrow, "dusted_escrow": fake_dusted_escrow,
    "escrow_via_exchange": fake_escrow_via_exchange,
}


# --- honest look-alikes -----------------------------------------------------------------------------------

# Honest families whose salaries are paid their own way (not one employer transfer a month).
HONEST_PAYOUTS = ("hub_user", "split_salary", "merged_records", "exchange_savings")


def honest_hub_user(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """Salary from a busy payroll provider; deposits to and withdrawals from a busy exchange, some of the
    salary's size; a fee to the provider before payday."""
    rng, w, amount = c.rng, c.wallets[0], salary * UNIT
    payroll, exchange = hubs["payroll"], hubs["exchange"]
    for period in PERIODS:
        at = payday(period)
        c.hub_traffic(payroll, at, hours=6, every_min=4)
        c.send(c.employer, payroll, 40 * amount, at - timedelta(hours=2))
        c.send(payroll, w, amount, at)
        c.record(at.date(), Decimal(salary), payroll)
        dep = at + timedelta(days=rng.randint(1, 4))
        c.hub_traffic(exchange, dep, hours=30)
        c.send(w, exchange, amount, dep)
        c.send(exchange, w, amount, dep + timedelta(hours=rng.randint(2, 24)))
        c.send(w, payroll, rng.randint(20, 200) * UNIT, at - timedelta(hours=1))


def honest_rent_coworker(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    landlord = c.address()
    for period in PERIODS:
        c.send(c.employer, landlord, c.rng.randint(1500, 9000) * UNIT, payday(period) + timedelta(hours=1))
        c.send(c.wallets[0], landlord, min(salary * UNIT // 3, 2500 * UNIT),
               payday(period, 1) + timedelta(days=1))


def honest_refund(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    for period in PERIODS:
        shop = c.rng.choice(merchants)
        at = payday(period, 5)
        price = c.rng.randint(20, 900) * UNIT
        c.send(c.wallets[0], shop, price, at)
        c.send(shop, c.wallets[0], price, at + timedelta(days=c.rng.randint(1, 6)))


def honest_loan_repaid(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    friend = c.address()
    for period in PERIODS[::2]:
        at = payday(period, 3)
        lent = c.rng.randint(100, 2000) * UNIT
        c.send(c.wallets[0], friend, lent, at)
        c.send(friend, c.wallets[0], lent, at + timedelta(days=c.rng.randint(3, 20)))


def honest_own_savings(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    w = c.wallets[0]
    c.wallets.append(c.address())
    for period in PERIODS:
        at = payday(period) + timedelta(days=1)
        c.send(w, c.wallets[1], salary * UNIT // 2, at)
        c.send(c.wallets[1], w, salary * UNIT // 2, at + timedelta(days=c.rng.randint(3, 12)))


def honest_client_customer(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    for period in PERIODS:
        client = c.address()
        c.send(c.address(), client, 3 * salary * UNIT, payday(period) - timedelta(days=4))
        c.send(c.wallets[0], client, c.rng.randint(20, 300) * UNIT, payday(period) - timedelta(days=3))
        c.send(client, c.wallets[0], c.rng.randint(100, 900) * UNIT, payday(period) + timedelta(days=2))


def honest_dex_swapper(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    for period in PERIODS:
        at = payday(period) + timedelta(days=2)
        size = c.rng.randint(100, salary) * UNIT
        c.send(c.wallets[0], c.dex, size, at)
        c.send(c.dex, c.wallets[0], size - size // 500, at + timedelta(seconds=1), token="USDT")


def honest_salary_advance(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """In some months the employer advances 30 to 100% of the salary mid-month (no record); the user
    gives it back a few days later, the day before payday, or the day after."""
    for period in c.rng.sample(PERIODS, 3):
        advance = salary * UNIT * c.rng.randint(30, 100) // 100
        lent = payday(period, c.rng.randint(8, 15))
        c.send(c.employer, c.wallets[0], advance, lent)
        when = c.rng.choice((lent + timedelta(days=c.rng.randint(2, 6)), payday(period) - timedelta(hours=20),
                             payday(period) + timedelta(days=1)))
        c.send(c.wallets[0], c.employer, advance, when)


def honest_buys_from_employer(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """The employer also sells: the user buys 5 to 45% of a salary's worth from it each month, the day
    before payday now and then; other customers buy too."""
    for period in PERIODS:
        at = c.rng.choice((payday(period, c.rng.randint(2, 22)), payday(period) - timedelta(hours=20)))
        c.send(c.wallets[0], c.employer, salary * UNIT * c.rng.randint(5, 45) // 100, at)
        for _ in range(4):
            c.send(c.address(), c.employer, c.rng.randint(50, 3000) * UNIT,
                   payday(period, c.rng.randint(1, 27)))


def honest_exchange_savings(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """Savings parked with a busy exchange, which the employer also funds its payroll from: 20 to 60% of
    each salary deposited after payday, some of it withdrawn months later; now and then money taken out
    and put back within days."""
    rng, w, amount, hub = c.rng, c.wallets[0], salary * UNIT, c.exchange
    for period in PERIODS:
        funded = payday(period) - timedelta(days=2)
        c.hub_traffic(hub, funded, hours=10, every_min=3)
        c.send(hub, c.employer, 50 * amount, funded)
        c.send(c.employer, w, amount, payday(period))
        c.record(payday(period).date(), Decimal(salary), c.employer)
        deposit_at = payday(period) + timedelta(days=rng.randint(1, 4))
        c.hub_traffic(hub, deposit_at, hours=10, every_min=3)
        c.send(w, hub, amount * rng.randint(20, 60) // 100, deposit_at)
    for period in rng.sample(PERIODS[2:], 2):
        out = payday(period, rng.randint(3, 20))
        size = amount * rng.randint(10, 40) // 100
        c.send(hub, w, size, out)
        if rng.random() < 0.5:
            c.send(w, hub, size, out + timedelta(days=rng.randint(1, 5)))


def honest_split_salary(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """Each salary in two or three transfers minutes apart (a batch, a second token, a fee split)."""
    amount = salary * UNIT
    for period in PERIODS:
        at = payday(period)
        parts = c.rng.choice((2, 3))
        cuts = sorted(c.rng.sample(range(1, 100), parts - 1))
        shares = [b - a for a, b in zip([0, *cuts], [*cuts, 100], strict=True)]
        sent = 0
        for i, pct in enumerate(shares):
            part = amount * pct // 100 if i < parts - 1 else amount - sent
            sent += part
            c.send(c.employer, c.wallets[0], part, at + timedelta(minutes=c.rng.randint(0, 90)),
                   token=c.rng.choice(("USDC", "USDT")))
        c.record(at.date(), Decimal(salary), c.employer)


def honest_merged_records(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """A salary and a reimbursement recorded apart, paid by one transfer."""
    for period in PERIODS:
        at = payday(period)
        extra = c.rng.randint(50, 600)
        c.send(c.employer, c.wallets[0], (salary + extra) * UNIT, at)
        c.record(at.date(), Decimal(salary), c.employer)
        c.record(at.date() - timedelta(days=1), Decimal(extra), c.employer)


def honest_employer_loan(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """The employer lends two to three salaries once; the user repays in monthly instalments, some of
    them the day before payday."""
    loan = salary * UNIT * c.rng.randint(2, 3)
    c.send(c.employer, c.wallets[0], loan, payday(PERIODS[0], 10))
    left = loan
    for period in PERIODS[1:]:
        part = min(left, salary * UNIT * c.rng.randint(30, 60) // 100)
        if part:
            c.send(c.wallets[0], c.employer, part, c.rng.choice((
                payday(period, c.rng.randint(2, 20)), payday(period) - timedelta(hours=20))))
            left -= part


def honest_quiet_employer(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    """An employer whose treasury was funded long before the history read (none of its inflows is seen)
    and whom the user buys from, the day before payday now and then."""
    c.openings[c.employer] = 200 * salary * UNIT * 10**12
    for period in PERIODS:
        at = c.rng.choice((payday(period, c.rng.randint(2, 22)), payday(period) - timedelta(hours=20)))
        c.send(c.wallets[0], c.employer, salary * UNIT * c.rng.randint(5, 45) // 100, at)


HONEST_EXTRAS: dict[str, Callable[[Case, int, list[str], dict[str, str]], None]] = {
    "hub_user": honest_hub_user, "rent_coworker": honest_rent_coworker, "refund": honest_refund,
    "loan_repaid": honest_loan_repaid, "own_savings": honest_own_savings,
    "client_customer": honest_client_customer, "dex_swapper": honest_dex_swapper,
    "salary_advance": honest_salary_advance, "buys_from_employer": honest_buys_from_employer,
    "exchange_savings": honest_exchange_savings, "split_salary": honest_split_salary,
    "merged_records": honest_merged_records, "employer_loan": honest_employer_loan,
    "quiet_employer": honest_quiet_employer,
}


@dataclass(frozen=True)
class Result:
    flagged: set[str]  # tx hashes flagged wash_trade or circular
    status: str
    opaque: set[str]  # tx hashes named in fraud_trace.opaque


def run(case: Case, config: VerificationConfig) -> Result:
    wallets = [Wallet(f"wal_{i}", a, NETWORK) for i, a in enumerate(case.wallets)]
    platform = Platform("paystream", "payroll", frozenset())
    outcome = verify(wallets, case.transfers(), case.records, [platform], PERIODS, config,
                     openings={NETWORK: case.openings})
    flagged = {f.transfer.tx_hash for f in outcome.findings if f.code in FLAGS}
    return Result(flagged, outcome.figures.status, {o.transfer.tx_hash for o in outcome.trace.opaque})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-family", type=int, default=40)
    parser.add_argument("--big-transfers", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    config = VerificationConfig()
    merchants = ["0x" + rng.randbytes(20).hex() for _ in range(2000)]
    hubs = {"payroll": "0x" + "a0" * 20, "exchange": "0x" + "e0" * 20, "dex": "0x" + "de" * 20}
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])  # tp fp fn, flagged, n, status
    hidden = named = 0
    started = time.perf_counter()
    for family in FRAUD + OPAQUE + HONEST:
        for _ in range(args.per_family):
            case = build(family, random.Random(rng.random()), merchants, hubs)
            result = run(case, config)
            s = stats[family]
            s[0] += len(result.flagged & case.fraud_txs)
            s[1] += len(result.flagged - case.fraud_txs)
            s[2] += len(case.fraud_txs - result.flagged)
            s[3] += bool(result.flagged)
            s[4] += 1
            s[5] += result.status == case.expected_status
            hidden += len(case.hidden_txs)
            named += len(case.hidden_txs & result.opaque)
    seconds = time.perf_counter() - started
    borrowers = sum(s[4] for s in stats.values())
    print(f"{borrowers} borrowers ({args.per_family} per family), seed {args.seed}, "
          f"{seconds:.1f} s ({seconds / borrowers * 1000:.0f} ms each)\n")
    print("fraud family        precision  recall     tp    fp    fn  status right")
    for family in FRAUD:
        tp, fp, fn, _, n, right = stats[family]
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / (tp + fn) if tp + fn else 1.0
        note = "  (a known limit)" if family in KNOWN_LIMITS else ""
        print(f"{family:<19} {p:>9.4f} {r:>7.4f} {tp:>6} {fp:>5} {fn:>5}  {right:>4}/{n}{note}")
    print("\nhonest look-alike   borrowers flagged  (false flags)  status right")
    for family in HONEST:
        tp, fp, fn, any_flag, n, right = stats[family]
        print(f"{family:<19} {any_flag:>4}/{n:<4} = {any_flag / n:.4f}  ({fp:>3})          {right:>4}/{n}")
    for family in OPAQUE:
        _, fp, _, any_flag, n, right = stats[family]
        print(f"\n{family}: {named}/{hidden} faked payouts named in fraud_trace.opaque; borrowers flagged "
              f"{any_flag}/{n}; status right (verified: the chain cannot tell) {right}/{n}")
    # The opaque family's status is what the chain lets the VIP say (verified, the payouts named): it is
    # counted apart, not as a right answer.
    counted = [s for family, s in stats.items() if family not in OPAQUE]
    right, total = sum(s[5] for s in counted), sum(s[4] for s in counted)
    print(f"\nVIP status right (fraud families and honest look-alikes): {right}/{total} "
          f"= {right / total:.4f}")

    big = Case("dex_swapper", random.Random(args.seed + 1), ["0x" + "11" * 20], "0x" + "22" * 20, hubs["dex"])
    periods = [f"{2025 + (m + 6) // 12}-{(m + 6) % 12 + 1:02d}" for m in range(12)]
    per_month = max(1, args.big_transfers // 12 - 2)
    for period in periods:
        big.send(big.employer, big.wallets[0], 5000 * UNIT, payday(period))
        big.record(payday(period).date(), Decimal(5000), big.employer)
        for _ in range(per_month):
            at = payday(period, 1) + timedelta(minutes=big.rng.randint(0, 27 * 24 * 60))
            if big.rng.random() < 0.1:
                big.send(big.rng.choice(merchants), big.wallets[0], big.rng.randint(5, 300) * UNIT, at)
            else:
                big.send(big.wallets[0], big.rng.choice(merchants), big.rng.randint(5, 300) * UNIT, at)
    transfers = big.transfers()
    wallets = [Wallet("wal_big", big.wallets[0], NETWORK)]
    took = []
    for _ in range(3):  # the machine is shared: the best of three, and the median
        start = time.perf_counter()
        outcome = verify(wallets, transfers, big.records, [Platform("paystream", "payroll", frozenset())],
                         periods, config)
        took.append(time.perf_counter() - start)
    took.sort()
    print(f"\none 12-month VIP, {len(transfers)} transfers ({outcome.trace.traced} inbound traced), "
          f"pure pipeline: {took[0] * 1000:.0f} ms (median of 3: {took[1] * 1000:.0f} ms), "
          f"status {outcome.figures.status}")


if __name__ == "__main__":
    main()
