"""The four-pillar risk score: each pillar 0-1000 from the VIP and the wallet's cash flow, the composite
by the spec's weights, the recommendation band, the fraud cap and the adverse action reasons."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from vip.verification.cashflow import Obligation
from vip.verification.config import ScoringConfig
from vip.verification.model import EXACT

WEIGHTS = {"consistency": Decimal("0.40"), "volume": Decimal("0.25"), "liquidity_buffer": Decimal("0.20"),
           "leverage": Decimal("0.15")}
MAX_SCORE = 1000
MAX_REASONS = 4
USD_PLACES = Decimal("0.000001")
RATIO_PLACES = Decimal("0.0001")


def whole(value: Decimal) -> int:
    """Round half up to an integer (scores and contributions)."""
    return int(value.quantize(Decimal(1), ROUND_HALF_UP))


def clamp_score(value: Decimal) -> int:
    return max(0, min(MAX_SCORE, whole(value)))


def ratio(numerator: Decimal, denominator: Decimal) -> Decimal:
    return EXACT.divide(numerator, denominator) if denominator > 0 else Decimal(0)


@dataclass(frozen=True)
class ScoreInputs:
    periods_requested: int
    periods_verified: int
    consistency_rate: Decimal
    longest_streak_months: int
    verified_monthly_income: Decimal
    average_usdc_balance: Decimal
    obligations: Sequence[Obligation]
    fraud_flag_count: int


def income_tier(income: Decimal, config: ScoringConfig) -> str:
    name = config.income_tiers[0].name
    for t in sorted(config.income_tiers, key=lambda t: t.min_monthly_usd):
        if income >= t.min_monthly_usd:
            name = t.name
    return name


def pillars(inputs: ScoreInputs, config: ScoringConfig) -> dict[str, dict[str, Any]]:
    income = inputs.verified_monthly_income
    requested = Decimal(max(inputs.periods_requested, 1))
    consistency = clamp_score(MAX_SCORE * (
        config.consistency_rate_weight * ratio(Decimal(inputs.periods_verified), requested)
        + config.consistency_streak_weight * ratio(Decimal(inputs.longest_streak_months), requested)))
    volume = clamp_score(MAX_SCORE * min(Decimal(1), ratio(income, config.volume_full_score_usd)))
    multiple = ratio(inputs.average_usdc_balance, income)
    liquidity = clamp_score(MAX_SCORE * min(Decimal(1), ratio(multiple,
                                                              config.liquidity_full_score_income_multiple)))
    monthly_obligations = sum((o.monthly_usd for o in inputs.obligations), Decimal(0))
    if income > 0:
        dti = ratio(monthly_obligations, income)
        leverage = clamp_score(MAX_SCORE * max(Decimal(0), 1 - ratio(dti, config.leverage_zero_score_dti)))
    else:
        dti, leverage = Decimal(0), 0
    spending = monthly_obligations if monthly_obligations > 0 else income
    buffer_months = ratio(inputs.average_usdc_balance, spending)
    missed = inputs.periods_requested - inputs.periods_verified
    signals = [{"type": "lending_protocol_repayment", "address": o.counterparty, "network": o.network,
                "monthly_usd": _usd(o.monthly_usd), "total_usd": _usd(o.total_usd), "transfers": o.transfers,
                "months": o.months} for o in inputs.obligations if o.lending_protocol]
    tier = income_tier(income, config)
    return {
        "consistency": _pillar("consistency", consistency, {
            "periods_verified": inputs.periods_verified, "periods_missed": missed,
            "consistency_rate": inputs.consistency_rate,
            "longest_streak_months": inputs.longest_streak_months},
            f"Income verified in {inputs.periods_verified} of {inputs.periods_requested} months, longest "
            f"unbroken run {inputs.longest_streak_months} months."),
        "volume": _pillar("volume", volume, {
            "verified_monthly_income_usd": _usd(income), "annualized_income_usd": _usd(income * 12),
            "income_tier": tier},
            f"Verified monthly income {_usd(income)} USD ({tier} tier); full marks from "
            f"{config.volume_full_score_usd} USD."),
        "liquidity_buffer": _pillar("liquidity_buffer", liquidity, {
            "average_usdc_balance": _usd(inputs.average_usdc_balance),
            "income_multiple": multiple.quantize(RATIO_PLACES, ROUND_HALF_UP),
            "buffer_months": buffer_months.quantize(RATIO_PLACES, ROUND_HALF_UP)},
            f"Average USDC balance {_usd(inputs.average_usdc_balance)} USD is "
            f"{multiple.quantize(Decimal('0.01'), ROUND_HALF_UP)} months of income."),
        "leverage": _pillar("leverage", leverage, {
            "estimated_monthly_obligations_usd": _usd(monthly_obligations),
            "dti_ratio": dti.quantize(RATIO_PLACES, ROUND_HALF_UP), "on_chain_debt_signals": signals},
            f"Recurring obligations {_usd(monthly_obligations)} USD a month, "
            f"{(dti * 100).quantize(Decimal('0.1'), ROUND_HALF_UP)}% of income; "
            f"{len(signals)} lending protocol(s) repaid."),
    }


def _usd(value: Decimal) -> Decimal:
    return value.quantize(USD_PLACES, ROUND_HALF_UP)


def _pillar(name: str, score: int, details: dict[str, Any], explanation: str) -> dict[str, Any]:
    weight = WEIGHTS[name]
    return {"weight": weight, "score": score, "weighted_contribution": whole(score * weight),
            "details": details, "explanation": explanation}


def composite(scores: dict[str, dict[str, Any]]) -> int:
    """The spec's formula on the exact pillar scores, rounded half up once at the end."""
    return clamp_score(sum((Decimal(p["score"]) * WEIGHTS[name] for name, p in scores.items()), Decimal(0)))


