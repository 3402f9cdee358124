"""EIP-1559 fee arithmetic for the service's own transactions (pure; integers of wei)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fees:
    max_fee_per_gas: int
    max_priority_fee_per_gas: int


def fees_for(base_fee: int, tip: int, cap: int, min_tip: int = 0) -> Fees:
    """Tip (at least the network's floor) plus twice the base fee (room for six full blocks of +12.5%
    each), capped; the tip never exceeds the max fee."""
    tip = max(tip, min_tip)
    max_fee = min(2 * base_fee + tip, cap)
    return Fees(max_fee, min(tip, max_fee))


def bumped(previous: Fees, current: Fees, percent: int, cap: int) -> Fees:
    """Fees for a replacement of `previous` (same nonce): nodes accept it only when both fees rise by
    at least 10%, so each is the larger of the current market and the previous plus `percent`, rounded
    up. The cap still holds; a replacement that would need more is the caller's to refuse."""
    def up(value: int) -> int:
        return -(-value * (100 + percent) // 100)

    max_fee = min(max(current.max_fee_per_gas, up(previous.max_fee_per_gas)), cap)
    tip = min(max(current.max_priority_fee_per_gas, up(previous.max_priority_fee_per_gas)), max_fee)
    return Fees(max_fee, tip)
