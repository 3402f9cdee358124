"""The whole verification of one user, as one pure function: fraud rules on every network (the funding
trace of every inbound transfer, the pass-through), payroll matching over all wallets, labels of every
transfer, the VIP figures and the VIP report body."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from vip.verification.classify import classify
from vip.verification.config import MatchingConfig, VerificationConfig
from vip.verification.fraud import Funding, FundingLedger, FundingPool, find_wash_trades, trace_funding
from vip.verification.matching import PeriodResult, match_income, tier
from vip.verification.model import (
    CIRCULAR_FLOW,
    EXACT,
    FRAUD_TYPES,
    INSUFFICIENT_HISTORY,
    WASH_TRADE,
    IncomeRecord,
    Label,
    Transfer,
    TransferKey,
)
from vip.verification.profile import Figures, figures, usd

MAX_REPORTED_FLAGS = 200  # the VIP lists at most this many flagged transfers (all are labelled)
MAX_REPORTED_UNTRACED = 50  # and at most this many addresses the trace could not follow
SHARE_PLACES = Decimal("0.0001")


@dataclass(frozen=True)
class Wallet:
    id: str
    address: str  # lower-case
    network: str


@dataclass(frozen=True)
class Platform:
    id: str
    source_type: str
    whitelist: frozenset[str]


@dataclass(frozen=True)
class Finding:
    wallet: Wallet
    transfer: Transfer
    code: str  # WASH_TRADE or CIRCULAR_FLOW
    funding: Funding | None = None  # the trace's evidence (None: a round trip found by the wash rule)


@dataclass(frozen=True)
class TraceSummary:
    """What the funding trace covered: inbound transfers traced, self-funded, and what it could not
    follow (an address whose history was not fetched: the fetch cap, or a fetch not finished in time)."""

    traced: int = 0
    self_funded: int = 0
    untraced: list[tuple[str, str, str]] = field(default_factory=list)  # (network, address, inbound tx)
    capped: bool = False


@dataclass(frozen=True)
class Outcome:
    periods: list[PeriodResult]
    figures: Figures
    labels: dict[Wallet, dict[TransferKey, Label]]
    findings: list[Finding]
    wallet: Wallet | None  # the wallet that received most verified income (else the first)
    platform: Platform | None  # the platform whose records were matched most (else the first)
    own_transfers: list[Transfer]  # every transfer of the wallets (once, even between two of them)
    trace: TraceSummary = TraceSummary()


def could_be_income(t: Transfer, records: Sequence[IncomeRecord], config: MatchingConfig) -> bool:
    """An inbound transfer some income record of the user could be paid by: from an origin the record
    accepts (its `from_reference` or its platform's whitelist: a named payer is traced like any other
    address, never exempt), its amount within the approximate tier of the record's, landing in the
    record's matching window."""
    day = t.timestamp.date()
    for r in records:
        if (r.accepts_origin(t.from_address) and r.record_date - timedelta(days=config.days_before) <= day
                <= r.record_date + timedelta(days=config.days_after)
                and tier(r.amount, t.usd(), config) is not None):
            return True
    return False


