"""An Idempotency-Key survives a crash: `vip serve` is SIGKILLed while a POST with a key is inside its
handler (its claim open); the same request sent again runs afresh instead of meeting a claim for a day."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.support.webhooks import PRODUCTION_SECRETS
from vip.devstack.anvil import free_port
from vip.devstack.dev import wait_http


def spawn_serve(database_url: str, tmp_path: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    overlay = tmp_path / "serve.toml"
    overlay.write_text(f"[api]\nport = {port}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIP_RPC_") and k != "VIP_CONFIG"}
    # No network is local, so this is a production start: it needs real (not development) secrets.
    env.update(DATABASE_URL=database_url, VIP_CONFIG=str(overlay), **PRODUCTION_SECRETS)
    with (tmp_path / "serve.log").open("ab") as out:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("vip")), "serve", "--allow-no-networks"],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc, port


@pytest.mark.e2e
async def test_a_claim_dies_with_the_killed_api_process(api, database_url, tmp_path):
    headers = {**await api.headers(), "Idempotency-Key": "crash-1"}
    server, port = spawn_serve(database_url, tmp_path)
    try:
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/healthz", 60, server)
        async with api.engine.connect() as blocker:
            # Hold the users table so the request stops inside its handler, its claim open.
            await blocker.exec_driver_sql("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
            async with aiohttp.ClientSession() as http:
                request = asyncio.create_task(http.post(f"http://127.0.0.1:{port}/v1/users",
                                                        json={"external_id": "emp-crash"}, headers=headers))
                async with api.engine.connect() as watcher:
                    for _ in range(500):  # until the handler waits for the table, its claim open
                        waiting = (await watcher.exec_driver_sql(
                            "select count(*) from pg_locks where relation = 'users'::regclass"
                            " and not granted")).scalar()
                        if waiting or request.done():
                            break
                        await asyncio.sleep(0.02)
                assert waiting == 1 and not request.done()
                server.send_signal(signal.SIGKILL)
                await asyncio.to_thread(server.wait, 10)
                with contextlib.suppress(aiohttp.ClientError):
                    await request
            await blocker.rollback()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    # The same request again, on another API process: it runs (PostgreSQL dropped the dead claim with its
    # connection), it is not told for 24 hours that the first is still in progress.
    for _ in range(50):
        resp = await api.client.post("/v1/users", json={"external_id": "emp-crash"}, headers=headers)
        if resp.status != 409:
            break
        await asyncio.sleep(0.1)  # PostgreSQL may take a moment to see the dead connection
    assert resp.status == 201, await resp.text()
    again = await api.client.post("/v1/users", json={"external_id": "emp-crash"}, headers=headers)
    assert again.status == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert await again.json() == await resp.json()
    async with api.engine.connect() as conn:
        assert (await conn.exec_driver_sql("select count(*) from users")).scalar() == 1