def recommendation(score: int, fraud_flag_count: int, config: ScoringConfig) -> str:
    if score >= config.approve_min:
        band = "approve"
    elif score >= config.approve_with_conditions_min:
        band = "approve_with_conditions"
    elif score >= config.refer_min:
        band = "refer"
    else:
        band = "decline"
    if fraud_flag_count and band in ("approve", "approve_with_conditions"):
        return "refer"  # any fraud flag sends the file to a human
    return band


REASON_TEXT = {
    "consistency": ("AA_INCOME_CONSISTENCY", "Income was not verified in every month of the lookback window"),
    "volume": ("AA_INCOME_LEVEL", "Verified monthly income is low for the requested credit"),
    "liquidity_buffer": ("AA_LIQUIDITY", "Average stablecoin balance is low relative to income"),
    "leverage": ("AA_OBLIGATIONS", "Recurring obligations are high relative to income"),
}
FRAUD_REASON = ("AA_FRAUD_SIGNALS", "Transactions were flagged as wash trades or circular flows")


def adverse_action_reasons(scores: dict[str, dict[str, Any]], rec: str, fraud_flag_count: int,
                           config: ScoringConfig) -> list[dict[str, Any]]:
    """When the answer is not `approve`: the fraud reason if any, then pillars under the threshold,
    weakest first (ties in the spec's pillar order); at most four."""
    if rec == "approve":
        return []
    reasons: list[dict[str, Any]] = []
    if fraud_flag_count:
        reasons.append({"code": FRAUD_REASON[0], "text": FRAUD_REASON[1]})
    order = list(WEIGHTS)
    weak = sorted((name for name, p in scores.items() if p["score"] < config.adverse_reason_below),
                  key=lambda name: (scores[name]["score"], order.index(name)))
    if not weak and not reasons:  # not approved on the composite alone: name the weakest pillar
        weak = sorted(scores, key=lambda name: (scores[name]["score"], order.index(name)))[:1]
    for name in weak:
        code, text = REASON_TEXT[name]
        reasons.append({"code": code, "text": text, "pillar": name, "score": scores[name]["score"]})
    return reasons[:MAX_REASONS]


def credit_limit(income: Decimal, config: ScoringConfig) -> Decimal:
    return _usd(income * config.credit_limit_multiple)


def risk_score(inputs: ScoreInputs, fraud_flags: list[Any], config: ScoringConfig, *, score_id: str,
               user_id: str, vip_id: str, generated_at: str) -> dict[str, Any]:
    """The spec's risk score body."""
    scores = pillars(inputs, config)
    total = composite(scores)
    rec = recommendation(total, inputs.fraud_flag_count, config)
    return {
        "id": score_id, "user_id": user_id, "vip_id": vip_id, "generated_at": generated_at,
        "composite_score": total, "score_range": {"min": 0, "max": MAX_SCORE}, "recommendation": rec,
        "suggested_credit_limit_usd": credit_limit(inputs.verified_monthly_income, config),
        "pillars": scores, "fraud_flags": fraud_flags,
        "adverse_action_reasons": adverse_action_reasons(scores, rec, inputs.fraud_flag_count, config),
    }