def verify(wallets: Sequence[Wallet], transfers: Sequence[Transfer], records: Sequence[IncomeRecord],
           platforms: Sequence[Platform], periods: Sequence[str], config: VerificationConfig, *,
           known: Mapping[str, Collection[str]] | None = None, capped: Collection[str] = (),
           prior_flags: Mapping[tuple[str, TransferKey], Collection[str]] | None = None) -> Outcome:
    """`periods`: the VIP's window (its figures); `records`: every inbound income record of the user (all of
    them label the transfers they match, in the window or not). `transfers`: every indexed transfer from
    the earliest of those (less the matching and trace windows) that touches the wallets or the addresses
    fetched for the funding trace. `known`: per network, the addresses whose history in the window is complete
    (None: every address `transfers` mentions); `capped`: networks where the trace's fetch hit its cap.
    `prior_flags`: wash and circular flags an earlier run raised, by (wallet address, transfer key): kept
    as if raised now (without evidence), so a flagged transfer never becomes income (decision 163)."""
    by_network: dict[str, list[Transfer]] = defaultdict(list)
    for t in transfers:
        by_network[t.network].append(t)
    whitelisted = frozenset(a for p in platforms for a in p.whitelist) | frozenset(
        r.from_reference for r in records if r.from_reference)
    trace_config = config.funding_trace
    flags: dict[tuple[str, TransferKey], set[str]] = defaultdict(set)  # (wallet address, key) -> codes
    # The trace's evidence, per flag it raised: a transfer the wash rule also flags carries none for that.
    evidence: dict[tuple[str, TransferKey, str], Funding] = {}
    own: dict[Wallet, list[Transfer]] = {}
    inflows: list[Transfer] = []
    traced = self_funded = 0
    untraced: list[tuple[str, str, str]] = []
    for network in sorted({w.network for w in wallets}):
        mine = [w for w in wallets if w.network == network]
        home = frozenset(w.address for w in mine)
        everything = by_network.get(network, [])
        touching = [t for t in everything if t.from_address in home or t.to_address in home]
        arriving = sorted((t for t in touching if t.to_address in home and t.from_address not in home),
                          key=lambda t: t.order)
        candidates = {t.key for t in arriving if could_be_income(t, records, config.matching)}
        for w in mine:
            own[w] = [t for t in touching if w.address in (t.from_address, t.to_address)]
            # Between two of the user's wallets is neither: it is the same person's money.
            for key in find_wash_trades(w.address, own[w], config.wash_trade,
                                        skip=home | set(config.dex_addresses.get(network, ())),
                                        claimable=candidates):
                flags[(w.address, key)].add(WASH_TRADE)
        ledger = FundingLedger(everything, trace_config.max_pieces)
        network_known = None if known is None else frozenset(known.get(network, ())) | home
        # Two accountings of the same money, the larger share counts: last in first out (money passed
        # on at once, through hubs too) for every inbound transfer, and the pool (money that stopped over
        # while other money arrived) for those that could pass for income.
        pool = FundingPool(everything, home, trace_config, network_known,
                           payers={t.from_address for t in arriving if t.key in candidates})
        for t in arriving:
            funding = trace_funding(t, ledger, home, trace_config, network_known)
            pooled = pool.funding(t) if t.key in candidates else None
            if pooled is not None and pooled.share > funding.share and pooled.path:
                funding = Funding(t, pooled.own_units, pooled.path, funding.untraced, pooled.origins)
            traced += 1
            untraced += [(network, address, t.tx_hash) for address in sorted(funding.untraced)]
            # Self-funded money is flagged when it could pass for income, and always when it went round
            # through two or more intermediaries; one that came straight back from the address the user
            # paid and no record could claim is a refund or a loan repaid (docs/verification.md).
            if not funding.self_funded(trace_config) or (
                    funding.intermediaries < 2 and t.key not in candidates):
                continue
            self_funded += 1
            code = WASH_TRADE if funding.intermediaries == 1 else CIRCULAR_FLOW
            # The inbound transfer and every payment of the user's wallets found in it.
            for side in [(t.to_address, t.key), *((o.from_address, o.key) for o in funding.origins)]:
                flags[side].add(code)
                evidence[(*side, code)] = funding
        inflows += arriving
    for side, codes in (prior_flags or {}).items():
        flags[side] |= {c for c in codes if c in FRAUD_TYPES}
    flagged_keys: dict[TransferKey, tuple[str, ...]] = {}
    for (_, key), codes in flags.items():
        flagged_keys[key] = tuple(sorted(set(flagged_keys.get(key, ())) | codes))

    # Every record of the user is matched, not only the window's (decision 131): a transfer paying a
    # record is verified income whichever VIP window it falls in; the window's periods make the figures.
    window = set(periods)
    every_period = sorted(window | {r.period for r in records})
    matched = {r.period: r for r in match_income(every_period, records, inflows, flagged_keys,
                                                 config.matching)}
    results = [matched[p] for p in periods]
    income: dict[TransferKey, dict[str, Any]] = {}
    platform_hits: Counter[str] = Counter()
    received_by: Counter[str] = Counter()
    for result in matched.values():
        for m in result.records:
            if m.transfer is None:
                continue
            income[m.transfer.key] = {"matched": True, "payroll_period": result.period,
                                      "origin_platform": m.record.platform,
                                      "match_confidence": m.confidence}
            if result.period in window:
                platform_hits[m.record.platform] += 1
                received_by[m.transfer.to_address] += m.transfer.amount

    labels: dict[Wallet, dict[TransferKey, Label]] = {}
    findings: list[Finding] = []
    for w, items in own.items():
        home = frozenset(x.address for x in wallets if x.network == w.network)
        view = {t.key: tuple(sorted(flags.get((w.address, t.key), ()))) for t in items}
        labels[w] = classify(w.address, items, home=home, fraud={k: v for k, v in view.items() if v},
                             income=income, whitelisted=whitelisted,
                             dex=set(config.dex_addresses.get(w.network, ())))
        findings.extend(Finding(w, t, code, evidence.get((w.address, t.key, code)))
                        for t in items for code in view[t.key])
    findings.sort(key=lambda f: (f.transfer.timestamp, f.transfer.order, f.wallet.address, f.code))

    primary = max(wallets, key=lambda w: (received_by[w.address], -wallets.index(w)), default=None)
    by_id = {p.id: p for p in platforms}
    platform = by_id.get(platform_hits.most_common(1)[0][0]) if platform_hits else (
        platforms[0] if platforms else None)
    own_once = {t.key: t for items in own.values() for t in items}
    summary = TraceSummary(traced, self_funded, untraced, bool(set(capped)))
    return Outcome(results, figures(results), labels, findings, primary, platform, list(own_once.values()),
                   summary)


