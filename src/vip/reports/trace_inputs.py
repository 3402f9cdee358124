"""What the pure pipeline of one user needs indexed, gathered for the VIP job and the labelling job alike:
the wallets' own final transfers from `since`, and those of the addresses the funding trace follows (the
payers of the wallets' inflows, then theirs, hop by hop, at most `funding_trace.max_addresses` per network),
asking the indexer to backfill the ones it does not watch yet and waiting for those backfills."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncConnection
from structlog.typing import FilteringBoundLogger

from vip.config import Settings
from vip.reports import inputs as inputs
from vip.verification.funding import ZERO_ADDRESS, FundingLedger
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


@dataclass(frozen=True)
class TraceInputs:
    """The `verify` arguments read from the index: transfers, per network the addresses whose history is
    complete and what they held when it begins (where their balances are read), the networks where the
    fetch cap cut the trace."""

    transfers: list[Transfer]
    known: dict[str, set[str]]
    capped: set[str]
    openings: dict[str, dict[str, int]]


class TraceCollector:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.config = settings.verification

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
        own, wanted, fetched, capped, settled = await self._collect(conn, wallets, finals, since)
        ready = await self._trace_ready(conn, wanted, since, fetch_requested_at, mark_fetch_requested, bound)
        if ready is not True and ready != TIMED_OUT:
            return ready
        if ready is True and not settled:
            # Some history above was read before its backfill was seen finished, and the backfill may have
            # committed in between: read them again, now that each is complete, and go round once more if
            # the money leads to an address not fetched yet. (When every address's history was complete
            # before it was read, a second read would find the same rows: it is skipped.)
            own, again, fetched, capped, _ = await self._collect(conn, wallets, finals, since)
            if any(set(addresses) - set(wanted.get(network, [])) for network, addresses in again.items()):
                return FETCHING
        transfers: list[Transfer] = []
        known: dict[str, set[str]] = {}
        openings: dict[str, dict[str, int]] = {}
        for network, items in own.items():
            seen = {t.key for t in items}
            transfers += items + [t for t in fetched[network] if t.key not in seen]
            complete = await inputs.backfilled(conn, network, wanted[network], since)
            known[network] = {w.address for w in wallets if w.network == network} | complete
            openings[network] = await inputs.opening_balances(conn, self.settings.networks[network],
                                                              sorted(complete), since)
        return TraceInputs(transfers, known, capped, openings)

    async def _collect(self, conn: AsyncConnection, wallets: list[Wallet], finals: dict[str, int],
                       since: datetime) -> tuple[dict[str, list[Transfer]], dict[str, list[str]],
                                                 dict[str, list[Transfer]], set[str], bool]:
        """Per network: the wallets' own transfers, the addresses the trace wants, their transfers indexed
        now; the networks where the cap cut the trace; and whether every address's history was complete
        from `since` before it was read (the wallets' is: `gather` waits for their backfills first)."""
        own: dict[str, list[Transfer]] = {}
        wanted: dict[str, list[str]] = {}
        fetched: dict[str, list[Transfer]] = {}
        capped: set[str] = set()
        settled = True
        for network in sorted({w.network for w in wallets}):
            if network not in finals:
                continue
            home = {w.address for w in wallets if w.network == network}
            own[network] = await inputs.transfers_touching(conn, network, sorted(home), since,
                                                           finals[network])
            wanted[network], fetched[network], hit, complete = await self._trace_frontier(
                conn, network, home, own[network], since, finals[network])
            if hit:
                capped.add(network)
            settled = settled and complete
        return own, wanted, fetched, capped, settled

    async def _trace_frontier(self, conn: AsyncConnection, network: str, home: set[str], own: list[Transfer],
                              since: datetime, final: int) -> tuple[list[str], list[Transfer], bool, bool]:
        """The addresses the funding trace needs fetched, the transfers of them indexed now, whether the
        `max_addresses` cap cut the list, and whether each address's history from `since` was complete
        (backfilled) before it was read. Level by level, as far as what is indexed now shows: the
        payers into the wallets; then, in each payer's history, the senders of the inflows that funded
        those payments (the trace's own last-in-first-out attribution: a busy payer adds only the few
        senders whose money reached it last before it paid the user, not its thousands), and so on
        `max_hops` deep. No address is left out but the zero address, whose transfers are mints."""
        trace = self.config.funding_trace
        wanted: list[str] = []
        fetched: list[Transfer] = []
        excluded = set(home) | {ZERO_ADDRESS}
        payments = [t for t in own if t.to_address in home and t.from_address not in excluded]
        capped, complete = False, True
        for hop in range(1, trace.max_hops + 1):
            level = inputs.payers(payments, {t.to_address for t in payments}, excluded)
            room = trace.max_addresses - len(wanted)
            if len(level) > room:
                capped, level = True, level[:room]
            if not level:
                break
            wanted += level
            excluded |= set(level)
            complete = complete and await inputs.backfilled(conn, network, level, since) == set(level)
            fetched += await inputs.transfers_touching(conn, network, level, since, final)
            if hop == trace.max_hops:
                break
            ledger = FundingLedger([*own, *fetched], trace.max_pieces)
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
                before = [t for t in received[p.from_address] if t.order < p.order]
                largest = sorted(before, key=lambda t: (-t.amount, t.order))[:POOL_FOLLOW]
                for inflow in [*(i for i, _ in ledger.pieces(p)), *largest]:
                    if inflow.from_address not in home:
                        following[inflow.key] = inflow
            payments = list(following.values())
        return wanted, fetched, capped, complete

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

