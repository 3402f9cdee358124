"""The pass-through rule over a user's transfers, and exact comparisons the rules share. Amounts are
compared as exact integers and decimals, never floats.

The principle of the fraud rules is where income money came from: the funding trace
(`vip.verification.funding`) follows every inbound transfer back to the share of it the user's own wallets
funded. The rule here (`find_wash_trades`) is the pass-through: value that arrives from a counterparty and
goes straight back to it (it never was the user's), and the user's own money straight back from the payer a
record names."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Iterable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from vip.verification.config import WashTradeConfig
from vip.verification.model import EXACT, Transfer, TransferKey

# At most this many of one counterparty's transfers are examined from one starting transfer.
MAX_WASH_SPAN = 200


def within(amount: int, reference: int, tolerance: Decimal) -> bool:
    """|amount - reference| <= reference x tolerance, exactly."""
    return Decimal(abs(amount - reference)) <= EXACT.multiply(Decimal(reference), tolerance)


# --- the pass-through -------------------------------------------------------------------------------------

Signed = tuple[Transfer, int]  # a transfer and its value as seen from the wallet (+ in, - out)


@dataclass(frozen=True)
class WashContext:
    """What the pass-through rule needs besides the transfers. `skip`: counterparties never examined (the
    user's other wallets, DEX routers). `claimable`: inbound transfers some income record could accept.
    `repaid`: the wallet's payments that mostly gave a counterparty back its own money (an advance, a loan:
    `funding.own_money`), which are not the user's own money going out. `omnibus`: counterparties holding
    many people's money (an exchange's hot wallet): in and out of one is the user's own account there.
    `lenders`: the payers records name, whose unclaimable payments returned are an advance repaid."""

    skip: Container[str] = ()
    claimable: Container[TransferKey] = ()
    repaid: Container[TransferKey] = ()
    omnibus: Container[str] = ()
    lenders: Container[str] = ()


def find_wash_trades(wallet: str, transfers: Iterable[Transfer], config: WashTradeConfig,
                     context: WashContext | None = None) -> set[TransferKey]:
    """Keys of the wallet's transfers that belong to a round trip with one counterparty: value that went
    to it and came back, net of nothing.

    Per counterparty, every run of consecutive transfers between the wallet and it that fits in the
    window, has value going both ways, and whose net position (|in - out|) is at most `max_net_fraction`
    of the mean trade size ((in + out) / count), is a wash: all its transfers are flagged (both sides),
    when the run starts with money coming in (a pass-through), or when it starts with the wallet's own
    payment and ends with an inbound transfer some income record could accept (`claimable`): the user's
    money came straight back from the payer a record names, whatever else that payer does with its own
    money meanwhile (decision 134). A run of the wallet's own payment returned that no record claims (a
    purchase refunded, a loan repaid) is not: it cannot verify anything (decision 122). Nor is an advance
    from a payer a record names given back, nor money in and out of an omnibus (decision 247).
    """
    context = context or WashContext()
    flagged: set[TransferKey] = set()
    for counterparty, items in _by_counterparty(wallet, transfers).items():
        if len(items) < 2 or counterparty in context.skip:
            continue
        for i in range(len(items)):
            flagged |= _runs_from(items, i, counterparty, config, context)
    return flagged


def _by_counterparty(wallet: str, transfers: Iterable[Transfer]) -> dict[str, list[Signed]]:
    """The wallet's transfers per counterparty, in chain order, signed as seen from the wallet."""
    by: dict[str, list[Signed]] = defaultdict(list)
    for t in transfers:
        if t.from_address == t.to_address:
            continue
        if t.to_address == wallet:
            by[t.from_address].append((t, t.amount))
        elif t.from_address == wallet:
            by[t.to_address].append((t, -t.amount))
    for items in by.values():
        items.sort(key=lambda item: item[0].order)
    return by


def _runs_from(items: list[Signed], i: int, counterparty: str, config: WashTradeConfig,
               context: WashContext) -> set[TransferKey]:
    """The keys of every wash run that starts with `items[i]`."""
    first, first_signed = items[i]
    returned = first_signed < 0  # the user's own payment first: only a claimable return counts
    if returned and first.key in context.repaid:
        return set()  # not the user's money going out: the counterparty's own, given back
    if not returned and counterparty in context.omnibus:
        return set()  # out of and back into the user's account at an exchange
    inflow = outflow = 0
    repaying = True  # so far every outflow of the run gave the counterparty back its own money
    end = first.timestamp + timedelta(days=config.window_days)
    flagged: set[TransferKey] = set()
    for j in range(i, min(len(items), i + MAX_WASH_SPAN)):
        t, signed = items[j]
        if t.timestamp > end:
            break
        if signed > 0:
            inflow += signed
        else:
            outflow -= signed
            repaying = repaying and t.key in context.repaid
        if returned and not (signed > 0 and t.key in context.claimable):
            continue
        if not returned and repaying and counterparty in context.lenders:
            continue  # an advance from the named payer given back: its money, not the salary returned
        if inflow and outflow and _balanced(inflow, outflow, j - i + 1, config.max_net_fraction):
            flagged.update(items[k][0].key for k in range(i, j + 1))
    return flagged


def _balanced(inflow: int, outflow: int, count: int, fraction: Decimal) -> bool:
    # |in - out| <= fraction x (in + out) / count, multiplied out so it stays exact.
    return Decimal(abs(inflow - outflow) * count) <= EXACT.multiply(Decimal(inflow + outflow), fraction)
