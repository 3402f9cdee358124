"""What the labelling queue adds to the follower's range commit (decision 164): `queue_owners_of_final`
over ranges of final blocks, on a table of token transfers of which a share touches users' wallets.

    .venv/bin/python bench/labelling_queue.py                    # 200,000 transfers, 1,000 users
    .venv/bin/python bench/labelling_queue.py --transfers 50000 --users 200 --range 50
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import psycopg
from benchdb import throwaway_database
from sqlalchemy import func, select

from vip.store import label_queue
from vip.store.engine import create_engine
from vip.store.tables import labelling_queue

PER_BLOCK = 200

SEED = """
INSERT INTO organisations (id, name) VALUES ('org_b', 'bench');
INSERT INTO users (id, organisation_id, created_at)
  SELECT 'usr_' || i, 'org_b', now() FROM generate_series(1, {users}) i;
INSERT INTO connections (id, organisation_id, user_id, type, provider, identifier, network, status,
                         created_at)
  SELECT 'conw_' || i, 'org_b', 'usr_' || i, 'wallet', 'metamask', 'w' || i, 'local', 'active', now()
  FROM generate_series(1, {users}) i;
INSERT INTO connections (id, organisation_id, user_id, type, provider, identifier, status, created_at)
  SELECT 'conp_' || i, 'org_b', 'usr_' || i, 'platform', 'paystream', 'h' || i, 'active', now()
  FROM generate_series(1, {users}) i WHERE i % 2 = 0;
INSERT INTO wallets (id, organisation_id, user_id, connection_id, address, network, created_at)
  SELECT 'wal_' || i, 'org_b', 'usr_' || i, 'conw_' || i, '0xw' || lpad(i::text, 39, '0'), 'local', now()
  FROM generate_series(1, {users}) i;
-- One transfer in {share} touches a user's wallet (as recipient or sender), the rest are strangers'.
INSERT INTO token_transfers (network, tx_hash, log_index, block_number, block_hash, block_timestamp, token,
                             token_address, from_address, to_address, amount)
  SELECT 'local', '0x' || lpad(to_hex(i), 64, '0'), 0, i / {per_block}, '0xb', now(), 'USDC', '0xa',
         CASE WHEN i % (2 * {share}) = 1 THEN '0xw' || lpad((1 + i % {users})::text, 39, '0')
              ELSE '0xs' || lpad((i % 5000)::text, 39, '0') END,
         CASE WHEN i % (2 * {share}) = 0 THEN '0xw' || lpad((1 + i % {users})::text, 39, '0')
              ELSE '0xr' || lpad((i % 7000)::text, 39, '0') END,
         1000000
  FROM generate_series(0, {transfers} - 1) i;
ANALYZE;
"""


async def measure(url: str, blocks: int, size: int) -> tuple[list[float], int]:
    engine = create_engine(url)
    timings = []
    try:
        for low in range(-1, blocks - 1, size):
            async with engine.begin() as conn:
                started = time.perf_counter()
                await label_queue.queue_owners_of_final(conn, "local", low, low + size)
                timings.append(time.perf_counter() - started)
        async with engine.connect() as conn:
            rows = await conn.scalar(select(func.count()).select_from(labelling_queue)) or 0
    finally:
        await engine.dispose()
    return timings, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transfers", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--share", type=int, default=20, help="one transfer in SHARE touches a user wallet")
    parser.add_argument("--range", type=int, default=50, help="blocks per range (200 transfers a block)")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    with throwaway_database(args.database_url, "bench-labelling", ("shared_buffers",)) as db:
        with psycopg.connect(db.pg_url) as conn:
            conn.execute(SEED.format(users=args.users, transfers=args.transfers, share=args.share,
                                     per_block=PER_BLOCK))
        blocks = args.transfers // PER_BLOCK
        timings, rows = asyncio.run(measure(db.url, blocks, args.range))
    ordered = sorted(timings)
    print(f"database: {db.source}")
    print(f"{args.transfers:,} transfers, {args.users:,} users (half with a platform), one transfer in "
          f"{args.share} touches a user's wallet; {len(timings)} ranges of {args.range} blocks "
          f"({args.range * PER_BLOCK:,} transfers each)")
    print(f"queue_owners_of_final per range: median {statistics.median(timings) * 1000:.1f} ms, "
          f"p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms; "
          f"{rows:,} queue rows written")


if __name__ == "__main__":
    main()
