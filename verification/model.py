"""The values the rules work on: transfers in base units, income records in exact decimals, labels."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Context, Decimal
from typing import Any

# Enough digits for any uint256 amount times a fraction: Decimal arithmetic here is exact.
EXACT = Context(prec=120)

# fraud_flags identifiers (the spec's error codes, as DESIGN decides).
WASH_TRADE = "ERR_WASH_TRADE_DETECTED"
CIRCULAR_FLOW = "ERR_CIRCULAR_FLOW"
UNVERIFIED_SOURCE = "ERR_UNVERIFIED_SOURCE"
INCOME_MISMATCH = "ERR_INCOME_MISMATCH"
INSUFFICIENT_HISTORY = "ERR_INSUFFICIENT_HISTORY"

FRAUD_TYPES = {WASH_TRADE: "wash_trade", CIRCULAR_FLOW: "circular"}

TransferKey = tuple[str, str, int]  # (network, tx_hash, log_index)


def iso_z(moment: datetime) -> str:
    """A moment as the service writes it wherever it shows one (reports, API bodies, webhook payloads):
    ISO 8601 in UTC with a Z. `vip.formats.iso` is the same, for the layers above this pure core."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Transfer:
    """One indexed token transfer; addresses lower-case, `amount` in the token's base units."""

    network: str
    tx_hash: str
    log_index: int
    block_number: int
    timestamp: datetime
    token: str
    from_address: str
    to_address: str
    amount: int
    decimals: int = 6
    # (network, tx_hash, log_index), made once: the rules look transfers up by it many times.
    key: TransferKey = field(init=False, repr=False, compare=False)
    # Position on its chain: later transfers sort after earlier ones, within a block too.
    order: tuple[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.network, self.tx_hash, self.log_index))
        object.__setattr__(self, "order", (self.block_number, self.log_index))

    def usd(self) -> Decimal:
        """Token units, exact (USDC and USDT count one USD per token)."""
        return Decimal(self.amount).scaleb(-self.decimals, EXACT)


@dataclass(frozen=True, slots=True)
class IncomeRecord:
    """One inbound off-chain income record of a platform connection."""

    platform: str  # platform identifier (the connection's provider)
    source_type: str
    record_date: date
    amount: Decimal  # in the record's currency (USD)
    from_reference: str | None  # lower-case when it is an address
    whitelist: frozenset[str] = frozenset()  # the platform's known disbursement wallets

    @property
    def period(self) -> str:
        return f"{self.record_date:%Y-%m}"

    def accepts_origin(self, address: str) -> bool:
        return address == self.from_reference or address in self.whitelist


@dataclass(frozen=True, slots=True)
class Label:
    """A transfer's classification as seen from one wallet."""

    classification: str
    fraud_flags: tuple[str, ...] = ()
    payroll_match: dict[str, Any] | None = None
