"""The funding trace against borrowers trying to fool it: every strategy and honest look-alike of the
adversarial corpus (bench/verification_adversarial.py) through the pure pipeline, and the property the
trace stands for: money funded mostly by the user's own wallets is never income, however many addresses
(up to the configured hops) it went through, whatever else they mixed in and however long it waited."""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.verification_adversarial import FRAUD, HONEST, KNOWN_LIMITS, OPAQUE, build, run
from vip.verification.config import FundingTraceConfig, VerificationConfig
from vip.verification.model import CIRCULAR_FLOW, WASH_TRADE, IncomeRecord, Transfer
from vip.verification.pipeline import Platform, Wallet, verify

CONFIG = VerificationConfig()
MERCHANTS = [f"0x{i:040x}" for i in range(1, 200)]
HUBS = {"payroll": "0x" + "a0" * 20, "exchange": "0x" + "e0" * 20, "dex": "0x" + "de" * 20}


@pytest.mark.parametrize("family", [f for f in FRAUD if f not in KNOWN_LIMITS])
def test_every_faked_salary_is_flagged_and_never_verifies(family):
    for seed in range(6):
        case = build(family, random.Random(f"{family}-{seed}"), MERCHANTS, HUBS)
        result = run(case, CONFIG)
        assert case.fraud_txs and result.flagged == case.fraud_txs, (family, seed)
        assert result.status == case.expected_status, (family, seed)


@pytest.mark.parametrize("family", HONEST)
def test_honest_look_alikes_are_clean_and_verified(family):
    for seed in range(6):
        case = build(family, random.Random(f"{family}-{seed}"), MERCHANTS, HUBS)
        result = run(case, CONFIG)
        assert result.flagged == set() and result.status == "verified", (family, seed)


@pytest.mark.parametrize("family", OPAQUE)
def test_self_funding_the_chain_cannot_see_is_named_in_the_vip_not_guessed(family):
    """Money parked inside an exchange's omnibus wallet and paid out by it: no on-chain trace can tell it
    is the user's. Nothing is flagged (no guess), and every such payout is named in fraud_trace.opaque."""
    for seed in range(4):
        case = build(family, random.Random(f"{family}-{seed}"), MERCHANTS, HUBS)
        result = run(case, CONFIG)
        assert result.flagged == set(), (family, seed)
        assert case.hidden_txs and case.hidden_txs <= result.opaque, (family, seed)


ME = "0x" + "a1" * 20
T0 = datetime(2026, 3, 1, tzinfo=UTC)
UNIT = 10**6


class Ledger:
    def __init__(self) -> None:
        self.items: list[tuple[datetime, str, str, int]] = []

    def send(self, frm: str, to: str, amount: int, at: datetime) -> None:
        self.items.append((at, frm, to, amount))

    def transfers(self) -> list[Transfer]:
        out = []
        for n, (at, frm, to, amount) in enumerate(sorted(self.items, key=lambda i: i[0])):
            tx = "0x" + hashlib.sha256(f"{n}{frm}{to}".encode()).hexdigest()
            out.append(Transfer("local", tx, 0, n + 1, at, "USDC", frm, to, amount))
        return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hops=st.integers(1, FundingTraceConfig().max_hops), own=st.integers(100, 50_000),
       outside=st.lists(st.tuples(st.integers(0, 10_000), st.booleans()), min_size=4, max_size=4),
       gaps=st.lists(st.integers(1, 24 * 45), min_size=5, max_size=5), old=st.integers(0, 100_000),
       second_wallet=st.booleans(), parts=st.integers(1, 3))
def test_money_funded_mostly_by_the_users_wallets_through_any_chain_is_never_income(
        hops, own, outside, gaps, old, second_wallet, parts):
    """The user (from either of two connected wallets) sends `own`; it goes through `hops` addresses,
    each of which may add outside money (before or after the user's arrives), waits up to 45 days (up to
    six months in all) and forwards all it got; the last pays the user, in one to three transfers, and a
    platform record names it as the payer with that amount and date. Whenever the user's money is more
    than half of the payment, the payment is flagged and the month unverified."""
    assume_own = own * UNIT
    outside_amounts = [amount * UNIT for amount, _ in outside[:hops]]
    if sum(outside_amounts) >= assume_own:
        outside_amounts = [0] * hops
    chain = [f"0x{0xC0DE00 + i:040x}" for i in range(hops)]
    second = "0x" + "a2" * 20
    ledger = Ledger()
    sender = second if second_wallet else ME
    # Old balances of the intermediaries, from long before: never the user's.
    for address in chain:
        ledger.send(f"0x{0xBEEF:040x}", address, old * UNIT, T0 - timedelta(days=90))
    at = T0
    ledger.send(sender, chain[0], assume_own, at)
    carried = assume_own
    for i, address in enumerate(chain):
        extra, before = outside_amounts[i], outside[i][1]
        if extra:
            when = at - timedelta(minutes=30) if before else at + timedelta(minutes=30)
            ledger.send(f"0x{0xF00D00 + i:040x}", address, extra, when)
        carried += extra
        at += timedelta(hours=gaps[i])
        if i + 1 < hops:
            ledger.send(address, chain[i + 1], carried, at)
    for k in range(parts):  # the last pays the user, in parts minutes apart
        part = carried // parts if k < parts - 1 else carried - (parts - 1) * (carried // parts)
        ledger.send(chain[-1], ME, part, at + timedelta(minutes=5 * k))
    payday = at.date()
    record = IncomeRecord("paystream", "payroll", payday, Decimal(carried) / UNIT, chain[-1])
    wallets = [Wallet("wal_1", ME, "local"), Wallet("wal_2", second, "local")]
    period = f"{payday:%Y-%m}"
    outcome = verify(wallets, ledger.transfers(), [record], [Platform("paystream", "payroll", frozenset())],
                     [period], CONFIG)
    assert outcome.figures.status == "unverified"
    paid = [t for t in ledger.transfers() if t.to_address == ME]
    for t in paid:
        label = outcome.labels[wallets[0]][t.key]
        assert label.classification == ("wash_trade" if hops == 1 else "circular")
        assert label.fraud_flags == ((WASH_TRADE,) if hops == 1 else (CIRCULAR_FLOW,))
    assert outcome.periods[0].reasons()[0]["code"] in (WASH_TRADE, CIRCULAR_FLOW)


