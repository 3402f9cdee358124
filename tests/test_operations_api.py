"""What an operator relies on from an API process: request metrics by route template, the build, liveness
apart from readiness (database and every network's RPC), and one access line per request with its id.
Real application on loopback HTTP, real PostgreSQL and Anvil."""

from __future__ import annotations

import platform
import time

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from tests.support.api import checked_api
from tests.support.chain import indexer_settings, local_network
from vip.api.app import create_app
from vip.daemon import start_metrics_server
from vip.devstack.anvil import free_port
from vip.metrics import package_version


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_requests_are_counted_by_route_template_and_status(api):
    headers = await api.headers()
    route = {"method": "GET", "route": "/v1/users/{user_id}"}
    before_404 = sample("vip_http_requests_total", **route, status="404")
    before_seconds = sample("vip_http_request_duration_seconds_count", **route)
    for user_id in ("usr_nobody_1", "usr_nobody_2"):  # two paths, one template: a bounded label
        resp = await api.client.get(f"/v1/users/{user_id}", headers=headers)
        assert resp.status == 404
    assert sample("vip_http_requests_total", **route, status="404") == before_404 + 2
    assert sample("vip_http_request_duration_seconds_count", **route) == before_seconds + 2

    unmatched = sample("vip_http_requests_total", method="GET", route="unmatched", status="404")
    await api.client.get("/v1/no/such/thing", headers=headers)
    assert sample("vip_http_requests_total", method="GET", route="unmatched", status="404") == unmatched + 1

    scraped = await (await api.client.get("/metrics")).text()
    assert "vip_http_requests_total{" in scraped and "/no/such/thing" not in scraped


async def test_build_info_names_the_running_version(api):
    scraped = await (await api.client.get("/metrics")).text()
    assert (f'vip_build_info{{python="{platform.python_version()}",version="{package_version()}"}} 1.0'
            in scraped)
    assert "vip_vip_" not in scraped  # no doubled namespace


async def test_one_access_line_per_request_with_its_id_and_organisation(api):
    headers = {**await api.headers(), "X-Request-Id": "lender-req-000123"}
    with capture_logs() as lines:
        resp = await api.client.get("/v1/users/usr_missing", headers=headers)
        await api.client.get("/healthz")  # probes are not access-logged
    assert resp.status == 404
    access = [line for line in lines if line["event"] == "request"]
    assert len(access) == 1, lines
    line = access[0]
    assert line["request_id"] == "lender-req-000123"
    assert (line["method"], line["route"], line["path"], line["status"]) == (
        "GET", "/v1/users/{user_id}", "/v1/users/usr_missing", 404)
    assert line["organisation_id"].startswith("org_") and line["duration_ms"] >= 0
    assert "Authorization" not in str(line) and (await api.key()) not in str(line)


async def test_liveness_and_readiness_when_everything_answers(api):
    live = await api.client.get("/healthz")
    assert live.status == 200 and (await live.json())["status"] == "ok"
    for path in ("/readyz", "/v1/health"):
        ready = await api.client.get(path)
        assert ready.status == 200 and (await ready.json())["status"] == "ok", path


async def test_not_ready_while_a_networks_rpc_is_down(aiohttp_client, session_chain, database_url, engine):
    """A dead RPC: liveness stays 200 (a restart would not help), readiness is 503 naming the network and
    never repeating its URL (hosted providers put keys in it)."""
    dead_rpc = f"http://127.0.0.1:{free_port()}/v2/secret-provider-key"
    down = local_network(dead_rpc, session_chain.node.chain_id, session_chain.contracts)
    up = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    settings = indexer_settings(up)
    mainnet_like = down.model_copy(update={"name": "mainnet_like", "local": False})
    settings = settings.model_copy(update={"networks": {**settings.networks, "mainnet_like": mainnet_like}})
    async with checked_api(aiohttp_client, settings, database_url, engine) as api:
        assert (await api.client.get("/healthz")).status == 200
        resp = await api.client.get("/readyz")
        body = await resp.json()
        assert resp.status == 503 and body["error"]["code"] == "ERR_NOT_READY"
        assert set(body["error"]["details"]) == {"rpc:mainnet_like"}
        assert "secret-provider-key" not in await resp.text()
        assert (await api.client.get("/v1/health")).status == 503


async def test_not_ready_while_the_database_is_down(aiohttp_client, session_chain):
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    nowhere = f"postgresql+psycopg://postgres:hunter2@127.0.0.1:{free_port()}/gone"
    client = await aiohttp_client(create_app(indexer_settings(network), nowhere))
    assert (await client.get("/healthz")).status == 200
    resp = await client.get("/readyz")
    body = await resp.json()
    assert resp.status == 503 and set(body["error"]["details"]) == {"database"}
    assert "hunter2" not in await resp.text()


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
async def test_probes_are_never_rate_limited(api, path):
    for _ in range(3):
        resp = await api.client.get(path)
        assert resp.status == 200 and "X-RateLimit-Limit" not in resp.headers


async def test_the_daemons_readiness_names_a_dead_rpc(engine, session_chain):
    up = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    down = up.model_copy(update={"name": "polygon", "local": False, "rpc_url": f"http://127.0.0.1:{free_port()}"})
    port = free_port()
    for networks, status in (([up], 200), ([up, down], 503)):
        runner = await start_metrics_server("127.0.0.1", port, engine, networks)
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as live:
                    assert live.status == 200
                async with session.get(f"http://127.0.0.1:{port}/readyz") as ready:
                    body = await ready.json()
                    assert ready.status == status, body
                    assert body.get("problems", {}).keys() == ({"rpc:polygon"} if status == 503 else set())
        finally:
            await runner.cleanup()


async def test_readiness_is_probed_at_most_once_per_interval(aiohttp_client, session_chain, database_url,
                                                             engine):
    """/readyz is public and never throttled: a burst of requests must not become a burst of calls to the
    lender's paid RPC provider. The probe's answer is shared for two seconds."""
    probes = []

    async def rpc(request: web.Request) -> web.Response:
        call = await request.json()
        if call["method"] == "eth_blockNumber":  # the probe (the service clock reads the latest block)
            probes.append(call)
            return web.json_response({"jsonrpc": "2.0", "id": call["id"], "result": "0x10"})
        block = {"number": "0x10", "hash": "0x" + "ab" * 32, "timestamp": hex(int(time.time()))}
        return web.json_response({"jsonrpc": "2.0", "id": call["id"], "result": block})

    provider = web.Application()
    provider.router.add_post("/", rpc)
    provider_client = await aiohttp_client(provider)
    counted = local_network(str(provider_client.make_url("/")), session_chain.node.chain_id,
                            session_chain.contracts)
    async with checked_api(aiohttp_client, indexer_settings(counted), database_url, engine) as api:
        for _ in range(20):
            assert (await api.client.get("/readyz")).status == 200
        assert len(probes) == 1
