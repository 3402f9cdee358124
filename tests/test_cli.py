"""The operator commands `vip watch` and `vip status` against a real database."""

from __future__ import annotations

import os
import subprocess
import sys

from vip.indexer import store
from vip.indexer.store import Cursor

ADDRESS = "0x8ba1f109551bD432803012645Ac136ddd64DBA72"


def vip(*args: str, database_url: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("VIP_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "vip.cli", *args], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_watch_then_status(database_url, engine):
    assert vip("watch", "base", ADDRESS, "--start-block", "123", database_url=database_url).startswith(
        "watching")
    assert vip("watch", "base", ADDRESS, database_url=database_url).startswith("already watched")
    async with engine.connect() as conn:
        [watched] = await store.load_watch_set(conn, "base")
    assert (watched.address, watched.start_block) == (ADDRESS.lower(), 123)

    async with engine.begin() as conn:
        await store.init_cursor(conn, "base", 8453, Cursor(4567, "0xabc"))
    line = vip("status", database_url=database_url).strip()
    assert line.split() == ["base", "chain", "8453", "block", "4567", "watched", "1", "reorgs", "0"]
