"""One classification per transfer of a wallet, from the fraud findings and the income matches.

Precedence (first that applies): `wash_trade`, `circular` (flags carry every fraud finding), then
`verified_income` (matched to an income record), `dex_trade` (the counterparty is a known DEX router or
pool), then for inbound transfers from outside the user's wallets whose origin no connected platform
whitelists: `unknown` with ERR_UNVERIFIED_SOURCE; everything else is `p2p`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from vip.verification.model import (
    CIRCULAR_FLOW,
    UNVERIFIED_SOURCE,
    WASH_TRADE,
    Label,
    Transfer,
    TransferKey,
)


def classify(wallet: str, transfers: Iterable[Transfer], *, home: Collection[str],
             fraud: Mapping[TransferKey, tuple[str, ...]], income: Mapping[TransferKey, dict[str, Any]],
             whitelisted: Collection[str], dex: Collection[str]) -> dict[TransferKey, Label]:
    """Labels of `wallet`'s transfers (as seen from it). `fraud`: flags found for this wallet's view of
    each transfer; `income`: the payroll_match of transfers matched to a record."""
    labels: dict[TransferKey, Label] = {}
    for t in transfers:
        inbound = t.to_address == wallet and t.from_address != wallet
        counterparty = t.from_address if inbound else t.to_address
        flags = fraud.get(t.key, ())
        if WASH_TRADE in flags:
            labels[t.key] = Label("wash_trade", tuple(sorted(flags)))
        elif CIRCULAR_FLOW in flags:
            labels[t.key] = Label("circular", tuple(sorted(flags)))
        elif inbound and t.key in income:
            labels[t.key] = Label("verified_income", (), income[t.key])
        elif counterparty in dex:
            labels[t.key] = Label("dex_trade")
        elif inbound and counterparty not in home and counterparty not in whitelisted:
            labels[t.key] = Label("unknown", (UNVERIFIED_SOURCE,))
        else:
            labels[t.key] = Label("p2p")
    return labels
