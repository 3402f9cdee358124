"""Property-based run (schemathesis) against the served OpenAPI document: whatever the generated input,
no 500 and no response that breaks the document; and hostile input on every operation (NUL in each path
and query parameter, bodies nested hundreds, thousands and a hundred thousand levels deep): a documented
400 in the error body."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import BaseSchema
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.chain import indexer_settings, local_network
from tests.support.openapi_check import violations_of
from vip.accounts import keys
from vip.api.app import create_app
from vip.api.openapi import document
from vip.config import ApiConfig, RateLimitConfig
from vip.devstack.anvil import free_port
from vip.store.engine import create_engine

CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]


@dataclass
class LiveApi:
    url: str
    headers: dict[str, str]
    user_id: str
    schema: BaseSchema  # the document the live server serves


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
    user_id = requests.post(f"{url}/v1/users", json={}, headers=headers, timeout=10).json()["user"]["id"]
    yield LiveApi(url, headers, user_id, schemathesis.openapi.from_url(f"{url}/v1/openapi.json"))
    asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


# Every operation of the document, one test each (so that parallel workers share the sweep). Built the way
# the server builds it; the test itself reads the document the live server serves.
OPERATIONS = sorted((path, method.upper()) for path, item in document("http://127.0.0.1")["paths"].items()
                    for method in item if method in {"get", "post", "put", "patch", "delete"})
# Bounded by the number of examples, never by the clock: the same work on a quiet or a loaded machine.
EXAMPLES_PER_OPERATION = 25


def test_the_sweep_covers_the_api():
    assert len(OPERATIONS) >= 40


@pytest.mark.fuzz
@pytest.mark.parametrize(("path", "method"), OPERATIONS, ids=[f"{m} {p}" for p, m in OPERATIONS])
def test_generated_requests_never_break_the_api(live_api: LiveApi, path: str, method: str):
    operation = live_api.schema[path][method]

    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    def run(case) -> None:
        # Half the cases aim at a real user, so handlers past validation run too.
        if case.query and "user_id" in case.query and len(str(case.query)) % 2:
            case.query["user_id"] = live_api.user_id
        case.call_and_validate(base_url=live_api.url, headers=live_api.headers, checks=CHECKS)

    run()


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_nul_and_deep_nesting_on_every_operation_are_documented_400s(live_api: LiveApi):
    schema = live_api.schema
    doc = requests.get(f"{live_api.url}/v1/openapi.json", timeout=10).json()
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        method, template = operation.method.upper(), operation.path
        spec = doc["paths"][template][operation.method.lower()]
        path_names = [p["name"] for p in spec.get("parameters", []) if p["in"] == "path"]
        query_names = [p["name"] for p in spec.get("parameters", []) if p["in"] == "query"]
        filler = dict.fromkeys(path_names, "x1")
        cases = [operation.Case(path_parameters={**filler, name: "x\x00y"}) for name in path_names]
        cases += [operation.Case(path_parameters=filler, query={name: "a\x00b"}) for name in query_names]
        if "requestBody" in spec:
            cases += [operation.Case(path_parameters=filler, body={"metadata": nested(200)},
                                     media_type="application/json"),
                      operation.Case(path_parameters=filler, body=nested(300), media_type="application/json")]
        for case in cases:
            response = case.call_and_validate(base_url=live_api.url, headers=live_api.headers, checks=CHECKS)
            assert response.status_code == 400, (method, template, case.path_parameters, case.query,
                                                 response.text[:300])
            assert response.json()["error"]["code"].startswith("ERR_"), response.text
            tried += 1
        if "requestBody" in spec:
            # Deeper than any encoder recurses: raw bytes.
            url = live_api.url + template.format(**filler)
            for raw in ['{"metadata": ' + "[" * 5_000 + "]" * 5_000 + "}", "[" * 100_000 + "]" * 100_000]:
                response = requests.request(method, url, data=raw.encode(), timeout=30, headers={
                    **live_api.headers, "Content-Type": "application/json"})
                assert response.status_code == 400, (method, template, response.text[:300])
                assert not violations_of(doc, method, template, 400, response.json())
                tried += 1
    assert tried >= 40
