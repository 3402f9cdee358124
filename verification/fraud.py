"""Fraud rules over a user's transfers. Amounts are compared as exact integers and fractions, never floats.

The principle is where income money came from (`trace_funding`): every inbound transfer is traced back
through the address that paid it, within a window and a number of intermediaries, to find what share of it
the user's own wallets funded. No address is exempt because a record or a user names it; busy addresses
are bounded by amount and time (`FundingLedger`: a payment is funded by the inflows that arrived last
before it, as much as it carries, no more; `FundingPool`, the second accounting: a payment takes the same
fraction of every part of its payer's balance; the larger share counts). The second rule
(`find_wash_trades`) is the pass-through: value that arrives from a counterparty and goes straight back to
it (it never was the user's)."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from vip.verification.config import FundingTraceConfig, WashTradeConfig
from vip.verification.model import EXACT, Transfer, TransferKey

# At most this many of one counterparty's transfers are examined from one starting transfer.
MAX_WASH_SPAN = 200
# Amounts of every token are compared in units of 10^-18 USD (USDC and USDT count one USD per token).
SCALE = 18
# Tokens minted come from here: new money, nobody's to trace.
ZERO_ADDRESS = "0x" + "0" * 40


def within(amount: int, reference: int, tolerance: Decimal) -> bool:
    """|amount - reference| <= reference x tolerance, exactly."""
    return Decimal(abs(amount - reference)) <= EXACT.multiply(Decimal(reference), tolerance)


def units(t: Transfer) -> int:
    """The transfer's value in 10^-18 USD, exact for tokens of at most 18 decimals."""
    return t.amount * int(10 ** max(0, SCALE - t.decimals))


# --- the pass-through -------------------------------------------------------------------------------------

