"""The indexer's reads and writes: cursor, headers, token logs, reorg rollback, watch set, backfill progress.

Every write here takes the caller's connection inside an open transaction, so rows, headers, cursor and
backfill progress commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import psycopg
from sqlalchemy import Row, delete, func, select, text, union, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.config import NetworkConfig
from vip.indexer.decode import BlockHeader, TokenLog
from vip.store.sets import any_of
from vip.store.tables import (
    block_headers,
    chain_cursors,
    chain_reorgs,
    token_approvals,
    token_transfers,
    watched_addresses,
)


@dataclass(frozen=True)
class Cursor:
    block_number: int
    block_hash: str | None


@dataclass(frozen=True)
class WatchedAddress:
    address: str
    start_block: int | None
    start_time: datetime | None
    live_from_block: int | None
    backfill_next_block: int | None
    reason: str = "wallet"  # wallet | counterparty | spender


# --- cursor ------------------------------------------------------------------------------------------

async def load_cursor(conn: AsyncConnection, network: str, *, lock: bool = False) -> Cursor | None:
    query = select(chain_cursors.c.block_number, chain_cursors.c.block_hash).where(
        chain_cursors.c.network == network)
    if lock:
        query = query.with_for_update()
    row = (await conn.execute(query)).first()
    return Cursor(row.block_number, row.block_hash) if row else None


async def locked_cursor(conn: AsyncConnection, network: str) -> tuple[Cursor, int] | None:
    """The cursor and the lead's fencing token, the row locked until the transaction ends: the follower's
    commits, its reorg repairs and backfills serialise on it, and a take of the lead waits for it."""
    row = (await conn.execute(select(chain_cursors.c.block_number, chain_cursors.c.block_hash,
                                     chain_cursors.c.leader_token)
                              .where(chain_cursors.c.network == network).with_for_update())).first()
    return (Cursor(row.block_number, row.block_hash), row.leader_token) if row else None


async def take_lead(conn: AsyncConnection, network: str, holder: str) -> int:
    """Raise the network's fencing token and name its new leader: a commit of the previous leader that
    has not locked the cursor row yet is refused from now on. Returns the new token."""
    return cast(int, await conn.scalar(update(chain_cursors).where(chain_cursors.c.network == network).values(
        leader_token=chain_cursors.c.leader_token + 1, leader=holder, leader_since=func.now(),
    ).returning(chain_cursors.c.leader_token)))


async def init_cursor(conn: AsyncConnection, network: str, chain_id: int, cursor: Cursor) -> None:
    await conn.execute(pg_insert(chain_cursors).values(
        network=network, chain_id=chain_id, block_number=cursor.block_number, block_hash=cursor.block_hash,
    ).on_conflict_do_nothing())


async def stored_chain_id(conn: AsyncConnection, network: str) -> int | None:
    return await conn.scalar(select(chain_cursors.c.chain_id).where(chain_cursors.c.network == network))


async def set_final_block(conn: AsyncConnection, network: str, final: int) -> None:
    """Raise the network's final block to `final`, never above the cursor and never back down (a lagging
    node's older `finalized` must not undo what another node already finalized; only a reorg lowers it)."""
    kept = func.greatest(func.coalesce(chain_cursors.c.final_block, final), final)
    await conn.execute(update(chain_cursors).where(chain_cursors.c.network == network).values(
        final_block=func.least(chain_cursors.c.block_number, kept)))


async def final_block(conn: AsyncConnection, network: NetworkConfig) -> int | None:
    """THE final block of a network: what acts on finality (approval confirmation, charges, fraud flags,
    income) acts only on blocks at or below it. None before the network has a cursor."""
    return (await final_blocks(conn, [network])).get(network.name)


async def final_blocks(conn: AsyncConnection, networks: Iterable[NetworkConfig]) -> dict[str, int]:
    """final_block() of several networks at once (those with a cursor)."""
    configs = {n.name: n for n in networks}
    rows = await conn.execute(select(chain_cursors.c.network, chain_cursors.c.block_number,
                                     chain_cursors.c.final_block)
                              .where(chain_cursors.c.network.in_(list(configs))))
    return {r.network: r.final_block if r.final_block is not None
            else r.block_number - configs[r.network].finality_depth for r in rows}


