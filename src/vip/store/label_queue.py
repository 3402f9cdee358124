"""The labelling queue (decision 162): a row asks the daemon's labelling job to work a user's transfer labels
out again, because something they depend on changed: income records stored, a wallet connected, transfers
of a user's wallet become final. A change inserts its row in its own transaction and never waits for a
running job (rows are never updated by the changes); the job takes the oldest due row FOR UPDATE SKIP
LOCKED, removes the user's other rows it can lock (their changes are committed, so its reads see them), and
removes its own when done."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.store.tables import label_cursors, labelling_queue

# Users with an active wallet connection on the network that a transfer in blocks (low, high] touches, and
# an active platform connection (a user without records has no income to label). One join per side of the
# transfer, so each uses its address index.
_OWNERS_OF_FINAL = text("""
INSERT INTO labelling_queue (user_id, queued_at, due_at)
SELECT owners.user_id, now(), max(owners.at) FROM (
    SELECT w.user_id, t.block_timestamp AS at FROM token_transfers t
    JOIN wallets w ON w.network = t.network AND w.address = t.to_address
    JOIN connections wc ON wc.id = w.connection_id AND wc.status = 'active'
    WHERE t.network = :network AND t.block_number > :low AND t.block_number <= :high
    UNION ALL
    SELECT w.user_id, t.block_timestamp FROM token_transfers t
    JOIN wallets w ON w.network = t.network AND w.address = t.from_address
    JOIN connections wc ON wc.id = w.connection_id AND wc.status = 'active'
    WHERE t.network = :network AND t.block_number > :low AND t.block_number <= :high
) AS owners
WHERE EXISTS (SELECT 1 FROM connections c
              WHERE c.user_id = owners.user_id AND c.type = 'platform' AND c.status = 'active')
GROUP BY owners.user_id
""")


async def queue_user(conn: AsyncConnection, user_id: str, at: datetime) -> None:
    """Ask for the user's labels to be worked out again (in the caller's transaction), due at `at`."""
    await conn.execute(labelling_queue.insert().values(user_id=user_id, queued_at=at, due_at=at))


async def queue_owners_of_final(conn: AsyncConnection, network: str, low: int, high: int) -> None:
    """Queue the users whose wallets' transfers in blocks (low, high] have just become final, due at the
    newest such transfer's time (the chain's: a local stack's service clock is its chain, and may be far
    behind the database's), queued at the database's time (the queue-age metric: a catch-up over old
    blocks is not old work)."""
    if high > low:
        await conn.execute(_OWNERS_OF_FINAL, {"network": network, "low": low, "high": high})


async def queue_newly_final(conn: AsyncConnection, finals: dict[str, int], starts: dict[str, int],
                            max_blocks: int) -> int:
    """Follow each network's final block with the labelling cursor (in the caller's transaction): queue the
    owners of transfers in at most `max_blocks` blocks that became final since the cursor, and move it.
    A network seen for the first time starts where its index starts (`starts`: the block before the
    configured start block, as the indexer's own cursor). A cursor another daemon holds is skipped (it is
    doing the same); one above the final block (a reorg deeper than finality lowered it) comes down to it,
    so the blocks final again are queued again. Returns the blocks queued."""
    if not finals:
        return 0
    await conn.execute(pg_insert(label_cursors).values(
        [{"network": n, "block_number": starts[n]} for n in finals]).on_conflict_do_nothing())
    cursors = (await conn.execute(select(label_cursors.c.network, label_cursors.c.block_number)
                                  .where(label_cursors.c.network.in_(list(finals)))
                                  .with_for_update(skip_locked=True))).all()
    queued = 0
    for network, low in cursors:
        high = min(finals[network], low + max_blocks)
        if high == low:
            continue
        await queue_owners_of_final(conn, network, low, high)
        await conn.execute(update(label_cursors).where(label_cursors.c.network == network)
                           .values(block_number=high, updated_at=func.now()))
        queued += max(0, high - low)
    return queued


async def take_due(conn: AsyncConnection, now: datetime):
    """The oldest due row, locked for this transaction; other workers skip it."""
    return (await conn.execute(select(labelling_queue).where(labelling_queue.c.due_at <= now)
                               .order_by(labelling_queue.c.due_at, labelling_queue.c.id).limit(1)
                               .with_for_update(skip_locked=True))).first()


async def absorb_others(conn: AsyncConnection, row) -> datetime | None:
    """Remove the user's other rows this worker can lock: they were committed with their changes, so the
    run of `row`, reading after this, sees those changes. A row another worker holds is left to it.
    Returns when the earliest of them first asked for the trace's backfills (the wait's limit carries
    over, so a stream of new changes never restarts it)."""
    locked = (select(labelling_queue.c.id).where(labelling_queue.c.user_id == row.user_id,
                                                 labelling_queue.c.id != row.id)
              .with_for_update(skip_locked=True).scalar_subquery())
    asked = [at for at in await conn.scalars(delete(labelling_queue).where(labelling_queue.c.id.in_(locked))
                                             .returning(labelling_queue.c.fetch_requested_at))
             if at is not None]
    if row.fetch_requested_at is not None:
        asked.append(row.fetch_requested_at)
    earliest = min(asked, default=None)
    if earliest is not None and earliest != row.fetch_requested_at:
        await mark_fetch_requested(conn, row.id, earliest)
    return earliest


async def done(conn: AsyncConnection, row_id: int) -> None:
    await conn.execute(delete(labelling_queue).where(labelling_queue.c.id == row_id))


async def postpone(conn: AsyncConnection, row_id: int, until: datetime, *,
                   attempts: int | None = None) -> None:
    values: dict[str, object] = {"due_at": until}
    if attempts is not None:
        values["attempts"] = attempts
    await conn.execute(update(labelling_queue).where(labelling_queue.c.id == row_id).values(**values))


async def mark_fetch_requested(conn: AsyncConnection, row_id: int, at: datetime) -> None:
    await conn.execute(update(labelling_queue).where(labelling_queue.c.id == row_id)
                       .values(fetch_requested_at=at))


async def oldest_pending_age(conn: AsyncConnection, now: datetime) -> float:
    oldest = await conn.scalar(select(func.min(labelling_queue.c.queued_at)))
    return max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
