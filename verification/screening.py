"""The fraud screening of one user's transfers on one network: the pass-through rule and the funding trace of
every inbound transfer (`vip.verification.funding`), what they flag with which evidence, and what the trace
could not see (docs/verification.md, "The funding trace")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from vip.verification.config import FundingTraceConfig, VerificationConfig
from vip.verification.fraud import WashContext, find_wash_trades
from vip.verification.funding import (
    Funding,
    FundingLedger,
    FundingPool,
    Omnibus,
    earmarked,
    in_chain_order,
    own_money,
    stronger,
    units,
)
from vip.verification.matching import in_record_windows, possible_settlements
from vip.verification.model import CIRCULAR_FLOW, WASH_TRADE, IncomeRecord, Transfer, TransferKey

# Why the trace could not tell where a payout's money came from (fraud_trace.opaque[].reason).
HELD_BEFORE_HISTORY = "held_before_history"  # its payer paid it from money held before the history read
OMNIBUS = "omnibus"  # it came through an omnibus address where the user keeps money of their own

Side = tuple[str, TransferKey]  # (a wallet's address, a transfer as that wallet sees it)


@dataclass(frozen=True)
class Wallet:
    id: str
    address: str  # lower-case
    network: str


@dataclass(frozen=True)
class Opaque:
    """An inbound transfer a record could claim whose origin the trace could not see, and why: its payer
    (`address`) paid it from money held before the history read (`units`: that part of it), or it came
    through an omnibus (`address`) where the user keeps money of their own (`units`: how much)."""

    network: str
    transfer: Transfer
    address: str
    reason: str
    units: int


@dataclass
class Screening:
    """What the screening found, summed over networks."""

    flags: dict[Side, set[str]] = field(default_factory=lambda: defaultdict(set))
    # The trace's evidence, per flag it raised: a transfer the wash rule also flags carries none for that.
    evidence: dict[tuple[str, TransferKey, str], Funding] = field(default_factory=dict)
    own: dict[Wallet, list[Transfer]] = field(default_factory=dict)  # every wallet's transfers
    inflows: list[Transfer] = field(default_factory=list)  # into the wallets from outside them
    traced: int = 0
    self_funded: int = 0
    untraced: list[tuple[str, str, str]] = field(default_factory=list)  # (network, address, inbound tx)
    opaque: list[Opaque] = field(default_factory=list)


@dataclass(frozen=True)
class _Network:
    """One network's inputs as the screening reads them."""

    name: str
    wallets: list[Wallet]
    home: frozenset[str]
    everything: Sequence[Transfer]  # the wallets' transfers and those of the addresses fetched
    touching: list[Transfer]  # the wallets' transfers
    arriving: list[Transfer]  # into the wallets from outside them, in chain order
    candidates: frozenset[TransferKey]  # of them, those an income record could accept
    described: frozenset[TransferKey]  # of them, those from a record's origin in its window (any amount)
    settlements: set[tuple[Transfer, ...]]  # the groups of them a record could be settled by
    known: frozenset[str] | None  # addresses whose history is at hand (None: all)
    openings: Mapping[str, int] | None  # what addresses held when the history begins, where known
    windowed: frozenset[str] = frozenset()  # omnibus addresses read only around the payments traced
    unread: frozenset[str] = frozenset()  # met at the trace's last hop, never paid by the wallets: not read


