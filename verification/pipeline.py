"""The whole verification of one user, as one pure function in named steps: screen every network for fraud
(`screening`: the pass-through rule, the funding trace of every inbound transfer), keep the flags earlier
runs raised, match every income record over all wallets, label every transfer, and choose the wallet and
platform the VIP names; then the VIP report body."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from vip.verification.classify import classify
from vip.verification.config import VerificationConfig
from vip.verification.funding import SCALE, Funding
from vip.verification.matching import PeriodResult, match_income
from vip.verification.model import (
    EXACT,
    FRAUD_TYPES,
    INSUFFICIENT_HISTORY,
    IncomeRecord,
    Label,
    Transfer,
    TransferKey,
    iso_z,
)
from vip.verification.profile import Figures, figures, usd
from vip.verification.screening import Opaque, Screening, Side, Wallet, prior_flags_into, screen_network

__all__ = ["Finding", "Outcome", "Platform", "TraceSummary", "Wallet", "verify", "vip_report"]

MAX_REPORTED_FLAGS = 200  # the VIP lists at most this many flagged transfers (all are labelled)
MAX_REPORTED_UNTRACED = 50  # and at most this many addresses the trace could not follow
MAX_REPORTED_OPAQUE = 50  # and at most this many payouts whose origin it could not see
SHARE_PLACES = Decimal("0.0001")


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
    """What the funding trace covered: inbound transfers traced, self-funded, what it could not follow (an
    address whose history was not fetched: the fetch cap, or a fetch not finished in time) and what it
    could not see (`opaque`); `history_from`: where the history it read begins."""

    traced: int = 0
    self_funded: int = 0
    untraced: list[tuple[str, str, str]] = field(default_factory=list)  # (network, address, inbound tx)
    capped: bool = False
    opaque: list[Opaque] = field(default_factory=list)
    history_from: datetime | None = None


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


@dataclass
class _Income:
    """What the matched records say: each income transfer's payroll_match, and in the window the matches
    per platform and the income received per wallet address."""

    labels: dict[TransferKey, dict[str, Any]] = field(default_factory=dict)
    platform_hits: Counter[str] = field(default_factory=Counter)
    received_by: Counter[str] = field(default_factory=Counter)


def verify(wallets: Sequence[Wallet], transfers: Sequence[Transfer], records: Sequence[IncomeRecord],
           platforms: Sequence[Platform], periods: Sequence[str], config: VerificationConfig, *,
           known: Mapping[str, Collection[str]] | None = None, capped: Collection[str] = (),
           prior_flags: Mapping[Side, Collection[str]] | None = None,
           history_from: datetime | None = None,
           openings: Mapping[str, Mapping[str, int]] | None = None,
           windowed: Mapping[str, Collection[str]] | None = None,
           unread: Mapping[str, Collection[str]] | None = None) -> Outcome:
    """`periods`: the VIP's window (its figures); `records`: every inbound income record of the user (all of
    them label the transfers they match, in the window or not). `transfers`: every indexed transfer from
    `history_from` (the earliest income examined less the trace's `history_days`) that touches the wallets
    or the addresses fetched for the funding trace. `known`: per network, the addresses whose history from
    then is complete (None: every address `transfers` mentions); `capped`: networks where the trace's fetch
    hit its cap. `prior_flags`: wash and circular flags an earlier run raised, by (wallet address, transfer
    key): kept as if raised now (without evidence), so a flagged transfer never becomes income (decision
    163). `openings`: per network, what addresses held (10^-18 USD) when the history begins, where the
    index knows it (their balance now less what the history added). `windowed`: per network, the omnibus
    addresses whose history was read only around the payments the trace follows (decision 355); `unread`:
    per network, the addresses the trace met at its last hop that the wallets never paid, whose history it
    did not read: at that depth only money paid straight from the wallets counts (decision 356)."""
    whitelisted = frozenset(a for p in platforms for a in p.whitelist) | frozenset(
        r.from_reference for r in records if r.from_reference)
    screening = _screen(wallets, transfers, records, config, known, whitelisted, openings, windowed or {},
                        unread or {})
    prior_flags_into(screening.flags, prior_flags, FRAUD_TYPES)
    matched = _match_every_record(periods, records, screening, config)
    income = _income(matched, set(periods))
    labels, findings = _label(wallets, screening, income, whitelisted, config)
    own_once = {t.key: t for items in screening.own.values() for t in items}
    summary = TraceSummary(screening.traced, screening.self_funded, screening.untraced, bool(set(capped)),
                           screening.opaque, history_from)
    results = [matched[p] for p in periods]
    return Outcome(results, figures(results), labels, findings, _primary_wallet(wallets, income),
                   _main_platform(platforms, income), list(own_once.values()), summary)


def _screen(wallets: Sequence[Wallet], transfers: Sequence[Transfer], records: Sequence[IncomeRecord],
            config: VerificationConfig, known: Mapping[str, Collection[str]] | None,
            lenders: frozenset[str], openings: Mapping[str, Mapping[str, int]] | None,
            windowed: Mapping[str, Collection[str]], unread: Mapping[str, Collection[str]]) -> Screening:
    """The fraud screening of every network the user has a wallet on."""
    by_network: dict[str, list[Transfer]] = defaultdict(list)
    for t in transfers:
        by_network[t.network].append(t)
    screening = Screening()
    for network in sorted({w.network for w in wallets}):
        screen_network(screening, network, [w for w in wallets if w.network == network],
                       by_network.get(network, []), records, config,
                       None if known is None else known.get(network, ()), lenders,
                       (openings or {}).get(network), windowed.get(network, ()), unread.get(network, ()))
    return screening


def _match_every_record(periods: Sequence[str], records: Sequence[IncomeRecord], screening: Screening,
                        config: VerificationConfig) -> dict[str, PeriodResult]:
    """Every record of the user is matched, not only the window's (decision 131): a transfer paying a
    record is verified income whichever VIP window it falls in; the window's periods make the figures.
    A transfer flagged (as any wallet sees it) is never income."""
    flagged: dict[TransferKey, tuple[str, ...]] = {}
    for (_, key), codes in screening.flags.items():
        flagged[key] = tuple(sorted(set(flagged.get(key, ())) | codes))
    every_period = sorted(set(periods) | {r.period for r in records})
    return {r.period: r for r in match_income(every_period, records, screening.inflows, flagged,
                                              config.matching)}


def _income(matched: Mapping[str, PeriodResult], window: set[str]) -> _Income:
    """Labels follow every transfer of a settlement; a transfer shared by two records carries the first's
    period."""
    income = _Income()
    counted: set[TransferKey] = set()
    for result in matched.values():
        for m in result.records:
            for t in m.transfers:
                income.labels.setdefault(t.key, {
                    "matched": True, "payroll_period": result.period, "origin_platform": m.record.platform,
                    "match_confidence": m.confidence})
                if result.period in window and t.key not in counted:
                    counted.add(t.key)
                    income.received_by[t.to_address] += t.amount
            if m.transfers and result.period in window:
                income.platform_hits[m.record.platform] += 1
    return income


def _label(wallets: Sequence[Wallet], screening: Screening, income: _Income, whitelisted: frozenset[str],
           config: VerificationConfig) -> tuple[dict[Wallet, dict[TransferKey, Label]], list[Finding]]:
    """Every wallet's label of each of its transfers, and the findings (one per flag), in time order."""
    labels: dict[Wallet, dict[TransferKey, Label]] = {}
    findings: list[Finding] = []
    for w, items in screening.own.items():
        home = frozenset(x.address for x in wallets if x.network == w.network)
        view = {t.key: tuple(sorted(screening.flags.get((w.address, t.key), ()))) for t in items}
        labels[w] = classify(w.address, items, home=home, fraud={k: v for k, v in view.items() if v},
                             income=income.labels, whitelisted=whitelisted,
                             dex=set(config.dex_addresses.get(w.network, ())))
        findings.extend(Finding(w, t, code, screening.evidence.get((w.address, t.key, code)))
                        for t in items for code in view[t.key])
    findings.sort(key=lambda f: (f.transfer.timestamp, f.transfer.order, f.wallet.address, f.code))
    return labels, findings


def _primary_wallet(wallets: Sequence[Wallet], income: _Income) -> Wallet | None:
    return max(wallets, key=lambda w: (income.received_by[w.address], -wallets.index(w)), default=None)


def _main_platform(platforms: Sequence[Platform], income: _Income) -> Platform | None:
    by_id = {p.id: p for p in platforms}
    if income.platform_hits:
        return by_id.get(income.platform_hits.most_common(1)[0][0])
    return platforms[0] if platforms else None


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
                "transfers": [transfer_json(x) for x in result.transfers],
                "payout_date": main.record.record_date.isoformat(),
                "block_timestamp": iso_z(t.timestamp), "origin_address": t.from_address,
                "match_confidence": result.confidence, "verified": True})
        else:
            reasons = result.reasons()
            unverified.append({
                "period": result.period, "expected_amount": usd(result.expected),
                "received_amount": usd(result.received), "verified": False,
                "reason_codes": sorted({r["code"] for r in reasons}), "reasons": reasons})
    platform = outcome.platform
    body: dict[str, Any] = {
        "id": vip_id, "user_id": user_id, "generated_at": iso_z(generated_at), "status": fig.status,
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


def transfer_json(t: Transfer) -> dict[str, Any]:
    """One transfer that settled a verified period."""
    return {"tx_hash": t.tx_hash, "log_index": t.log_index, "amount_usd": usd(t.usd()),
            "block_timestamp": iso_z(t.timestamp), "origin_address": t.from_address}


def fraud_trace_json(trace: TraceSummary, config: VerificationConfig | None = None) -> dict[str, Any]:
    """What the funding trace covered, what it could not follow (the fetch cap hit, a fetch not finished
    in time) and what it could not see (`opaque`: a payout paid from money held before the history read,
    or come through an omnibus where the user keeps money): a lender reads here how far the fraud flags can
    be trusted."""
    settings = (config or VerificationConfig()).funding_trace
    return {"history_days": settings.history_days,
            "history_from": iso_z(trace.history_from) if trace.history_from else None,
            "max_hops": settings.max_hops, "self_funded_share": settings.self_funded_share,
            "transfers_traced": trace.traced, "self_funded": trace.self_funded, "fetch_cap_hit": trace.capped,
            "untraced_count": len(trace.untraced),
            "untraced": [{"network": n, "address": a, "tx_hash": h}
                         for n, a, h in trace.untraced[:MAX_REPORTED_UNTRACED]],
            "opaque_count": len(trace.opaque),
            "opaque": [{"network": o.network, "tx_hash": o.transfer.tx_hash, "address": o.address,
                        "reason": o.reason, "amount_usd": usd(Decimal(o.units).scaleb(-SCALE, EXACT))}
                       for o in trace.opaque[:MAX_REPORTED_OPAQUE]]}


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
                      "block_timestamp": iso_z(t.timestamp)} for t in funding.path]}


def fraud_flags_json(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    return [{"code": f.code, "fraud_type": FRAUD_TYPES[f.code], "tx_hash": f.transfer.tx_hash,
             "log_index": f.transfer.log_index, "network": f.transfer.network, "wallet_id": f.wallet.id,
             "wallet_address": f.wallet.address, "amount_usd": usd(f.transfer.usd()),
             "block_timestamp": iso_z(f.transfer.timestamp), "evidence": evidence_json(f.funding)}
            for f in findings[:MAX_REPORTED_FLAGS]]


