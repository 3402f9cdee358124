"""What the pure pipeline of one user needs indexed, gathered for the VIP job and the labelling job alike:
the wallets' own final transfers from `since`, and those of the addresses the funding trace follows (the
payers of the wallets' inflows, then theirs, hop by hop, at most `funding_trace.max_addresses` per network),
asking the indexer to backfill the ones it does not watch yet and waiting for those backfills."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncConnection
from structlog.typing import FilteringBoundLogger

from vip.config import Settings
from vip.reports import inputs as inputs
from vip.verification.funding import ZERO_ADDRESS, FundingLedger, Omnibus
from vip.verification.model import Transfer, TransferKey
from vip.verification.pipeline import Wallet

# `_trace_ready` gave up waiting for the trace's backfills: verify with what is indexed, as it is.
TIMED_OUT = "timed_out"
# Not ready yet: the caller postpones its job. FETCHING: the indexer was just asked for addresses (work done);
# None (WAITING): backfills under way, the worker may idle.
FETCHING = "fetching"
WAITING = None
# Per payment traced, the trace's fetch also follows this many of the payer's largest inflows before it (the
# pool accounting may find the user's money there), besides what last in first out attributes the payment to.
POOL_FOLLOW = 16
# A payer with at least this many inflows is looked at before its history is read: when its latest this many
# inflows show an omnibus day, only the windows before the payments traced are read (decision 355).
OMNIBUS_PROBE = 1000
# How long a worker keeps what it found about a busy payer (an exchange's hot wallet stays one).
OMNIBUS_MEMORY_S = 600.0
# At the trace's last two hops, leave unread the payers the wallets' money cannot have reached by then
# (decision 356); False reads every one, as before (tests compare the two).
LAST_HOPS_PRUNED = True


@dataclass(frozen=True)
class TraceInputs:
    """The `verify` arguments read from the index: transfers, per network the addresses whose history is
    complete and what they held when it begins (where their balances are read), the networks where the
    fetch cap cut the trace, the omnibus addresses read in windows."""

    transfers: list[Transfer]
    known: dict[str, set[str]]
    capped: set[str]
    openings: dict[str, dict[str, int]]
    windowed: dict[str, set[str]]  # per network, the omnibus addresses read only around traced payments
    unread: dict[str, set[str]]  # per network, last-hop payers the wallets never paid (not read)


@dataclass
class _Frontier:
    """What `_trace_frontier` found on one network: the addresses the trace wants and their transfers
    indexed now, whether the `max_addresses` cap cut the list, whether each address's history from `since`
    was complete (backfilled) before it was read, the omnibus addresses read only in windows."""

    wanted: list[str] = field(default_factory=list)
    fetched: list[Transfer] = field(default_factory=list)
    capped: bool = False
    complete: bool = True
    windowed: set[str] = field(default_factory=set)
    unread: set[str] = field(default_factory=set)


class TraceCollector:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.config = settings.verification
        # (network, address, since) -> (monotonic time looked at, whether it is an omnibus): a busy payer's
        # latest inflows are read once per OMNIBUS_MEMORY_S per worker, not once per VIP meeting it.
        self._omnibus_seen: dict[tuple[str, str, datetime], tuple[float, bool]] = {}

    async def gather(self, conn: AsyncConnection, wallets: list[Wallet], since: datetime,
                     fetch_requested_at: datetime | None,
                     mark_fetch_requested: Callable[[datetime], Awaitable[None]],
                     bound: FilteringBoundLogger) -> TraceInputs | str | None:
        """The inputs, or FETCHING / WAITING while the history they need is not indexed yet (the caller
        postpones its job). `fetch_requested_at`: when this job first asked the indexer for the trace's
        addresses (`mark_fetch_requested` records it); after `fetch_wait_s` of wall-clock time the trace
        goes on with what is indexed."""
        finals = await inputs.final_blocks(conn, self.settings, {w.network for w in wallets})
        # The wallets' own history first: a run while a just-connected wallet is still being backfilled
        # would miss its payouts (and its payers). It waits, however long that takes: a wrong report is
        # worse than a late one (the job-queue-age alert watches the wait).
        for network in sorted({w.network for w in wallets}):
            mine = sorted(w.address for w in wallets if w.network == network)
            # The wallets' history from `since` too: the user's money may have left them long before it
            # comes back as "salary" (a wallet is backfilled a year back when it connects).
            asked = await inputs.watch_from(conn, network, mine, since)
            if asked:
                bound.info("fetching the wallets' earlier history", wallets=asked)
                return FETCHING
            if await inputs.pending_backfills(conn, network, mine):
                return WAITING
        own, frontiers = await self._collect(conn, wallets, finals, since)
        wanted = {network: f.wanted for network, f in frontiers.items()}
        ready = await self._trace_ready(conn, wanted, since, fetch_requested_at, mark_fetch_requested, bound)
        if ready is not True and ready != TIMED_OUT:
            return ready
        if ready is True and not all(f.complete for f in frontiers.values()):
            # Some history above was read before its backfill was seen finished, and the backfill may have
            # committed in between: read them again, now that each is complete, and go round once more if
            # the money leads to an address not fetched yet. (When every address's history was complete
            # before it was read, a second read would find the same rows: it is skipped.)
            own, frontiers = await self._collect(conn, wallets, finals, since)
            if any(set(f.wanted) - set(wanted.get(network, [])) for network, f in frontiers.items()):
                return FETCHING
        transfers: list[Transfer] = []
        known: dict[str, set[str]] = {}
        openings: dict[str, dict[str, int]] = {}
        for network, items in own.items():
            seen = {t.key for t in items}
            frontier = frontiers[network]
            transfers += items + [t for t in frontier.fetched if t.key not in seen]
            complete = await inputs.backfilled(conn, network, wanted[network], since)
            known[network] = {w.address for w in wallets if w.network == network} | complete
            # A windowed omnibus's balance at `since` is not what its windows add up to: none is given.
            openings[network] = await inputs.opening_balances(conn, self.settings.networks[network],
                                                              sorted(complete - frontier.windowed), since)
        return TraceInputs(transfers, known, {n for n, f in frontiers.items() if f.capped}, openings,
                           {n: f.windowed for n, f in frontiers.items()},
                           {n: f.unread for n, f in frontiers.items()})

    async def _collect(self, conn: AsyncConnection, wallets: list[Wallet], finals: dict[str, int],
                       since: datetime) -> tuple[dict[str, list[Transfer]], dict[str, _Frontier]]:
        """Per network: the wallets' own transfers, and what the trace's frontier found from them."""
        own: dict[str, list[Transfer]] = {}
        frontiers: dict[str, _Frontier] = {}
        for network in sorted({w.network for w in wallets}):
            if network not in finals:
                continue
            home = {w.address for w in wallets if w.network == network}
            own[network] = await inputs.transfers_touching(conn, network, sorted(home), since,
                                                           finals[network])
            frontiers[network] = await self._trace_frontier(conn, network, home, own[network], since,
                                                            finals[network])
        return own, frontiers

    async def _trace_frontier(self, conn: AsyncConnection, network: str, home: set[str], own: list[Transfer],
                              since: datetime, final: int) -> _Frontier:
        """The addresses the funding trace needs fetched and the transfers of them indexed now, level by
        level, as far as what is indexed now shows: the payers into the wallets; then, in each payer's
        history, the senders of the inflows that funded those payments (the trace's own last-in-first-out
        attribution: a busy payer adds only the few senders whose money reached it last before it paid the
        user, not its thousands), and so on `max_hops` deep. No address is left out but the zero address,
        whose transfers are mints. An omnibus payer's year is not read: only its last `max_pieces`
        inflows before each payment traced can have funded it, so those windows are (decision 355). At
        the last two hops a payer the wallets' money cannot have reached by then is not read (decision
        356)."""
        trace = self.config.funding_trace
        frontier = _Frontier()
        fetched = frontier.fetched
        excluded = set(home) | {ZERO_ADDRESS}
        payments = [t for t in own if t.to_address in home and t.from_address not in excluded]
        for hop in range(1, trace.max_hops + 1):
            level = inputs.payers(payments, {t.to_address for t in payments}, excluded)
            unread = await self._unreachable(conn, network, hop, level, own, home, since, final)
            frontier.unread |= unread
            level = [a for a in level if a not in unread]
            room = trace.max_addresses - len(frontier.wanted)
            if len(level) > room:
                frontier.capped, level = True, level[:room]
            if not level:
                break
            frontier.wanted += level
            excluded |= set(level)
            frontier.complete = frontier.complete and \
                await inputs.backfilled(conn, network, level, since) == set(level)
            omnibus = await self._omnibus_among(conn, network, level, since, final)
            fetched += await inputs.transfers_touching(conn, network, [a for a in level if a not in omnibus],
                                                       since, final)
            for address in sorted(omnibus):
                fetched += await inputs.windows_before(conn, network, address,
                                                       [p for p in payments if p.from_address == address],
                                                       since, trace.max_pieces)
            frontier.windowed |= omnibus
            if hop == trace.max_hops:
                break
            ledger = FundingLedger([*own, *fetched], trace.max_pieces, frontier.windowed)
            chosen = set(level)
            received: dict[str, list[Transfer]] = defaultdict(list)
            for t in fetched:
                if t.to_address in chosen:
                    received[t.to_address].append(t)
            following: dict[TransferKey, Transfer] = {}
            for p in payments:
                if p.from_address not in chosen:
                    continue
                # What last in first out attributes the payment to, and (for the pool) the largest
                # inflows of the payer before it, however old.
                # (The pool passes nothing through a windowed omnibus: no largest inflows there.)
                before = [] if p.from_address in frontier.windowed else \
                    [t for t in received[p.from_address] if t.order < p.order]
                largest = sorted(before, key=lambda t: (-t.amount, t.order))[:POOL_FOLLOW]
                for inflow in [*(i for i, _ in ledger.pieces(p)), *largest]:
                    if inflow.from_address not in home:
                        following[inflow.key] = inflow
            payments = list(following.values())
        return frontier

    async def _unreachable(self, conn: AsyncConnection, network: str, hop: int, level: list[str],
                           own: list[Transfer], home: set[str], since: datetime, final: int) -> set[str]:
        """The payers of `level` that cannot hold the wallets' money at this hop (decision 356). At the last
        hop the trace counts only inflows straight from the wallets (one more payer back is one intermediary
        too many): a payer the wallets never paid. At the hop before, inflows from the wallets or from an
        address they paid (from an omnibus they paid, only while one of their payments into it was among its
        last `max_pieces` inflows): a payer that had none, by its history from `since` as indexed whole
        now, and no omnibus (those are read in windows). Any other is read, as every payer was before."""
        trace = self.config.funding_trace
        if not LAST_HOPS_PRUNED or hop < trace.max_hops - 1:
            return set()
        paid: dict[str, list[Transfer]] = defaultdict(list)  # what the wallets paid each address
        for t in own:
            if t.from_address in home and t.to_address not in home:
                paid[t.to_address].append(t)
        unpaid = [a for a in level if a not in paid]
        if hop == trace.max_hops:
            return set(unpaid)
        indexed = await inputs.backfilled(conn, network, unpaid, since)
        quiet = indexed - await inputs.busy_receivers(conn, network, sorted(indexed), final, OMNIBUS_PROBE)
        pairs = await inputs.paid_by(conn, network, sorted(quiet), sorted(home | paid.keys()), since, final)
        senders = {s for s, _ in pairs} - home
        omnibus = await self._omnibus_among(conn, network, sorted(senders), since, final)
        reached = {r for s, r in pairs if s not in omnibus}
        for address in sorted(omnibus):
            receivers = sorted({r for s, r in pairs if s == address} - reached)
            reached |= await inputs.paid_while_recent(conn, network, address, paid[address], receivers,
                                                      trace.max_pieces, final)
        return quiet - reached

    async def _omnibus_among(self, conn: AsyncConnection, network: str, level: list[str], since: datetime,
                             final: int) -> set[str]:
        """The addresses of `level` with at least OMNIBUS_PROBE inflows whose latest OMNIBUS_PROBE inflows
        show an omnibus day (`Omnibus`); a quieter address is read whole, as its reading is cheap."""
        busy = await inputs.busy_receivers(conn, network, level, final, OMNIBUS_PROBE)
        now = time.monotonic()
        unknown = sorted(a for a in busy if (hit := self._omnibus_seen.get((network, a, since))) is None
                         or now - hit[0] > OMNIBUS_MEMORY_S)
        if unknown:
            if len(self._omnibus_seen) > 10_000:  # forget what is stale (another day's `since`, say)
                self._omnibus_seen = {k: v for k, v in self._omnibus_seen.items()
                                      if now - v[0] <= OMNIBUS_MEMORY_S}
            latest = await inputs.latest_inflows(conn, network, unknown, since, final, OMNIBUS_PROBE)
            found = Omnibus([t for items in latest.values() for t in items], self.config.funding_trace)
            for address in unknown:
                self._omnibus_seen[(network, address, since)] = (now, address in found)
        return {a for a in busy if self._omnibus_seen[(network, a, since)][1]}

    async def _trace_ready(self, conn: AsyncConnection, wanted: dict[str, list[str]], since: datetime,
                           fetch_requested_at: datetime | None,
                           mark_fetch_requested: Callable[[datetime], Awaitable[None]],
                           bound: FilteringBoundLogger) -> Literal[True] | str | None:
        """True when the history of every address the trace needs is indexed. Otherwise asks the indexer
        for the ones it does not watch yet (FETCHING: a run after their backfills may find the next
        hop's) or keeps waiting (None), at most `fetch_wait_s` of wall-clock time after the first ask
        (then TIMED_OUT: verify with what is indexed)."""
        wall = datetime.now(UTC)
        added = 0
        for network, addresses in wanted.items():
            added += await inputs.watch_from(conn, network, addresses, since)
        if fetch_requested_at is None:
            await mark_fetch_requested(wall)
        elif (wall - fetch_requested_at).total_seconds() >= self.config.circular_flow.fetch_wait_s:
            bound.warning("trace backfills still running; verifying with what is indexed")
            return TIMED_OUT
        if added:
            bound.info("fetching the trace's addresses", addresses=added)
            return FETCHING
        return True if await self._backfills_done(conn, wanted) else None

    async def _backfills_done(self, conn: AsyncConnection, wanted: dict[str, list[str]]) -> bool:
        for network, addresses in wanted.items():
            if await inputs.pending_backfills(conn, network, addresses):
                return False
        return True

