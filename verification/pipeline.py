"""The whole verification of one user, as one pure function: fraud rules on every network, payroll
matching over all wallets, labels of every transfer, the VIP figures and the VIP report body."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vip.verification.classify import classify
from vip.verification.config import VerificationConfig
from vip.verification.fraud import TransferGraph, find_circular_flows, find_wash_trades
from vip.verification.matching import PeriodResult, match_income
from vip.verification.model import (
    CIRCULAR_FLOW,
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


@dataclass(frozen=True)
class Outcome:
    periods: list[PeriodResult]
    figures: Figures
    labels: dict[Wallet, dict[TransferKey, Label]]
    findings: list[Finding]
    wallet: Wallet | None  # the wallet that received most verified income (else the first)
    platform: Platform | None  # the platform whose records were matched most (else the first)
    own_transfers: list[Transfer]  # every transfer of the wallets (once, even between two of them)


def verify(wallets: Sequence[Wallet], transfers: Sequence[Transfer], records: Sequence[IncomeRecord],
           platforms: Sequence[Platform], periods: Sequence[str], config: VerificationConfig) -> Outcome:
    """`transfers`: every indexed transfer of the window that touches the wallets or their fetched
    counterparties (the latter are what the cycle search walks)."""
    by_network: dict[str, list[Transfer]] = defaultdict(list)
    for t in transfers:
        by_network[t.network].append(t)
    whitelisted = frozenset(a for p in platforms for a in p.whitelist) | frozenset(
        r.from_reference for r in records if r.from_reference)
    flags: dict[tuple[str, TransferKey], set[str]] = defaultdict(set)  # (wallet address, key) -> codes
    own: dict[Wallet, list[Transfer]] = {}
    inflows: list[Transfer] = []
    for network in sorted({w.network for w in wallets}):
        mine = [w for w in wallets if w.network == network]
        home = frozenset(w.address for w in mine)
        everything = by_network.get(network, [])
        touching = [t for t in everything if t.from_address in home or t.to_address in home]
        for w in mine:
            own[w] = [t for t in touching if w.address in (t.from_address, t.to_address)]
            for key in find_wash_trades(w.address, own[w], config.wash_trade,
                                        skip=config.dex_addresses.get(network, ())):
                flags[(w.address, key)].add(WASH_TRADE)
        skip = dict.fromkeys(config.dex_addresses.get(network, ()), True) | dict.fromkeys(whitelisted, True)
        outbound = [t for t in touching if t.from_address in home]
        for address, key in find_circular_flows(home, TransferGraph(everything), outbound,
                                                config.circular_flow, skip=skip):
            flags[(address, key)].add(CIRCULAR_FLOW)
        inflows += [t for t in touching if t.to_address in home and t.from_address not in home]
    flagged_keys: dict[TransferKey, tuple[str, ...]] = {}
    for (_, key), codes in flags.items():
        flagged_keys[key] = tuple(sorted(set(flagged_keys.get(key, ())) | codes))

    results = match_income(periods, records, inflows, flagged_keys, config.matching)
    income: dict[TransferKey, dict[str, Any]] = {}
    platform_hits: Counter[str] = Counter()
    received_by: Counter[str] = Counter()
    for result in results:
        for m in result.records:
            if m.transfer is None:
                continue
            income[m.transfer.key] = {"matched": True, "payroll_period": result.period,
                                      "origin_platform": m.record.platform,
                                      "match_confidence": m.confidence}
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
        findings.extend(Finding(w, t, code) for t in items for code in view[t.key])
    findings.sort(key=lambda f: (f.transfer.timestamp, f.transfer.order, f.wallet.address, f.code))

    primary = max(wallets, key=lambda w: (received_by[w.address], -wallets.index(w)), default=None)
    by_id = {p.id: p for p in platforms}
    platform = by_id.get(platform_hits.most_common(1)[0][0]) if platform_hits else (
        platforms[0] if platforms else None)
    own_once = {t.key: t for items in own.values() for t in items}
    return Outcome(results, figures(results), labels, findings, primary, platform, list(own_once.values()))


def vip_report(outcome: Outcome, *, vip_id: str, user_id: str, generated_at: datetime,
               currency: str = "USD") -> dict[str, Any]:
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
    }
    return body


def fraud_flags_json(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    return [{"code": f.code, "fraud_type": FRAUD_TYPES[f.code], "tx_hash": f.transfer.tx_hash,
             "log_index": f.transfer.log_index, "network": f.transfer.network, "wallet_id": f.wallet.id,
             "wallet_address": f.wallet.address, "amount_usd": usd(f.transfer.usd()),
             "block_timestamp": _iso(f.transfer.timestamp)} for f in findings[:MAX_REPORTED_FLAGS]]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")

