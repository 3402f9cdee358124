"""The disbursement contract on a network as an operator meets one: a fresh chain (not Anvil's default chain
id, not marked local, production secrets, keys of their own), `vip contracts deploy` at a CREATE2 address
written to the operator's overlay, `vip contracts verify`, a payout through it by `vip index`, starts
refused for a wrong contract or a wrong operator, and the operator key rotated on the contract."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tomllib
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from eth_account import Account
from web3 import Web3

from tests.support.api import checked_api
from tests.support.chain import ChainDriver
from tests.support.payments import (
    approve,
    balance,
    borrower,
    create_intent,
    disbursed_logs,
    lender,
    post_json,
    wait_intent_status,
)
from tests.support.webhooks import PRODUCTION_SECRETS
from vip.chain import deployment
from vip.chain.contracts import contract_at, deploy_contract
from vip.config import load_settings
from vip.devstack.anvil import free_port, start_anvil
from vip.devstack.deploy import LocalContracts
from vip.devstack.dev import wait_http
from vip.payments.rules import chain_intent_id
from vip.store.engine import create_engine

CHAIN_ID = 84_532_777
VIP = str(Path(sys.executable).with_name("vip"))


def funded_key(node) -> str:
    account = Account.create()
    node.call("anvil_setBalance", [account.address, hex(10**20)])
    return "0x" + account.key.hex().removeprefix("0x")


class Operator:
    """The operator's machine: configuration files and the environment `vip` runs with."""

    def __init__(self, tmp: Path, node, tokens: dict[str, str], database_url: str) -> None:
        self.api_port, self.metrics_port = free_port(), free_port()
        self.base = tmp / "vip.toml"
        self.base.write_text(
            f'[api]\nport = {self.api_port}\n\n[daemon]\nmetrics_port = {self.metrics_port}\n\n'
            f'[networks.local]\nchain_id = {CHAIN_ID}\nrpc_url = "{node.rpc_url}"\nfinality_depth = 2\n'
            'poll_interval_s = 0.1\nstart_block = 0\n'
            + "".join(f'\n[networks.local.tokens.{symbol}]\naddress = "{address}"\n'
                      for symbol, address in tokens.items()))
        self.contracts = tmp / "contracts.toml"
        self.contracts.touch()  # the overlay `vip contracts` writes, listed in VIP_CONFIG
        self.logs = tmp
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("VIP_")}
        self.env.update(PRODUCTION_SECRETS, DATABASE_URL=database_url,
                        VIP_CONFIG=os.pathsep.join([str(self.base), str(self.contracts)]))

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([VIP, *args], env={**self.env, **env}, capture_output=True, text=True,
                              timeout=120)

    def spawn(self, role: str, **env: str) -> subprocess.Popen:
        with (self.logs / f"{role}.log").open("ab") as out:
            return subprocess.Popen([VIP, role], env={**self.env, **env}, stdout=out,
                                    stderr=subprocess.STDOUT)

    def overlay(self) -> dict:
        with self.contracts.open("rb") as fh:
            return tomllib.load(fh)


def refused(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr)
    return lines[0]


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


async def pay_once(operator: Operator, driver: ChainDriver, aiohttp_client, database_url: str,
                   operator_key: str, amount: str, lender_index: int) -> None:
    """intent -> approve -> charge, with `vip index` (holding `operator_key`) executing it: transferFrom
    mined once."""
    settings = load_settings(extra_files=[operator.base, operator.contracts], environ={})
    engine = create_engine(database_url, pool_size=2)
    daemon = operator.spawn("index", VIP_OPERATOR_KEY=operator_key)
    try:
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{operator.metrics_port}/readyz", 90, daemon)
        async with checked_api(aiohttp_client, settings, database_url, engine) as api:
            # In production a borrower signs in on a site the lender registered.
            site = urlsplit(settings.api.public_base_url).netloc
            registered = await api.client.post("/v1/sign-in-domains", headers=await api.headers(), json={
                "domain": site, "uri_prefixes": [f"http://{site}/"]})
            assert registered.status in (200, 201), await registered.text()
            who = await borrower(api)
            funding = lender(driver, lender_index)
            intent = await create_intent(api, who, funding, amount)
            assert intent["network"] == "local"
            approval = approve(driver, intent, funding)
            await wait_intent_status(api, intent["id"], "approval_confirmed", timeout_s=60)
            before = balance(driver, "USDC", funding)
            resp = await post_json(api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                        "approval_tx_hash": approval})
            assert resp.status == 201, await resp.text()
            charge = (await resp.json())["charge"]
            assert charge["status"] == "succeeded", charge
            units = int(Decimal(amount) * 10**6)
            assert before - balance(driver, "USDC", funding) == units
            assert balance(driver, "USDC", who.wallet) == units
            (log,) = disbursed_logs(driver, chain_intent_id(intent["id"]))
            receipt = driver.node.call("eth_getTransactionReceipt", [log["transactionHash"]])
            assert receipt["from"].lower() == Account.from_key(operator_key).address.lower()
    finally:
        stop(daemon)
        await engine.dispose()


