"""Any watch-set size: `vip watch --file` adds any number of addresses in one transaction (COPY), refusing
the whole input for one bad line; every statement the indexer runs over a set of addresses binds it as one
array, so sets past PostgreSQL's 65,535 parameters work; an earlier start moves a history back in bulk as
it does one address at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from vip.indexer import store
from vip.store.tables import watched_addresses

# Every test here runs `vip watch` in a subprocess.
pytestmark = pytest.mark.e2e

MANY = 70_000  # more than one statement may bind parameters


def addresses(n: int, base: int = 0x5EED_0000) -> list[str]:
    return ["0x" + f"{base + i:040x}" for i in range(n)]


def vip_watch(*args: str, database_url: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("VIP_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "vip.cli", "watch", *args], env=env, capture_output=True,
                          text=True, timeout=120, input=stdin)


async def watched(engine, network: str) -> dict[str, tuple]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(watched_addresses.c.address, watched_addresses.c.reason,
                                         watched_addresses.c.start_block, watched_addresses.c.start_time)
                                  .where(watched_addresses.c.network == network))
        return {r.address: tuple(r)[1:] for r in rows}


async def test_vip_watch_adds_a_file_of_addresses_past_the_parameter_limit(database_url, engine, tmp_path):
    listed = addresses(MANY)
    path = tmp_path / "wallets.txt"
    # Any case, comments and blank lines; one address twice.
    path.write_text("# onboarding batch 7\n" + "\n".join(a.upper().replace("0X", "0x") if i % 2 else a
                                                          for i, a in enumerate(listed))
                    + f"\n\n{listed[0]}  # again\n")
    done = vip_watch("base", "--file", str(path), "--start-time", "2026-01-05T10:20:00",
                     database_url=database_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"watching {MANY:,} new addresses on base (0 already watched)"
    rows = await watched(engine, "base")
    assert set(rows) == set(listed)
    assert set(rows.values()) == {("wallet", None, datetime(2026, 1, 5, 10, 20, tzinfo=UTC))}

    # The follower's and the backfill's statements over the whole set: one array parameter each.
    async with engine.begin() as conn:
        await store.mark_live_from(conn, "base", listed, 1234)
        assert set((await store.live_from_blocks(conn, "base", listed)).values()) == {1234}
        await store.set_start_blocks(conn, "base", {datetime(2026, 1, 5, 10, tzinfo=UTC): 1000}, 0)
        assert await store.pending_backfill_count(conn, "base") == MANY
        group = await store.backfill_group(conn, "base", 1000)
        assert len(group) == MANY and {w.start_block for w in group} == {1000}
        await store.advance_backfill(conn, "base", listed, 1234)
        assert await store.pending_backfill_count(conn, "base") == 0


async def test_vip_watch_from_standard_input_and_an_earlier_start_in_bulk(database_url, engine):
    first = addresses(3, 0xA000)
    done = vip_watch("base", "--file", "-", "--start-block", "500", database_url=database_url,
                     stdin="\n".join(first))
    assert done.returncode == 0, done.stderr
    async with engine.begin() as conn:
        await store.mark_live_from(conn, "base", first, 900)
        await store.advance_backfill(conn, "base", first, 900)  # their histories are done
    # Again with one new address, from an earlier block: the known ones backfill the difference.
    done = vip_watch("base", first[0], "--file", "-", "--start-block", "100", "--reason", "counterparty",
                     database_url=database_url, stdin="\n".join(first[1:] + addresses(1, 0xB000)))
    assert done.returncode == 0, done.stderr
    assert "watching 1 new addresses on base (3 already watched)" in done.stdout
    rows = await watched(engine, "base")
    assert {rows[a][:2] for a in first} == {("wallet", 100)}  # the first reason is kept
    assert rows[addresses(1, 0xB000)[0]][:2] == ("counterparty", 100)
    async with engine.connect() as conn:
        assert await store.pending_backfill_count(conn, "base") == 3  # live already: backfilled again
    # A later start changes nothing.
    assert vip_watch("base", *first, "--start-block", "700", database_url=database_url).returncode == 0
    assert {(await watched(engine, "base"))[a][1] for a in first} == {100}


async def test_vip_watch_refuses_a_bad_line_and_an_unknown_network_writing_nothing(
        database_url, engine, tmp_path):
    path = tmp_path / "wallets.txt"
    path.write_text("\n".join(addresses(5)) + "\n0x1234\n")
    done = vip_watch("base", "--file", str(path), database_url=database_url)
    assert done.returncode == 2
    assert done.stderr.startswith(f"vip watch: {path} line 6: '0x1234' must be an address")
    mixed = "0x8ba1f109551bD432803012645Ac136ddd64DBA73"  # a checksum that does not hold
    done = vip_watch("base", mixed, database_url=database_url)
    assert done.returncode == 2 and "checksum" in done.stderr
    done = vip_watch("basee", addresses(1)[0], database_url=database_url)
    assert done.returncode == 2 and "unknown network 'basee'" in done.stderr
    async with engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(watched_addresses)) == 0
