"""Verification quality and speed on a labelled population, through the real VIP generation job.

What it does:
  1. Creates a fresh, migrated database (embedded pgserver in a temp dir, or a throw-away database on
     `--database-url` / $DATABASE_URL), see bench/benchdb.py.
  2. Generates `--borrowers` (default 600) labelled borrowers over 7 months of a network `bench`: six
     kinds in equal shares -- honest (exact salary on the 25th, spending to merchants, gifts from
     friends), noisy honest (salary 0-4% off the record, paid up to 2 days late, partial repayments to
     friends, now and then a merchant refund of a purchase), washers (honest salary plus one to three
     round trips with a peer), circlers (honest salary plus a circle through two or three
     intermediaries), wrong wallet (salary paid to an address that is not connected) and partial (one or
     two months unpaid). Every transfer carries its true fraud flags; every borrower its true VIP status
     and its true verified income (the median of the salaries actually paid in the months that should
     verify).
  3. Writes what the indexer and the connection flows would have written, directly into their tables:
     users, wallet and platform connections, wallets, income records, `token_transfers` (the borrowers'
     transfers AND their counterparties' transfers, as the counterparty fetch would have backfilled them),
     `watched_addresses` (every counterparty watched and backfilled) and the network cursor. Running
     600 borrowers through Anvil would take hours on this machine; the scenario tests
     (tests/test_verification_scenarios.py) cover the chain-to-database path.
  4. Requests a VIP for every borrower (`vip_reports.request_report`, as GET /v1/vip-report does) and runs
     the real job (`indexer.vip_job.VipReportJob.run_once`) until none is pending; then reads the stored
     reports and `transfer_labels`.
  5. Prints precision and recall of each flag (over every transfer of every borrower's wallet), the share
     of VIP statuses that are right, the mean absolute error of verified monthly income (absolute and
     relative), and the time to generate one VIP for a borrower with 12 months and `--big-transfers`
     (default 10,000) transfers (the pipeline step of the job: reading, rules, labels, report, events).

Goals: precision and recall at least 0.95 for every flag, income error under 1%, one big VIP under 1 s.

Run (from the repository root):
    .venv/bin/python bench/verification_quality.py
    .venv/bin/python bench/verification_quality.py --borrowers 1200 --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from statistics import median

import psycopg
import structlog
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchdb import throwaway_database
from vip.config import NetworkConfig, Settings, TokenConfig, load_settings
from vip.ids import new_id
from vip.reports import vip_reports
from vip.reports.worker import VipReportJob
from vip.store.engine import create_engine
from vip.store.tables import transfer_labels
from vip.store.tables import vip_reports as vip_table
from vip.verification.config import VerificationConfig
from vip.verification.model import CIRCULAR_FLOW, UNVERIFIED_SOURCE, WASH_TRADE

NETWORK = "bench"
USDC_ADDRESS = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
USDT_ADDRESS = "0xdac17f958d2ee523a2206206994597c13d831ec7"
UNIT = 10**6
GENESIS = datetime(2025, 6, 1, tzinfo=UTC)
NOW = datetime(2026, 7, 3, 12, tzinfo=UTC)  # lookback 6: 2026-01..2026-06; 12: 2025-07..2026-06
BLOCK_SECONDS = 12
KINDS = ("honest", "noisy", "washer", "circler", "wrong_wallet", "partial")
FLAGS = (WASH_TRADE, CIRCULAR_FLOW, UNVERIFIED_SOURCE)


class FixedClock:
    async def now(self) -> datetime:
        return NOW


def bench_settings() -> Settings:
    network = NetworkConfig(name=NETWORK, chain_id=1, finality_depth=0, tokens={
        "USDC": TokenConfig(address=USDC_ADDRESS), "USDT": TokenConfig(address=USDT_ADDRESS)})
    # The shipped OAuth platforms: their payout wallets are the whitelist the verification checks.
    return Settings(networks={NETWORK: network}, verification=VerificationConfig(),
                    platforms=load_settings(environ={}).platforms)


@dataclass
class Borrower:
    kind: str
    user_id: str
    wallet: str
    employer: str
    lookback: int = 6
    salary: Decimal = Decimal(0)
    records: list[tuple[date, Decimal]] = field(default_factory=list)
    paid: dict[str, Decimal] = field(default_factory=dict)  # period -> on-chain salary actually received
    expected_status: str = "verified"


class Population:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.truth: dict[tuple[str, str], set[str]] = {}  # (wallet, tx_hash) -> true flags
        self.merchants = [self.address() for _ in range(3000)]
        self.block_of: dict[int, int] = {}

    def address(self) -> str:
        return "0x" + self.rng.randbytes(20).hex()

    def transfer(self, frm: str, to: str, amount: int, at: datetime, *, token: str = "USDC",
                 wallet: str | None = None, flags: set[str] | None = None) -> str:
        seconds = int((at - GENESIS).total_seconds())
        block = seconds // BLOCK_SECONDS
        tx = "0x" + self.rng.randbytes(32).hex()
        stamp = (GENESIS + timedelta(seconds=block * BLOCK_SECONDS)).isoformat()
        address = USDC_ADDRESS if token == "USDC" else USDT_ADDRESS
        self.lines.append(f"{NETWORK}\t{tx}\t0\t{block}\t0x{block:064x}\t{stamp}\t{token}\t{address}\t"
                          f"{frm}\t{to}\t{amount}\n")
        if wallet is not None:
            self.truth[(wallet, tx)] = set(flags or ())
        return tx

    def moment(self, day: date, hour: int = 12) -> datetime:
        return datetime(day.year, day.month, day.day, hour, tzinfo=UTC) + timedelta(
            minutes=self.rng.randint(0, 300))


def months(lookback: int) -> list[str]:
    out, year, month = [], NOW.year, NOW.month
    for _ in range(lookback):
        month -= 1
        if month == 0:
            year, month = year - 1, 12
        out.append(f"{year:04d}-{month:02d}")
    return out[::-1]


def add_borrower(pop: Population, kind: str, *, lookback: int = 6, spend_per_month: int = 12) -> Borrower:
    rng = pop.rng
    b = Borrower(kind, new_id("usr"), pop.address(), pop.address(), lookback)
    b.salary = Decimal(rng.randrange(1500, 15000, 50))
    friends = [pop.address() for _ in range(3)]
    periods = months(lookback)
    unpaid = set(rng.sample(periods, rng.choice((1, 2)))) if kind == "partial" else set()
    payee = pop.address() if kind == "wrong_wallet" else b.wallet
    for period in periods:
        year, month = map(int, period.split("-"))
        payday = date(year, month, 25)
        b.records.append((payday, b.salary))
        if period in unpaid:
            continue
        amount = b.salary
        day = payday
        if kind == "noisy":
            amount = (b.salary * (1 - Decimal(rng.randint(0, 400)) / 10000)).quantize(Decimal("0.01"))
            day = payday + timedelta(days=rng.randint(0, 2))
        pop.transfer(b.employer, payee, int(amount * UNIT), pop.moment(day),
                     wallet=b.wallet if payee == b.wallet else None)
        if payee == b.wallet:
            b.paid[period] = amount
        # Spending across the month, gifts from friends now and then.
        for _ in range(spend_per_month):
            when = datetime(year, month, 1, tzinfo=UTC) + timedelta(minutes=rng.randint(0, 27 * 24 * 60))
            amount = rng.randint(5, 900) * UNIT + rng.randint(0, UNIT)
            pop.transfer(b.wallet, rng.choice(pop.merchants), amount, when, wallet=b.wallet)
        if rng.random() < 0.3:
            pop.transfer(rng.choice(friends), b.wallet, rng.randint(20, 400) * UNIT,
                         datetime(year, month, 2, tzinfo=UTC) + timedelta(hours=rng.randint(0, 200)),
                         wallet=b.wallet, flags={UNVERIFIED_SOURCE})
        if kind == "noisy" and rng.random() < 0.3:
            # A friend lends 300, half is paid back: not a round trip.
            friend = friends[0]
            lent = datetime(year, month, 10, tzinfo=UTC)
            pop.transfer(friend, b.wallet, 300 * UNIT, lent, wallet=b.wallet, flags={UNVERIFIED_SOURCE})
            pop.transfer(b.wallet, friend, 150 * UNIT, lent + timedelta(days=3), wallet=b.wallet)
    if kind == "washer":
        for _ in range(rng.randint(1, 3)):
            peer = pop.address()
            start = NOW - timedelta(days=rng.randint(20, 170))
            amount = rng.randint(500, 20000) * UNIT
            back = amount - amount * rng.randint(0, 80) // 10000
            pop.transfer(peer, b.wallet, amount, start, wallet=b.wallet, flags={WASH_TRADE})
            pop.transfer(b.wallet, peer, back, start + timedelta(hours=rng.randint(1, 140)), wallet=b.wallet,
                         flags={WASH_TRADE})
    if kind == "circler":
        hops = [pop.address() for _ in range(rng.choice((2, 3)))]
        start = NOW - timedelta(days=rng.randint(20, 170))
        amount = rng.randint(500, 20000) * UNIT
        path = [b.wallet, *hops, b.wallet]
        for i in range(len(path) - 1):
            amount_i = amount - amount * i * rng.randint(0, 50) // 10000
            flags = {CIRCULAR_FLOW} if b.wallet in (path[i], path[i + 1]) else None
            pop.transfer(path[i], path[i + 1], amount_i, start + timedelta(hours=6 * i + rng.randint(0, 5)),
                         wallet=b.wallet if flags else None, flags=flags)
    if kind == "noisy" and rng.random() < 0.02:
        # A refund: a purchase returned in full a few days later (honest, but shaped like a round trip).
        shop = pop.address()
        when = NOW - timedelta(days=rng.randint(20, 170))
        pop.transfer(b.wallet, shop, 250 * UNIT, when, wallet=b.wallet)
        pop.transfer(shop, b.wallet, 250 * UNIT, when + timedelta(days=2), wallet=b.wallet,
                     flags={UNVERIFIED_SOURCE})
    verified = [p for p in periods if p in b.paid]
    b.expected_status = ("verified" if len(verified) == len(periods) else
                         "unverified" if not verified else "partially_verified")
    return b


def seed(pg_url: str, people: list[Borrower], pop: Population, org: str | None = None) -> str:
    """Write the population as the indexer and the connection flows would have; returns the organisation."""
    with psycopg.connect(pg_url) as conn, conn.cursor() as cur:
        with cur.copy("COPY token_transfers (network, tx_hash, log_index, block_number, block_hash,"
                      " block_timestamp, token, token_address, from_address, to_address, amount)"
                      " FROM STDIN") as copy:
            copy.write("".join(pop.lines))
        if org is None:
            org = new_id("org")
            cur.execute("INSERT INTO organisations (id, name) VALUES (%s, 'bench')", (org,))
            last_block = int((NOW - GENESIS).total_seconds()) // BLOCK_SECONDS
            cur.execute("INSERT INTO chain_cursors (network, chain_id, block_number, block_hash) VALUES "
                        "(%s, 1, %s, %s)", (NETWORK, last_block, f"0x{last_block:064x}"))
        # Every wallet and counterparty as the indexer leaves them after the sign-in's backfill and the
        # counterparty fetch: watched from the chain's first block (no history before it), backfilled.
        last_block = int((NOW - GENESIS).total_seconds()) // BLOCK_SECONDS
        own = {b.wallet for b in people}
        parties = {part for line in pop.lines for part in line.split("\t")[8:10]} - own
        cur.executemany("INSERT INTO watched_addresses (network, address, reason, start_block,"
                        " live_from_block, backfill_next_block, backfill_done_at) VALUES (%s, %s,"
                        " %s, 0, %s, %s, now()) ON CONFLICT DO NOTHING",
                        [(NETWORK, a, "wallet" if a in own else "counterparty", last_block, last_block)
                         for a in sorted(parties | own)])
        for b in people:
            wallet_con, platform_con = new_id("con"), new_id("con")
            cur.execute("INSERT INTO users (id, organisation_id, created_at) VALUES (%s, %s, now())",
                        (b.user_id, org))
            cur.execute("INSERT INTO connections (id, organisation_id, user_id, type, provider, identifier,"
                        " network, status, created_at) VALUES (%s, %s, %s, 'wallet', 'metamask', %s, %s,"
                        " 'active', now())", (wallet_con, org, b.user_id, b.wallet, NETWORK))
            cur.execute("INSERT INTO wallets (id, organisation_id, user_id, connection_id, address, network,"
                        " created_at) VALUES (%s, %s, %s, %s, %s, %s, now())",
                        (new_id("wal"), org, b.user_id, wallet_con, b.wallet, NETWORK))
            cur.execute("INSERT INTO connections (id, organisation_id, user_id, type, provider, identifier,"
                        " source_type, account_id, status, created_at) VALUES (%s, %s, %s, 'platform',"
                        " 'paystream', 'holder', 'payroll', %s, 'active', now())",
                        (platform_con, org, b.user_id, f"acct-{b.user_id}"))
            cur.executemany("INSERT INTO income_records (connection_id, record_date, amount, currency,"
                            " direction, from_reference) VALUES (%s, %s, %s, 'USD', 'inbound', %s)",
                            [(platform_con, d, amount, b.employer) for d, amount in b.records])
        cur.execute("ANALYZE")
        conn.commit()
    return org


async def generate(url: str, settings: Settings, org: str, people: list[Borrower]) -> None:
    """Request every borrower's VIP and run the job until none is pending."""
    engine = create_engine(url, pool_size=2)
    job = VipReportJob(settings, engine, FixedClock(), settings.platforms)
    try:
        async with engine.begin() as conn:
            for b in people:
                await vip_reports.request_report(conn, organisation_id=org, user_id=b.user_id,
                                                 lookback_months=b.lookback, refresh=False, now=NOW,
                                                 cache=timedelta(hours=24))
        steps, started = 0, time.perf_counter()
        while True:
            steps += 1
            if not await job.run_once() or steps % 200 == 0:
                async with engine.connect() as conn:
                    pending = await conn.scalar(select(func.count()).select_from(vip_table)
                                                .where(vip_table.c.status == "pending"))
                if not pending:
                    break
                done = len(people) - pending
                print(f"  {done}/{len(people)} VIPs generated "
                      f"({done / (time.perf_counter() - started):.1f}/s)", flush=True)
    finally:
        await engine.dispose()


