"""Several `vip index` on one network: one follows it (the leader), the others stand by and take over when
it dies (kill -9 included). While addresses join the watch set and their transfers and approvals are
mined at once, every canonical row of the watched addresses ends stored exactly once."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from eth_account import Account
from sqlalchemy import func, select, text

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import (
    WATCHED_DAEMON,
    cursor_of,
    db_rows,
    local_network_toml,
    spawn_indexer,
    wait_synced,
)
from vip.chain.rpc import RpcClient
from vip.daemon import build_network_tasks
from vip.devstack.anvil import free_port
from vip.indexer import store
from vip.indexer.follower import LeadershipLost
from vip.indexer.leadership import NetworkLead
from vip.store.tables import chain_cursors, token_approvals, token_transfers

LEADER_GAUGE = re.compile(r'^vip_indexer_leader\{network="local"\} ([0-9.]+)$', re.MULTILINE)


def daemon_toml(chain: ChainDriver, metrics_port: int) -> str:
    return f"""
[daemon]
metrics_port = {metrics_port}

[indexer]
lead_poll_s = 0.2
""" + local_network_toml(chain, **WATCHED_DAEMON)


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    metrics_port: int
    log: Path

    def leader_gauge(self) -> float | None:
        """What /metrics says of this daemon's lead of `local` (None until it answers)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
                found = LEADER_GAUGE.search(resp.read().decode())
        except OSError:
            return None
        return float(found.group(1)) if found else None


def start_daemon(chain: ChainDriver, database_url: str, tmp_path: Path, name: str) -> Daemon:
    port = free_port()
    config = tmp_path / f"{name}.toml"
    config.write_text(daemon_toml(chain, port))
    log = tmp_path / f"{name}.log"
    env = {"DATABASE_URL": database_url, "VIP_CONFIG": str(config), "VIP_LOG_FORMAT": "json"}
    return Daemon(name, spawn_indexer(env, log), port, log)


async def leader(engine) -> tuple[int | None, int, object]:
    """(pid of the daemon leading `local`, fencing token, when it took the lead)."""
    async with engine.connect() as conn:
        row = (await conn.execute(select(chain_cursors.c.leader, chain_cursors.c.leader_token,
                                         chain_cursors.c.leader_since)
                                  .where(chain_cursors.c.network == "local"))).first()
    if row is None or row.leader is None:
        return None, 0, None
    return int(row.leader.rsplit(":", 1)[1]), row.leader_token, row.leader_since


async def wait_leader(engine, daemons: list[Daemon], timeout_s: float = 60.0) -> Daemon:
    """The daemon that leads `local` once one of `daemons` does, by the database and by its gauges: 1 on
    the leader, 0 on every other one."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, _, _ = await leader(engine)
        chosen = [d for d in daemons if d.proc.pid == pid]
        if chosen:
            gauges = await asyncio.gather(*(asyncio.to_thread(d.leader_gauge) for d in daemons))
            if list(gauges) == [1.0 if d is chosen[0] else 0.0 for d in daemons]:
                return chosen[0]
        for d in daemons:
            assert d.proc.poll() is None, f"{d.name} exited: {d.log.read_text()[-3000:]}"
        if time.monotonic() > deadline:
            raise AssertionError(f"no daemon of {[d.name for d in daemons]} leads local (leader pid {pid})")
        await asyncio.sleep(0.05)


@pytest.mark.e2e
async def test_one_leader_at_a_time_and_every_row_stored_once(chain: ChainDriver, database_url, engine,
                                                              tmp_path):
    seed = 20261128
    rng = random.Random(seed)
    holders = chain.accounts[2:9]
    chain.fund(holders)
    watched = set(holders[:2])
    async with engine.begin() as conn:
        for address in watched:
            await store.add_watched_address(conn, "local", address, "wallet", start_block=0)

    async def churn(rounds: int) -> None:
        """Each round: a new address joins the watch set and, at once, receives a transfer and is named
        spender by a lender's approval, among other activity."""
        for _ in range(rounds):
            fresh = Account.create().address.lower()
            async with engine.begin() as conn:
                await store.add_watched_address(conn, "local", fresh, "wallet")
            watched.add(fresh)
            sender = rng.choice(holders)
            chain.transfer(rng.choice(["USDC", "USDT"]), sender, fresh, rng.randint(1, 10**6))
            chain.approve("USDC", rng.choice(holders), fresh, rng.randint(1, 10**6))
            chain.random_activity(rng, 6, holders, [*holders, fresh], per_block=2)
            await asyncio.sleep(rng.uniform(0.0, 0.15))

    daemons: list[Daemon] = []
    try:
        daemons.append(start_daemon(chain, database_url, tmp_path, "a"))
        first = await wait_leader(engine, daemons)
        daemons.append(start_daemon(chain, database_url, tmp_path, "b"))
        await churn(4)
        assert await wait_leader(engine, daemons) is first
        daemons.append(start_daemon(chain, database_url, tmp_path, "c"))
        await churn(4)
        assert await wait_leader(engine, daemons) is first

        for _ in range(2):  # kill -9 the leader twice: three daemons, then two, then one left
            current = await wait_leader(engine, daemons)
            _, token_before, _ = await leader(engine)
            current.proc.send_signal(signal.SIGKILL)
            current.proc.wait(10)
            daemons.remove(current)
            churning = asyncio.create_task(churn(3))
            successor = await wait_leader(engine, daemons)
            _, token, _ = await leader(engine)
            assert token > token_before  # the new leader's commits fence the dead one's out
            await churning
            await churn(2)

        await wait_synced(engine, chain, "local", timeout_s=120)
        assert successor.proc.poll() is None
    finally:
        for d in daemons:
            if d.proc.poll() is None:
                d.proc.terminate()
                d.proc.wait(15)

    logs = {d: (tmp_path / f"{d}.log").read_text() for d in ("a", "b", "c")}
    assert "standby for network" in logs["b"] and "standby for network" in logs["c"]
    assert sum("leading network" in text for text in logs.values()) == 3  # the first, then two takeovers
    expected = chain.token_logs(watched)
    stored = await db_rows(engine, "local")
    assert stored == expected, f"replay with seed {seed}"
    async with engine.connect() as conn:
        count = sum([await conn.scalar(select(func.count()).select_from(table)
                                       .where(table.c.network == "local"))
                     for table in (token_transfers, token_approvals)])
    assert count == len(expected)  # each row once
    assert any(row.kind == "approval" and row.party_b in watched - set(holders) for row in expected)


