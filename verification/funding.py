"""Where income money came from: the funding trace (docs/verification.md, "The funding trace").

Every inbound transfer is traced back through the address that paid it, its payers and theirs, to the share
of it that the user's own wallets funded. Nothing is forgotten by age: over the whole history read (the
payers' too, from well before the earliest income examined) a payer that holds only the user's money is the
user, however long the money waited there. The trace is bounded by hops (`max_hops`) and by the inflows it
visits (`max_pieces` per payment, `max_steps` per traced transfer), never by a time window.

Two accountings of the same money, the larger share counts:

- `FundingLedger`, last in first out: each address's transfers replayed in chain order, every inflow on a
  stack, every payment taking from its top as much as it carries. It finds money passed on at once, through a
  hub too. At an omnibus address (many people's money in one balance) only its last `max_pieces` inflows can
  have funded a payment: older money there is the omnibus's, which the chain cannot tell apart.
- `FundingPool`, the haircut: every address's balance as a pool, each payment taking the same fraction of
  every part of it, the balance including what the address must have held before its history began. It
  finds money that stopped over while other money arrived, however long ago.

The user's money (`own_money`) is what leaves their wallets, except what repays an address the money it gave
them that no record could claim (a salary advance, a loan): that is the address's own money going back.
Amounts are integers in 10^-18 USD and exact fractions, never floats."""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from itertools import pairwise

from vip.verification.config import FundingTraceConfig
from vip.verification.model import Transfer, TransferKey

# Amounts of every token are compared in units of 10^-18 USD (USDC and USDT count one USD per token).
SCALE = 18
# Tokens minted come from here: new money, nobody's to trace.
ZERO_ADDRESS = "0x" + "0" * 40

Piece = tuple[Transfer, int]  # (an inflow of the payer, the units of it the payment carries)
Seeds = Mapping[TransferKey, int]  # per payment out of the user's wallets: the units that are their own money


_FACTORS: dict[int, int] = {decimals: int(10 ** (SCALE - decimals)) for decimals in range(SCALE + 1)}


def units(t: Transfer) -> int:
    """The transfer's value in 10^-18 USD, exact for tokens of at most 18 decimals."""
    return t.amount * _FACTORS.get(t.decimals, 1)


def in_chain_order(transfers: Iterable[Transfer]) -> list[Transfer]:
    """Each transfer once, in chain order (a list already so is returned as it is, checked in one pass)."""
    items = list(transfers)
    if all(a.order < b.order for a, b in pairwise(items)):
        return items
    return sorted({t.key: t for t in items}.values(), key=lambda t: t.order)


