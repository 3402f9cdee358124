"""The real API on a real loopback port, in a thread of its own, for tools that call it synchronously
(schemathesis, generated clients, node): its own database, the session's Anvil, a key with every scope
and a user, and rate limits out of the way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
from aiohttp import web

from tests.support.chain import indexer_settings, local_network
from vip.accounts import keys
from vip.api.app import create_app
from vip.config import ApiConfig, RateLimitConfig
from vip.devstack.anvil import free_port
from vip.store.engine import create_engine


@dataclass
class LiveApi:
    url: str
    headers: dict[str, str]
    user_id: str

    @property
    def key(self) -> str:
        return self.headers["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module", name="live_api")
def live_api_fixture(databases, session_chain) -> Iterator[LiveApi]:
    """The API on a real port, in a thread of its own (schemathesis calls it synchronously)."""
    database_url = databases.create()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    base = indexer_settings(network)
    unlimited = RateLimitConfig(vip_report_per_user=10**6, risk_score_per_user=10**6,
                                transactions_per_key=10**6, default_per_key=10**6)
    app_settings = base.model_copy(update={"api": ApiConfig(public_base_url=url, rate_limits=unlimited)})
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict = {}

    async def start() -> None:
        runner = web.AppRunner(create_app(app_settings, database_url))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        engine = create_engine(database_url, pool_size=1)
        async with engine.begin() as conn:
            org = await keys.ensure_organisation(conn, "fuzz")
            state["secret"], _ = await keys.create_key(conn, org, list(keys.SCOPES))
        await engine.dispose()
        state["runner"] = runner

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30)
    headers = {"Authorization": f"Bearer {state['secret']}"}
    user_id = requests.post(f"{url}/v1/users", json={}, headers=headers, timeout=10).json()["user"]["id"]
    yield LiveApi(url, headers, user_id)
    asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


