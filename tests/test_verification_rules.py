"""The pure verification core: fraud rules, payroll matching tiers, classification, VIP figures, balances,
obligations and the four pillars. Plain values in, plain values out; Hypothesis for the rules."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vip.verification.cashflow import Obligation, average_balance, obligations
from vip.verification.classify import classify
from vip.verification.config import (
    FundingTraceConfig,
    MatchingConfig,
    ScoringConfig,
    VerificationConfig,
    WashTradeConfig,
)
from vip.verification.fraud import WashContext, find_wash_trades, within
from vip.verification.funding import FundingLedger, trace_funding
from vip.verification.matching import tier, variance
from vip.verification.model import (
    CIRCULAR_FLOW,
    EXACT,
    INCOME_MISMATCH,
    INSUFFICIENT_HISTORY,
    UNVERIFIED_SOURCE,
    WASH_TRADE,
    IncomeRecord,
    Transfer,
)
from vip.verification.pipeline import Platform, Wallet, verify, vip_report
from vip.verification.profile import figures, lookback_periods, population_stdev, vip_periods
from vip.verification.scoring import (
    ScoreInputs,
    adverse_action_reasons,
    composite,
    credit_limit,
    income_tier,
    pillars,
    recommendation,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
USDC = 10**6
ME = "0x" + "a" * 40
EMPLOYER = "0x" + "e" * 40
PLATFORM = Platform("paystream", "payroll", frozenset({EMPLOYER}))
CONFIG = VerificationConfig()


def addr(n: int) -> str:
    return "0x" + f"{n:040x}"


class Chain:
    """Builds transfers in chain order: each one a block after the previous."""

    def __init__(self, network: str = "local") -> None:
        self.network = network
        self.block = 0

    def t(self, frm: str, to: str, amount: int, at: datetime, token: str = "USDC") -> Transfer:
        self.block += 1
        digest = hashlib.sha256(f"{self.network}{self.block}".encode()).hexdigest()
        return Transfer(self.network, "0x" + digest, 0, self.block, at, token, frm, to, amount)


def salary_records(amount: Decimal, months: list[date]) -> list[IncomeRecord]:
    return [IncomeRecord("paystream", "payroll", d, amount, EMPLOYER, PLATFORM.whitelist) for d in months]


# --- exact amounts ---------------------------------------------------------------------------------------

def test_within_is_exact_for_amounts_beyond_float_precision():
    big = 2**200
    assert within(big + big // 20, big, Decimal("0.05"))
    assert not within(big + big // 20 + 1, big, Decimal("0.05"))  # one base unit over: a float would say yes


@pytest.mark.parametrize(("received", "expected_tier"), [
    ("5000", "exact"), ("4925", "close"), ("4900", "close"), ("4899.999999", "approximate"),
    ("4800", "approximate"), ("4750", "approximate"), ("4749.999999", None), ("4650", None),
    ("5250", "approximate"),
])
def test_tiers(received, expected_tier):
    assert tier(Decimal("5000"), Decimal(received), MatchingConfig()) == expected_tier


def test_variance_is_a_fraction_to_six_places():
    assert variance(Decimal("5000"), Decimal("4650")) == Decimal("0.07")
    assert variance(Decimal("3"), Decimal("2")) == Decimal("0.333333")


# --- wash trades -------------------------------------------------------------------------------------------

def test_round_trip_with_one_counterparty_is_flagged_on_both_sides():
    c = Chain()
    peer = addr(7)
    inbound = c.t(peer, ME, 1000 * USDC, T0)
    outbound = c.t(ME, peer, 995 * USDC, T0 + timedelta(days=2))
    assert find_wash_trades(ME, [inbound, outbound], WashTradeConfig()) == {inbound.key, outbound.key}


def test_round_trip_outside_the_window_or_unbalanced_is_not_a_wash():
    c = Chain()
    peer = addr(7)
    late = [c.t(peer, ME, 1000 * USDC, T0), c.t(ME, peer, 1000 * USDC, T0 + timedelta(days=8))]
    assert find_wash_trades(ME, late, WashTradeConfig()) == set()
    partial = [c.t(peer, ME, 1000 * USDC, T0), c.t(ME, peer, 600 * USDC, T0 + timedelta(days=1))]
    assert find_wash_trades(ME, partial, WashTradeConfig()) == set()


def test_honest_salary_then_spending():
    c = Chain()
    transfers = [c.t(EMPLOYER, ME, 5000 * USDC, T0)]
    transfers += [c.t(ME, addr(100 + i), 200 * USDC, T0 + timedelta(days=i + 1)) for i in range(20)]
    assert find_wash_trades(ME, transfers, WashTradeConfig()) == set()


amounts = st.integers(min_value=1 * USDC, max_value=50_000 * USDC)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(salary=amounts, spends=st.lists(st.tuples(st.integers(1, 400), amounts, st.integers(0, 30 * 24)),
                                       max_size=40),
       wash=amounts, skim=st.integers(0, 9), gap_h=st.integers(1, 6 * 24), when=st.integers(0, 200 * 24))
def test_wash_pattern_hidden_in_honest_noise_is_found_and_nothing_else(salary, spends, wash, skim, gap_h,
                                                                      when):
    c = Chain()
    washer = addr(9999)
    honest = [c.t(EMPLOYER, ME, salary, T0 + timedelta(days=30 * m)) for m in range(6)]
    honest += [c.t(ME, addr(1000 + shop), amount, T0 + timedelta(hours=h)) for shop, amount, h in spends]
    # Sent back within the window, at most 0.9% short: net position well inside 10% of the mean trade.
    start = T0 + timedelta(hours=when)
    pattern = [c.t(washer, ME, wash, start), c.t(ME, washer, wash - wash * skim // 1000,
                                                  start + timedelta(hours=gap_h))]
    everything = sorted(honest + pattern, key=lambda t: t.timestamp)
    flagged = find_wash_trades(ME, everything, WashTradeConfig())
    assert flagged == {t.key for t in pattern}


@settings(max_examples=60, deadline=None)
@given(salary=amounts, spends=st.lists(st.tuples(st.integers(1, 400), amounts, st.integers(0, 30 * 24)),
                                       max_size=40))
def test_honest_salary_and_spending_is_never_flagged(salary, spends):
    c = Chain()
    transfers = [c.t(EMPLOYER, ME, salary, T0 + timedelta(days=30 * m)) for m in range(6)]
    transfers += [c.t(ME, addr(1000 + shop), amount, T0 + timedelta(hours=h)) for shop, amount, h in spends]
    transfers.sort(key=lambda t: t.timestamp)
    assert find_wash_trades(ME, transfers, WashTradeConfig()) == set()
    ledger = FundingLedger(transfers, 64)
    assert all(not trace_funding(t, ledger, {ME}, FundingTraceConfig()).path
               for t in transfers if t.to_address == ME)


def test_a_refund_or_a_repaid_loan_is_not_a_pass_through():
    """The user's money first, then the same amount back: the value returning was theirs (the trace
    decides whether it may pass for income), not a pass-through."""
    c = Chain()
    shop = addr(7)
    refund = [c.t(ME, shop, 250 * USDC, T0), c.t(shop, ME, 250 * USDC, T0 + timedelta(days=2))]
    assert find_wash_trades(ME, refund, WashTradeConfig()) == set()


def test_own_money_back_from_a_payer_a_record_names_is_a_wash_whatever_the_payer_does_meanwhile():
    """Decision 134: the user pays the payer, the payer pays the same back within the window as the
    salary a record claims: a round trip with one counterparty, however busy that payer is with strangers
    in between (its other traffic cannot make the user's money income). Unclaimed, it stays a refund."""
    c = Chain()
    payer = addr(9)
    out = c.t(ME, payer, 4000 * USDC, T0)
    business = [c.t(addr(100 + i), payer, 1500 * USDC, T0 + timedelta(hours=3 + 6 * i)) for i in range(8)]
    business += [c.t(payer, addr(200 + i), 1400 * USDC, T0 + timedelta(hours=5 + 6 * i)) for i in range(8)]
    back = c.t(payer, ME, 4000 * USDC, T0 + timedelta(days=4))
    mine = [out, back]
    claimed = WashContext(claimable={back.key})
    assert find_wash_trades(ME, mine, WashTradeConfig(), claimed) == {out.key, back.key}
    assert find_wash_trades(ME, mine, WashTradeConfig()) == set()
    # A fee to the payroll provider before the salary is not a round trip: the net is the salary.
    fee = c.t(ME, payer, 150 * USDC, T0 + timedelta(days=5))
    salary = c.t(payer, ME, 4000 * USDC, T0 + timedelta(days=5, hours=1))
    claimed = WashContext(claimable={salary.key})
    assert find_wash_trades(ME, [fee, salary], WashTradeConfig(), claimed) == set()
    # Through the pipeline: the record naming the payer verifies nothing.
    d = back.timestamp.date()
    record = IncomeRecord("paystream", "payroll", d, Decimal(4000), payer)
    outcome = verify([Wallet("wal_1", ME, "local")], [out, *business, back], [record],
                     [Platform("paystream", "payroll", frozenset())], [f"{d:%Y-%m}"], CONFIG)
    assert outcome.figures.status == "unverified"
    assert {f.transfer.key for f in outcome.findings} == {out.key, back.key}


# --- the funding trace -------------------------------------------------------------------------------------

def traced(transfers, inbound, home=frozenset({ME}), config=None, known=None):
    return trace_funding(inbound, FundingLedger(transfers, 64), home, config or FundingTraceConfig(), known)


def test_circle_through_two_intermediaries():
    c = Chain()
    a, b = addr(1), addr(2)
    out = c.t(ME, a, 3000 * USDC, T0)
    hop = c.t(a, b, 2990 * USDC, T0 + timedelta(hours=5))
    back = c.t(b, ME, 2980 * USDC, T0 + timedelta(days=1))
    noise = [c.t(a, addr(50), 10 * USDC, T0 + timedelta(hours=1)), c.t(addr(51), b, 3000 * USDC, T0)]
    funding = traced([out, hop, back, *noise], back)
    # b held 3,000 of addr(51)'s before a's 2,990 arrived: the payment takes the last in first.
    assert funding.path == (out, hop, back) and funding.intermediaries == 2
    assert funding.share == 1 and funding.self_funded(FundingTraceConfig())


@pytest.mark.parametrize("intermediaries", [1, 2, 3, 4])
def test_own_money_back_through_up_to_max_hops_intermediaries_is_found_five_is_not(intermediaries):
    c = Chain()
    path = [ME] + [addr(10 + i) for i in range(intermediaries)] + [ME]
    hops = [c.t(path[i], path[i + 1], 1000 * USDC, T0 + timedelta(hours=i)) for i in range(len(path) - 1)]
    funding = traced(hops, hops[-1])
    assert funding.path == tuple(hops) and funding.intermediaries == intermediaries
    c2 = Chain()
    long_path = [ME] + [addr(20 + i) for i in range(5)] + [ME]
    long_hops = [c2.t(long_path[i], long_path[i + 1], 1000 * USDC, T0 + timedelta(hours=i))
                 for i in range(len(long_path) - 1)]
    assert traced(long_hops, long_hops[-1]).path == ()


def test_trace_follows_money_not_amounts_however_long_it_waited():
    c = Chain()
    a, b = addr(1), addr(2)
    out = c.t(ME, a, 3000 * USDC, T0)
    # Another amount: 2,000 of the 3,000 goes round, all of it the user's.
    part = [c.t(a, b, 2000 * USDC, T0 + timedelta(days=6)), c.t(b, ME, 2000 * USDC, T0 + timedelta(days=20))]
    assert traced([out, *part], part[-1]).share == 1
    # Back half a year after it left: still the user's money (no window to wait out).
    late = [c.t(a, b, 3000 * USDC, T0 + timedelta(days=150)),
            c.t(b, ME, 3000 * USDC, T0 + timedelta(days=181))]
    assert traced([out, *late], late[-1]).share == 1


def test_a_busy_hub_passes_on_only_what_reached_it_last():
    """A hub that receives from thousands: the user's deposit funds a payment only when it is what the
    hub received last before it, and only as much of it as the payment carries."""
    c = Chain()
    hub = addr(0x40B)
    deposit = c.t(ME, hub, 5000 * USDC, T0)
    others = [c.t(addr(1000 + i), hub, 900 * USDC, T0 + timedelta(minutes=1 + i)) for i in range(10)]
    payout = c.t(hub, ME, 5000 * USDC, T0 + timedelta(hours=1))
    assert traced([deposit, *others, payout], payout).share == 0
    # Straight through the hub: the deposit is the last money in.
    c2 = Chain()
    before = [c2.t(addr(1000 + i), hub, 900 * USDC, T0 + timedelta(minutes=i)) for i in range(10)]
    deposit = c2.t(ME, hub, 5000 * USDC, T0 + timedelta(hours=1))
    payout = c2.t(hub, ME, 5000 * USDC, T0 + timedelta(hours=1, seconds=12))
    funding = traced([*before, deposit, payout], payout)
    assert funding.share == 1 and funding.path == (deposit, payout)
    # A payout larger than the deposit: the user's part only.
    c3 = Chain()
    deposit3 = c3.t(ME, hub, 5000 * USDC, T0)
    filler = c3.t(addr(77), hub, 2000 * USDC, T0 - timedelta(hours=1))
    bigger = c3.t(hub, ME, 7000 * USDC, T0 + timedelta(minutes=1))
    assert traced([filler, deposit3, bigger], bigger).share == Fraction(5, 7)


def test_an_address_not_fetched_is_named_not_guessed():
    c = Chain()
    a, b = addr(1), addr(2)
    hops = [c.t(ME, a, 1000 * USDC, T0), c.t(a, b, 1000 * USDC, T0 + timedelta(hours=1)),
            c.t(b, ME, 1000 * USDC, T0 + timedelta(hours=2))]
    funding = traced(hops, hops[-1], known={ME, b})
    assert funding.share == 0 and funding.untraced == {a}


def one_record(transfers, payer, amount, on):
    """verify() for one record naming `payer` for `amount` on `on`, over `transfers`."""
    record = IncomeRecord("paystream", "payroll", on, Decimal(amount), payer)
    return verify([Wallet("wal_1", ME, "local")], transfers, [record],
                  [Platform("paystream", "payroll", frozenset())], [f"{on:%Y-%m}"], CONFIG)


def test_a_salary_advance_given_back_is_the_employers_money_not_the_users():
    """The employer advances a whole salary mid-month (no record claims it); the user gives it back the
    day before payday, after the employer's payroll funding. The repayment is the employer's own money going
    home: the salary is clean and verifies, and the advance in and out is no pass-through."""
    c = Chain()
    company = addr(0xC0)
    advance = c.t(EMPLOYER, ME, 5000 * USDC, T0 + timedelta(days=10))
    c.t(ME, addr(0x51), 100 * USDC, T0 + timedelta(days=11))  # some spending
    funded = c.t(company, EMPLOYER, 250_000 * USDC, T0 + timedelta(days=22))
    repaid = c.t(ME, EMPLOYER, 5000 * USDC, T0 + timedelta(days=23))
    salary = c.t(EMPLOYER, ME, 5000 * USDC, T0 + timedelta(days=24))
    outcome = one_record([advance, funded, repaid, salary], EMPLOYER, 5000, salary.timestamp.date())
    assert outcome.figures.status == "verified" and outcome.findings == []
    # The same payments without the advance: the user's own 5,000 back from the named payer.
    outcome = one_record([funded, repaid, salary], EMPLOYER, 5000, salary.timestamp.date())
    assert outcome.figures.status == "unverified"
    assert {f.transfer for f in outcome.findings} == {repaid, salary}


def test_a_loan_cycled_as_monthly_salary_is_caught_from_the_second_month():
    """A friend's 3,000 reaches the named payer once; it pays the user 3,000 as January's salary, the user
    sends it back, and it pays it again as February's. Money a record claims is the user's once received:
    February's salary is the user's money back."""
    c = Chain()
    payer = addr(0xB0)
    days = [date(2026, 1, 25), date(2026, 2, 25)]
    at = [datetime.combine(d, datetime.min.time(), UTC) + timedelta(hours=12) for d in days]
    lent = c.t(addr(0xF1), payer, 3000 * USDC, at[0] - timedelta(days=3))
    january = c.t(payer, ME, 3000 * USDC, at[0])
    back = c.t(ME, payer, 3000 * USDC, at[0] + timedelta(days=10))
    february = c.t(payer, ME, 3000 * USDC, at[1])
    records = [IncomeRecord("paystream", "payroll", d, Decimal(3000), payer) for d in days]
    outcome = verify([Wallet("wal_1", ME, "local")], [lent, january, back, february], records,
                     [Platform("paystream", "payroll", frozenset())], ["2026-01", "2026-02"], CONFIG)
    assert [p.verified for p in outcome.periods] == [True, False]
    assert {f.transfer for f in outcome.findings} == {back, february}


def test_an_opening_balance_from_the_index_is_never_the_users_money():
    """An employer whose treasury is older than the history read pays a salary the day after the user
    bought 45% of a salary's worth from it. Its opening balance (from the index) dilutes the purchase in
    the pool; last in first out finds 45%; the earmark 45%: clean. The payout is named in the trace's
    opaque list: most of it came from money held before the history."""
    c = Chain()
    bought = c.t(ME, EMPLOYER, 2250 * USDC, T0 + timedelta(days=23))
    salary = c.t(EMPLOYER, ME, 5000 * USDC, T0 + timedelta(days=24))
    record = IncomeRecord("paystream", "payroll", salary.timestamp.date(), Decimal(5000), EMPLOYER)
    outcome = verify([Wallet("wal_1", ME, "local")], [bought, salary], [record],
                     [Platform("paystream", "payroll", frozenset())], ["2026-01"], CONFIG,
                     openings={"local": {EMPLOYER: 10**6 * USDC * 10**12}})
    assert outcome.figures.status == "verified" and outcome.findings == []
    (opaque,) = outcome.trace.opaque
    assert (opaque.transfer, opaque.reason, opaque.address) == (salary, "held_before_history", EMPLOYER)
    assert opaque.units == 2750 * USDC * 10**12


def test_money_kept_in_an_omnibus_is_named_not_guessed():
    """The user deposits 15,000 at an exchange's hot wallet (dozens of strangers a day use it); weeks later
    the exchange pays a fresh address 5,000, which pays the user as the record's salary. The chain cannot
    tell whose money the exchange paid out: nothing is flagged, the payout is named as `omnibus` with the
    15,000 the user keeps there."""
    c = Chain()
    hub, payer = addr(0xE0), addr(0xB7)
    moves = [c.t(addr(0x1000 + i), hub, 900 * USDC, T0 + timedelta(minutes=20 * i)) for i in range(40)]
    deposit = c.t(ME, hub, 15_000 * USDC, T0 + timedelta(days=1))
    moves += [c.t(addr(0x2000 + i), hub, 700 * USDC, T0 + timedelta(days=20, minutes=9 * i))
              for i in range(80)]
    withdrawal = c.t(hub, payer, 5000 * USDC, T0 + timedelta(days=21))
    salary = c.t(payer, ME, 5000 * USDC, T0 + timedelta(days=24))
    outcome = one_record([*moves, deposit, withdrawal, salary], payer, 5000, salary.timestamp.date())
    assert outcome.figures.status == "verified" and outcome.findings == []
    (opaque,) = outcome.trace.opaque
    assert (opaque.transfer, opaque.reason, opaque.address) == (salary, "omnibus", hub)
    assert opaque.units == 15_000 * USDC * 10**12


# --- matching and the VIP ----------------------------------------------------------------------------------

def months(n: int, day: int = 25) -> list[date]:
    return [date(2026, m, day) for m in range(1, n + 1)]


def run(transfers, records, periods, wallets=None):
    wallets = wallets or [Wallet("wal_1", ME, "local")]
    return verify(wallets, transfers, records, [PLATFORM], periods, CONFIG)


def test_six_honest_salaries_verified():
    c = Chain()
    days = months(6)
    transfers = [c.t(EMPLOYER, ME, 5000 * USDC, datetime.combine(d, datetime.min.time(), UTC)
                     + timedelta(hours=14)) for d in days]
    outcome = run(transfers, salary_records(Decimal(5000), days), [f"2026-0{m}" for m in range(1, 7)])
    assert outcome.figures.status == "verified"
    assert outcome.figures.verified_monthly_income == Decimal(5000)
    assert outcome.figures.income_variance == 0
    labels = outcome.labels[Wallet("wal_1", ME, "local")]
    assert {lbl.classification for lbl in labels.values()} == {"verified_income"}
    assert all(lbl.payroll_match["match_confidence"] == "exact" for lbl in labels.values())


def test_a_flag_stored_by_an_earlier_run_is_kept_and_the_transfer_never_matches():
    """Decision 163: a transfer an earlier run flagged stays flagged, so no later run makes it income."""
    c = Chain()
    days = months(2)
    transfers = [c.t(EMPLOYER, ME, 5000 * USDC, datetime.combine(d, datetime.min.time(), UTC)
                     + timedelta(hours=14)) for d in days]
    wallet = Wallet("wal_1", ME, "local")
    records = salary_records(Decimal(5000), days)
    prior = {(ME, transfers[0].key): ("ERR_CIRCULAR_FLOW", "ERR_UNVERIFIED_SOURCE")}
    outcome = verify([wallet], transfers, records, [PLATFORM], ["2026-01", "2026-02"], CONFIG,
                     prior_flags=prior)
    first, second = (outcome.labels[wallet][t.key] for t in transfers)
    assert first.classification == "circular" and first.fraud_flags == ("ERR_CIRCULAR_FLOW",)
    assert first.payroll_match is None
    assert second.classification == "verified_income"
    assert [r.verified for r in outcome.periods] == [False, True]
    assert [(f.transfer, f.code, f.funding) for f in outcome.findings] == [
        (transfers[0], "ERR_CIRCULAR_FLOW", None)]
    # The same inputs again: the same labels.
    again = verify([wallet], transfers, records, [PLATFORM], ["2026-01", "2026-02"], CONFIG,
                   prior_flags=prior)
    assert again.labels == outcome.labels


def test_shortfalls_give_tiers_and_a_mismatch_with_details():
    c = Chain()
    days = months(3)
    received = [Decimal("4925"), Decimal("4800"), Decimal("4650")]  # 1.5%, 4%, 7% short
    transfers = [c.t(EMPLOYER, ME, int(r * USDC), datetime.combine(d, datetime.min.time(), UTC))
                 for r, d in zip(received, days, strict=True)]
    outcome = run(transfers, salary_records(Decimal(5000), days), ["2026-01", "2026-02", "2026-03"])
    assert [p.confidence for p in outcome.periods] == ["close", "approximate", None]
    assert outcome.figures.status == "partially_verified"
    body = vip_report(outcome, vip_id="vip_1", user_id="usr_1", generated_at=T0)
    (missing,) = body["unverified_periods"]
    assert missing["reason_codes"] == [INCOME_MISMATCH]
    assert missing["reasons"][0]["details"] == {
        "expected_amount": Decimal(5000), "received_amount": Decimal(4650), "tolerance_pct": Decimal("0.05"),
        "actual_variance_pct": Decimal("0.07"), "tx_hash": transfers[2].tx_hash}


def noon_of(d: date, minutes: int = 0) -> datetime:
    return datetime.combine(d, datetime.min.time(), UTC) + timedelta(hours=12, minutes=minutes)


def test_a_salary_in_several_transfers_is_matched_as_a_sum_and_every_transfer_is_income():
    """Money, not transfers: a record settled by two or three transfers of its payer within its window,
    the tier on the sum; every transfer labelled, the first standing for the period, all of them listed."""
    c = Chain()
    days = months(3)
    parts = [[2500, 2500], [3000, 1000, 1000], [4900, 98]]  # exact, exact, close (0.04% short)
    transfers = [[c.t(EMPLOYER, ME, amount * USDC, noon_of(d, 7 * i), token="USDT" if i else "USDC")
                  for i, amount in enumerate(split)] for d, split in zip(days, parts, strict=True)]
    outcome = run([t for split in transfers for t in split], salary_records(Decimal(5000), days),
                  ["2026-01", "2026-02", "2026-03"])
    assert outcome.figures.status == "verified"
    assert [p.confidence for p in outcome.periods] == ["exact", "exact", "close"]
    assert [p.received for p in outcome.periods] == [Decimal(5000), Decimal(5000), Decimal(4998)]
    labels = outcome.labels[Wallet("wal_1", ME, "local")]
    assert all(labels[t.key].classification == "verified_income" for split in transfers for t in split)
    body = vip_report(outcome, vip_id="vip_1", user_id="usr_1", generated_at=T0)
    for period, split in zip(body["verified_periods"], transfers, strict=True):
        assert period["tx_hash"] == split[0].tx_hash
        assert [x["tx_hash"] for x in period["transfers"]] == [t.tx_hash for t in split]
        assert sum(x["amount_usd"] for x in period["transfers"]) == period["received_amount"]


def test_one_transfer_settles_several_records_and_is_never_counted_twice():
    """A salary and a reimbursement recorded apart, paid together: one transfer settles both (the sum in
    a tier), each record counts its own amount. A transfer counted once is not counted again: two records
    of 5,000 with one transfer of 5,000 settle one of them only."""
    c = Chain()
    d = date(2026, 1, 25)
    together = c.t(EMPLOYER, ME, 5300 * USDC, noon_of(d))
    records = [IncomeRecord("paystream", "payroll", d, Decimal(5000), EMPLOYER, PLATFORM.whitelist),
               IncomeRecord("paystream", "expenses", d - timedelta(days=1), Decimal(300), EMPLOYER,
                            PLATFORM.whitelist)]
    outcome = run([together], records, ["2026-01"])
    (period,) = outcome.periods
    assert period.verified and period.confidence == "exact" and period.received == Decimal(5300)
    assert sorted(m.received for m in period.records) == [Decimal(300), Decimal(5000)]
    assert period.transfers == [together]
    twice = run([c.t(EMPLOYER, ME, 5000 * USDC, noon_of(d))], salary_records(Decimal(5000), [d, d]),
                ["2026-01"])
    assert not twice.periods[0].verified
    assert [bool(m.transfers) for m in twice.periods[0].records] == [True, False]


def test_a_sum_short_of_every_tier_names_the_closest_sum():
    c = Chain()
    d = date(2026, 1, 25)
    parts = [c.t(EMPLOYER, ME, 2500 * USDC, noon_of(d)), c.t(EMPLOYER, ME, 2000 * USDC, noon_of(d, 3))]
    outcome = run(parts, salary_records(Decimal(5000), [d]), ["2026-01"])
    (reason,) = outcome.periods[0].reasons()
    assert reason["code"] == INCOME_MISMATCH
    assert reason["details"]["received_amount"] == Decimal(4500)
    assert reason["details"]["tx_hashes"] == [t.tx_hash for t in parts]


def test_a_refund_from_the_employer_is_not_part_of_the_salary():
    """Only transfers a sum needs are taken: the salary settles the record, a refund beside it from the
    same payer stays out of it (and, no record needing it, is not taken for income)."""
    c = Chain()
    d = date(2026, 1, 25)
    bought = c.t(ME, EMPLOYER, 300 * USDC, noon_of(d) - timedelta(days=2))
    refund = c.t(EMPLOYER, ME, 300 * USDC, noon_of(d, -60))
    salary = c.t(EMPLOYER, ME, 5000 * USDC, noon_of(d))
    outcome = run([bought, refund, salary], salary_records(Decimal(5000), [d]), ["2026-01"])
    assert outcome.periods[0].transfers == [salary] and outcome.findings == []
    assert outcome.labels[Wallet("wal_1", ME, "local")][refund.key].classification == "p2p"


def test_salary_washed_back_is_not_income_and_unknown_origin_is_flagged():
    c = Chain()
    d = date(2026, 1, 25)
    at = datetime.combine(d, datetime.min.time(), UTC)
    pay = c.t(EMPLOYER, ME, 5000 * USDC, at)
    back = c.t(ME, EMPLOYER, 5000 * USDC, at + timedelta(hours=3))
    stranger = c.t(addr(77), ME, 40 * USDC, at + timedelta(days=1))
    outcome = run([pay, back, stranger], salary_records(Decimal(5000), [d]), ["2026-01"])
    assert outcome.figures.status == "unverified"
    assert outcome.periods[0].reasons()[0]["code"] == WASH_TRADE
    labels = outcome.labels[Wallet("wal_1", ME, "local")]
    assert labels[pay.key].classification == "wash_trade"
    assert labels[back.key].fraud_flags == (WASH_TRADE,)
    assert labels[stranger.key].classification == "unknown"
    assert labels[stranger.key].fraud_flags == (UNVERIFIED_SOURCE,)
    body = vip_report(outcome, vip_id="vip_1", user_id="usr_1", generated_at=T0)
    assert body["error_code"] == INSUFFICIENT_HISTORY
    assert {f["tx_hash"] for f in body["fraud_flags"]} == {pay.tx_hash, back.tx_hash}


def test_payout_from_an_unknown_origin_names_it():
    c = Chain()
    d = date(2026, 1, 25)
    stranger = c.t(addr(77), ME, 5000 * USDC, datetime.combine(d, datetime.min.time(), UTC))
    outcome = run([stranger], salary_records(Decimal(5000), [d]), ["2026-01"])
    assert [r["code"] for r in outcome.periods[0].reasons()] == [UNVERIFIED_SOURCE, INCOME_MISMATCH]


def test_missing_record_month_and_dex_and_circle_labels():
    c = Chain()
    dex = addr(0xDE)
    config = VerificationConfig(dex_addresses={"local": (dex,)})
    d = date(2026, 1, 25)
    at = datetime.combine(d, datetime.min.time(), UTC)
    transfers = [c.t(EMPLOYER, ME, 5000 * USDC, at), c.t(ME, dex, 100 * USDC, at + timedelta(days=1)),
                 c.t(ME, addr(1), 900 * USDC, at + timedelta(days=2)),
                 c.t(addr(1), addr(2), 900 * USDC, at + timedelta(days=3)),
                 c.t(addr(2), ME, 900 * USDC, at + timedelta(days=4))]
    wallet = Wallet("wal_1", ME, "local")
    outcome = verify([wallet], transfers, salary_records(Decimal(5000), [d]), [PLATFORM],
                     ["2026-01", "2026-02"], config)
    labels = outcome.labels[wallet]
    assert [labels[t.key].classification for t in transfers if t.key in labels] == [
        "verified_income", "dex_trade", "circular", "circular"]
    assert labels[transfers[2].key].fraud_flags == (CIRCULAR_FLOW,)
    assert outcome.periods[1].reasons() == [{"code": INSUFFICIENT_HISTORY,
                                             "message": "no income record for this period"}]
    assert outcome.figures.status == "partially_verified"


def test_classify_inbound_from_whitelisted_but_unmatched_is_p2p():
    c = Chain()
    bonus = c.t(EMPLOYER, ME, 10 * USDC, T0)
    labels = classify(ME, [bonus], home={ME}, fraud={}, income={}, whitelisted={EMPLOYER}, dex=set())
    assert labels[bonus.key].classification == "p2p"


def test_figures():
    assert lookback_periods(datetime(2026, 2, 10, tzinfo=UTC), 3) == ["2025-11", "2025-12", "2026-01"]
    assert population_stdev([Decimal(2), Decimal(4), Decimal(4), Decimal(4), Decimal(5), Decimal(5),
                             Decimal(7), Decimal(9)]) == 2
    assert figures([]).status == "unverified"


def test_vip_window_ends_with_the_current_month_once_its_payout_is_dated_on_or_before_now():
    now = datetime(2026, 11, 25, 15, tzinfo=UTC)
    earlier = [date(2026, m, 20) for m in range(5, 11)]
    # A November payout dated 2026-11-20: November is in, 2026-06..2026-11.
    assert vip_periods(now, 6, [*earlier, date(2026, 11, 20)]) == [
        "2026-06", "2026-07", "2026-08", "2026-09", "2026-10", "2026-11"]
    # Dated today counts ("on or before now"), whatever the hour.
    assert vip_periods(now, 6, [date(2026, 11, 25)])[-1] == "2026-11"
    # No November payout: the six months before, 2026-05..2026-10.
    assert vip_periods(now, 6, earlier) == ["2026-05", "2026-06", "2026-07", "2026-08", "2026-09", "2026-10"]
    # A payout dated 2026-11-28 is not money received yet: it does not move the window.
    assert vip_periods(now, 6, [*earlier, date(2026, 11, 28)]) == vip_periods(now, 6, earlier)
    # Last year's November is not this November; across the new year the window wraps.
    assert vip_periods(now, 6, [date(2025, 11, 20)])[-1] == "2026-10"
    assert vip_periods(datetime(2027, 1, 3, tzinfo=UTC), 3, [date(2027, 1, 2)]) == ["2026-11", "2026-12",
                                                                                    "2027-01"]
    assert vip_periods(datetime(2027, 1, 3, tzinfo=UTC), 3, []) == ["2026-10", "2026-11", "2026-12"]
    # Always `months` periods.
    assert len(vip_periods(now, 12, [date(2026, 11, 1)])) == 12


def test_every_record_labels_its_transfer_as_income_in_or_out_of_the_window():
    """A payout matched to any record of the user is verified_income with its payroll_match, whether or
    not the VIP's window covers its month; only the window's periods make the figures; a self-funded
    payout matching a record is never income (the fraud rule wins)."""
    c = Chain()
    days = months(6)
    at = [datetime.combine(d, datetime.min.time(), UTC) + timedelta(hours=14) for d in days]
    # January's "salary" is the user's own money sent to the payer an hour before.
    own = c.t(ME, EMPLOYER, 5000 * USDC, at[0] - timedelta(hours=1))
    pays = [c.t(EMPLOYER, ME, 5000 * USDC, moment) for moment in at]
    outcome = run([own, *pays], salary_records(Decimal(5000), days), ["2026-05", "2026-06"])
    assert [p.period for p in outcome.periods] == ["2026-05", "2026-06"]
    assert outcome.figures.status == "verified" and outcome.figures.periods_requested == 2
    labels = outcome.labels[Wallet("wal_1", ME, "local")]
    assert labels[pays[0].key].classification == "wash_trade"
    assert labels[pays[0].key].payroll_match is None
    for month, pay in zip(range(2, 7), pays[1:], strict=True):
        assert labels[pay.key].classification == "verified_income"
        assert labels[pay.key].payroll_match == {"matched": True, "payroll_period": f"2026-0{month}",
                                                 "origin_platform": "paystream", "match_confidence": "exact"}


# --- cash flow and score -----------------------------------------------------------------------------------

def test_average_balance_is_time_weighted_from_the_end_balance():
    start, end = T0, T0 + timedelta(days=10)
    # 100 held for 5 days, then +100: 150 on average; a flow after the end is undone first.
    flows = [(T0 + timedelta(days=5), 100), (T0 + timedelta(days=12), 50)]
    assert average_balance(250, flows, start, end) == 150


def test_recurring_obligations_and_lending_repayments():
    c = Chain()
    rent, lender = addr(300), addr(400)
    outs = [c.t(ME, rent, 1500 * USDC, datetime(2026, m, 1, tzinfo=UTC)) for m in range(1, 5)]
    outs += [c.t(ME, lender, 300 * USDC, datetime(2026, 2, 3, tzinfo=UTC))]
    outs += [c.t(ME, addr(500), 80 * USDC, datetime(2026, 1, 9, tzinfo=UTC))]
    found = obligations(outs, ["2026-01", "2026-02", "2026-03", "2026-04"], {lender}, min_months=3,
                        tolerance=Decimal("0.1"))
    assert [(o.counterparty, o.monthly_usd, o.lending_protocol) for o in found] == [
        (rent, Decimal(1500), False), (lender, Decimal(75), True)]


def score_of(**overrides):
    values = {"periods_requested": 6, "periods_verified": 6, "consistency_rate": Decimal(1),
              "longest_streak_months": 6, "verified_monthly_income": Decimal(5000),
              "average_usdc_balance": Decimal(15000), "obligations": (), "fraud_flag_count": 0}
    values.update(overrides)
    return ScoreInputs(**values)


def test_pillars_composite_and_recommendation():
    config = ScoringConfig()
    p = pillars(score_of(), config)
    assert {k: v["score"] for k, v in p.items()} == {"consistency": 1000, "volume": 500,
                                                     "liquidity_buffer": 1000, "leverage": 1000}
    assert composite(p) == 875  # 400 + 125 + 200 + 150
    assert recommendation(875, 0, config) == "approve"
    assert recommendation(875, 1, config) == "refer"  # the fraud cap
    assert recommendation(399, 1, config) == "decline"
    assert p["volume"]["details"]["income_tier"] == "mid"
    assert credit_limit(Decimal(5000), config) == Decimal(10000)
    assert adverse_action_reasons(p, "approve", 0, config) == []
    reasons = adverse_action_reasons(p, "refer", 1, config)
    assert [r["code"] for r in reasons] == ["AA_FRAUD_SIGNALS", "AA_INCOME_LEVEL"]


def test_weak_file_declines_with_at_most_four_reasons_weakest_first():
    config = ScoringConfig()
    debt = Obligation(addr(1), "local", Decimal(900), 6, True, Decimal(5400), 6)
    p = pillars(score_of(periods_verified=1, consistency_rate=Decimal("0.1667"), longest_streak_months=1,
                         verified_monthly_income=Decimal(1000), average_usdc_balance=Decimal(100),
                         obligations=(debt,), fraud_flag_count=2), config)
    score = composite(p)
    rec = recommendation(score, 2, config)
    assert rec == "decline"
    reasons = adverse_action_reasons(p, rec, 2, config)
    assert len(reasons) == 4 and reasons[0]["code"] == "AA_FRAUD_SIGNALS"
    assert [r["score"] for r in reasons[1:]] == sorted(r["score"] for r in reasons[1:])
    assert p["leverage"]["details"]["on_chain_debt_signals"][0]["address"] == addr(1)
    assert income_tier(Decimal(1000), config) == "low"


@given(scores=st.lists(st.integers(0, 1000), min_size=4, max_size=4))
def test_composite_is_the_spec_formula_rounded_half_up(scores):
    p = {name: {"score": s} for name, s in zip(("consistency", "volume", "liquidity_buffer", "leverage"),
                                                scores, strict=True)}
    exact = Decimal(scores[0]) * Decimal("0.4") + Decimal(scores[1]) * Decimal("0.25") + \
        Decimal(scores[2]) * Decimal("0.2") + Decimal(scores[3]) * Decimal("0.15")
    assert composite(p) == int(exact + Decimal("0.5"))
    assert 0 <= composite(p) <= 1000


@given(expected=st.integers(1, 10**30), permille=st.integers(-80, 80), nudge=st.integers(-1, 1),
       scale=st.integers(0, 18))
def test_tiers_agree_with_exact_rational_arithmetic(expected, permille, nudge, scale):
    """Amounts far beyond a float's 53 bits, right at the tier edges: the tier is what exact fractions
    say, never a rounding."""
    from fractions import Fraction

    received = max(0, expected + expected * permille // 1000 + nudge)
    # scaleb in the default context (28 digits) would round the amounts the test means to be exact
    e, r = Decimal(expected).scaleb(-scale, EXACT), Decimal(received).scaleb(-scale, EXACT)
    gap = Fraction(abs(received - expected), expected)
    want = ("exact" if gap == 0 else "close" if gap <= Fraction(2, 100)
            else "approximate" if gap <= Fraction(5, 100) else None)
    assert tier(e, r, MatchingConfig()) == want
