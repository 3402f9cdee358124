"""Run the indexer in-process or as a `vip index` subprocess, and compare its database with the chain."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.chain import ChainDriver, LogRow
from vip.config import Settings
from vip.daemon import run_daemon
from vip.store.tables import chain_cursors, token_approvals, token_transfers, watched_addresses


async def db_rows(engine: AsyncEngine, network: str) -> set[LogRow]:
    rows: set[LogRow] = set()
    async with engine.connect() as conn:
        for kind, table, a, b in (("transfer", token_transfers, "from_address", "to_address"),
                                  ("approval", token_approvals, "owner_address", "spender_address")):
            result = await conn.execute(select(table).where(table.c.network == network))
            for r in result.mappings():
                rows.add(LogRow(kind, r["tx_hash"], r["log_index"], r["block_number"], r["block_hash"],
                                r["token_address"], r[a], r[b], int(r["amount"])))
    return rows


async def cursor_of(engine: AsyncEngine, network: str) -> tuple[int, str | None] | None:
    async with engine.connect() as conn:
        row = (await conn.execute(select(chain_cursors.c.block_number, chain_cursors.c.block_hash)
                                  .where(chain_cursors.c.network == network))).first()
    return (row.block_number, row.block_hash) if row else None


async def backfills_pending(engine: AsyncEngine, network: str) -> int:
    async with engine.connect() as conn:
        rows = await conn.execute(select(watched_addresses.c.address).where(
            watched_addresses.c.network == network, watched_addresses.c.backfill_done_at.is_(None)))
        return len(rows.all())


async def wait_synced(engine: AsyncEngine, driver: ChainDriver, network: str, timeout_s: float = 60.0,
                      backfills: bool = True) -> None:
    """Until the cursor is the node's head (number and hash) and no backfill is pending."""
    deadline = time.monotonic() + timeout_s
    while True:
        head = driver.head()
        cursor = await cursor_of(engine, network)
        pending = await backfills_pending(engine, network) if backfills else 0
        if cursor == head and pending == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"indexer not synced after {timeout_s}s: cursor {cursor}, head {head}, "
                                 f"pending backfills {pending}")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def running_indexer(settings: Settings, database_url: str, networks: list[str] | None = None):
    """The daemon as a task of this event loop; stopped (and its errors raised) on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_daemon(settings, database_url, stop, networks=networks,
                                          serve_metrics=False))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def spawn_indexer(env_overrides: dict[str, str], log_path, *options: str) -> subprocess.Popen:
    """`vip index` as a real OS process (for kill -9 tests)."""
    env = {**os.environ, **env_overrides}
    out = open(log_path, "ab")  # noqa: SIM115 - handed to the child process
    return subprocess.Popen([sys.executable, "-m", "vip.cli", "index", *options], env=env, stdout=out,
                            stderr=subprocess.STDOUT)


# What a `vip index` process started by a test follows on its chain: small ranges and a short poll, so a kill
# lands between many commits.
WATCHED_DAEMON = {"finality_depth": 4, "poll_interval_s": 0.05, "max_block_range": 4,
                  "initial_block_range": 2, "mode": "watched"}


def local_network_toml(chain: ChainDriver, **settings: object) -> str:
    """The `[networks.local]` overlay for `chain` (its RPC, the test tokens, the disbursement contract), with
    these settings beside the chain id and start block."""
    c = chain.contracts
    lines = "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in settings.items())
    return f"""
[networks.local]
chain_id = {chain.node.chain_id}
rpc_url = "{chain.node.rpc_url}"
local = true
start_block = 0
{lines}disbursement_contract = "{c.disbursement}"

[networks.local.tokens.USDC]
address = "{c.usdc}"

[networks.local.tokens.USDT]
address = "{c.usdt}"
"""
