"""A loan is paid once, whatever fails: crashes between signing, broadcast and receipt, a dropped
transaction, a retried disburse(). Each test runs on its own Anvil and checks balances on chain."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from decimal import Decimal

import aiohttp
import pytest
from eth_account import Account
from sqlalchemy import select

from tests.support.api import ApiHarness
from tests.support.payments import (
    approve,
    balance,
    borrower,
    confirmed_intent,
    create_intent,
    disbursed_logs,
    event_types,
    lender,
    payments_api,
    post_json,
)
from vip.chain.contracts import TransactionReverted, contract_at, organisation_key, send_transaction
from vip.chain.rpc import RpcClient, RpcError
from vip.clock import ChainClock
from vip.config import Settings
from vip.devstack.anvil import free_port
from vip.devstack.dev import wait_http
from vip.ids import new_id
from vip.payments import store
from vip.payments.charges import ChargeExecutor
from vip.payments.disburser import Disburser, Payout
from vip.payments.rules import chain_intent_id
from vip.payments.shapes import charge_json
from vip.payments.worker import ChargeCompleter, IntentExpirer
from vip.store.tables import charges, disbursement_transactions


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, chain) -> AsyncIterator[ApiHarness]:
    async with payments_api(aiohttp_client, database_url, engine, chain, charge_wait_s=0.5,
                            drop_grace_s=0.0) as harness:
        yield harness


class Restarted:
    """What a freshly started daemon has: its own RPC client, clock and executor; nothing in memory."""

    def __init__(self, api: ApiHarness, settings: Settings | None = None) -> None:
        settings = settings or api.settings
        network = settings.network("local")
        self.rpc = RpcClient("local", network.rpc_url, settings.rpc)  # type: ignore[arg-type]
        self.clock = ChainClock(network.rpc_url)  # type: ignore[arg-type]
        operator = Account.from_key(settings.disbursement.operator_private_key.get_secret_value())
        self.executor = ChargeExecutor(settings, api.engine, {"local": self.rpc}, operator, self.clock)
        self.completer = ChargeCompleter(self.executor, api.engine, 0.0, 30.0)
        self.disburser: Disburser = self.executor.disburser("local")

    async def finish(self, api: ApiHarness, charge_id: str, rounds: int = 50) -> dict:
        for _ in range(rounds):
            await self.completer.step()
            charge, intent = await load(api, charge_id)
            if charge.status != "pending":
                return charge_json(charge, intent)
            await asyncio.sleep(0.02)
        raise AssertionError(f"charge {charge_id} still pending")

    async def close(self) -> None:
        await self.rpc.close()
        await self.clock.close()


@pytest.fixture
async def restarted(pay_api) -> AsyncIterator[Restarted]:
    daemon = Restarted(pay_api)
    yield daemon
    await daemon.close()


async def load(api: ApiHarness, charge_id: str):
    async with api.engine.connect() as conn:
        charge = await store.load_charge(conn, charge_id)
        return charge, await store.load_intent(conn, charge.payment_intent_id)


async def new_charge(api: ApiHarness, intent: dict, approval_tx: str) -> tuple[str, Payout]:
    """The charge row POST /v1/charges writes before executing, with its lease already lapsed (its
    request died)."""
    async with api.engine.begin() as conn:
        row = await store.load_intent(conn, intent["id"])
        charge = await store.insert_charge(conn, {
            "id": new_id("ch"), "organisation_id": row.organisation_id, "payment_intent_id": row.id,
            "network": "local", "approval_tx_hash": approval_tx, "created_at": row.created_at}, 0.0)
    return charge.id, Payout(charge.id, organisation_key(row.organisation_id), row.chain_intent_id,
                             row.token_address, row.funding_wallet, row.recipient_wallet, int(row.amount))


def operator_nonce(chain) -> int:
    return int(chain.node.call("eth_getTransactionCount", [chain.accounts[1], "latest"]), 16)


async def attempts(api: ApiHarness, charge_id: str) -> list:
    async with api.engine.connect() as conn:
        return (await conn.execute(select(disbursement_transactions).where(
            disbursement_transactions.c.charge_id == charge_id)
            .order_by(disbursement_transactions.c.created_at))).all()


def assert_paid_once(chain, intent: dict, who, funding: str, before: tuple[int, int], amount: int,
                     tx_hash: str) -> None:
    logs = disbursed_logs(chain, chain_intent_id(intent["id"]))
    assert [lg["transactionHash"] for lg in logs] == [tx_hash]
    assert balance(chain, "USDC", who.wallet) - before[1] == amount
    assert before[0] - balance(chain, "USDC", funding) == amount


async def test_crash_after_signing_before_broadcast(pay_api, chain, database_url, restarted):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "10")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    charge_id, payout = await new_charge(pay_api, intent, approval_tx)
    signed = await restarted.disburser.sign_new(payout)  # ... and the process dies here
    assert chain.node.call("eth_getTransactionByHash", [signed.tx_hash]) is None
    assert operator_nonce(chain) == nonce_before and balance(chain, "USDC", who.wallet) == before[1]

    charge = await Restarted(pay_api).finish(pay_api, charge_id)
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == signed.tx_hash
    assert operator_nonce(chain) == nonce_before + 1
    assert_paid_once(chain, intent, who, funding, before, 10_000_000, signed.tx_hash)
    assert await restarted.completer.step() is False
    assert [t for t, _ in await event_types(pay_api)].count("charge.succeeded") == 1


async def test_crash_after_broadcast_before_receipt(pay_api, chain, database_url, restarted):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "11")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    charge_id, payout = await new_charge(pay_api, intent, approval_tx)
    chain.set_automine(False)
    signed = await restarted.disburser.sign_new(payout)
    await restarted.disburser.broadcast(signed)  # ... and the process dies before the receipt
    chain.mine()
    chain.set_automine(True)

    charge = await Restarted(pay_api).finish(pay_api, charge_id)
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == signed.tx_hash
    assert operator_nonce(chain) == nonce_before + 1
    assert [a.status for a in await attempts(pay_api, charge_id)] == ["mined"]
    assert_paid_once(chain, intent, who, funding, before, 11_000_000, signed.tx_hash)


async def test_pending_charge_answers_202_and_the_daemon_finishes_it(pay_api, chain, database_url, restarted):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "12")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    chain.set_automine(False)
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval_tx})
    assert resp.status == 202, await resp.text()
    pending = (await resp.json())["charge"]
    assert pending["status"] == "pending" and pending["disbursement_tx_hash"] is None
    chain.mine()
    chain.set_automine(True)
    charge = await restarted.finish(pay_api, pending["id"])
    assert charge["status"] == "succeeded"
    got = await pay_api.client.get(f"/v1/charges/{pending['id']}", headers=await pay_api.headers())
    assert (await got.json())["charge"] == charge
    assert_paid_once(chain, intent, who, funding, before, 12_000_000, charge["disbursement_tx_hash"])


async def test_dropped_transaction_is_replaced_with_the_same_nonce(pay_api, chain, database_url, restarted):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "13")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    chain.set_automine(False)
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval_tx})
    assert resp.status == 202
    charge_id = (await resp.json())["charge"]["id"]
    [first] = await attempts(pay_api, charge_id)
    chain.node.call("anvil_dropTransaction", [first.tx_hash])  # the mempool forgets it

    for _ in range(100):  # until the daemon takes the charge up (its lease is released by then)
        if await restarted.completer.step():
            break
        await asyncio.sleep(0.02)
    replaced, replacement = await attempts(pay_api, charge_id)
    assert replaced.tx_hash == first.tx_hash and replaced.status == "replaced"
    assert replacement.nonce == first.nonce and replacement.tx_hash != first.tx_hash
    assert int(replacement.max_fee_per_gas) >= int(first.max_fee_per_gas) * 125 // 100
    chain.mine()
    chain.set_automine(True)
    charge = await restarted.finish(pay_api, charge_id)
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == replacement.tx_hash
    assert chain.node.call("eth_getTransactionReceipt", [first.tx_hash]) is None
    assert operator_nonce(chain) == nonce_before + 1
    assert_paid_once(chain, intent, who, funding, before, 13_000_000, replacement.tx_hash)


async def test_contract_refuses_a_second_disburse_of_one_intent(pay_api, chain, database_url):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "14")
    approve(chain, intent, funding, amount=10**12)  # plenty of allowance left for a second payment
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval_tx})
    charge = (await resp.json())["charge"]
    assert charge["status"] == "succeeded"
    contract = contract_at(chain.w3, "Disbursement", chain.contracts.disbursement)
    intent_key = bytes.fromhex(chain_intent_id(intent["id"])[2:])
    async with pay_api.engine.connect() as conn:
        org_key = organisation_key((await store.load_intent(conn, intent["id"])).organisation_id)
    again = contract.functions.disburse(org_key, intent_key, chain.contracts.usdc, funding, who.wallet,
                                        14_000_000)
    with pytest.raises(TransactionReverted, match="AlreadyDisbursed"):
        send_transaction(chain.w3, again, chain.node.private_keys[1])
    forced = again.build_transaction({"from": chain.w3.to_checksum_address(chain.accounts[1]), "gas": 200_000,
                                      "nonce": operator_nonce(chain)})
    with pytest.raises(TransactionReverted) as reverted:
        send_transaction(chain.w3, forced, chain.node.private_keys[1])
    assert reverted.value.receipt["status"] == 0  # mined, and reverted
    assert_paid_once(chain, intent, who, funding, before, 14_000_000, charge["disbursement_tx_hash"])


async def test_intent_expires_before_approval(pay_api, chain, database_url, restarted):
    who = await borrower(pay_api)
    funding = lender(chain, 7)
    intent = await create_intent(pay_api, who, funding, "15")
    chain.node.call("evm_increaseTime", [pay_api.settings.disbursement.intent_ttl_s + 1])
    chain.mine()
    approval_tx = approve(chain, intent, funding)
    body = {"payment_intent_id": intent["id"], "approval_tx_hash": approval_tx}
    resp = await post_json(pay_api, "/v1/charges", body)
    assert resp.status == 410 and (await resp.json())["error"]["code"] == "ERR_PAYMENT_INTENT_EXPIRED"
    assert await IntentExpirer(pay_api.engine, restarted.clock).step() is True
    resp = await post_json(pay_api, "/v1/charges", body)
    assert resp.status == 410
    got = await pay_api.client.get(f"/v1/payment-intents/{intent['id']}", headers=await pay_api.headers())
    assert (await got.json())["payment_intent"]["status"] == "expired"
    assert await event_types(pay_api) == [("payment_intent.created", intent["id"]),
                                          ("payment_intent.expired", intent["id"])]
    async with pay_api.engine.connect() as conn:
        assert (await conn.execute(select(charges))).first() is None


async def test_concurrent_charges_of_different_intents_take_consecutive_nonces(pay_api, chain, database_url):
    nonce_before = operator_nonce(chain)
    confirmed = [await confirmed_intent(pay_api, chain, database_url, str(20 + i), lender_index=5 + i)
                 for i in range(4)]
    responses = await asyncio.gather(*(post_json(pay_api, "/v1/charges", {
        "payment_intent_id": intent["id"], "approval_tx_hash": tx}) for _, _, intent, tx in confirmed))
    assert [r.status for r in responses] == [201] * 4
    async with pay_api.engine.connect() as conn:
        nonces = sorted((await conn.execute(select(disbursement_transactions.c.nonce))).scalars())
    assert nonces == list(range(nonce_before, nonce_before + 4))
    assert operator_nonce(chain) == nonce_before + 4
    for _, _, intent, _ in confirmed:
        assert len(disbursed_logs(chain, chain_intent_id(intent["id"]))) == 1


def serve_config(chain, api_port: int) -> str:
    c = chain.contracts
    return f"""
