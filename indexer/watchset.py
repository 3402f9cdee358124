"""The live follower's watch set in memory: additions read at every step by one small indexed query, the
whole set reloaded only periodically or when addresses are removed (never 100,000 rows per poll)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.store.tables import watched_addresses

# Channel the `watched_addresses` delete trigger notifies (migration 0017).
WATCH_SET_CHANNEL = "vip_watch_set"


@dataclass(frozen=True)
class WatchSnapshot:
    """One version of a network's watch set, never changed once made (a prefetch running meanwhile
    keeps filtering with the version it started with). `keys` are the addresses as bare lower-case hex,
    the form an address takes at the end of a log topic, plus the disbursement contract."""

    version: int
    keys: frozenset[str]
    _sorted: list[str] = field(default_factory=list, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.keys)

    def addresses(self) -> list[str]:
        """The set as sorted `0x` addresses (topic filters' chunks), built once per version."""
        if not self._sorted and self.keys:
            self._sorted.extend(sorted("0x" + k for k in self.keys))
        return self._sorted


def key_of(address: str) -> str:
    return address.lower().removeprefix("0x")


class WatchSetCache:
    """A network's watch set for the follower. `refresh()` at every step returns the current snapshot and
    the addresses the follower has not covered yet (`live_from_block IS NULL`: just added, or added back),
    every one of which is in that snapshot."""

    def __init__(self, network: str, reload_s: float, extra: tuple[str, ...] = ()) -> None:
        self.network = network
        self.reload_s = reload_s
        self.extra = frozenset(key_of(a) for a in extra)
        self.snapshot = WatchSnapshot(0, self.extra)
        self._loaded_at: float | None = None
        self.full_loads = 0
        self.watched = 0  # rows of the network's watch set (the snapshot also holds `extra`)

    def invalidate(self) -> None:
        """Reload the whole set at the next refresh (addresses were removed)."""
        self._loaded_at = None

    async def refresh(self, conn: AsyncConnection) -> tuple[WatchSnapshot, list[str]]:
        now = time.monotonic()
        if self._loaded_at is None or now - self._loaded_at >= self.reload_s:
            return await self._load_all(conn, now)
        rows = await conn.execute(select(watched_addresses.c.address).where(
            watched_addresses.c.network == self.network, watched_addresses.c.live_from_block.is_(None)))
        uncovered = [r.address for r in rows]
        added = {key_of(a) for a in uncovered} - self.snapshot.keys
        if added:
            self.snapshot = WatchSnapshot(self.snapshot.version + 1, self.snapshot.keys | added)
            self.watched += len(added)
        return self.snapshot, uncovered

    async def _load_all(self, conn: AsyncConnection, now: float) -> tuple[WatchSnapshot, list[str]]:
        rows = (await conn.execute(select(watched_addresses.c.address,
                                          watched_addresses.c.live_from_block.is_(None).label("uncovered"))
                                   .where(watched_addresses.c.network == self.network))).all()
        keys = frozenset(key_of(r.address) for r in rows) | self.extra
        if keys != self.snapshot.keys:
            self.snapshot = WatchSnapshot(self.snapshot.version + 1, keys)
        self._loaded_at = now
        self.full_loads += 1
        self.watched = len(rows)
        return self.snapshot, [r.address for r in rows if r.uncovered]