def test_money_that_stops_over_with_other_money_is_found_by_the_pool():
    """The user's 5,000 reaches the payer through a relay, then 3,000 of a stranger's; the payer pays 5,000
    as salary. Last in first out, the payment is the stranger's 3,000 and 2,000 of the user's (0.4); as a
    pool, the payer holds 5/8 of the user's money and pays it out in that share (0.625): self-funded."""
    ledger = Ledger()
    relay, payer, stranger = "0x" + "b1" * 20, "0x" + "b2" * 20, "0x" + "c3" * 20
    ledger.send(ME, relay, 5000 * UNIT, T0)
    ledger.send(relay, payer, 5000 * UNIT, T0 + timedelta(hours=1))
    ledger.send(stranger, payer, 3000 * UNIT, T0 + timedelta(hours=5))
    ledger.send(payer, ME, 5000 * UNIT, T0 + timedelta(days=2))
    day = (T0 + timedelta(days=2)).date()
    record = IncomeRecord("paystream", "payroll", day, Decimal(5000), payer)
    wallet = Wallet("wal_1", ME, "local")
    outcome = verify([wallet], ledger.transfers(), [record], [Platform("paystream", "payroll", frozenset())],
                     [f"{day:%Y-%m}"], CONFIG)
    assert outcome.figures.status == "unverified"
    (paid,) = [f for f in outcome.findings if f.transfer.to_address == ME]
    assert paid.code == CIRCULAR_FLOW and paid.funding is not None
    assert paid.funding.share == Fraction(5, 8)
    assert [t.from_address for t in paid.funding.path] == [ME, relay, payer]


def test_the_users_money_back_from_the_payer_a_record_names_counts_first_however_late():
    """The named payer runs a business: strangers pay it and it pays strangers every few hours; the user
    paid it 4,500 three weeks before it pays a 5,000 "salary". Whatever it did meanwhile, the user's own
    money there is the first it pays back (the earmark): 0.9 of the salary, self-funded."""
    ledger = Ledger()
    payer = "0x" + "b3" * 20
    ledger.send(ME, payer, 4500 * UNIT, T0)
    for i in range(120):
        who = f"0x{0xF00000 + i:040x}"
        at = T0 + timedelta(hours=4 * i + 1)
        if i % 2:
            ledger.send(payer, who, 900 * UNIT, at)
        else:
            ledger.send(who, payer, 1000 * UNIT, at)
    paid_at = T0 + timedelta(days=21)
    ledger.send(payer, ME, 5000 * UNIT, paid_at)
    record = IncomeRecord("paystream", "payroll", paid_at.date(), Decimal(5000), payer)
    outcome = verify([Wallet("wal_1", ME, "local")], ledger.transfers(), [record],
                     [Platform("paystream", "payroll", frozenset())], [f"{paid_at:%Y-%m}"], CONFIG)
    assert outcome.figures.status == "unverified"
    (paid,) = [f for f in outcome.findings if f.transfer.to_address == ME]
    assert paid.code == WASH_TRADE and paid.funding is not None and paid.funding.share == Fraction(9, 10)


def test_a_salary_half_of_it_the_users_money_or_less_is_income():
    """The other side of the threshold: more than half of it from a real employer, the payment counts."""
    ledger = Ledger()
    payer, employer = "0x" + "b1" * 20, "0x" + "e1" * 20
    ledger.send(ME, payer, 2000 * UNIT, T0)
    ledger.send(employer, payer, 3000 * UNIT, T0 + timedelta(hours=1))
    ledger.send(payer, ME, 5000 * UNIT, T0 + timedelta(days=1))
    day = (T0 + timedelta(days=1)).date()
    record = IncomeRecord("paystream", "payroll", day, Decimal(5000), payer)
    outcome = verify([Wallet("wal_1", ME, "local")], ledger.transfers(), [record],
                     [Platform("paystream", "payroll", frozenset())], [f"{day:%Y-%m}"], CONFIG)
    assert outcome.figures.status == "verified" and outcome.findings == []