async def _set_cursor(conn: AsyncConnection, network: str, cursor: Cursor) -> None:
    await conn.execute(update(chain_cursors).where(chain_cursors.c.network == network).values(
        block_number=cursor.block_number, block_hash=cursor.block_hash, updated_at=func.now()))


# --- logs ----------------------------------------------------------------------------------------------

_COLUMNS = {
    "transfer": ("token_transfers", "from_address, to_address"),
    "approval": ("token_approvals", "owner_address, spender_address"),
}
_ROW_COLUMNS = ("network, tx_hash, log_index, block_number, block_hash, block_timestamp, token,"
                " token_address, {parties}, amount")


def copy_text(network: str, logs: Sequence[TokenLog], symbols: dict[str, str],
              timestamps: dict[int, int]) -> dict[str, bytes]:
    """COPY text per table ('transfer', 'approval') in table column order. Every value is hex, digits,
    a symbol or a timestamp: nothing needs escaping."""
    lines: dict[str, list[str]] = {"transfer": [], "approval": []}
    stamp_text: dict[int, str] = {}  # one per block, not per log
    for lg in logs:
        ts = lg.block_timestamp if lg.block_timestamp is not None else timestamps[lg.block_number]
        stamp = stamp_text.get(ts)
        if stamp is None:
            stamp = stamp_text[ts] = datetime.fromtimestamp(ts, UTC).isoformat()
        lines[lg.kind].append(
            f"{network}\t{lg.tx_hash}\t{lg.log_index}\t{lg.block_number}\t{lg.block_hash}\t{stamp}\t"
            f"{symbols[lg.token_address]}\t{lg.token_address}\t{lg.party_a}\t{lg.party_b}\t{lg.amount}\n")
    return {kind: "".join(rows).encode() for kind, rows in lines.items() if rows}


async def insert_logs(conn: AsyncConnection, network: str, logs: Sequence[TokenLog],
                      symbols: dict[str, str], timestamps: dict[int, int], *,
                      direct: bool = False, texts: dict[str, bytes] | None = None) -> tuple[int, int]:
    """Write logs; return (transfers, approvals) newly stored.

    `direct`: the caller knows none of these rows can exist (the live follower writes only above its
    cursor), so they are COPYed straight into the tables; a row that exists after all raises
    `psycopg.errors.UniqueViolation` and the caller retries its transaction without `direct`.
    Otherwise the rows are COPYed into a temporary staging table and inserted from it with
    ON CONFLICT DO NOTHING on their natural key. `texts`: the logs' `copy_text`, when already formatted.
    """
    if not logs:
        return 0, 0
    if texts is None:
        texts = copy_text(network, logs, symbols, timestamps)
    # SQLAlchemy types the driver connection loosely; under the psycopg dialect it is psycopg's own.
    pg = cast(psycopg.AsyncConnection[Any], (await conn.get_raw_connection()).driver_connection)
    counts = {"transfer": 0, "approval": 0}
    async with pg.cursor() as cur:
        for kind, text_rows in texts.items():
            table, parties = _COLUMNS[kind]
            columns = _ROW_COLUMNS.format(parties=parties)
            if direct:
                async with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    await copy.write(text_rows)
                counts[kind] = sum(lg.kind == kind for lg in logs)
                continue
            await cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS stage_{table}"
                              f" (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
            async with cur.copy(f"COPY stage_{table} ({columns}) FROM STDIN") as copy:
                await copy.write(text_rows)
            await cur.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM stage_{table}"
                              " ON CONFLICT DO NOTHING")
            counts[kind] = max(cur.rowcount, 0)
            await cur.execute(f"TRUNCATE stage_{table}")
    return counts["transfer"], counts["approval"]


# --- headers -------------------------------------------------------------------------------------------

# Header rows per INSERT: five parameters each, well under the protocol's 65,535 (a window above a late
# `finalized` tag can hold thousands of blocks).
_HEADERS_PER_INSERT = 5_000