async def read_results(url: str, people: list[Borrower]):
    engine = create_engine(url, pool_size=2)
    try:
        async with engine.connect() as conn:
            reports = {r.user_id: r.report for r in await conn.execute(
                select(vip_table.c.user_id, vip_table.c.report))}
            labels = defaultdict(set)
            rows = await conn.execute(select(transfer_labels.c.wallet_address, transfer_labels.c.tx_hash,
                                             transfer_labels.c.fraud_flags))
            for r in rows:
                labels[(r.wallet_address, r.tx_hash)] = set(r.fraud_flags or ())
    finally:
        await engine.dispose()
    return reports, labels


def precision_recall(pop: Population, labels) -> dict[str, tuple[float, float, int, int, int]]:
    out = {}
    for flag in FLAGS:
        tp = fp = fn = 0
        for key, truth in pop.truth.items():
            predicted = labels.get(key, set())
            if flag in predicted and flag in truth:
                tp += 1
            elif flag in predicted:
                fp += 1
            elif flag in truth:
                fn += 1
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        out[flag] = (precision, recall, tp, fp, fn)
    return out


async def big_vip(url: str, pg_url: str, settings: Settings, org: str, transfers: int,
                  seed_value: int) -> tuple[float, int]:
    """One borrower with 12 months and about `transfers` transfers: seconds of the job's pipeline step."""
    pop = Population(random.Random(seed_value + 1))
    per_month = max(1, (transfers - 12 * 2) // 12)
    b = add_borrower(pop, "honest", lookback=12, spend_per_month=per_month)
    seed(pg_url, [b], pop, org)
    engine = create_engine(url, pool_size=2)
    job = VipReportJob(settings, engine, FixedClock(), settings.platforms)
    try:
        async with engine.begin() as conn:
            await vip_reports.request_report(conn, organisation_id=org, user_id=b.user_id, lookback_months=12,
                                             refresh=False, now=NOW, cache=timedelta(hours=24))
        start = time.perf_counter()
        assert await job.run_once()
        seconds = time.perf_counter() - start
        async with engine.connect() as conn:
            status = await conn.scalar(select(vip_table.c.status).where(vip_table.c.user_id == b.user_id))
        assert status == "verified", status
    finally:
        await engine.dispose()
    return seconds, len(pop.truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--borrowers", type=int, default=600)
    parser.add_argument("--big-transfers", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up

    rng = random.Random(args.seed)
    pop = Population(rng)
    people = [add_borrower(pop, KINDS[i % len(KINDS)]) for i in range(args.borrowers)]
    settings = bench_settings()
    with throwaway_database(args.database_url, "vip-bench-verification", ("server_version",)) as db:
        print(f"database: {db.source}, PostgreSQL {db.settings['server_version']}; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
        print(f"population: {len(people)} borrowers ({', '.join(KINDS)} in equal shares), "
              f"{len(pop.lines)} transfers, {len(pop.truth)} of them the borrowers' own")
        org = seed(db.pg_url, people, pop)
        start = time.perf_counter()
        asyncio.run(generate(db.url, settings, org, people))
        total = time.perf_counter() - start
        reports, labels = asyncio.run(read_results(db.url, people))
        print(f"generated {len(reports)} VIPs in {total:.1f} s ({total / len(people) * 1000:.0f} ms each, "
              "counterparties already indexed)")

        print("\nflag                        precision  recall      tp    fp    fn")
        for flag, (p, r, tp, fp, fn) in precision_recall(pop, labels).items():
            print(f"{flag:<27} {p:>9.4f} {r:>7.4f} {tp:>7} {fp:>5} {fn:>5}")

        right = defaultdict(lambda: [0, 0])
        errors, relative = [], []
        for b in people:
            report = reports[b.user_id]
            right[b.kind][1] += 1
            right[b.kind][0] += report["status"] == b.expected_status
            if b.expected_status != "unverified":
                truth = Decimal(median(b.paid.values()))
                got = Decimal(str(report["verified_monthly_income_usd"]))
                errors.append(abs(got - truth))
                relative.append(abs(got - truth) / truth)
        correct = sum(v[0] for v in right.values())
        print(f"\nVIP status right: {correct}/{len(people)} = {correct / len(people):.4f}  (" + ", ".join(
            f"{k} {v[0]}/{v[1]}" for k, v in right.items()) + ")")
        mae = sum(errors, Decimal(0)) / len(errors)
        mre = sum(relative, Decimal(0)) / len(relative)
        print(f"verified income: mean absolute error {mae:.2f} USD, mean relative error {mre * 100:.3f}% "
              f"over {len(errors)} borrowers with income")

        seconds, own = asyncio.run(big_vip(db.url, db.pg_url, settings, org, args.big_transfers, args.seed))
        print(f"\none VIP, 12 months, {own} transfers of the wallet: {seconds * 1000:.0f} ms "
              "(goal: under 1 s)")


if __name__ == "__main__":
    main()