class Omnibus:
    """Which addresses are omnibus wallets: paid by at least `omnibus_senders_per_day` different senders
    within one UTC day (an exchange's hot wallet, a payroll provider's pool). Worked out per address when
    first asked (most addresses of a network's transfers never are). `found`: addresses already known to
    be (their history was read only around the payments traced, after a look at their latest inflows
    showed such a day)."""

    def __init__(self, transfers: Iterable[Transfer], config: FundingTraceConfig,
                 found: Iterable[str] = ()) -> None:
        self._threshold = config.omnibus_senders_per_day
        self._inflows: dict[str, list[Transfer]] = defaultdict(list)
        for t in transfers:
            if t.from_address != t.to_address:
                self._inflows[t.to_address].append(t)
        self._found: dict[str, bool] = dict.fromkeys(found, True)

    def __contains__(self, address: object) -> bool:
        if not isinstance(address, str):
            return False
        found = self._found.get(address)
        if found is None:
            senders: dict[int, set[str]] = defaultdict(set)
            for t in self._inflows.get(address, ()):
                senders[int(t.timestamp.timestamp()) // 86400].add(t.from_address)
            found = self._found[address] = any(len(s) >= self._threshold for s in senders.values())
        return found


class FundingLedger:
    """Which inflows funded each payment of an address: its transfers replayed in chain order, every inflow
    put on a stack, every payment taking from the top (last in, first out) as much as it carries.

    This bounds a busy address by amount: a hub that received from thousands passes on, in a payment, only
    the money that reached it last before that payment, and only as much as the payment carries; what
    earlier payments took is gone. At an omnibus address the stack keeps only the last `max_pieces` inflows
    (older money is the omnibus's own, funding nothing traceable). Money the replay cannot see, held before
    the first transfer given, funds nothing traceable and is counted as `uncovered`. At most `max_pieces`
    inflows are named per payment (the rest of its value counts as untraced)."""

    def __init__(self, transfers: Iterable[Transfer], max_pieces: int,
                 omnibus: Container[str] = frozenset()) -> None:
        self._max_pieces = max_pieces
        self._omnibus = omnibus
        self._of: dict[str, list[Transfer]] = defaultdict(list)  # each address's transfers, in chain order
        for t in in_chain_order(transfers):
            if t.from_address == t.to_address:
                continue
            self._of[t.from_address].append(t)
            self._of[t.to_address].append(t)
        self._pieces: dict[TransferKey, list[Piece]] = {}
        self._uncovered: dict[TransferKey, int] = {}
        self._replayed: set[str] = set()

    def pieces(self, payment: Transfer) -> Sequence[Piece]:
        self._replay_once(payment.from_address)
        return self._pieces.get(payment.key, ())

    def uncovered(self, payment: Transfer) -> int:
        """The units of `payment` its payer held before the history given (no inflow seen funds them)."""
        self._replay_once(payment.from_address)
        return self._uncovered.get(payment.key, 0)

    def _replay_once(self, address: str) -> None:
        if address in self._replayed:
            return
        self._replayed.add(address)
        depth = self._max_pieces if address in self._omnibus else None
        stack: deque[Piece] = deque()  # (inflow, units of it left), newest last
        for t in self._of.get(address, ()):
            if t.to_address == address:
                stack.append((t, units(t)))
                if depth is not None and len(stack) > depth:
                    stack.popleft()  # buried in the omnibus's pool: nobody's in particular any more
            else:
                taken, missing = self._take(stack, units(t), buried=depth is not None)
                self._pieces[t.key], self._uncovered[t.key] = taken, missing

    def _take(self, stack: deque[Piece], need: int, *, buried: bool) -> tuple[list[Piece], int]:
        """Take `need` units from the top of the stack: the pieces named and what no inflow covered."""
        taken: list[Piece] = []
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
        # An omnibus's older money was dropped from its stack, not missing from its history.
        return taken, 0 if buried else need


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
        return bool(self.path) and self.share > _fraction(config.self_funded_share)


@lru_cache(maxsize=8)
def _fraction(value: Decimal) -> Fraction:
    return Fraction(value)


def stronger(first: Funding, second: Funding | None) -> Funding:
    """The larger of two accountings' findings for one transfer (the first's untraced names kept)."""
    if second is None or not second.path or second.share <= first.share:
        return first
    return Funding(first.transfer, second.own_units, second.path, first.untraced, second.origins)


def trace_funding(inbound: Transfer, ledger: FundingLedger, home: Container[str], config: FundingTraceConfig,
                  known: Container[str] | None = None, seeds: Seeds | None = None) -> Funding:
    """The share of `inbound` (paid from outside `home` into it) that the user's wallets (`home`) funded:
    back through its payer's inflows (those the ledger attributes to the payment), their payers' and so on,
    through at most `max_hops` intermediaries, whenever the money moved. Each inflow contributes in
    proportion to the part of it the payment carries; a payment of the user's contributes its `seeds` part
    (all of it when not given). `known`: the addresses whose history is at hand (None: all); one not known
    is named in `untraced`."""
    walk = _Walk(ledger, home, config, known, seeds or {})
    own, path = walk.walk(inbound, 1)
    found = tuple(sorted(walk.origins.values(), key=lambda t: t.order))
    return Funding(inbound, own, path, frozenset(walk.untraced), found)


class _Walk:
    """One trace's recursion through the ledger, with its memo, its budget of inflows and what it found."""

    def __init__(self, ledger: FundingLedger, home: Container[str], config: FundingTraceConfig,
                 known: Container[str] | None, seeds: Seeds) -> None:
        self.ledger, self.home, self.config, self.known, self.seeds = ledger, home, config, known, seeds
        self.untraced: set[str] = set()
        self.origins: dict[TransferKey, Transfer] = {}
        self.memo: dict[tuple[TransferKey, int], tuple[Fraction, tuple[Transfer, ...]]] = {}
        self.budget = config.max_steps

    def walk(self, payment: Transfer, hops: int) -> tuple[Fraction, tuple[Transfer, ...]]:
        """Own units in the whole `payment` (from an intermediary, the `hops`-th counted back) and the
        largest path ending with it."""
        cached = self.memo.get((payment.key, hops))
        if cached is not None:
            return cached
        payer = payment.from_address
        if payer == ZERO_ADDRESS:
            return Fraction(0), ()
        if self.known is not None and payer not in self.known:
            self.untraced.add(payer)
            return Fraction(0), ()
        total, best = Fraction(0), Fraction(0)
        best_path: tuple[Transfer, ...] = ()
        for inflow, take in self.ledger.pieces(payment):
            if self.budget <= 0:
                self.untraced.add(payer)
                break
            self.budget -= 1
            got, path = self._contribution(inflow, take, hops)
            total += got
            if got > best:
                best, best_path = got, path
        result = (total, (*best_path, payment) if best_path else ())
        self.memo[(payment.key, hops)] = result
        return result

    def _contribution(self, inflow: Transfer, take: int, hops: int) -> tuple[Fraction, tuple[Transfer, ...]]:
        """The user's units in the `take` units of `inflow` a payment carries, and their path."""
        whole = units(inflow)
        if inflow.from_address in self.home:
            own = self.seeds.get(inflow.key, whole)
            if not own:
                return Fraction(0), ()
            self.origins[inflow.key] = inflow
            return Fraction(take * own, whole), (inflow,)
        if hops >= self.config.max_hops:
            return Fraction(0), ()
        sub, path = self.walk(inflow, hops + 1)
        return (sub * take / whole, path) if sub else (Fraction(0), ())


def own_money(touching: Sequence[Transfer], home: Container[str], ledger: FundingLedger,
              config: FundingTraceConfig, known: Container[str] | None, described: Container[TransferKey]
              ) -> tuple[dict[TransferKey, int], dict[TransferKey, Funding]]:
    """The user's money leaving their wallets (`seeds`: per payment out of them, the units that are their
    own) and, on the way, the last-in-first-out funding of every transfer into them from outside.

    In chain order: a payment into the wallets that no record could be describing (`described`: from a
    record's origin in its date window, whatever the amount) and that the trace does not find to be the
    user's own money is its payer's money the user now holds (an advance, a loan); the user's next
    payments to that payer repay it first, and that part of them is the payer's money going back, not the
    user's. A payout a record describes (paid in full or short) is the user's once received."""
    seeds: dict[TransferKey, int] = {}
    fundings: dict[TransferKey, Funding] = {}
    owed: dict[str, int] = defaultdict(int)  # per payer: its money the user holds, not repaid yet
    for t in in_chain_order(touching):
        sender, recipient = t.from_address, t.to_address
        if sender in home and recipient not in home:
            repaid = min(owed[recipient], units(t))
            owed[recipient] -= repaid
            seeds[t.key] = units(t) - repaid
        elif recipient in home and sender not in home:
            funding = trace_funding(t, ledger, home, config, known, seeds)
            fundings[t.key] = funding
            if t.key not in described:
                owed[sender] += units(t) - _ceil(funding.own_units)
    return seeds, fundings


def earmarked(touching: Sequence[Transfer], home: Container[str], seeds: Seeds,
              claimable: Container[TransferKey], omnibus: Container[str]) -> dict[TransferKey, Funding]:
    """The third accounting, at the payer a record names: the user's own money paid into it and not paid
    back yet is the first of what it pays them (however long it stayed, whatever else the payer does
    meanwhile). Per transfer a record could claim, from a payer that is not an omnibus (where the user's
    deposits are their own account, not the payer's money): the part of it the user's money held there
    makes up, and the user's payments it takes that money from (their latest first)."""
    kept: dict[str, list[Piece]] = defaultdict(list)  # per payer: the user's payments into it, what is left
    found: dict[TransferKey, Funding] = {}
    for t in in_chain_order(touching):
        sender, recipient = t.from_address, t.to_address
        if sender in home and recipient not in home and seeds.get(t.key, units(t)):
            kept[recipient].append((t, seeds.get(t.key, units(t))))
        elif recipient in home and sender not in home and kept[sender]:
            taken, need = [], units(t)
            while need and kept[sender]:
                payment, left = kept[sender][-1]
                take = min(need, left)
                taken.append((payment, take))
                need -= take
                if take == left:
                    kept[sender].pop()
                else:
                    kept[sender][-1] = (payment, left - take)
            if t.key in claimable and sender not in omnibus:
                largest = max(taken, key=lambda piece: piece[1])[0]
                found[t.key] = Funding(t, Fraction(units(t) - need), (largest, t),
                                       origins=tuple(p for p, _ in taken))
    return found


def _ceil(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)


class FundingPool:
    """The second attribution, for payers that mix: every address's balance as a pool, every payment
    taking the same fraction of each part of it (the "haircut": a payer holding the user's 5,000 among
    8,000 pays out 5/8 of the user's money in every payment). One pass in chain order over the network's
    transfers; the user's money is followed by the number of intermediaries it went through (at most
    `max_hops`), however long it stays. Each balance starts with what the address held when its history
    began (`openings`, from the index's balances; else the least that keeps every payment covered), money
    of unknown origin and never the user's. A busy hub's pool is large, so the user's share of what it pays
    is small: hubs stay bounded by amount; money that stops over at an address with a business of its own is
    still found.
    Amounts in 10^-18 USD, integer (floor) arithmetic. Addresses not in `known` (history not fetched) pass
    on nothing of the user's."""

    def __init__(self, transfers: Iterable[Transfer], home: Container[str], config: FundingTraceConfig,
                 known: Container[str] | None = None, payers: Iterable[str] | None = None,
                 seeds: Seeds | None = None, openings: Mapping[str, int] | None = None,
                 partial: Container[str] = frozenset()) -> None:
        """`payers`: only money that can reach these addresses within `max_hops` is followed (None:
        every address's): the pass then reads only the transfers of the addresses that can. `seeds`: the
        user's own units of each of their payments (`own_money`; all of each when not given).
        `openings`: what addresses held when their history begins, where known (their balance now less
        what the history added); elsewhere the least that keeps each of their payments covered.
        `partial`: addresses whose history was not read whole (an omnibus read only around the payments
        traced, an address met at the trace's last hop that the user never paid): their balance is
        unknown, so they pass on nothing of the user's here (last in first out still follows money
        through an omnibus; at an omnibus the user's share of a payment is nil anyway)."""
        self._home, self._config, self._known, self._seeds = home, config, known, seeds or {}
        self._partial = partial
        ordered = in_chain_order(transfers)
        if payers is not None:
            ordered = _reaching(ordered, set(payers), home, config.max_hops)
        self._balance = _opening_balances(ordered, home)
        for address, opening in (openings or {}).items():
            if address not in home and opening > self._balance[address]:
                self._balance[address] = opening
        self._held: dict[str, list[int]] = {}  # address -> the user's units it holds, by intermediaries - 1
        self.carried: dict[TransferKey, int] = {}  # the user's units every transfer carried
        self.arrived: dict[TransferKey, list[int]] = {}  # into the user's wallets: by intermediaries
        self._inflows: dict[str, list[Transfer]] = defaultdict(list)
        for t in ordered:
            self._move(t)
        self._orders = {a: [t.order for t in items] for a, items in self._inflows.items()}

    def _move(self, t: Transfer) -> None:
        sender, recipient = t.from_address, t.to_address
        if sender == recipient or (sender in self._home and recipient in self._home):
            return
        self._inflows[recipient].append(t)
        moved = self._leaving(t)
        if recipient in self._home:
            if moved is not None and sender not in self._home:
                self.arrived[t.key] = moved
                self.carried[t.key] = sum(moved)
            return
        self._balance[recipient] += units(t)
        if moved is None or not any(moved):
            return
        if sender not in self._home:
            moved = [0, *moved[:-1]]  # one more intermediary (beyond max_hops: forgotten)
        self.carried[t.key] = sum(moved)
        held = self._held.setdefault(recipient, [0] * self._config.max_hops)
        self._held[recipient] = [a + b for a, b in zip(held, moved, strict=True)]

    def _leaving(self, t: Transfer) -> list[int] | None:
        """The user's units `t` takes from its sender, by intermediaries so far (None: none to follow)."""
        sender, amount = t.from_address, units(t)
        if sender in self._home:
            return [self._seeds.get(t.key, amount)] + [0] * (self._config.max_hops - 1)
        balance = self._balance[sender]
        self._balance[sender] = max(balance - amount, 0)
        held = self._held.get(sender)
        if held is None or sender == ZERO_ADDRESS or (self._known is not None and sender not in self._known) \
                or sender in self._partial:
            return None
        pool = max(balance, amount)
        moved = [part * amount // pool for part in held]
        self._held[sender] = [part - m for part, m in zip(held, moved, strict=True)]
        return moved

    def funding(self, inbound: Transfer) -> Funding:
        """What the pool accounting finds in `inbound` (into the user's wallets), with the path of the
        largest carriers back to the user's payment."""
        own = sum(self.arrived.get(inbound.key, ()))
        if not own:
            return Funding(inbound, Fraction(0), ())
        path = self._path(inbound, 1)
        return Funding(inbound, Fraction(own), path, origins=path[:1])

    def _path(self, payment: Transfer, hops: int) -> tuple[Transfer, ...]:
        payer = payment.from_address
        end = bisect.bisect_left(self._orders.get(payer, []), payment.order)
        best: Transfer | None = None
        best_units = 0
        for inflow in self._inflows.get(payer, [])[:end]:
            if inflow.from_address in self._home:
                carried = self._seeds.get(inflow.key, units(inflow))
            else:
                carried = self.carried.get(inflow.key, 0)
            if carried > best_units:
                best, best_units = inflow, carried
        if best is None:
            return ()
        if best.from_address in self._home:
            return (best, payment)
        if hops >= self._config.max_hops:
            return ()
        sub = self._path(best, hops + 1)
        return (*sub, payment) if sub else ()


def _opening_balances(ordered: Sequence[Transfer], home: Container[str]) -> defaultdict[str, int]:
    """Per address outside the user's wallets, the least it must have held before its first transfer given
    for no payment of it to overdraw it: money from before its history, whose origin the trace cannot see."""
    running: dict[str, int] = defaultdict(int)
    lowest: dict[str, int] = defaultdict(int)
    for t in ordered:
        if t.from_address == t.to_address:
            continue
        amount = units(t)
        running[t.from_address] -= amount
        lowest[t.from_address] = min(lowest[t.from_address], running[t.from_address])
        running[t.to_address] += amount
    return defaultdict(int, {a: -low for a, low in lowest.items() if low < 0 and a not in home})


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
