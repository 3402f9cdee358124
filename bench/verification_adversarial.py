"""An adversarial corpus for the fraud rules: borrowers who fake income the ways a fraudster would, and
honest borrowers whose money looks like it. Run on the pure pipeline (`vip.verification.pipeline.verify`)
over every transfer the job's fetch would gather for them (their own, their payers', their payers' payers',
and the busy hubs' traffic around the borrower's use of them).

Fraud strategies (each borrower fakes some or all of six monthly salaries; a fake month's platform record
names the address that pays the salary):
  one_hop          own money to an address, back as salary from it
  multi_hop        out and back through 2 to 4 intermediaries
  payer_in_loop    the named payer has an honest-looking history of its own (small payments from others)
  split            own money split over 2-3 addresses that all pay the named payer, who pays the salary
  merged_biweekly  one transfer out, back as two bi-weekly salaries (two records a month)
  several_wallets  sent from the user's second connected wallet, salary into the first
  parked           the money waits 2 to 4 weeks at the intermediary before it comes back
  busy_hub         through an exchange's hot wallet (thousands of deposits and withdrawals around it):
                   deposited, withdrawn at once to an intermediary, paid back as salary
  mixed_salary     the named payer mixes a real salary part (30-45%) with the user's money
  swap_laundering  out in USDC, swapped to USDT through a DEX router by the intermediary, back in USDT
  chain_then_split out through two intermediaries, the last pays the salary in two transfers a month
  payer_with_business  the named payer runs a small business of its own: strangers pay it and it pays
                   strangers a few times a day, before, between and after the user's money and the salary

Honest look-alikes (all six months paid by the employer):
  hub_user         salary from a busy payroll provider; deposits to and withdrawals from a busy exchange
                   (some the size of the salary)
  rent_coworker    pays rent to a landlord whom the same employer also pays
  refund           purchases refunded in full a few days later (no record claims them)
  loan_repaid      lends a friend money, repaid within weeks (no record claims it)
  own_savings      moves money to a second connected wallet and back
  client_customer  a freelancer paid by clients the borrower also buys from
  dex_swapper      swaps salary on a DEX router now and then

Prints, per family, precision and recall of the fraud flags (a transfer is positive when it is flagged
wash_trade or circular; truth: the salaries a fraudster funded and the payments that funded them), the
share of honest look-alike borrowers with any flag, the VIP status accuracy, and the pure pipeline's time
for one 12-month borrower with `--big-transfers` transfers.

Run (from the repository root):
    .venv/bin/python bench/verification_adversarial.py
    .venv/bin/python bench/verification_adversarial.py --per-family 60 --seed 7
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from collections import defaultdict
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
FRAUD = ("one_hop", "multi_hop", "payer_in_loop", "split", "merged_biweekly", "several_wallets", "parked",
         "busy_hub", "mixed_salary", "swap_laundering", "chain_then_split", "payer_with_business")
# Strategies the rules are known to miss in part (docs/performance.md says how much, and why). None now:
# `payer_with_business` was one until the round trip with a named payer became a wash (decision 134).
KNOWN_LIMITS: tuple[str, ...] = ()
HONEST = ("hub_user", "rent_coworker", "refund", "loan_repaid", "own_savings", "client_customer",
          "dex_swapper")
FLAGS = {WASH_TRADE, CIRCULAR_FLOW}


@dataclass
class Case:
    family: str
    rng: random.Random
    wallets: list[str]
    employer: str
    dex: str
    exchange: str = "0x" + "b0" * 20
    pending: list[tuple[datetime, str, str, int, str, bool]] = field(default_factory=list)
    records: list[IncomeRecord] = field(default_factory=list)
    fraud_txs: set[str] = field(default_factory=set)
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
        for block, (at, tx, frm, to, amount, usdt) in enumerate(sorted(self.pending, key=lambda p: p[0])):
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
    w = c.wallets[0]
    salary = rng.randrange(1500, 12000, 50)
    spend(c, merchants)
    # The employer is funded by its company before every payroll.
    for period in PERIODS:
        c.send(c.address(), c.employer, 50 * salary * UNIT, payday(period) - timedelta(days=2))
    if family in FRAUD:
        real = set(rng.sample(PERIODS, rng.choice((0, 0, 1, 2, 3))))
        c.expected_status = "partially_verified" if real else "unverified"
    else:
        real = set(PERIODS)
    fake = [p for p in PERIODS if p not in real]
    for period in sorted(real):
        if family == "hub_user":
            continue
        c.send(c.employer, w, salary * UNIT, payday(period))
        c.record(payday(period).date(), Decimal(salary), c.employer)
    for period in fake:
        fake_month(c, period, salary)
    honest_extras(c, salary, merchants, hubs)
    return c


def fake_month(c: Case, period: str, salary: int) -> None:
    rng, w, amount = c.rng, c.wallets[0], salary * UNIT
    pay_at = payday(period) + timedelta(hours=rng.randint(0, 30))
    leave = pay_at - timedelta(days=rng.randint(1, 6), hours=rng.randint(0, 20))
    f = c.family
    if f == "one_hop":
        x = c.address()
        c.send(w, x, amount, leave, fraud=True)
        c.send(x, w, amount, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), x)
    elif f in ("multi_hop", "payer_in_loop", "parked"):
        hops = [c.address() for _ in range(rng.randint(2, 4) if f != "parked" else 1)]
        if f == "parked":
            leave = pay_at - timedelta(days=rng.randint(14, 28))
        if f == "payer_in_loop":
            for _ in range(5):  # an honest-looking history: small payments from others, earlier
                c.send(c.address(), hops[-1], rng.randint(10, 200) * UNIT, leave - timedelta(
                    days=rng.randint(1, 20)))
        c.send(w, hops[0], amount, leave, fraud=True)
        step = (pay_at - leave) / (len(hops) + 1)
        for i in range(len(hops) - 1):
            c.send(hops[i], hops[i + 1], amount - (i + 1) * rng.randint(0, 3) * UNIT, leave + step * (i + 1))
        c.send(hops[-1], w, amount, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), hops[-1])
    elif f == "split":
        payer = c.address()
        parts = rng.choice((2, 3))
        share = amount // parts
        for i in range(parts):
            mule = c.address()
            c.send(w, mule, share, leave + timedelta(hours=i), fraud=True)
            c.send(mule, payer, share, leave + timedelta(hours=12 + i))
        c.send(payer, w, amount, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), payer)
    elif f == "merged_biweekly":
        x = c.address()
        half = amount // 2
        first = pay_at - timedelta(days=14)
        c.send(w, x, amount, first - timedelta(days=2), fraud=True)
        c.send(x, w, half, first, fraud=True)
        c.send(x, w, half, pay_at, fraud=True)
        c.record(first.date(), Decimal(half) / UNIT, x)
        c.record(pay_at.date(), Decimal(half) / UNIT, x)
    elif f == "several_wallets":
        if len(c.wallets) == 1:
            c.wallets.append(c.address())
            c.send(c.address(), c.wallets[1], 100 * amount, payday(PERIODS[0], 1) - timedelta(days=5))
        x = c.address()
        c.send(c.wallets[1], x, amount, leave, fraud=True)
        c.send(x, w, amount, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), x)
    elif f == "busy_hub":
        hub, x = c.exchange, c.address()
        deposit_at = leave
        c.hub_traffic(hub, deposit_at, every_min=3)
        c.send(w, hub, amount, deposit_at, fraud=True)
        c.send(hub, x, amount, deposit_at + timedelta(seconds=rng.randint(12, 60)))
        c.send(x, w, amount, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), x)
    elif f == "mixed_salary":
        payer = c.address()
        real = amount * rng.randint(30, 45) // 100
        c.send(c.employer, payer, real, leave - timedelta(days=1))
        c.send(w, payer, amount - real, leave, fraud=True)
        c.send(payer, w, amount, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), payer)
    elif f == "swap_laundering":
        x = c.address()
        c.send(w, x, amount, leave, fraud=True)
        swap_at = leave + timedelta(hours=rng.randint(1, 20))
        c.send(x, c.dex, amount, swap_at)
        c.send(c.dex, x, amount - amount // 1000, swap_at + timedelta(seconds=1), token="USDT")
        c.send(x, w, amount - amount // 1000, pay_at, token="USDT", fraud=True)
        c.record(pay_at.date(), Decimal(salary), x)
    elif f == "payer_with_business":
        payer = c.address()
        at = leave - timedelta(days=3)
        while at < pay_at + timedelta(days=2):
            at += timedelta(hours=rng.randint(2, 10))
            if rng.random() < 0.5:
                c.send(c.address(), payer, rng.randint(50, 1500) * UNIT, at)
            else:
                c.send(payer, c.address(), rng.randint(50, 1500) * UNIT, at)
        c.send(w, payer, amount, leave, fraud=True)
        c.send(payer, w, amount, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(salary), payer)
    elif f == "chain_then_split":
        a, payer = c.address(), c.address()
        half = amount // 2
        c.send(w, a, amount, leave, fraud=True)
        c.send(a, payer, amount, leave + timedelta(hours=6))
        c.send(payer, w, half, pay_at - timedelta(hours=1), fraud=True)
        c.send(payer, w, half, pay_at, fraud=True)
        c.record(pay_at.date(), Decimal(half) / UNIT, payer)
        c.record(pay_at.date(), Decimal(half) / UNIT, payer)


def honest_extras(c: Case, salary: int, merchants: list[str], hubs: dict[str, str]) -> None:
    rng, w, amount = c.rng, c.wallets[0], salary * UNIT
    f = c.family
    if f == "hub_user":
        payroll, exchange = hubs["payroll"], hubs["exchange"]
        for period in PERIODS:
            at = payday(period)
            c.hub_traffic(payroll, at, hours=6, every_min=4)
            c.send(c.employer, payroll, 40 * amount, at - timedelta(hours=2))
            c.send(payroll, w, amount, at)
            c.record(at.date(), Decimal(salary), payroll)
            # Deposits to the exchange and withdrawals from it, some of them the salary's size.
            dep = at + timedelta(days=rng.randint(1, 4))
            c.hub_traffic(exchange, dep, hours=30)
            c.send(w, exchange, amount, dep)
            c.send(exchange, w, amount, dep + timedelta(hours=rng.randint(2, 24)))
            c.send(w, payroll, rng.randint(20, 200) * UNIT, at - timedelta(hours=1))  # a fee to the provider
    elif f == "rent_coworker":
        landlord = c.address()
        for period in PERIODS:
            c.send(c.employer, landlord, rng.randint(1500, 9000) * UNIT, payday(period) + timedelta(hours=1))
            c.send(w, landlord, min(amount // 3, 2500 * UNIT), payday(period, 1) + timedelta(days=1))
    elif f == "refund":
        for period in PERIODS:
            shop = rng.choice(merchants)
            at = payday(period, 5)
            price = rng.randint(20, 900) * UNIT
            c.send(w, shop, price, at)
            c.send(shop, w, price, at + timedelta(days=rng.randint(1, 6)))
    elif f == "loan_repaid":
        friend = c.address()
        for period in PERIODS[::2]:
            at = payday(period, 3)
            lent = rng.randint(100, 2000) * UNIT
            c.send(w, friend, lent, at)
            c.send(friend, w, lent, at + timedelta(days=rng.randint(3, 20)))
    elif f == "own_savings":
        c.wallets.append(c.address())
        for period in PERIODS:
            at = payday(period) + timedelta(days=1)
            c.send(w, c.wallets[1], amount // 2, at)
            c.send(c.wallets[1], w, amount // 2, at + timedelta(days=rng.randint(3, 12)))
    elif f == "client_customer":
        for period in PERIODS:
            client = c.address()
            c.send(c.address(), client, 3 * amount, payday(period) - timedelta(days=4))
            c.send(w, client, rng.randint(20, 300) * UNIT, payday(period) - timedelta(days=3))
            c.send(client, w, rng.randint(100, 900) * UNIT, payday(period) + timedelta(days=2))
    elif f == "dex_swapper":
        for period in PERIODS:
            at = payday(period) + timedelta(days=2)
            size = rng.randint(100, amount // UNIT) * UNIT
            c.send(w, c.dex, size, at)
            c.send(c.dex, w, size - size // 500, at + timedelta(seconds=1), token="USDT")


def run(case: Case, config: VerificationConfig) -> tuple[set[str], str]:
    wallets = [Wallet(f"wal_{i}", a, NETWORK) for i, a in enumerate(case.wallets)]
    platform = Platform("paystream", "payroll", frozenset())
    outcome = verify(wallets, case.transfers(), case.records, [platform], PERIODS, config)
    flagged = {f.transfer.tx_hash for f in outcome.findings if f.code in FLAGS}
    return flagged, outcome.figures.status


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
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # tp fp fn, borrowers flagged, n
    status_right = borrowers = limits_right = limits_n = 0
    started = time.perf_counter()
    for family in FRAUD + HONEST:
        for _ in range(args.per_family):
            case = build(family, random.Random(rng.random()), merchants, hubs)
            flagged, status = run(case, config)
            s = stats[family]
            s[0] += len(flagged & case.fraud_txs)
            s[1] += len(flagged - case.fraud_txs)
            s[2] += len(case.fraud_txs - flagged)
            s[3] += bool(flagged)
            s[4] += 1
            borrowers += 1
            status_right += status == case.expected_status
            if family in KNOWN_LIMITS:
                limits_n += 1
                limits_right += status == case.expected_status
    seconds = time.perf_counter() - started
    print(f"{borrowers} borrowers ({args.per_family} per family), seed {args.seed}, "
          f"{seconds:.1f} s ({seconds / borrowers * 1000:.0f} ms each)\n")
    print("fraud family        precision  recall     tp    fp    fn")
    for family in FRAUD:
        tp, fp, fn, _, _ = stats[family]
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / (tp + fn) if tp + fn else 1.0
        note = "  (a known limit)" if family in KNOWN_LIMITS else ""
        print(f"{family:<19} {p:>9.4f} {r:>7.4f} {tp:>6} {fp:>5} {fn:>5}{note}")
    print("\nhonest look-alike   borrowers flagged  (false flags)")
    for family in HONEST:
        tp, fp, fn, any_flag, n = stats[family]
        print(f"{family:<19} {any_flag:>4}/{n:<4} = {any_flag / n:.4f}  ({fp})")
    print(f"\nVIP status right: {status_right}/{borrowers} = {status_right / borrowers:.4f}; without the "
          f"known limits: {status_right - limits_right}/{borrowers - limits_n} = "
          f"{(status_right - limits_right) / (borrowers - limits_n):.4f}")

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
    start = time.perf_counter()
    outcome = verify(wallets, transfers, big.records, [Platform("paystream", "payroll", frozenset())],
                     periods, config)
    took = time.perf_counter() - start
    print(f"\none 12-month VIP, {len(transfers)} transfers ({outcome.trace.traced} inbound traced), "
          f"pure pipeline: {took * 1000:.0f} ms, status {outcome.figures.status}")


if __name__ == "__main__":
    main()