[api]
port = {api_port}

[disbursement]
charge_wait_s = 3.0
lease_s = 4.0

[networks.local]
chain_id = {chain.node.chain_id}
rpc_url = "{chain.node.rpc_url}"
local = true
finality_depth = 2
start_block = 0
disbursement_contract = "{c.disbursement}"

[networks.local.tokens.USDC]
address = "{c.usdc}"

[networks.local.tokens.USDT]
address = "{c.usdt}"
"""


def spawn_serve(env: dict[str, str], log_path) -> subprocess.Popen:
    with open(log_path, "ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", "vip.cli", "serve"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)


async def test_api_process_killed_between_broadcast_and_receipt(pay_api, chain, database_url, restarted,
                                                                tmp_path):
    """`vip serve` as a real process, SIGKILLed while it waits for the receipt; the daemon finishes."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "16")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(serve_config(chain, port))
    env = {**os.environ, "DATABASE_URL": database_url, "VIP_CONFIG": str(config),
           "VIP_OPERATOR_KEY": chain.node.private_keys[1]}
    server = spawn_serve(env, tmp_path / "serve.log")
    try:
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/healthz", 60, server)
        chain.set_automine(False)
        headers = {**await pay_api.headers(), "Content-Type": "application/json"}
        async with aiohttp.ClientSession() as http:
            request = asyncio.create_task(http.post(
                f"http://127.0.0.1:{port}/v1/charges", headers=headers,
                json={"payment_intent_id": intent["id"], "approval_tx_hash": approval_tx}))
            for _ in range(600):  # until the API process has broadcast the transaction
                async with pay_api.engine.connect() as conn:
                    sent = (await conn.execute(select(disbursement_transactions).where(
                        disbursement_transactions.c.status == "broadcast"))).first()
                if sent is not None or request.done():
                    break
                await asyncio.sleep(0.02)
            assert sent is not None and not request.done()
            server.send_signal(signal.SIGKILL)
            server.wait(10)
            with contextlib.suppress(aiohttp.ClientError):
                await request
    finally:
        if server.poll() is None:
            server.kill()
    chain.mine()
    chain.set_automine(True)
    charge_row, _ = await load(pay_api, sent.charge_id)
    assert charge_row.status == "pending"

    charge = await restarted.finish(pay_api, sent.charge_id, rounds=1000)  # once the dead lease lapses
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == sent.tx_hash
    assert operator_nonce(chain) == nonce_before + 1
    assert_paid_once(chain, intent, who, funding, before, 16_000_000, sent.tx_hash)


