"""The verification section of the settings (`[verification]` in config/verification.toml): every threshold
of docs/verification.md, and the limits of the job that runs the rules. Fractions are Decimals (exact:
amounts are never compared through a float). Plain frozen values: the rules take them as arguments."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WashTradeConfig(_Strict):
    window_days: int = Field(default=7, ge=1)
    # Net position with the counterparty over the window at most this fraction of the mean trade size.
    max_net_fraction: Decimal = Field(default=Decimal("0.10"), ge=0, le=1)


class FundingTraceConfig(_Strict):
    """Where income money came from (docs/verification.md, "The funding trace")."""

    # The trace reads the history of the user's wallets and of every address it follows from this many
    # days before the earliest income it examines (the VIP window's start or the earliest record, less the
    # matching's days_before): money parked with a payer that long before it pays is still seen. Within
    # that history nothing is forgotten by age: the trace is bounded by hops and by inflows visited.
    history_days: int = Field(default=365, ge=1)
    max_hops: int = Field(default=4, ge=1, le=8)
    # An inbound transfer more than this share of which the user's wallets funded is self-funded.
    self_funded_share: Decimal = Field(default=Decimal("0.5"), ge=0, lt=1)
    # A payment is attributed to at most this many inflows of its payer (the rest counts as untraced); at an
    # omnibus address only its last this many inflows before a payment can have funded it.
    max_pieces: int = Field(default=64, ge=1)
    # At most this many inflows are visited tracing one inbound transfer (bounds a trace through hubs).
    max_steps: int = Field(default=20000, ge=1)
    # At most this many addresses per VIP and network have their transfers fetched for the trace.
    max_addresses: int = Field(default=200, ge=1)
    # An address paid by at least this many different senders within one UTC day is an omnibus (an
    # exchange's hot wallet, a payroll provider's pool): many people's money in one balance, which no
    # on-chain trace can tell apart. Money the user keeps there is reported, not guessed at.
    omnibus_senders_per_day: int = Field(default=25, ge=2)


class CircularFlowConfig(_Strict):
    # Verification waits at most this long for the trace's fetches (backfills), then runs on what it has.
    fetch_wait_s: float = Field(default=120.0, ge=0)


class MatchingConfig(_Strict):
    # A payout dated D is looked for in on-chain inflows between D - days_before and D + days_after.
    days_before: int = Field(default=2, ge=0)
    days_after: int = Field(default=5, ge=0)
    close_tolerance: Decimal = Field(default=Decimal("0.02"), ge=0, le=1)
    approximate_tolerance: Decimal = Field(default=Decimal("0.05"), ge=0, le=1)
    # A record may be settled by up to this many transfers of one payer (a batch, a fee split), or one
    # transfer may settle up to this many records; the tiers apply to the sums.
    max_parts: int = Field(default=4, ge=1, le=6)
    # Of one payer's transfers in a record's window, the this many nearest to its date are combined.
    max_candidates: int = Field(default=12, ge=1, le=24)


class IncomeTier(_Strict):
    name: str
    min_monthly_usd: Decimal = Field(ge=0)


class ScoringConfig(_Strict):
    approve_min: int = Field(default=700, ge=0, le=1000)
    approve_with_conditions_min: int = Field(default=550, ge=0, le=1000)
    refer_min: int = Field(default=400, ge=0, le=1000)
    credit_limit_multiple: Decimal = Decimal("2.0")
    # consistency = 1000 x (rate_weight x consistency_rate + streak_weight x longest_streak / requested)
    consistency_rate_weight: Decimal = Decimal("0.7")
    consistency_streak_weight: Decimal = Decimal("0.3")
    # volume = 1000 x min(1, monthly income / this)
    volume_full_score_usd: Decimal = Field(default=Decimal("10000"), gt=0)
    income_tiers: tuple[IncomeTier, ...] = (
        IncomeTier(name="low", min_monthly_usd=Decimal(0)),
        IncomeTier(name="mid", min_monthly_usd=Decimal(2000)),
        IncomeTier(name="high", min_monthly_usd=Decimal(8000)),
    )
    # liquidity = 1000 x min(1, average USDC balance / (monthly income x this))
    liquidity_full_score_income_multiple: Decimal = Field(default=Decimal("3"), gt=0)
    # leverage = 1000 x max(0, 1 - dti / this)
    leverage_zero_score_dti: Decimal = Field(default=Decimal("0.6"), gt=0)
    # Outbound payments to one counterparty in at least this many months, amounts within the tolerance
    # of their median, are a recurring obligation.
    recurring_min_months: int = Field(default=3, ge=2)
    recurring_amount_tolerance: Decimal = Field(default=Decimal("0.10"), ge=0, le=1)
    # Pillars scoring below this are named in adverse action reasons (weakest first, at most four).
    adverse_reason_below: int = Field(default=700, ge=0, le=1000)


class VerificationConfig(_Strict):
    wash_trade: WashTradeConfig = WashTradeConfig()
    funding_trace: FundingTraceConfig = FundingTraceConfig()
    circular_flow: CircularFlowConfig = CircularFlowConfig()
    matching: MatchingConfig = MatchingConfig()
    scoring: ScoringConfig = ScoringConfig()
    # A VIP answers from cache for this long per user and lookback.
    cache_hours: int = Field(default=24, ge=0)
    # Verified monthly income moving more than this fraction against the previous VIP fires an event.
    income_change_threshold: Decimal = Decimal("0.10")
    # Per network: lower-case addresses of known DEX routers and pools, and of lending protocols.
    dex_addresses: dict[str, tuple[str, ...]] = {}
    lending_addresses: dict[str, tuple[str, ...]] = {}
    # Job worker: poll interval when idle, and a failed generation's retry delay before it is `error`.
    job_idle_s: float = Field(default=1.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)

    @field_validator("dex_addresses", "lending_addresses")
    @classmethod
    def _lower(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        return {net: tuple(a.lower() for a in addrs) for net, addrs in value.items()}
