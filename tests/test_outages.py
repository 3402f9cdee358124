"""Outages as an operator meets them: the database stops and comes back under a running API; a daemon
counts as ready only once it can execute charges."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from sqlalchemy import select
from structlog.testing import capture_logs

from tests.support.api import checked_api
from tests.support.chain import indexer_settings, local_network
from tests.support.own_postgres import OwnPostgres
from tests.support.payments import disbursement_settings
from vip.config import DaemonConfig
from vip.daemon import run_daemon, start_metrics_server
from vip.devstack.anvil import free_port
from vip.store.engine import create_engine
from vip.store.tables import charge_executors


@pytest.mark.e2e
async def test_a_database_outage_is_503_not_ready_and_the_first_request_after_it_succeeds(
        aiohttp_client, session_chain, tmp_path):
    postgres = OwnPostgres(tmp_path / "pg")
    engine = create_engine(postgres.url, pool_size=1)
    try:
        node = session_chain.node
        network = local_network(node.rpc_url, node.chain_id, session_chain.contracts)
        async with checked_api(aiohttp_client, indexer_settings(network), postgres.url, engine) as api:
            user_id = await api.user()
            headers = await api.headers()
            # Several requests at once: the API's pools hold several connections, all about to go stale.
            answers = await asyncio.gather(*(api.client.get(f"/v1/users/{user_id}", headers=headers)
                                             for _ in range(6)))
            assert [a.status for a in answers] == [200] * 6
            await engine.dispose()

            # A restart between two requests: the pools' connections are all dead, nothing has noticed.
            postgres.stop()
            postgres.start()
            first = await api.client.get(f"/v1/users/{user_id}", headers=headers)
            assert first.status == 200, await first.text()

            postgres.stop()
            with capture_logs() as logs:
                down = [await api.client.get(f"/v1/users/{user_id}", headers=headers),
                        await api.client.post("/v1/users", json={"external_id": "during-outage"},
                                              headers={**headers, "Idempotency-Key": "outage-1"})]
            for resp in down:
                assert resp.status == 503, await resp.text()
                assert resp.headers["Retry-After"] == "5"
                error = (await resp.json())["error"]
                assert error["code"] == "ERR_NOT_READY" and error["details"] == {"database": "unreachable"}
                assert error["request_id"] == resp.headers["X-Request-Id"]
            outage_lines = [entry for entry in logs if entry["event"].startswith("database unreachable")]
            assert len(outage_lines) == 2  # one line per request, with its context
            assert {line["path"] for line in outage_lines} == {f"/v1/users/{user_id}", "/v1/users"}
            assert all(entry["log_level"] != "error" and "exc_info" not in entry for entry in logs)

            postgres.start()
            # The first request after the recovery, on pools full of connections the old server dropped.
            after = await api.client.get(f"/v1/users/{user_id}", headers=headers)
            assert after.status == 200, await after.text()
            retried = await api.client.post("/v1/users", json={"external_id": "during-outage"},
                                            headers={**headers, "Idempotency-Key": "outage-1"})
            assert retried.status == 201, await retried.text()
    finally:
        await engine.dispose()
        postgres.close()


async def test_a_daemon_is_ready_only_once_it_executes_charges(session_chain, database_url):
    """The first 200 of the daemon's /readyz comes after its charge executor row exists: a charge sent as
    soon as the daemon says ready is never answered 503 ERR_DISBURSEMENT_UNAVAILABLE."""
    port = free_port()
    settings = disbursement_settings(session_chain).model_copy(update={
        "daemon": DaemonConfig(metrics_host="127.0.0.1", metrics_port=port)})
    stop = asyncio.Event()
    daemon = asyncio.create_task(run_daemon(settings, database_url, stop))
    engine = create_engine(database_url, pool_size=1)
    seen_not_ready = []
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                try:
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                        body = await resp.json()
                        if resp.status == 200:
                            break
                        seen_not_ready.append(body["problems"])
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.01)
            assert resp.status == 200
        async with engine.connect() as conn:
            executors = (await conn.execute(select(charge_executors.c.network))).scalars().all()
        assert executors == ["local"]
        # Every "not ready" named what was missing.
        assert all(problems for problems in seen_not_ready)
    finally:
        stop.set()
        await daemon
        await engine.dispose()


async def test_readiness_waits_for_every_start_up_gate(session_chain, engine):
    port = free_port()
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    registered = asyncio.Event()
    runner = await start_metrics_server("127.0.0.1", port, engine, [network], None,
                                        {"charge_executor": registered})
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                assert resp.status == 503
                assert (await resp.json())["problems"] == {"charge_executor": "not started yet"}
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                assert resp.status == 200  # alive all along: liveness is not readiness
            registered.set()
            async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                assert resp.status == 200, await resp.text()
    finally:
        await runner.cleanup()