async def upsert_headers(conn: AsyncConnection, network: str, headers: Iterable[BlockHeader]) -> None:
    rows = [{"network": network, "block_number": h.number, "block_hash": h.hash,
             "parent_hash": h.parent_hash, "block_timestamp": h.time} for h in headers]
    for i in range(0, len(rows), _HEADERS_PER_INSERT):
        stmt = pg_insert(block_headers).values(rows[i:i + _HEADERS_PER_INSERT])
        await conn.execute(stmt.on_conflict_do_update(
            index_elements=[block_headers.c.network, block_headers.c.block_number],
            set_={"block_hash": stmt.excluded.block_hash, "parent_hash": stmt.excluded.parent_hash,
                  "block_timestamp": stmt.excluded.block_timestamp}))


async def stored_headers_desc(conn: AsyncConnection, network: str, at_or_below: int) -> list[tuple[int, str]]:
    rows = await conn.execute(
        select(block_headers.c.block_number, block_headers.c.block_hash)
        .where(block_headers.c.network == network, block_headers.c.block_number <= at_or_below)
        .order_by(block_headers.c.block_number.desc()))
    return [(r.block_number, r.block_hash) for r in rows]


async def stored_header_hashes(conn: AsyncConnection, network: str, numbers: Iterable[int]) -> dict[int, str]:
    wanted = list(set(numbers))
    if not wanted:
        return {}
    rows = await conn.execute(
        select(block_headers.c.block_number, block_headers.c.block_hash)
        .where(block_headers.c.network == network, any_of(block_headers.c.block_number, wanted)))
    return {r.block_number: r.block_hash for r in rows}


async def row_blocks_desc(conn: AsyncConnection, network: str, below: int,
                          limit: int) -> list[tuple[int, str]]:
    """Distinct (block, hash) of stored logs below `below`, newest first: anchors for a deep reorg."""
    parts = [select(t.c.block_number, t.c.block_hash).where(t.c.network == network, t.c.block_number < below)
             for t in (token_transfers, token_approvals)]
    sub = union(*parts).subquery()
    rows = await conn.execute(select(sub.c.block_number, sub.c.block_hash)
                              .order_by(sub.c.block_number.desc()).limit(limit))
    return [(r.block_number, r.block_hash) for r in rows]


# --- batch commit and rollback -------------------------------------------------------------------------

# The headers of a range, the prune below the header window and the cursor in one statement (one round
# trip under the cursor lock). The pruned rows and the inserted ones never meet: only headers at or above
# the window's start are inserted.
_FINISH_RANGE = """
WITH upserted AS (
  INSERT INTO block_headers (network, block_number, block_hash, parent_hash, block_timestamp)
  SELECT :network, u.n, u.h, u.p, to_timestamp(u.t)
  FROM unnest(CAST(:numbers AS bigint[]), CAST(:hashes AS text[]), CAST(:parents AS text[]),
              CAST(:stamps AS bigint[])) AS u(n, h, p, t)
  ON CONFLICT (network, block_number) DO UPDATE SET block_hash = EXCLUDED.block_hash,
    parent_hash = EXCLUDED.parent_hash, block_timestamp = EXCLUDED.block_timestamp
), pruned AS (
  DELETE FROM block_headers WHERE network = :network AND block_number < :keep_from
)
UPDATE chain_cursors SET block_number = :block, block_hash = :hash, updated_at = now(),
  final_block = CASE WHEN CAST(:final AS bigint) IS NULL THEN final_block
                     ELSE least(:block, greatest(coalesce(final_block, :final), :final)) END
WHERE network = :network
"""


async def commit_range(conn: AsyncConnection, network: str, *, logs: Sequence[TokenLog],
                       symbols: dict[str, str], timestamps: dict[int, int], headers: Iterable[BlockHeader],
                       cursor: Cursor, keep_headers_from: int, direct: bool,
                       texts: dict[str, bytes] | None = None, final: int | None = None) -> tuple[int, int]:
    """Store one indexed range: logs (`texts`: their COPY text, if already formatted), the headers at or
    above `keep_headers_from` and none below it, the new cursor (and with `final`, the final block raised
    as set_final_block does, against the new cursor)."""
    counts = await insert_logs(conn, network, logs, symbols, timestamps, direct=direct, texts=texts)
    kept = [h for h in headers if h.number >= keep_headers_from]
    await conn.execute(text(_FINISH_RANGE), {
        "network": network, "numbers": [h.number for h in kept], "hashes": [h.hash for h in kept],
        "parents": [h.parent_hash for h in kept], "stamps": [h.timestamp for h in kept],
        "keep_from": keep_headers_from, "block": cursor.block_number, "hash": cursor.block_hash,
        "final": final})
    return counts


