"""Shared fixtures: real Anvil nodes and real PostgreSQL databases (embedded unless DATABASE_URL is set)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from sqlalchemy.ext.asyncio import AsyncEngine
from web3 import Web3

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.dashboard import dashboard  # noqa: F401 (the dashboard's browser fixture)
from tests.support.db import TestDatabases
from tests.support.payments import payments_api
from tests.support.webhooks import Receiver
from vip.config import WebhookConfig
from vip.devstack.anvil import AnvilNode, start_anvil
from vip.store import transaction_guard
from vip.store.engine import create_engine

# The fast lane and the full suite (markers chain, e2e and fuzz; tests/support/lanes.py)
pytest_plugins = ("tests.support.lanes",)

# Property tests run beside Anvil nodes and PostgreSQL servers on two cores: how long one example takes to
# draw or run says nothing about the property (a draw of 0.9 s under load failed a run on too_slow).
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    # A network call made while the calling task holds an open database transaction fails the test
    # (production logs and counts it): see vip.store.transaction_guard.
    transaction_guard.set_mode("raise")


def chain_genesis() -> int | None:
    """VIP_TEST_CHAIN_GENESIS (an ISO 8601 instant): the test chains start then, not now, so the tests that
    run on the chain's clock can be run as of a month's last day, a leap day, a year's end
    (docs/testing.md)."""
    value = os.environ.get("VIP_TEST_CHAIN_GENESIS")
    return int(datetime.fromisoformat(value).timestamp()) if value else None


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilNode]:
    """One Anvil node (chain id 31337) for the whole session; tests must not assume an empty chain."""
    node = start_anvil(chain_id=31337, genesis_timestamp=chain_genesis())
    yield node
    node.stop()


@pytest.fixture(scope="session")
def w3(anvil: AnvilNode) -> Web3:
    return Web3(Web3.HTTPProvider(anvil.rpc_url, request_kwargs={"timeout": 30}))


@pytest.fixture(scope="session")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestDatabases]:
    dbs = TestDatabases(Path(tmp_path_factory.mktemp("postgres")))
    yield dbs
    dbs.drop_all()


@pytest.fixture
def database_url(databases: TestDatabases) -> str:
    """A fresh, migrated database for this test."""
    return databases.create()


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(database_url, pool_size=2)
    yield eng
    await eng.dispose()


@pytest.fixture
def chain() -> Iterator[ChainDriver]:
    """A fresh Anvil node of its own (reorgs and kills stay inside the test) with the tokens deployed."""
    node = start_anvil(chain_id=31337, genesis_timestamp=chain_genesis())
    try:
        yield ChainDriver(node)
    finally:
        node.stop()


@pytest.fixture(scope="session")
def session_chain(anvil: AnvilNode) -> ChainDriver:
    """The session Anvil with the tokens and the disbursement contract deployed once."""
    return ChainDriver(anvil)


@pytest.fixture
async def api(aiohttp_client, database_url: str, engine: AsyncEngine,
              session_chain: ChainDriver) -> AsyncIterator[ApiHarness]:
    """The real application served on loopback, on this test's database, following the session chain."""
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    # Every response of every API test is checked against the served OpenAPI document.
    async with checked_api(aiohttp_client, indexer_settings(network), database_url, engine) as harness:
        yield harness


@pytest.fixture
async def hooks(aiohttp_client, database_url: str, engine: AsyncEngine,
                session_chain: ChainDriver) -> AsyncIterator[ApiHarness]:
    """The `api` fixture's application with plain-http webhook endpoints allowed (a local receiver), as
    `vip dev` runs it."""
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    settings = indexer_settings(network).model_copy(update={"webhooks": WebhookConfig(allow_http=True)})
    async with checked_api(aiohttp_client, settings, database_url, engine) as harness:
        yield harness


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A webhook receiver on loopback that records every delivery."""
    r = await Receiver().start()
    yield r
    await r.stop()


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, session_chain) -> AsyncIterator[ApiHarness]:
    """The API with disbursement configured on the session chain (the charge daemon in-process). A test
    file that needs its own chain or other disbursement settings defines its own `pay_api`."""
    async with payments_api(aiohttp_client, database_url, engine, session_chain) as harness:
        yield harness
