"""Fraud rules over a wallet's transfers: wash trades (value sent back to where it came from) and circular
flows (value that leaves and returns through intermediaries). Amounts are compared as exact integers and
Decimals, never floats."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from vip.verification.config import CircularFlowConfig, WashTradeConfig
from vip.verification.model import EXACT, Transfer, TransferKey

# At most this many of one counterparty's transfers are examined from one starting transfer.
MAX_WASH_SPAN = 200


def within(amount: int, reference: int, tolerance: Decimal) -> bool:
    """|amount - reference| <= reference x tolerance, exactly."""
    return Decimal(abs(amount - reference)) <= EXACT.multiply(Decimal(reference), tolerance)


def find_wash_trades(wallet: str, transfers: Iterable[Transfer], config: WashTradeConfig,
                     skip: Collection[str] = ()) -> set[TransferKey]:
    """Keys of the wallet's transfers that belong to a wash pattern.

    Per counterparty, every run of consecutive transfers between the wallet and it that fits in the
    window, with value going both ways, whose net position (|in - out|) is at most `max_net_fraction` of
    the mean trade size ((in + out) / count), is a wash: all its transfers are flagged (both sides).
    """
    by_counterparty: dict[str, list[tuple[tuple[int, int], Transfer, int]]] = defaultdict(list)
    for t in transfers:
        if t.from_address == t.to_address:
            continue
        if t.to_address == wallet:
            by_counterparty[t.from_address].append((t.order, t, t.amount))
        elif t.from_address == wallet:
            by_counterparty[t.to_address].append((t.order, t, -t.amount))
    window = timedelta(days=config.window_days)
    flagged: set[TransferKey] = set()
    for counterparty, items in by_counterparty.items():
        if len(items) < 2 or counterparty in skip:
            continue
        items.sort(key=lambda item: item[0])
        for i, (_, first, _) in enumerate(items):
            inflow = outflow = 0
            end = first.timestamp + window
            for j in range(i, min(len(items), i + MAX_WASH_SPAN)):
                _, t, signed = items[j]
                if t.timestamp > end:
                    break
                if signed > 0:
                    inflow += signed
                else:
                    outflow -= signed
                if inflow and outflow and _balanced(inflow, outflow, j - i + 1, config.max_net_fraction):
                    flagged.update(items[k][1].key for k in range(i, j + 1))
    return flagged


def _balanced(inflow: int, outflow: int, count: int, fraction: Decimal) -> bool:
    # |in - out| <= fraction x (in + out) / count, multiplied out so it stays exact.
    return Decimal(abs(inflow - outflow) * count) <= EXACT.multiply(Decimal(inflow + outflow), fraction)


class TransferGraph:
    """Transfers by sender, in chain order, for the cycle search."""

    def __init__(self, transfers: Iterable[Transfer]) -> None:
        grouped: dict[str, list[Transfer]] = defaultdict(list)
        for t in transfers:
            grouped[t.from_address].append(t)
        self._sent: dict[str, list[Transfer]] = {}
        self._orders: dict[str, list[tuple[int, int]]] = {}
        for sender, items in grouped.items():
            items.sort(key=lambda t: t.order)
            self._sent[sender] = items
            self._orders[sender] = [t.order for t in items]

    def sent_after(self, sender: str, after: tuple[int, int]) -> Sequence[Transfer]:
        items = self._sent.get(sender)
        if not items:
            return ()
        start = bisect.bisect_right(self._orders[sender], after)
        return items[start:]


def find_circular_flows(home: frozenset[str], graph: TransferGraph, outbound: Iterable[Transfer],
                        config: CircularFlowConfig, *, skip: Mapping[str, bool] | None = None
                        ) -> set[tuple[str, TransferKey]]:
    """(wallet, key) of the home wallets' transfers that start or close a cycle.

    A cycle: a home wallet sends an amount to A; within the window it travels on through transfers that
    each carry the first amount within `amount_tolerance`, in chain order, and reaches a home wallet
    again after one to `max_intermediaries` intermediaries. A single intermediary straight back to the
    same wallet is the wash pattern, not a cycle. `skip` names addresses never used as intermediaries
    (DEX pools, the platforms' payout wallets: hubs whose flows are not the borrower's).
    """
    skip = skip or {}
    window = timedelta(days=config.window_days)
    found: set[tuple[str, TransferKey]] = set()
    for start in outbound:
        first = start.to_address
        if first in home or first in skip or start.from_address not in home:
            continue
        deadline = start.timestamp + window
        closing = _search(graph, start, first, deadline, home, skip, config, depth=1, visited={first})
        if closing:
            found.add((start.from_address, start.key))
            found.update((t.to_address, t.key) for t in closing)
    return found


def _search(graph: TransferGraph, start: Transfer, node: str, deadline: datetime, home: frozenset[str],
            skip: Mapping[str, bool], config: CircularFlowConfig, *, depth: int, visited: set[str],
            previous: Transfer | None = None) -> list[Transfer]:
    """The transfers that bring `start`'s amount back home from `node` (empty when none)."""
    previous = previous or start
    closing: list[Transfer] = []
    followed = 0
    for t in graph.sent_after(node, previous.order):
        if t.timestamp > deadline or followed >= config.max_fanout:
            break
        if t.token != start.token or not within(t.amount, start.amount, config.amount_tolerance):
            continue
        followed += 1
        if t.to_address in home:
            if depth >= 2 or t.to_address != start.from_address:
                closing.append(t)
            continue
        if depth < config.max_intermediaries and t.to_address not in visited and t.to_address not in skip:
            closing += _search(graph, start, t.to_address, deadline, home, skip, config, depth=depth + 1,
                               visited=visited | {t.to_address}, previous=t)
    return closing
