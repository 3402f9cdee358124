"""kill -9 of the `vip index` process at random moments, restarted each time: the database ends equal to
the canonical chain, with no duplicate and no gap (rows and cursor commit in one transaction)."""

from __future__ import annotations

import asyncio
import random
import signal

from tests.support.chain import ChainDriver
from tests.support.indexer import (
    WATCHED_DAEMON,
    cursor_of,
    db_rows,
    local_network_toml,
    spawn_indexer,
    wait_synced,
)
from vip.devstack.anvil import free_port
from vip.indexer import store


def network_toml(chain: ChainDriver) -> str:
    return f"""
[daemon]
metrics_port = {free_port()}
""" + local_network_toml(chain, **WATCHED_DAEMON)


async def test_kill_9_at_random_points(chain: ChainDriver, database_url, engine, tmp_path):
    seed = 20261122
    rng = random.Random(seed)
    config = tmp_path / "local.toml"
    config.write_text(network_toml(chain))
    env = {"DATABASE_URL": database_url, "VIP_CONFIG": str(config), "VIP_LOG_FORMAT": "json"}
    watched = chain.accounts[2:5]
    async with engine.begin() as conn:
        for address in watched:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)
    chain.fund(chain.accounts[2:9])

    killed_behind_head = 0
    late_address = chain.accounts[7]
    for round_number in range(6):
        chain.random_activity(rng, 40, chain.accounts[2:9], chain.accounts[2:9], per_block=1)
        if round_number == 2:
            # A wallet connected mid-way: its backfill is interrupted by later kills and resumes.
            async with engine.begin() as conn:
                await store.add_watched_address(conn, "local", late_address, "wallet", start_block=0)
        start_cursor = await cursor_of(engine, "local")
        proc = spawn_indexer(env, tmp_path / "index.log")
        try:
            # Let it start working, then kill it at a random moment of its catch-up.
            while await cursor_of(engine, "local") == start_cursor and proc.poll() is None:  # noqa: ASYNC110 - polls another process
                await asyncio.sleep(0.01)
            await asyncio.sleep(rng.uniform(0.0, 0.3))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        cursor = await cursor_of(engine, "local")
        killed_behind_head += cursor is not None and cursor[0] < chain.head()[0]

    proc = spawn_indexer(env, tmp_path / "index.log")
    try:
        await wait_synced(engine, chain, "local", timeout_s=90)
    finally:
        proc.terminate()
        proc.wait(15)
    assert killed_behind_head >= 3, "most kills should land mid-sync, or the test proves little"
    expected = chain.token_logs({*watched, late_address})
    assert await db_rows(engine, "local") == expected, f"replay with seed {seed}"
