"""Property-based run (schemathesis) against the served OpenAPI document: whatever the generated input,
no 500 and no response that breaks the document."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.chain import indexer_settings, local_network
from vip.accounts import keys
from vip.api.app import create_app
from vip.config import ApiConfig, RateLimitConfig
from vip.devstack.anvil import free_port
from vip.store.engine import create_engine

CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]


@dataclass
class LiveApi:
    url: str
    headers: dict[str, str]
    user_id: str


@pytest.fixture(scope="module")
def live_api(databases, session_chain) -> Iterator[LiveApi]:
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
    import requests

    user_id = requests.post(f"{url}/v1/users", json={}, headers=headers, timeout=10).json()["user"]["id"]
    yield LiveApi(url, headers, user_id)
    asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_generated_requests_never_break_the_api(live_api: LiveApi):
    schema = schemathesis.openapi.from_url(f"{live_api.url}/v1/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case) -> None:
            # Half the cases aim at a real user, so handlers past validation run too.
            if case.query and "user_id" in case.query and len(str(case.query)) % 2:
                case.query["user_id"] = live_api.user_id
            case.call_and_validate(base_url=live_api.url, headers=live_api.headers, checks=CHECKS)

        run()
