"""The API's /metrics as the operator chooses (api.metrics_port / VIP_METRICS_TOKEN): open on the API's port
in development, behind a bearer token, or only on a listener of its own. Real HTTP on loopback."""

from __future__ import annotations

import aiohttp
import pytest
from pydantic import SecretStr

from tests.support.api import checked_api
from tests.support.chain import indexer_settings, local_network
from vip.config import load_settings
from vip.devstack.anvil import free_port

TOKEN = "metrics-token-of-at-least-32-characters!"


@pytest.fixture
def settings(session_chain):
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    return indexer_settings(network)


def with_api(settings, **api):
    return settings.model_copy(update={"api": settings.api.model_copy(update=api)})


async def test_open_on_the_api_port_by_default(aiohttp_client, settings, database_url, engine):
    async with checked_api(aiohttp_client, settings, database_url, engine) as api:
        resp = await api.client.get("/metrics")
        assert resp.status == 200 and "vip_webhook_oldest_undelivered_seconds" in await resp.text()


async def test_behind_a_token(aiohttp_client, settings, database_url, engine):
    async with checked_api(aiohttp_client, with_api(settings, metrics_token=SecretStr(TOKEN)), database_url,
                           engine) as api:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            resp = await api.client.get("/metrics", headers=headers)
            body = await resp.json()
            assert resp.status == 401 and body["error"]["code"] == "ERR_UNAUTHORIZED", headers
            assert body["error"]["request_id"] == resp.headers["X-Request-Id"]
        resp = await api.client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert resp.status == 200 and "vip_webhook_oldest_undelivered_seconds" in await resp.text()


async def test_on_its_own_listener_only(aiohttp_client, settings, database_url, engine):
    port = free_port()
    async with checked_api(aiohttp_client, with_api(settings, metrics_port=port), database_url,
                           engine) as api:
        resp = await api.client.get("/metrics")
        assert resp.status == 404  # not on the port lenders reach
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/metrics") as scraped:
            assert scraped.status == 200 and "vip_webhook_oldest_undelivered_seconds" in await scraped.text()


def test_the_token_comes_from_the_environment():
    settings = load_settings(environ={"VIP_METRICS_TOKEN": TOKEN})
    assert settings.api.metrics_token is not None and TOKEN not in repr(settings)
    assert settings.api.metrics_token.get_secret_value() == TOKEN