async def test_transaction_refused_for_its_fees_is_replaced_with_the_same_nonce(pay_api, chain, database_url):
    """Signed and recorded with a fee cap below the base fee, the node refuses it; a daemon with a sane
    cap re-signs the same nonce with market fees."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "17")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    stingy = pay_api.settings.disbursement.model_copy(update={"max_fee_gwei": Decimal("0.000000001")})
    stingy_daemon = Restarted(pay_api, pay_api.settings.model_copy(update={"disbursement": stingy}))
    charge_id, _ = await new_charge(pay_api, intent, approval_tx)
    try:
        with pytest.raises(RpcError, match="fee"):
            await stingy_daemon.executor.advance(charge_id)
    finally:
        await stingy_daemon.close()
    [refused] = await attempts(pay_api, charge_id)
    assert refused.status == "signed" and int(refused.max_fee_per_gas) == 1

    sane = Restarted(pay_api)
    try:
        charge = await sane.finish(pay_api, charge_id)
    finally:
        await sane.close()
    replaced, replacement = await attempts(pay_api, charge_id)
    assert replaced.status == "replaced" and replacement.nonce == refused.nonce
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == replacement.tx_hash
    assert operator_nonce(chain) == nonce_before + 1
    assert_paid_once(chain, intent, who, funding, before, 17_000_000, replacement.tx_hash)


async def pending_charge(api: ApiHarness, chain, intent: dict, approval_tx: str) -> str:
    """POST /v1/charges with mining off: answered 202, its transaction waiting in the mempool."""
    chain.set_automine(False)
    resp = await post_json(api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                "approval_tx_hash": approval_tx})
    assert resp.status == 202, await resp.text()
    return (await resp.json())["charge"]["id"]


async def test_stuck_transaction_is_replaced_with_the_same_nonce(pay_api, chain, database_url):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "18")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    charge_id = await pending_charge(pay_api, chain, intent, approval_tx)
    impatient = pay_api.settings.disbursement.model_copy(update={"replace_after_s": 0.001})
    daemon = Restarted(pay_api, pay_api.settings.model_copy(update={"disbursement": impatient}))
    try:
        for _ in range(100):
            if await daemon.completer.step():
                break
            await asyncio.sleep(0.02)
        stuck, replacement = await attempts(pay_api, charge_id)
        assert stuck.status == "replaced" and replacement.nonce == stuck.nonce
        chain.mine()
        chain.set_automine(True)
        charge = await daemon.finish(pay_api, charge_id)
    finally:
        await daemon.close()
    assert charge["disbursement_tx_hash"] == replacement.tx_hash
    assert chain.node.call("eth_getTransactionReceipt", [stuck.tx_hash]) is None
    assert operator_nonce(chain) == nonce_before + 1
    assert_paid_once(chain, intent, who, funding, before, 18_000_000, replacement.tx_hash)


async def test_nonce_taken_by_another_transaction_of_the_key(pay_api, chain, database_url, restarted):
    """Someone used the operator key while our transaction was dropped: ours can never be mined, so a
    fresh nonce is used, and the intent is still paid once."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "19")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    charge_id = await pending_charge(pay_api, chain, intent, approval_tx)
    [ours] = await attempts(pay_api, charge_id)
    chain.node.call("anvil_dropTransaction", [ours.tx_hash])
    chain.node.call("eth_sendTransaction", [{"from": chain.accounts[1], "to": chain.accounts[2],
                                             "value": "0x1", "nonce": hex(ours.nonce)}])
    chain.mine()
    chain.set_automine(True)
    charge = await restarted.finish(pay_api, charge_id)
    lost, fresh = await attempts(pay_api, charge_id)
    assert lost.tx_hash == ours.tx_hash and fresh.nonce == ours.nonce + 1
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == fresh.tx_hash
    assert_paid_once(chain, intent, who, funding, before, 19_000_000, fresh.tx_hash)
