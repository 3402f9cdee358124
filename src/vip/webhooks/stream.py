"""An organisation's events as they commit, for `GET /v1/events/stream` (what `vip listen` reads).

Events are read from the outbox by commit sequence (`seq`), but a sequence number is taken at insert,
not at commit: a transaction may commit an event below one already seen. So each look re-reads the
organisation's sequence numbers above where the cursor stood `lookback_s` ago (an index-only range of
`(organisation_id, seq)`) and takes those not seen yet; an event whose transaction stayed open longer
than that after a later one was seen is missed by the stream (never by webhooks, which fan out by
`fanned_out_at`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.store.tables import api_keys, outbox_events
from vip.webhooks.records import Event

e = outbox_events
BATCH = 500  # events sent per look at most; the rest on the next


@dataclass
class SeqWindow:
    """Which sequence numbers are new (pure): the cursor, and the seen ones above where it stood
    `lookback_s` ago."""

    cursor: int
    lookback_s: float
    _marks: deque[tuple[float, int]] = field(default_factory=deque)
    _seen: set[int] = field(default_factory=set)

    def floor(self, now: float) -> int:
        """Sequence numbers at or below this are not looked at again."""
        while len(self._marks) > 1 and self._marks[1][0] <= now - self.lookback_s:
            self._marks.popleft()
        return self._marks[0][1] if self._marks else self.cursor

    def take(self, seqs: list[int], now: float, limit: int = BATCH) -> list[int]:
        """The first `limit` new ones among `seqs` (above the floor), in order; they count as seen from
        now on (the rest are new at the next look)."""
        floor = self.floor(now)
        new = sorted(s for s in set(seqs) if s > floor and s not in self._seen)[:limit]
        self._seen.update(new)
        if new:
            self.cursor = max(self.cursor, new[-1])
        self._marks.append((now, self.cursor))
        floor = self.floor(now)
        self._seen = {s for s in self._seen if s > floor}
        return new


async def latest_seq(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        latest: int = (await conn.execute(select(func.coalesce(func.max(e.c.seq), 0)))).scalar_one()
        return int(latest)


async def new_events(engine: AsyncEngine, organisation_id: str, window: SeqWindow,
                     now: float) -> list[Event]:
    """The organisation's events committed since the last look (oldest first), as outbox rows."""
    async with engine.connect() as conn:
        seqs = list((await conn.execute(
            select(e.c.seq).where(e.c.organisation_id == organisation_id, e.c.seq > window.floor(now))
            .order_by(e.c.seq).limit(BATCH * 4))).scalars())
        wanted = window.take(seqs, now)
        if not wanted:
            return []
        rows = await conn.execute(select(e).where(e.c.seq.in_(wanted)).order_by(e.c.seq))
        return [Event.of(r) for r in rows]


async def key_active(engine: AsyncEngine, key_id: str) -> bool:
    """Whether the stream's API key is still unrevoked (a stream outlives the request's authentication)."""
    async with engine.connect() as conn:
        return await conn.scalar(select(api_keys.c.id).where(
            api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))) is not None