@pytest.mark.e2e
async def test_deploy_verify_pay_refuse_and_rotate_on_a_fresh_network(aiohttp_client, database_url, tmp_path):
    node = start_anvil(chain_id=CHAIN_ID)
    try:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 30}))
        minter = node.private_keys[0]
        minter_address = Account.from_key(minter).address
        usdc = deploy_contract(w3, "StandardStablecoin", "USD Coin", "USDC", minter_address,
                               private_key=minter)
        usdt = deploy_contract(w3, "TetherStyleStablecoin", "Tether USD", "USDT", minter_address,
                               private_key=minter)
        deployer_key, operator_key, next_operator_key = (funded_key(node) for _ in range(3))
        operator = Operator(tmp_path, node, {"USDC": usdc, "USDT": usdt}, database_url)
        keys = {"VIP_DEPLOYER_KEY": deployer_key, "VIP_OPERATOR_KEY": operator_key}

        deployed = operator.run("contracts", "deploy", "--network", "local", **keys)
        assert deployed.returncode == 0, deployed.stderr
        (line,) = deployed.stdout.strip().splitlines()
        written = operator.overlay()
        address = written["networks"]["local"]["disbursement_contract"]
        op_address = Account.from_key(operator_key).address
        owner = Account.from_key(deployer_key).address
        expected = deployment.create2_address(deployment.salt_of(deployment.DEFAULT_SALT),
                                              deployment.init_code(op_address, owner))
        assert address == expected and written["disbursement"]["operator_address"] == op_address
        assert line.startswith(f"local: Disbursement {address} deployed in block ") and "CREATE2 via" in line
        assert f"operator {op_address}, owner {owner}, written to {operator.contracts}" in line
        for secret in (deployer_key, operator_key):
            assert secret[2:] not in deployed.stdout + deployed.stderr
        # Deterministic: the same deployment again finds it there.
        again = operator.run("contracts", "deploy", "--network", "local", **keys)
        assert again.returncode == 0 and f"Disbursement {address} already deployed" in again.stdout
        verified = operator.run("contracts", "verify", "--network", "local", **keys)
        assert verified.returncode == 0, verified.stderr
        assert verified.stdout.strip() == (f"local: Disbursement {address} is ours, operator {op_address}, "
                                           f"owner {owner}")

        driver = ChainDriver(node, LocalContracts(usdc=usdc, usdt=usdt, disbursement=address, sprayer=usdc))
        await pay_once(operator, driver, aiohttp_client, database_url, operator_key, "42.000001", 3)

        # A wrong contract address: both roles refuse to start, in one line.
        wrong = tmp_path / "wrong.toml"
        wrong.write_text(f'[networks.local]\ndisbursement_contract = "{usdc}"\n')
        files = [str(operator.base), str(operator.contracts), str(wrong)]
        with_wrong = {"VIP_CONFIG": os.pathsep.join(files)}
        line = refused(operator.run("index", **keys, **with_wrong))
        assert line == (f"vip index: refusing to start: local's disbursement contract: {usdc} holds other "
                        "code than our Disbursement contract (vip contracts deploy)")
        assert "refusing to start" in refused(operator.run("serve", **with_wrong))
        # Another operator key than the contract's: the daemon refuses.
        stranger = funded_key(node)
        line = refused(operator.run("index", VIP_OPERATOR_KEY=stranger))
        assert f"operator is {op_address}, ours is {Account.from_key(stranger).address}" in line

        # Rotation: the owner makes another key the operator; the overlay follows.
        next_address = Account.from_key(next_operator_key).address
        rotated = operator.run("contracts", "set-operator", next_address, "--network", "local", **keys)
        assert rotated.returncode == 0, rotated.stderr
        assert f"operator is now {next_address}" in rotated.stdout
        assert operator.overlay()["disbursement"]["operator_address"] == next_address
        assert contract_at(w3, "Disbursement", address).functions.operator().call() == next_address
        assert "operator is" in refused(operator.run("index", VIP_OPERATOR_KEY=operator_key))
        assert operator.run("contracts", "verify", "--network", "local",
                            VIP_OPERATOR_KEY=next_operator_key).returncode == 0
        # Only the owner may rotate.
        assert "the contract's owner is" in refused(operator.run(
            "contracts", "set-operator", op_address, "--network", "local", VIP_DEPLOYER_KEY=stranger))
        # The next payout is signed by the new operator.
        await pay_once(operator, driver, aiohttp_client, database_url, next_operator_key, "7.5", 4)
    finally:
        node.stop()


@pytest.mark.e2e
def test_without_the_deterministic_deployment_proxy_a_plain_create_is_used(tmp_path):
    node = start_anvil(chain_id=CHAIN_ID, extra_args=["--disable-default-create2-deployer"])
    try:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 30}))
        assert not w3.eth.get_code(deployment.DETERMINISTIC_DEPLOYER)
        operator = Operator(tmp_path, node, {"USDC": Account.create().address}, "postgresql://unused.invalid/x")
        key = funded_key(node)
        deployed = operator.run("contracts", "deploy", "--network", "local", "--operator",
                                Account.from_key(key).address, VIP_DEPLOYER_KEY=key)
        assert deployed.returncode == 0, deployed.stderr
        assert "(CREATE: no deterministic deployment proxy on this chain)" in deployed.stdout
        address = operator.overlay()["networks"]["local"]["disbursement_contract"]
        assert deployment.contract_problem(w3, CHAIN_ID, address, Account.from_key(key).address) is None
    finally:
        node.stop()