def screen_network(screening: Screening, name: str, wallets: list[Wallet], everything: Sequence[Transfer],
                   records: Sequence[IncomeRecord], config: VerificationConfig,
                   known: Collection[str] | None, lenders: Container[str],
                   openings: Mapping[str, int] | None = None, windowed: Collection[str] = (),
                   unread: Collection[str] = ()) -> None:
    """Screen one network's transfers into `screening`. `lenders`: the payers the records name;
    `openings`: what addresses held when the history read begins, where the index knows it; `windowed`:
    omnibus addresses whose history was read only around the payments traced (decision 355); `unread`:
    addresses met at the trace's last hop, never paid by the wallets, whose history was not read
    (decision 356)."""
    net = _network(name, wallets, everything, records, config, known, openings, windowed, unread)
    trace = config.funding_trace
    omnibus = Omnibus(net.everything, trace, found=net.windowed)
    ledger = FundingLedger(net.everything, trace.max_pieces, omnibus)
    seeds, lifo = own_money(net.touching, net.home, ledger, trace, net.known, net.described)
    for w in wallets:
        screening.own[w] = [t for t in net.touching if w.address in (t.from_address, t.to_address)]
    repaid = {t.key for t in net.touching if t.key in seeds and 2 * seeds[t.key] < units(t)}
    context = WashContext(skip=net.home | set(config.dex_addresses.get(name, ())), claimable=net.candidates,
                          repaid=repaid, omnibus=omnibus, lenders=lenders)
    for w in wallets:
        # Between two of the user's wallets is neither: it is the same person's money.
        for key in find_wash_trades(w.address, screening.own[w], config.wash_trade, context):
            screening.flags[(w.address, key)].add(WASH_TRADE)
    marked = earmarked(net.touching, net.home, seeds, net.candidates, omnibus)
    fundings = _trace_inflows(screening, net, lifo, marked, seeds, trace)
    flagged = {key for (_, key), codes in screening.flags.items() if codes}
    screening.opaque += _opaque(net, ledger, fundings, seeds, omnibus, flagged, trace)
    screening.inflows += net.arriving


def _network(name: str, wallets: list[Wallet], everything: Sequence[Transfer],
             records: Sequence[IncomeRecord], config: VerificationConfig, known: Collection[str] | None,
             openings: Mapping[str, int] | None, windowed: Collection[str] = (),
             unread: Collection[str] = ()) -> _Network:
    home = frozenset(w.address for w in wallets)
    everything = in_chain_order(everything)
    touching = [t for t in everything if t.from_address in home or t.to_address in home]
    arriving = [t for t in touching if t.to_address in home and t.from_address not in home]
    settlements = possible_settlements(records, arriving, config.matching)
    candidates = frozenset(t.key for group in settlements for t in group)
    described = in_record_windows(records, arriving, config.matching)
    return _Network(name, wallets, home, everything, touching, arriving, candidates, described, settlements,
                    None if known is None else frozenset(known) | home | frozenset(unread), openings,
                    frozenset(windowed), frozenset(unread))


@dataclass(frozen=True)
class _Found:
    """What each accounting found in one inbound transfer: last in first out for every one, the pool and
    the earmark at the named payer for those that could pass for income."""

    lifo: Funding
    pool: Funding | None = None
    earmark: Funding | None = None

    def each(self) -> tuple[Funding | None, Funding | None, Funding | None]:
        return (self.lifo, self.pool, self.earmark)

    def strongest(self) -> Funding:
        return stronger(stronger(self.lifo, self.pool), self.earmark)


def _trace_inflows(screening: Screening, net: _Network, lifo: Mapping[TransferKey, Funding],
                   marked: Mapping[TransferKey, Funding], seeds: Mapping[TransferKey, int],
                   trace: FundingTraceConfig) -> dict[TransferKey, Funding]:
    """The funding of every inbound transfer (the largest of the accountings' shares; a part of a sum a
    record could be settled by, the share of the whole sum), and the flags of the self-funded."""
    pool = FundingPool(net.everything, net.home, trace, net.known, seeds=seeds, openings=net.openings,
                       payers={t.from_address for t in net.arriving if t.key in net.candidates},
                       partial=net.windowed | net.unread)
    found = {t.key: _Found(lifo[t.key], pool.funding(t), marked.get(t.key)) if t.key in net.candidates
             else _Found(lifo[t.key]) for t in net.arriving}
    fundings = {key: each.strongest() for key, each in found.items()}
    for group in net.settlements:
        if len(group) > 1:
            for t, whole in _as_a_sum(group, found).items():
                fundings[t.key] = stronger(fundings[t.key], whole)
    for t in net.arriving:
        funding = fundings[t.key]
        screening.traced += 1
        screening.untraced += [(net.name, address, t.tx_hash) for address in sorted(funding.untraced)]
        # Self-funded money is flagged when it could pass for income, and always when it went round
        # through two or more intermediaries; one that came straight back from the address the user paid
        # and no record could claim is a refund or a loan repaid (docs/verification.md).
        if not funding.self_funded(trace) or (funding.intermediaries < 2 and t.key not in net.candidates):
            continue
        screening.self_funded += 1
        code = WASH_TRADE if funding.intermediaries == 1 else CIRCULAR_FLOW
        # The inbound transfer and every payment of the user's wallets found in it.
        for side in [(t.to_address, t.key), *((o.from_address, o.key) for o in funding.origins)]:
            screening.flags[side].add(code)
            screening.evidence[(*side, code)] = funding
    return fundings