async def rollback_to(conn: AsyncConnection, network: str, *, fork: Cursor, old_head: Cursor,
                      beyond_finality: bool) -> None:
    """Forget everything above the fork block and move the cursor there; log the reorg."""
    for table in (token_transfers, token_approvals, block_headers):
        await conn.execute(delete(table).where(table.c.network == network,
                                               table.c.block_number > fork.block_number))
    # A live_from_block above the fork is no longer covered; the follower re-covers it from the fork.
    await conn.execute(update(watched_addresses).where(
        watched_addresses.c.network == network, watched_addresses.c.live_from_block > fork.block_number + 1,
    ).values(live_from_block=fork.block_number + 1))
    await _set_cursor(conn, network, fork)
    await conn.execute(update(chain_cursors).where(
        chain_cursors.c.network == network, chain_cursors.c.final_block > fork.block_number,
    ).values(final_block=fork.block_number))
    await conn.execute(chain_reorgs.insert().values(
        network=network, old_head_number=old_head.block_number, old_head_hash=old_head.block_hash,
        fork_block_number=fork.block_number, depth=old_head.block_number - fork.block_number,
        beyond_finality=int(beyond_finality)))


# --- watch set and backfill ----------------------------------------------------------------------------

def _watched(row: Row[Any]) -> WatchedAddress:
    return WatchedAddress(row.address, row.start_block, row.start_time, row.live_from_block,
                          row.backfill_next_block, row.reason)


async def load_watch_set(conn: AsyncConnection, network: str) -> list[WatchedAddress]:
    rows = await conn.execute(select(watched_addresses).where(watched_addresses.c.network == network)
                              .order_by(watched_addresses.c.address))
    return [_watched(r) for r in rows]


async def add_watched_address(conn: AsyncConnection, network: str, address: str, reason: str, *,
                              start_block: int | None = None, start_time: datetime | None = None) -> bool:
    """Watch an address; its history from start_block/start_time is backfilled. Returns True when the
    address is new. Watching it again with an earlier start (a counterparty that becomes a connected
    wallet, say) moves its start back and backfills the difference. The first reason is kept: an
    address watched as a counterparty stays watched when a wallet connection to it is revoked."""
    address = address.lower()
    inserted = await conn.scalar(pg_insert(watched_addresses).values(
        network=network, address=address, reason=reason, start_block=start_block,
        start_time=start_time).on_conflict_do_nothing().returning(watched_addresses.c.address))
    if inserted is not None:
        return True
    row = (await conn.execute(select(watched_addresses).where(
        watched_addresses.c.network == network, watched_addresses.c.address == address,
    ).with_for_update())).one()
    values: dict[str, Any] = {}
    earlier_block = start_block is not None and (row.start_block is None or start_block < row.start_block)
    earlier_time = start_time is not None and start_block is None and (
        row.start_time is None or start_time < row.start_time)
    if earlier_block or earlier_time:
        # Re-resolve the start and run the backfill again from it (rows already stored are skipped).
        values.update(start_block=start_block, start_time=start_time, backfill_next_block=None,
                      backfill_done_at=None)
    if values:
        await conn.execute(update(watched_addresses).where(
            watched_addresses.c.network == network, watched_addresses.c.address == address).values(**values))
    return False