async def test_a_deposed_follower_stores_nothing(session_chain: ChainDriver, engine):
    """A follower whose lead another one took (the fencing token moved on) stores no range and marks no
    address live: its next commit stops it. The new leader goes on from the same cursor."""
    chain = session_chain
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    settings = indexer_settings(network)
    async with engine.begin() as conn:
        await store.add_watched_address(conn, "local", chain.accounts[2], "wallet", start_block=0)
    async with RpcClient("local", network.rpc_url, settings.rpc) as rpc:
        deposed, _ = build_network_tasks(settings, network, engine, rpc)
        await deposed.prepare()
        leader, _ = build_network_tasks(settings, network, engine, rpc)
        await leader.prepare()
        assert leader.token == deposed.token + 1  # type: ignore[operator]
        before = await cursor_of(engine, "local")
        with pytest.raises(LeadershipLost):
            await deposed.step()  # a range to store: the chain has blocks past the new cursor
        assert await cursor_of(engine, "local") == before
        async with engine.connect() as conn:
            [watched] = await store.load_watch_set(conn, "local")
        assert watched.live_from_block is None
        while not await leader.step():
            pass
    assert await cursor_of(engine, "local") == chain.head()
    assert await db_rows(engine, "local") == chain.token_logs({chain.accounts[2]})


async def wait_until(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def test_one_lead_at_a_time_and_a_lost_session_ends_the_term(engine):
    """Two daemons' leads of one network: one runs the network's work, the other stands by. When the
    leader's lock session is cut (the server ends it), the standby takes over and the old leader stops its
    work and stands by in turn."""
    running: list[str] = []

    def work_of(name: str):
        def work(stop: asyncio.Event):
            async def body() -> None:
                running.append(name)
                try:
                    await stop.wait()
                finally:
                    running.remove(name)
            return [body()]
        return work

    first = NetworkLead("net", engine, work_of("first"), 0.05)
    second = NetworkLead("net", engine, work_of("second"), 0.05)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(first.run(stop))]
    try:
        await asyncio.wait_for(first.leading.wait(), 30)
        tasks.append(asyncio.create_task(second.run(stop)))
        await asyncio.wait_for(second.standing_by.wait(), 30)
        assert running == ["first"] and not second.leading.is_set()

        async with engine.connect() as conn:  # the server ends the leader's session, and its lock
            await conn.execute(text("SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_database d"
                                    " ON d.oid = l.database WHERE l.locktype = 'advisory' AND l.granted"
                                    " AND d.datname = current_database()"))
        await wait_until(lambda: running == ["second"] and first.standing_by.is_set(),
                         f"the standby should lead alone, running: {running}")
        assert second.leading.is_set() and not first.leading.is_set()
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert running == []