def vip_report(outcome: Outcome, *, vip_id: str, user_id: str, generated_at: datetime,
               currency: str = "USD", config: VerificationConfig | None = None) -> dict[str, Any]:
    """The spec's VIP report for a finished pipeline (status verified, partially_verified or unverified)."""
    fig = outcome.figures
    verified, unverified = [], []
    for result in outcome.periods:
        main = result.main
        if result.verified and main is not None and main.transfer is not None:
            t = main.transfer
            verified.append({
                "period": result.period, "expected_amount": usd(result.expected),
                "received_amount": usd(result.received), "tx_hash": t.tx_hash,
                "payout_date": main.record.record_date.isoformat(),
                "block_timestamp": _iso(t.timestamp), "origin_address": t.from_address,
                "match_confidence": result.confidence, "verified": True})
        else:
            reasons = result.reasons()
            unverified.append({
                "period": result.period, "expected_amount": usd(result.expected),
                "received_amount": usd(result.received), "verified": False,
                "reason_codes": sorted({r["code"] for r in reasons}), "reasons": reasons})
    platform = outcome.platform
    body: dict[str, Any] = {
        "id": vip_id, "user_id": user_id, "generated_at": _iso(generated_at), "status": fig.status,
        "verified_monthly_income_usd": fig.verified_monthly_income, "income_currency": currency,
        "verification_method": "deterministic_match",
        "data_source_type": platform.source_type if platform else None,
        "data_source_platform": platform.id if platform else None,
        "payroll_platform": platform.id if platform else None,
        "periods_verified": fig.periods_verified, "periods_requested": fig.periods_requested,
        "consistency_rate": fig.consistency_rate, "average_verified_amount": fig.average_verified_amount,
        "income_variance": fig.income_variance, "verified_periods": verified,
        "unverified_periods": unverified, "fraud_flags": fraud_flags_json(outcome.findings),
        "wallet_address": outcome.wallet.address if outcome.wallet else None,
        "network": outcome.wallet.network if outcome.wallet else None,
        "error_code": INSUFFICIENT_HISTORY if fig.status == "unverified" else None,
        "fraud_trace": fraud_trace_json(outcome.trace, config),
    }
    return body


def fraud_trace_json(trace: TraceSummary, config: VerificationConfig | None = None) -> dict[str, Any]:
    """What the funding trace covered, and what it could not follow (the fetch cap hit, a fetch not
    finished in time): a lender reads here how far the fraud flags can be trusted."""
    settings = (config or VerificationConfig()).funding_trace
    return {"window_days": settings.window_days, "max_hops": settings.max_hops,
            "self_funded_share": settings.self_funded_share, "transfers_traced": trace.traced,
            "self_funded": trace.self_funded, "fetch_cap_hit": trace.capped,
            "untraced_count": len(trace.untraced),
            "untraced": [{"network": n, "address": a, "tx_hash": h}
                         for n, a, h in trace.untraced[:MAX_REPORTED_UNTRACED]]}


def share(funding: Funding) -> Decimal:
    value = funding.share
    return EXACT.divide(Decimal(value.numerator), Decimal(value.denominator)).quantize(
        SHARE_PLACES, ROUND_HALF_UP)


def evidence_json(funding: Funding | None) -> dict[str, Any] | None:
    """The trace's evidence of a flag: the share self-funded and the path of the largest contribution,
    from the user's wallet back to it (tx hashes, addresses, amounts)."""
    if funding is None:
        return None
    return {"rule": "funding_trace", "inbound_tx_hash": funding.transfer.tx_hash,
            "self_funded_share": share(funding), "intermediaries": funding.intermediaries,
            "path": [{"tx_hash": t.tx_hash, "log_index": t.log_index, "from_address": t.from_address,
                      "to_address": t.to_address, "amount_usd": usd(t.usd()),
                      "block_timestamp": _iso(t.timestamp)} for t in funding.path]}


def fraud_flags_json(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    return [{"code": f.code, "fraud_type": FRAUD_TYPES[f.code], "tx_hash": f.transfer.tx_hash,
             "log_index": f.transfer.log_index, "network": f.transfer.network, "wallet_id": f.wallet.id,
             "wallet_address": f.wallet.address, "amount_usd": usd(f.transfer.usd()),
             "block_timestamp": _iso(f.transfer.timestamp), "evidence": evidence_json(f.funding)}
            for f in findings[:MAX_REPORTED_FLAGS]]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")