async def add_watched_addresses(conn: AsyncConnection, network: str, addresses: Iterable[str], reason: str,
                                *, start_block: int | None = None, start_time: datetime | None = None) -> int:
    """`add_watched_address` for any number of addresses at once (the bulk `vip watch`): COPY into a
    temporary table, then one INSERT and one UPDATE over it, with the same rules for an address already
    watched. Returns how many addresses are new."""
    unique = sorted({a.lower() for a in addresses})
    if not unique:
        return 0
    pg = cast(psycopg.AsyncConnection[Any], (await conn.get_raw_connection()).driver_connection)
    async with pg.cursor() as cur:
        await cur.execute("CREATE TEMP TABLE IF NOT EXISTS stage_watch (address text PRIMARY KEY)"
                          " ON COMMIT DELETE ROWS")
        async with cur.copy("COPY stage_watch (address) FROM STDIN") as copy:
            await copy.write("".join(f"{a}\n" for a in unique).encode())
    params = {"network": network, "reason": reason, "start_block": start_block, "start_time": start_time}
    added = await conn.execute(text(
        "INSERT INTO watched_addresses (network, address, reason, start_block, start_time)"
        " SELECT :network, s.address, :reason, :start_block, :start_time FROM stage_watch s"
        " ON CONFLICT DO NOTHING"), params)
    # An earlier start moves an existing address's start back and runs its backfill again, as
    # add_watched_address does (rows just inserted start where asked: never earlier than themselves).
    if start_block is not None:
        earlier = "(w.start_block IS NULL OR w.start_block > :start_block)"
    elif start_time is not None:
        earlier = "(w.start_time IS NULL OR w.start_time > :start_time)"
    else:
        earlier = "false"
    await conn.execute(text(
        "UPDATE watched_addresses w SET start_block = :start_block, start_time = :start_time,"
        " backfill_next_block = NULL, backfill_done_at = NULL FROM stage_watch s"
        f" WHERE w.network = :network AND w.address = s.address AND {earlier}"), params)
    await conn.execute(text("TRUNCATE stage_watch"))
    return max(added.rowcount, 0)


async def remove_watched_address(conn: AsyncConnection, network: str, address: str, reason: str) -> None:
    """Stop watching an address watched for `reason`. One watched for another reason (a counterparty, a
    spender: the first reason is kept) is not the caller's to drop and stays."""
    await conn.execute(delete(watched_addresses).where(
        watched_addresses.c.network == network, watched_addresses.c.address == address.lower(),
        watched_addresses.c.reason == reason))


async def mark_live_from(conn: AsyncConnection, network: str, addresses: Sequence[str], block: int) -> None:
    """Record the first block the live follower covers for newly seen addresses (any number: one array
    parameter)."""
    if addresses:
        await conn.execute(update(watched_addresses).where(
            watched_addresses.c.network == network, any_of(watched_addresses.c.address, addresses),
            watched_addresses.c.live_from_block.is_(None)).values(live_from_block=block))


# --- backfills: set-based, whatever the number of addresses waiting --------------------------------------

_PENDING = ("network = :network AND live_from_block IS NOT NULL AND backfill_done_at IS NULL")
# Where a pending address's backfill stands: its next block, or its start block before the first range.
_NEXT = "greatest(coalesce(backfill_next_block, 0), start_block)"


async def pending_backfill_count(conn: AsyncConnection, network: str) -> int:
    return await conn.scalar(text(f"SELECT count(*) FROM watched_addresses WHERE {_PENDING}"),
                             {"network": network}) or 0


async def start_hours_to_resolve(conn: AsyncConnection, network: str) -> list[datetime]:
    """The distinct UTC hours of the start times of pending backfills whose start block is not known yet.
    A history starts at the first block of its start time's hour (decision 232): 100,000 wallets signed
    in within an hour cost one bisection, not 100,000."""
    rows = await conn.execute(text(
        "SELECT DISTINCT date_trunc('hour', start_time, 'UTC') AS hour FROM watched_addresses"
        f" WHERE {_PENDING} AND start_block IS NULL AND start_time IS NOT NULL ORDER BY hour"),
        {"network": network})
    return [r.hour for r in rows]


async def set_start_blocks(conn: AsyncConnection, network: str, by_hour: dict[datetime, int],
                           default_block: int) -> None:
    """Give every pending backfill without a start block one: the block found for its start time's hour,
    or `default_block` (the network's start block) when it has no start time."""
    if by_hour:
        hours = sorted(by_hour)
        await conn.execute(text(
            "UPDATE watched_addresses w SET start_block = r.block"
            " FROM unnest(CAST(:hours AS timestamptz[]), CAST(:blocks AS bigint[])) AS r(hour, block)"
            " WHERE w.network = :network AND w.live_from_block IS NOT NULL AND w.backfill_done_at IS NULL"
            " AND w.start_block IS NULL AND date_trunc('hour', w.start_time, 'UTC') = r.hour"),
            {"network": network, "hours": hours, "blocks": [by_hour[h] for h in hours]})
    await conn.execute(text(
        f"UPDATE watched_addresses SET start_block = :block WHERE {_PENDING}"
        " AND start_block IS NULL AND start_time IS NULL"), {"network": network, "block": default_block})


