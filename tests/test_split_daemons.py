"""Daemons that split networks (`vip index --network`), each with the operator key: each claims only the
charges of the network it has, so no daemon ever takes another network's charge (it could not execute
it), and charges on both networks are paid once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account
from pydantic import SecretStr
from sqlalchemy import select

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.payments import (
    Borrower,
    approve,
    disbursed_logs,
    intent_body,
    lender,
    post_json,
    register_funding_wallet,
    wait_charge_settled,
    wait_intent_status,
)
from tests.support.wallets import sign_in_body
from vip.config import DisbursementConfig
from vip.devstack.anvil import free_port, start_anvil
from vip.payments.rules import chain_intent_id
from vip.store.tables import charge_executors

pytestmark = pytest.mark.e2e


@pytest.fixture
def other() -> Iterator[ChainDriver]:
    """A second Anvil of its own (another chain id), with the tokens and the disbursement contract."""
    node = start_anvil(chain_id=31338)
    try:
        yield ChainDriver(node)
    finally:
        node.stop()


def network_section(name: str, driver: ChainDriver) -> str:
    c = driver.contracts
    return f"""
[networks.{name}]
chain_id = {driver.node.chain_id}
rpc_url = "{driver.node.rpc_url}"
local = true
finality_depth = 2
poll_interval_s = 0.05
start_block = 0
disbursement_contract = "{c.disbursement}"

[networks.{name}.tokens.USDC]
address = "{c.usdc}"

[networks.{name}.tokens.USDT]
address = "{c.usdt}"
"""


def daemon_config(drivers: dict[str, ChainDriver]) -> str:
    return f"""
[daemon]
metrics_port = {free_port()}

[indexer]
lead_poll_s = 0.2

[disbursement]
charge_wait_s = 0.5
lease_s = 4.0
poll_interval_s = 0.1
""" + "".join(network_section(name, driver) for name, driver in drivers.items())


def spawn_daemon(tmp_path: Path, database_url: str, drivers: dict[str, ChainDriver], network: str,
                 operator_key: str) -> subprocess.Popen:
    """`vip index --network NETWORK` as a real process, configured with every network, holding the key."""
    config = tmp_path / f"{network}.toml"
    config.write_text(daemon_config(drivers))
    env = {k: v for k, v in os.environ.items() if k not in ("VIP_OPERATOR_KEYSTORE_PASSWORD", "VIP_CONFIG")}
    env.update(DATABASE_URL=database_url, VIP_CONFIG=str(config), VIP_LOG_FORMAT="json",
               VIP_OPERATOR_KEY=operator_key)
    with open(tmp_path / f"{network}.log", "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "vip.cli", "index", "--network", network], env=env,
                                stdout=out, stderr=subprocess.STDOUT)


async def wait_executors(api: ApiHarness, networks: set[str], procs: list[subprocess.Popen]) -> None:
    """Until a daemon announced itself as the charge executor of every network."""
    for _ in range(3000):
        async with api.engine.connect() as conn:
            rows = (await conn.execute(select(charge_executors.c.network))).scalars().all()
        if set(rows) >= networks:
            return
        assert all(p.poll() is None for p in procs), "a daemon exited"
        await asyncio.sleep(0.02)
    raise AssertionError(f"executors announced: {rows}")


async def borrower_on(api: ApiHarness, network: str, driver: ChainDriver) -> Borrower:
    """A user with a wallet signed in on `network`."""
    account = Account.create()
    user_id = await api.user("acme")
    body = await sign_in_body(api, user_id, account, network=network, chain_id=driver.node.chain_id)
    resp = await api.client.post("/v1/connect/wallet", json=body, headers=await api.headers("acme"))
    assert resp.status == 201, await resp.text()
    return Borrower(user_id, account.address)


async def test_split_daemons_execute_only_their_own_networks_charges(aiohttp_client, database_url, engine,
                                                                     chain, other, tmp_path):
    drivers = {"local": chain, "local2": other}
    networks = [local_network(d.node.rpc_url, d.node.chain_id, d.contracts, name=name, finality_depth=2)
                for name, d in drivers.items()]
    operator_key = chain.node.private_keys[1]  # the same dev account operates both contracts
    settings = indexer_settings(*networks).model_copy(update={"disbursement": DisbursementConfig(
        operator_private_key=SecretStr(operator_key), charge_wait_s=0.5, poll_interval_s=0.1)})
    procs: list[subprocess.Popen] = []
    async with checked_api(aiohttp_client, settings, database_url, engine) as api:
        try:
            procs = [spawn_daemon(tmp_path, database_url, drivers, name, operator_key) for name in drivers]
            await wait_executors(api, set(drivers), procs)
            intents = []
            for name, driver in drivers.items():
                for index in (7, 8):
                    who = await borrower_on(api, name, driver)
                    funding = lender(driver, index)
                    registered = await register_funding_wallet(api, funding, network=name)
                    assert registered.status in (200, 201), await registered.text()
                    body = {**intent_body(who, funding, f"{index}.25"), "network": name}
                    resp = await post_json(api, "/v1/payment-intents", body)
                    assert resp.status == 201, await resp.text()
                    intent = (await resp.json())["payment_intent"]
                    intents.append((name, intent, approve(driver, intent, funding)))
            for _, intent, _ in intents:
                await wait_intent_status(api, intent["id"], "approval_confirmed", timeout_s=60)
            # Every charge at once: both daemons wake on each one.
            responses = await asyncio.gather(*(post_json(api, "/v1/charges", {
                "payment_intent_id": intent["id"], "approval_tx_hash": tx}) for _, intent, tx in intents))
            charges = []
            for resp in responses:
                assert resp.status in (201, 202), await resp.text()
                charge = (await resp.json())["charge"]
                charges.append(charge if resp.status == 201 else await wait_charge_settled(api, charge["id"]))
            assert [c["status"] for c in charges] == ["succeeded"] * len(intents)
            for (name, intent, _), charge in zip(intents, charges, strict=True):
                assert charge["network"] == name
                assert len(disbursed_logs(drivers[name], chain_intent_id(intent["id"]))) == 1
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(15)
    for name in drivers:
        log = (tmp_path / f"{name}.log").read_text()
        assert "disbursement jobs running" in log, log[-3000:]
        assert "charge step failed" not in log and "Traceback" not in log, log[-5000:]