def _as_a_sum(group: tuple[Transfer, ...], found: Mapping[TransferKey, _Found]) -> dict[Transfer, Funding]:
    """The parts of a sum a record could be settled by, each with the share of the whole sum the user's
    money makes up (by the accounting that finds most in the sum), along the path of its largest part:
    money is matched as a sum, and traced as one."""
    best: list[Funding] = []
    for index in range(3):
        parts = [f for t in group if (f := found[t.key].each()[index]) is not None and f.path]
        if sum(f.own_units for f in parts) > sum(f.own_units for f in best):
            best = parts
    if not best:
        return {}
    own = sum((f.own_units for f in best), Fraction(0))
    total = sum(units(t) for t in group)
    largest = max(best, key=lambda f: f.own_units)
    origins = tuple({o.key: o for f in best for o in f.origins}.values())
    return {t: Funding(t, own * units(t) / total, (*largest.path[:-1], t), origins=origins) for t in group}


def _opaque(net: _Network, ledger: FundingLedger, fundings: Mapping[TransferKey, Funding],
            seeds: Mapping[TransferKey, int], omnibus: Container[str], flagged: Container[TransferKey],
            trace: FundingTraceConfig) -> list[Opaque]:
    """The transfers a record could claim, not flagged, whose origin the trace could not see: mostly paid
    from money their payer held before the history read, or come through an omnibus in which the user
    keeps at least that share of them (their money there could be it: the chain cannot tell)."""
    threshold = Fraction(trace.self_funded_share)
    found: list[Opaque] = []
    for t in net.arriving:
        if t.key not in net.candidates or t.key in flagged or fundings[t.key].untraced:
            continue
        before = ledger.uncovered(t)
        if Fraction(before, units(t)) > threshold:
            found.append(Opaque(net.name, t, t.from_address, HELD_BEFORE_HISTORY, before))
            continue
        through = _omnibus_on_the_way(t, ledger, omnibus, net.home, trace.max_hops)
        if through is not None:
            kept = _kept_at(through, t, net.touching, seeds, net.home)
            if Fraction(kept, units(t)) > threshold:
                found.append(Opaque(net.name, t, through, OMNIBUS, kept))
    return found


def _omnibus_on_the_way(t: Transfer, ledger: FundingLedger, omnibus: Container[str], home: Container[str],
                        hops: int) -> str | None:
    """The first omnibus met going back from `t` along the largest part of its money, if any."""
    current = t
    for _ in range(hops):
        if current.from_address in omnibus:
            return current.from_address
        pieces = ledger.pieces(current)
        if not pieces:
            return None
        current = max(pieces, key=lambda piece: piece[1])[0]
        if current.from_address in home:
            return None
    return None


def _kept_at(address: str, before: Transfer, touching: Sequence[Transfer], seeds: Mapping[TransferKey, int],
             home: Container[str]) -> int:
    """The user's own money at `address` before `before`: what they paid into it less what it paid them."""
    kept = 0
    for t in touching:
        if t.order >= before.order:
            continue
        if t.to_address == address and t.from_address in home:
            kept += seeds.get(t.key, units(t))
        elif t.from_address == address and t.to_address in home:
            kept -= units(t)
    return max(kept, 0)


def prior_flags_into(flags: dict[Side, set[str]], prior: Mapping[Side, Collection[str]] | None,
                     kept: Container[str]) -> None:
    """Add the flags an earlier run raised (decision 163)."""
    for side, codes in (prior or {}).items():
        flags[side] |= {c for c in codes if c in kept}