async def finish_covered_backfills(conn: AsyncConnection, network: str) -> int:
    """Mark done the pending backfills with nothing left to fetch (their start is at or past their live
    start); returns how many."""
    done = await conn.execute(text(
        f"UPDATE watched_addresses SET backfill_next_block = {_NEXT}, backfill_done_at = now()"
        f" WHERE {_PENDING} AND start_block IS NOT NULL AND {_NEXT} >= live_from_block"),
        {"network": network})
    return max(done.rowcount, 0)


async def backfill_front(conn: AsyncConnection, network: str) -> int | None:
    """The lowest next block of the pending backfills with a start block (None: none)."""
    front: int | None = await conn.scalar(text(
        f"SELECT min({_NEXT}) FROM watched_addresses WHERE {_PENDING} AND start_block IS NOT NULL"),
        {"network": network})
    return front


async def backfill_group(conn: AsyncConnection, network: str, upto: int) -> list[WatchedAddress]:
    """The pending backfills whose next block is at or below `upto`: fetched together in one range."""
    rows = await conn.execute(text(
        "SELECT address, start_block, start_time, live_from_block, backfill_next_block, reason"
        f" FROM watched_addresses WHERE {_PENDING} AND start_block IS NOT NULL AND {_NEXT} <= :upto"
        " ORDER BY address"), {"network": network, "upto": upto})
    return [_watched(r) for r in rows]


async def set_start_block(conn: AsyncConnection, network: str, address: str, block: int) -> None:
    await conn.execute(update(watched_addresses).where(
        watched_addresses.c.network == network, watched_addresses.c.address == address,
    ).values(start_block=block))


async def live_from_blocks(conn: AsyncConnection, network: str, addresses: Sequence[str]
                           ) -> dict[str, int | None]:
    rows = await conn.execute(select(watched_addresses.c.address, watched_addresses.c.live_from_block).where(
        watched_addresses.c.network == network, any_of(watched_addresses.c.address, addresses)))
    return {r.address: r.live_from_block for r in rows}


async def advance_backfill(conn: AsyncConnection, network: str, addresses: Sequence[str],
                           next_block: int) -> None:
    """Move the backfill of `addresses` to `next_block`; finish those that reached their live start."""
    await conn.execute(update(watched_addresses).where(
        watched_addresses.c.network == network, any_of(watched_addresses.c.address, addresses),
    ).values(backfill_next_block=func.greatest(func.coalesce(watched_addresses.c.backfill_next_block, 0),
                                               next_block)))
    await conn.execute(update(watched_addresses).where(
        watched_addresses.c.network == network, any_of(watched_addresses.c.address, addresses),
        watched_addresses.c.backfill_done_at.is_(None),
        watched_addresses.c.backfill_next_block >= watched_addresses.c.live_from_block,
    ).values(backfill_done_at=func.now()))


@dataclass(frozen=True)
class NetworkStatus:
    network: str
    chain_id: int
    block_number: int
    watched: int
    reorgs: int
    leader: str | None  # the daemon that took the network's lead last ("host:pid")


async def network_status(conn: AsyncConnection) -> list[NetworkStatus]:
    """Each followed network's cursor, watch-set size, count of repaired reorgs and leader (`vip status`)."""
    cursors = (await conn.execute(select(chain_cursors).order_by(chain_cursors.c.network))).all()
    reorgs: dict[str, int] = dict((await conn.execute(select(chain_reorgs.c.network, func.count())
                                                      .group_by(chain_reorgs.c.network))).tuples().all())
    watched: dict[str, int] = dict((await conn.execute(select(watched_addresses.c.network, func.count())
                                                       .group_by(watched_addresses.c.network))).tuples().all())
    return [NetworkStatus(c.network, c.chain_id, c.block_number, watched.get(c.network, 0),
                          reorgs.get(c.network, 0), c.leader) for c in cursors]
