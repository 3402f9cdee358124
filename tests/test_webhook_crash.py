"""kill -9 of the `vip index` daemon right after an event commits, and in the middle of an attempt;
restarted each time: every committed event reaches the receiver (a duplicate may, a gap never)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.indexer import spawn_indexer
from tests.support.webhooks import (
    PRODUCTION_SECRETS,
    PRODUCTION_TOKEN_KEY,
    Receiver,
    deliveries,
    make_endpoint,
    organisation,
)
from vip.devstack.anvil import free_port
from vip.store.outbox import record_event
from vip.token_cipher import TokenCipher

HUNG_REQUEST = 3  # the receiver never answers its third request (the daemon is killed during it)


def daemon_toml(rpc_url: str) -> str:
    # A development stack (a local network: the session's Anvil, nothing watched), since production refuses
    # plain-http webhook URLs and the receiver is plain http on loopback.
    return f"""
[networks.local]
chain_id = 31337
rpc_url = "{rpc_url}"
local = true
finality_depth = 3
mode = "watched"

[networks.local.tokens.USDC]
address = "0x5fbdb2315678afecb367f032d93f642f64180aa3"

[daemon]
metrics_port = {free_port()}

[webhooks]
allow_http = true
timeout_s = 2.0
lease_margin_s = 1.0
poll_interval_s = 0.05
"""


async def commit_event(engine: AsyncEngine, org_id: str, n: int) -> str:
    async with engine.begin() as conn:
        return await record_event(conn, "connection.revoked", {"id": f"con_{n}", "status": "revoked"},
                                  created_at=datetime.now(UTC), organisation_id=org_id)


async def wait_for(predicate, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def kill(proc) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.e2e
async def test_kill_9_after_commit_and_mid_attempt_loses_nothing(database_url, engine, tmp_path, anvil):
    receiver = await Receiver(respond=lambda n: None if n == HUNG_REQUEST else 200).start()
    config = tmp_path / "daemon.toml"
    config.write_text(daemon_toml(anvil.rpc_url))
    # The production key ring seals the endpoint's secret; the receiver is on loopback (allow_http).
    env = {"DATABASE_URL": database_url, "VIP_CONFIG": str(config), "VIP_LOG_FORMAT": "json",
           **PRODUCTION_SECRETS}
    log = tmp_path / "daemon.log"
    org = await organisation(engine)
    await make_endpoint(engine, org, receiver.url, cipher=TokenCipher.from_text(PRODUCTION_TOKEN_KEY))
    committed: list[str] = []
    proc = spawn_indexer(env, log)
    try:
        # 1. The daemon is up and delivering.
        committed.append(await commit_event(engine, org, 0))
        await wait_for(lambda: len(receiver.received) == 1, "the first delivery")

        # 2. Killed right after each commit, before it can have sent the event; restarted.
        for n in range(1, 5):
            committed.append(await commit_event(engine, org, n))
            kill(proc)
            proc = spawn_indexer(env, log)
        await wait_for(lambda: set(receiver.event_ids()) >= set(committed[:HUNG_REQUEST - 1]),
                       "the deliveries after the first kills")

        # 3. Killed while an attempt is under way (the receiver holds request 3 open).
        await wait_for(lambda: len(receiver.received) >= HUNG_REQUEST, "the hung request")
        hung = receiver.received[HUNG_REQUEST - 1].one("Service-Event-Id")
        kill(proc)
        proc = spawn_indexer(env, log)
        committed.append(await commit_event(engine, org, 5))

        # Everything arrives; the hung event again (same Service-Event-Id) once its lease ends.
        await wait_for(lambda: set(receiver.event_ids()) >= set(committed)
                       and receiver.event_ids().count(hung) == 2, "every event", timeout_s=90)
        deadline = time.monotonic() + 30
        rows = await deliveries(engine)
        while {d.status for d in rows} != {"delivered"}:
            assert time.monotonic() < deadline, [(d.status, d.attempts) for d in rows]
            await asyncio.sleep(0.05)
            rows = await deliveries(engine)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)
        await receiver.stop()
    assert sorted(set(receiver.event_ids())) == sorted(committed), "a committed event was lost"
    duplicates = [e for e in set(receiver.event_ids()) if receiver.event_ids().count(e) > 1]
    assert hung in duplicates
    assert all(json.loads(r.body)["id"] == r.one("Service-Event-Id") for r in receiver.received)
    assert len(rows) == len(committed)