def find_wash_trades(wallet: str, transfers: Iterable[Transfer], config: WashTradeConfig,
                     skip: Container[str] = (), claimable: Container[TransferKey] = ()) -> set[TransferKey]:
    """Keys of the wallet's transfers that belong to a round trip with one counterparty: value that went
    to it and came back, net of nothing.

    Per counterparty, every run of consecutive transfers between the wallet and it that fits in the
    window, has value going both ways, and whose net position (|in - out|) is at most `max_net_fraction`
    of the mean trade size ((in + out) / count), is a wash: all its transfers are flagged (both sides),
    when the run starts with money coming in (a pass-through), or when it starts with the wallet's own
    payment and ends with an inbound transfer some income record could accept (`claimable`): the user's
    money came straight back from the payer a record names, whatever else that payer does with its own
    money meanwhile (decision 134). A run of the wallet's own payment returned that no record claims (a
    purchase refunded, a loan repaid) is not: it cannot verify anything (decision 122).
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
        for i, (_, first, first_signed) in enumerate(items):
            returned = first_signed < 0  # the user's own payment first: only a claimable return counts
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
                if returned and not (signed > 0 and t.key in claimable):
                    continue
                if inflow and outflow and _balanced(inflow, outflow, j - i + 1, config.max_net_fraction):
                    flagged.update(items[k][1].key for k in range(i, j + 1))
    return flagged


def _balanced(inflow: int, outflow: int, count: int, fraction: Decimal) -> bool:
    # |in - out| <= fraction x (in + out) / count, multiplied out so it stays exact.
    return Decimal(abs(inflow - outflow) * count) <= EXACT.multiply(Decimal(inflow + outflow), fraction)


# --- the funding trace ------------------------------------------------------------------------------------

Piece = tuple[Transfer, int]  # (an inflow of the payer, the units of it the payment carries)


class FundingLedger:
    """Which inflows funded each payment of an address: its transfers replayed in chain order, every inflow
    put on a stack, every payment taking from the top (last in, first out) as much as it carries.

    This bounds a busy address by amount and time: a hub that received from thousands passes on, in a
    payment, only the money that reached it last before that payment, and only as much as the payment
    carries; what earlier payments took is gone. Money the replay cannot see (held before the first
    transfer given) funds nothing traceable. At most `max_pieces` inflows are named per payment (the rest
    of its value counts as untraced)."""

    def __init__(self, transfers: Iterable[Transfer], max_pieces: int) -> None:
        self._max_pieces = max_pieces
        self._of: dict[str, list[Transfer]] = defaultdict(list)
        for t in transfers:
            if t.from_address == t.to_address:
                continue
            self._of[t.from_address].append(t)
            self._of[t.to_address].append(t)
        self._pieces: dict[TransferKey, list[Piece]] = {}
        self._replayed: set[str] = set()

    def pieces(self, payment: Transfer) -> Sequence[Piece]:
        payer = payment.from_address
        if payer not in self._replayed:
            self._replay(payer)
        return self._pieces.get(payment.key, ())

    def _replay(self, address: str) -> None:
        self._replayed.add(address)
        items = sorted({t.key: t for t in self._of.get(address, ())}.values(), key=lambda t: t.order)
        stack: list[Piece] = []  # (inflow, units of it left)
        for t in items:
            if t.to_address == address:
                stack.append((t, units(t)))
                continue
            need, taken = units(t), list[Piece]()
            while need and stack:
                inflow, left = stack[-1]
                take = min(need, left)
                if len(taken) < self._max_pieces:
                    taken.append((inflow, take))
                need -= take
                if take == left:
                    stack.pop()
                else:
                    stack[-1] = (inflow, left - take)
            self._pieces[t.key] = taken


@dataclass(frozen=True)
class Funding:
    """What the trace found for one inbound transfer."""

    transfer: Transfer
    own_units: Fraction  # the part of it the user's wallets funded, in 10^-18 USD
    path: tuple[Transfer, ...]  # the largest contribution: the user's payment first, `transfer` last
    untraced: frozenset[str] = field(default_factory=frozenset)  # payers whose history was not at hand
    origins: tuple[Transfer, ...] = ()  # every payment of the user's wallets the trace found in it

    @property
    def share(self) -> Fraction:
        total = units(self.transfer)
        return self.own_units / total if total else Fraction(0)

    @property
    def intermediaries(self) -> int:
        return len(self.path) - 1

    def self_funded(self, config: FundingTraceConfig) -> bool:
        return bool(self.path) and self.share > Fraction(config.self_funded_share)


def trace_funding(inbound: Transfer, ledger: FundingLedger, home: Container[str], config: FundingTraceConfig,
                  known: Container[str] | None = None) -> Funding:
    """The share of `inbound` (paid from outside `home` into it) that the user's wallets (`home`) funded:
    back through its payer's inflows (those the ledger attributes to the payment), their payers' and so on,
    through at most `max_hops` intermediaries, on money that moved within `window_days` before `inbound`.
    Each inflow contributes in proportion to the part of it the payment carries. `known`: the addresses
    whose history in the window is at hand (None: all); one not known is named in `untraced`."""
    start = inbound.timestamp - timedelta(days=config.window_days)
    untraced: set[str] = set()
    origins: dict[TransferKey, Transfer] = {}
    memo: dict[tuple[TransferKey, int], tuple[Fraction, tuple[Transfer, ...]]] = {}
    budget = [config.max_steps]

    def walk(payment: Transfer, hops: int) -> tuple[Fraction, tuple[Transfer, ...]]:
        """Own units in the whole `payment` (from an intermediary, the `hops`-th counted back) and the
        largest path ending with it."""
        cached = memo.get((payment.key, hops))
        if cached is not None:
            return cached
        payer = payment.from_address
        if payer == ZERO_ADDRESS:
            return Fraction(0), ()
        if known is not None and payer not in known:
            untraced.add(payer)
            return Fraction(0), ()
        total, best = Fraction(0), Fraction(0)
        best_path: tuple[Transfer, ...] = ()
        for inflow, take in ledger.pieces(payment):
            if inflow.timestamp < start:
                continue
            if budget[0] <= 0:
                untraced.add(payer)
                break
            budget[0] -= 1
            path: tuple[Transfer, ...]
            if inflow.from_address in home:
                got, path = Fraction(take), (inflow,)
                origins[inflow.key] = inflow
            elif hops >= config.max_hops:
                continue
            else:
                sub, path = walk(inflow, hops + 1)
                if not sub:
                    continue
                got = sub * take / units(inflow)
            total += got
            if got > best:
                best, best_path = got, path
        result = (total, (*best_path, payment) if best_path else ())
        memo[(payment.key, hops)] = result
        return result

    own, path = walk(inbound, 1)
    found = tuple(sorted(origins.values(), key=lambda t: t.order))
    return Funding(inbound, own, path, frozenset(untraced), found)


class FundingPool:
    """The second attribution, for payers that mix: every address's balance as a pool, every payment
    taking the same fraction of each part of it (the "haircut": a payer holding the user's 5,000 among
    8,000 pays out 5/8 of the user's money in every payment). One pass in chain order over the network's
    transfers; the user's money is followed by the number of intermediaries it went through (at most
    `max_hops`) and forgotten by an address that received none of it for `window_days`. A busy hub's
    pool is large, so the user's share of what it pays is small: hubs stay bounded by amount; money that
    stops over at an address with a business of its own is still found. Amounts in 10^-18 USD, integer
    (floor) arithmetic. Addresses not in `known` (history not fetched) pass on nothing of the user's."""

    def __init__(self, transfers: Iterable[Transfer], home: Container[str], config: FundingTraceConfig,
                 known: Container[str] | None = None, payers: Iterable[str] | None = None) -> None:
        """`payers`: only money that can reach these addresses within `max_hops` is followed (None:
        every address's): the pass then reads only the transfers of the addresses that can."""
        self._home, self._config = home, config
        hops, window = config.max_hops, timedelta(days=config.window_days)
        if payers is not None:
            transfers = _reaching(list(transfers), set(payers), home, hops)
        total: dict[str, int] = defaultdict(int)
        own: dict[str, list[int]] = {}  # address -> the user's units held, by intermediaries (index k - 1)
        last: dict[str, datetime] = {}
        self.carried: dict[TransferKey, int] = {}  # the user's units every transfer carried
        self.arrived: dict[TransferKey, list[int]] = {}  # into the user's wallets: by intermediaries
        self._inflows: dict[str, list[Transfer]] = defaultdict(list)
        ordered = sorted({t.key: t for t in transfers}.values(), key=lambda t: t.order)
        for t in ordered:
            x, y, amount = t.from_address, t.to_address, units(t)
            if x == y or (x in home and y in home):
                continue
            self._inflows[y].append(t)
            moved: list[int] | None = None
            if x in home:
                moved = [amount] + [0] * (hops - 1)  # arriving at y, y is the first intermediary
            else:
                held = own.get(x)
                if held is not None and t.timestamp - last[x] > window:
                    del own[x]
                    held = None
                if held is not None and x != ZERO_ADDRESS and (known is None or x in known):
                    pool = max(total[x], amount)
                    moved = [part * amount // pool for part in held]
                    own[x] = [part - m for part, m in zip(held, moved, strict=True)]
                total[x] = max(total[x] - amount, 0)
            if y in home:
                if moved is not None and x not in home:
                    self.arrived[t.key] = moved
                    self.carried[t.key] = sum(moved)
                continue
            total[y] += amount
            if moved is None or not any(moved):
                continue
            if x not in home:
                moved = [0, *moved[:-1]]  # one more intermediary (beyond max_hops: forgotten)
            self.carried[t.key] = sum(moved)
            held = own.setdefault(y, [0] * hops)
            own[y] = [a + b for a, b in zip(held, moved, strict=True)]
            last[y] = t.timestamp
        self._orders = {a: [t.order for t in items] for a, items in self._inflows.items()}

    def funding(self, inbound: Transfer) -> Funding:
        """What the pool accounting finds in `inbound` (into the user's wallets), with the path of the
        largest carriers back to the user's payment."""
        own = sum(self.arrived.get(inbound.key, ()))
        if not own:
            return Funding(inbound, Fraction(0), ())
        start = inbound.timestamp - timedelta(days=self._config.window_days)
        path = self._path(inbound, start, 1)
        return Funding(inbound, Fraction(own), path, origins=path[:1])

    def _path(self, payment: Transfer, start: datetime, hops: int) -> tuple[Transfer, ...]:
        payer = payment.from_address
        items = self._inflows.get(payer, [])
        end = bisect.bisect_left(self._orders.get(payer, []), payment.order)
        best: Transfer | None = None
        best_units = 0
        for inflow in items[:end]:
            if inflow.timestamp < start:
                continue
            carried = units(inflow) if inflow.from_address in self._home else self.carried.get(inflow.key, 0)
            if carried > best_units:
                best, best_units = inflow, carried
        if best is None:
            return ()
        if best.from_address in self._home:
            return (best, payment)
        if hops >= self._config.max_hops:
            return ()
        sub = self._path(best, start, hops + 1)
        return (*sub, payment) if sub else ()


def _reaching(transfers: list[Transfer], payers: set[str], home: Container[str], hops: int) -> list[Transfer]:
    """The transfers into or out of the addresses from which money reaches `payers` in at most `hops`
    steps back (the payers themselves included), the user's wallets excepted."""
    senders: dict[str, set[str]] = defaultdict(set)
    for t in transfers:
        senders[t.to_address].add(t.from_address)
    relevant = {a for a in payers if a not in home}
    level = set(relevant)
    for _ in range(hops - 1):
        level = {s for a in level for s in senders.get(a, ()) if s not in home and s not in relevant}
        if not level:
            break
        relevant |= level
    return [t for t in transfers if t.from_address in relevant or t.to_address in relevant]
