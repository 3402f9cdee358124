"""A loan is paid once, whatever fails: crashes between signing, broadcast and receipt (a daemon
SIGKILLed mid-charge), two daemons racing for the same charges, a dropped transaction, a retried
disburse(). The API holds no key: daemons (`ChargeCompleter`) are the only executors, here started by
each test where it wants one. Each test runs on its own Anvil and checks balances on chain."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal

import aiohttp
import pytest
from eth_account import Account
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from tests.support.api import ApiHarness
from tests.support.payments import (
    approve,
    balance,
    borrower,
    charge_daemon,
    confirmed_intent,
    create_intent,
    daemon,
    disbursed_logs,
    event_types,
    lender,
    pay_outside_the_service,
    payments_api,
    post_json,
    wait_charge_settled,
    wait_intent_status,
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
from vip.store.tables import (
    charge_executors,
    charges,
    disbursement_transactions,
    operator_nonces,
    token_approvals,
)


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, chain) -> AsyncIterator[ApiHarness]:
    async with payments_api(aiohttp_client, database_url, engine, chain, executor=False, charge_wait_s=0.5,
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
    """A daemon that has announced itself (so the API accepts charges) and that the test steps by hand."""
    daemon = Restarted(pay_api)
    await daemon.completer.beat()
    yield daemon
    await daemon.close()


async def load(api: ApiHarness, charge_id: str):
    async with api.engine.connect() as conn:
        charge = await store.load_charge(conn, charge_id)
        return charge, await store.load_intent(conn, charge.payment_intent_id)


async def new_charge(api: ApiHarness, intent: dict, approval_tx: str) -> tuple[str, Payout]:
    """The charge row POST /v1/charges writes for the daemon: pending, due, leased to nobody."""
    async with api.engine.begin() as conn:
        row = await store.load_intent(conn, intent["id"])
        charge = await store.insert_charge(conn, {
            "id": new_id("ch"), "organisation_id": row.organisation_id, "payment_intent_id": row.id,
            "network": "local", "approval_tx_hash": approval_tx, "created_at": row.created_at})
    return charge.id, Payout(charge.id, organisation_key(row.organisation_id), row.chain_intent_id,
                             row.token_address, row.funding_wallet, row.recipient_wallet, int(row.amount))


async def settled(api: ApiHarness, responses) -> list[dict]:
    """The charges POST /v1/charges answered, each once the daemon settled it: 201 when that happened
    within charge_wait_s, else 202 and GET until it did (how fast is the machine's business, not the
    test's)."""
    charges = []
    for resp in responses:
        assert resp.status in (201, 202), await resp.text()
        charge = (await resp.json())["charge"]
        charges.append(charge if resp.status == 201 else await wait_charge_settled(api, charge["id"]))
    return charges


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


async def test_pending_charge_answers_202_and_the_daemon_finishes_it(pay_api, chain, database_url):
    """The daemon broadcasts at once (woken by the charge's NOTIFY), the block is not mined within
    charge_wait_s: 202 with the pending charge; GET and the webhook event follow it to `succeeded`."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "12")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    async with charge_daemon(pay_api.settings, pay_api.engine):
        chain.set_automine(False)
        resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                        "approval_tx_hash": approval_tx})
        assert resp.status == 202, await resp.text()
        pending = (await resp.json())["charge"]
        assert pending["status"] == "pending" and pending["disbursement_tx_hash"] is None
        sent = await broadcast_attempt(pay_api, pending["id"])
        chain.mine()
        chain.set_automine(True)
        charge = await wait_charge_settled(pay_api, pending["id"])
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == sent.tx_hash
    assert ("charge.succeeded", pending["id"]) in await event_types(pay_api)
    assert_paid_once(chain, intent, who, funding, before, 12_000_000, charge["disbursement_tx_hash"])


async def test_dropped_transaction_is_replaced_with_the_same_nonce(pay_api, chain, database_url, restarted):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "13")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    charge_id = await pending_charge(pay_api, chain, intent, approval_tx, restarted)
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
    async with charge_daemon(pay_api.settings, pay_api.engine):
        [charge] = await settled(pay_api, [await post_json(pay_api, "/v1/charges", {
            "payment_intent_id": intent["id"], "approval_tx_hash": approval_tx})])
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
    async with charge_daemon(pay_api.settings, pay_api.engine):
        responses = await asyncio.gather(*(post_json(pay_api, "/v1/charges", {
            "payment_intent_id": intent["id"], "approval_tx_hash": tx}) for _, _, intent, tx in confirmed))
        assert [c["status"] for c in await settled(pay_api, responses)] == ["succeeded"] * 4
    async with pay_api.engine.connect() as conn:
        nonces = sorted((await conn.execute(select(disbursement_transactions.c.nonce))).scalars())
    assert nonces == list(range(nonce_before, nonce_before + 4))
    assert operator_nonce(chain) == nonce_before + 4
    for _, _, intent, _ in confirmed:
        assert len(disbursed_logs(chain, chain_intent_id(intent["id"]))) == 1


def stack_config(chain, api_port: int, metrics_port: int) -> str:
    c = chain.contracts
    return f"""
[api]
port = {api_port}

[daemon]
metrics_port = {metrics_port}

[disbursement]
charge_wait_s = 3.0
lease_s = 4.0
poll_interval_s = 0.1

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


def spawn(command: str, env: dict[str, str], log_path) -> subprocess.Popen:
    with open(log_path, "ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", "vip.cli", command], env=env, stdout=out,
                                stderr=subprocess.STDOUT)


def environment_without_operator_key(database_url: str, config) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (
        "VIP_OPERATOR_KEY", "VIP_OPERATOR_KEYSTORE_PASSWORD", "VIP_CONFIG")}
    return {**env, "DATABASE_URL": database_url, "VIP_CONFIG": str(config)}


async def broadcast_attempt(api: ApiHarness, charge_id: str | None = None, rounds: int = 1500):
    """The first broadcast disburse() transaction (of `charge_id`, or of any), once a daemon sent it."""
    for _ in range(rounds):
        async with api.engine.connect() as conn:
            query = select(disbursement_transactions).where(disbursement_transactions.c.status == "broadcast")
            if charge_id is not None:
                query = query.where(disbursement_transactions.c.charge_id == charge_id)
            sent = (await conn.execute(query)).first()
        if sent is not None:
            return sent
        await asyncio.sleep(0.02)
    raise AssertionError("no daemon broadcast the charge's transaction")


async def test_daemon_killed_between_broadcast_and_receipt(pay_api, chain, database_url, restarted, tmp_path):
    """`vip index` as a real process (the only one with the operator key) SIGKILLed once it has broadcast
    the charge's transaction; another daemon takes the charge when the dead lease lapses and finishes the
    same transaction: one nonce, one payment."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "16")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    config = tmp_path / "stack.toml"
    config.write_text(stack_config(chain, free_port(), free_port()))
    env = {**environment_without_operator_key(database_url, config),
           "VIP_OPERATOR_KEY": chain.node.private_keys[1]}
    indexer = spawn("index", env, tmp_path / "index.log")
    try:
        for _ in range(3000):  # until the daemon announces itself as a charge executor
            async with pay_api.engine.connect() as conn:
                rows = (await conn.execute(select(charge_executors.c.instance_id))).all()
            if len(rows) > 1 or indexer.poll() is not None:  # `restarted` beat one row
                break
            await asyncio.sleep(0.02)
        assert indexer.poll() is None and len(rows) == 2
        chain.set_automine(False)
        resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                        "approval_tx_hash": approval_tx})
        assert resp.status == 202, await resp.text()
        sent = await broadcast_attempt(pay_api)
        indexer.send_signal(signal.SIGKILL)
        indexer.wait(10)
    finally:
        if indexer.poll() is None:
            indexer.kill()
    chain.mine()
    chain.set_automine(True)
    charge_row, _ = await load(pay_api, sent.charge_id)
    assert charge_row.status == "pending"

    # Once the dead daemon's lease lapses (if it died inside a pass), the other daemon takes the charge.
    charge = await restarted.finish(pay_api, sent.charge_id, rounds=1000)
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == sent.tx_hash
    assert [a.tx_hash for a in await attempts(pay_api, sent.charge_id)] == [sent.tx_hash]
    assert operator_nonce(chain) == nonce_before + 1
    assert_paid_once(chain, intent, who, funding, before, 16_000_000, sent.tx_hash)


async def test_api_without_any_operator_key_charges_through_the_daemon(pay_api, chain, database_url,
                                                                       tmp_path):
    """`vip serve` as a real process whose environment and configuration hold no operator key at all:
    charges still succeed, executed by the daemon (here in this process, with the key)."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "21")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    port = free_port()
    config = tmp_path / "stack.toml"
    config.write_text(stack_config(chain, port, free_port()))
    assert "operator" not in config.read_text()
    server = spawn("serve", environment_without_operator_key(database_url, config), tmp_path / "serve.log")
    try:
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/healthz", 60, server)
        headers = {**await pay_api.headers(), "Content-Type": "application/json"}
        body = {"payment_intent_id": intent["id"], "approval_tx_hash": approval_tx}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"http://127.0.0.1:{port}/v1/charges", headers=headers, json=body) as resp:
                # No daemon announced itself: nothing would execute the charge.
                assert resp.status == 503
                assert (await resp.json())["error"]["code"] == "ERR_DISBURSEMENT_UNAVAILABLE"
            async with charge_daemon(pay_api.settings, pay_api.engine), \
                    http.post(f"http://127.0.0.1:{port}/v1/charges", headers=headers, json=body) as resp:
                [charge] = await settled(pay_api, [resp])
    finally:
        server.terminate()
        server.wait(10)
    assert charge["status"] == "succeeded"
    assert_paid_once(chain, intent, who, funding, before, 21_000_000, charge["disbursement_tx_hash"])
    assert "operator" not in (tmp_path / "serve.log").read_text().lower()


async def test_two_daemons_racing_execute_each_charge_once(pay_api, chain, database_url):
    """Two daemons, each with its own RPC client, nonce view and lease, run side by side while four
    charges arrive at once: each charge is claimed by one of them (FOR UPDATE SKIP LOCKED, then the
    lease), so each has exactly one signed transaction and one Disbursed log, on consecutive nonces."""
    nonce_before = operator_nonce(chain)
    confirmed = [await confirmed_intent(pay_api, chain, database_url, str(30 + i), lender_index=5 + i)
                 for i in range(4)]
    async with charge_daemon(pay_api.settings, pay_api.engine), \
            charge_daemon(pay_api.settings, pay_api.engine):
        responses = await asyncio.gather(*(post_json(pay_api, "/v1/charges", {
            "payment_intent_id": intent["id"], "approval_tx_hash": tx}) for _, _, intent, tx in confirmed))
        assert [c["status"] for c in await settled(pay_api, responses)] == ["succeeded"] * 4
    async with pay_api.engine.connect() as conn:
        rows = (await conn.execute(select(disbursement_transactions.c.charge_id,
                                          disbursement_transactions.c.nonce))).all()
    assert len({r.charge_id for r in rows}) == len(rows) == 4
    assert sorted(r.nonce for r in rows) == list(range(nonce_before, nonce_before + 4))
    for _, _, intent, _ in confirmed:
        assert len(disbursed_logs(chain, chain_intent_id(intent["id"]))) == 1


async def test_a_due_charge_is_claimed_by_one_daemon(pay_api, chain, database_url):
    """The claim itself: two daemons asking at the same moment, one gets the charge, the other nothing;
    while the lease holds, nobody else gets it. A daemon without the charge's network never gets it."""
    _, _, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "22")
    charge_id, _ = await new_charge(pay_api, intent, approval_tx)

    async def claim(networks: tuple[str, ...] = ("local",)) -> list[str]:
        async with pay_api.engine.begin() as conn:
            return await store.claim_due_charges(conn, networks, 30.0, 20)

    assert await claim(("base", "polygon")) == []
    first, second = await asyncio.gather(claim(), claim())
    assert sorted([first, second]) == [[], [charge_id]]
    assert await claim() == []


async def test_no_live_daemon_answers_503_and_records_nothing(pay_api, chain, database_url, restarted):
    """A daemon that stopped beating (its row older than executor_stale_s) serves nobody: 503, and the
    intent stays chargeable."""
    _, _, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "23")
    async with pay_api.engine.begin() as conn:
        await conn.execute(update(charge_executors).values(seen_at=func.now() - timedelta(minutes=5)))
    body = {"payment_intent_id": intent["id"], "approval_tx_hash": approval_tx}
    resp = await post_json(pay_api, "/v1/charges", body)
    assert resp.status == 503, await resp.text()
    error = (await resp.json())["error"]
    assert error["code"] == "ERR_DISBURSEMENT_UNAVAILABLE" and error["details"] == {"network": "local"}
    async with pay_api.engine.connect() as conn:
        assert (await conn.execute(select(charges))).first() is None
    await restarted.completer.beat()
    resp = await post_json(pay_api, "/v1/charges", body)
    assert resp.status == 202, await resp.text()  # accepted; nobody executes it in this test


async def test_transaction_refused_for_its_fees_is_replaced_with_the_same_nonce(pay_api, chain, database_url):
    """Signed and recorded with a fee cap below the base fee (the network's own cap, which wins over the
    service-wide one), the node refuses it; a daemon with a sane cap re-signs the same nonce with market
    fees, tipping at least the network's floor."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "17")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)

    def with_network_fees(**fees) -> Settings:
        networks = {name: network.model_copy(update=fees) if name == "local" else network
                    for name, network in pay_api.settings.networks.items()}
        return pay_api.settings.model_copy(update={"networks": networks})

    stingy_daemon = Restarted(pay_api, with_network_fees(max_fee_gwei=Decimal("0.000000001")))
    charge_id, _ = await new_charge(pay_api, intent, approval_tx)
    try:
        with pytest.raises(RpcError, match="fee"):
            await stingy_daemon.executor.advance(charge_id)
    finally:
        await stingy_daemon.close()
    [refused] = await attempts(pay_api, charge_id)
    assert refused.status == "signed" and int(refused.max_fee_per_gas) == 1

    sane = Restarted(pay_api, with_network_fees(min_priority_fee_gwei=Decimal(3)))
    try:
        charge = await sane.finish(pay_api, charge_id)
    finally:
        await sane.close()
    replaced, replacement = await attempts(pay_api, charge_id)
    assert replaced.status == "replaced" and replacement.nonce == refused.nonce
    assert int(replacement.max_priority_fee_per_gas) >= 3 * 10**9
    assert charge["status"] == "succeeded" and charge["disbursement_tx_hash"] == replacement.tx_hash
    assert operator_nonce(chain) == nonce_before + 1
    assert_paid_once(chain, intent, who, funding, before, 17_000_000, replacement.tx_hash)


async def pending_charge(api: ApiHarness, chain, intent: dict, approval_tx: str, daemon: Restarted) -> str:
    """POST /v1/charges with mining off: answered 202; then the daemon's first pass broadcasts its
    transaction, which waits in the mempool."""
    chain.set_automine(False)
    resp = await post_json(api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                "approval_tx_hash": approval_tx})
    assert resp.status == 202, await resp.text()
    charge_id = (await resp.json())["charge"]["id"]
    assert await daemon.completer.step() is True
    [sent] = await attempts(api, charge_id)
    assert sent.status == "broadcast"
    return charge_id


async def test_stuck_transaction_is_replaced_with_the_same_nonce(pay_api, chain, database_url, restarted):
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "18")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    charge_id = await pending_charge(pay_api, chain, intent, approval_tx, restarted)
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
    charge_id = await pending_charge(pay_api, chain, intent, approval_tx, restarted)
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


@pytest.mark.parametrize("fork", ["shorter_then_longer", "same_height"])
async def test_reorg_removing_a_paid_charge_pays_the_intent_again_once(pay_api, chain, database_url,
                                                                       restarted, fork):
    """A reorg removes the block that paid a succeeded charge (back to a snapshot, then a longer chain; or
    `anvil_reorg` replacing it with a block of the same height without it): the charge goes back to
    `pending` and the same intent is paid again on the canonical chain, once; the next charge is not
    stuck behind the nonce the reorg took back."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "31",
                                                               lender_index=5)
    who_b, funding_b, intent_b, approval_b = await confirmed_intent(pay_api, chain, database_url, "32",
                                                                    lender_index=6)
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    before_b = (balance(chain, "USDC", funding_b), balance(chain, "USDC", who_b.wallet))
    nonce_before = operator_nonce(chain)
    snapshot = chain.node.call("evm_snapshot")
    charge_id, _ = await new_charge(pay_api, intent, approval_tx)
    first = await restarted.finish(pay_api, charge_id)
    assert first["status"] == "succeeded" and operator_nonce(chain) == nonce_before + 1

    if fork == "shorter_then_longer":
        assert chain.node.call("evm_revert", [snapshot])  # the block holding the payment leaves the chain
        chain.mine(3)
    else:
        paid_in = int(chain.node.call("eth_getTransactionReceipt", [first["disbursement_tx_hash"]])
                      ["blockNumber"], 16)
        chain.node.call("anvil_reorg", [chain.head()[0] - paid_in + 1, []])
    assert chain.node.call("eth_getTransactionReceipt", [first["disbursement_tx_hash"]]) is None
    assert disbursed_logs(chain, chain_intent_id(intent["id"])) == []
    assert balance(chain, "USDC", who.wallet) == before[1]  # unpaid on the canonical chain
    next_id, _ = await new_charge(pay_api, intent_b, approval_b)

    assert await restarted.executor.recheck_successes("local") == 1
    charge, reopened = await load(pay_api, charge_id)
    assert (charge.status, charge.disbursement_tx_hash, reopened.status) == ("pending", None,
                                                                             "approval_confirmed")
    assert await restarted.executor.recheck_successes("local") == 0  # reopened once
    again = await restarted.finish(pay_api, charge_id)
    following = await restarted.finish(pay_api, next_id)
    assert again["status"] == "succeeded" and following["status"] == "succeeded"
    assert_paid_once(chain, intent, who, funding, before, 31_000_000, again["disbursement_tx_hash"])
    assert_paid_once(chain, intent_b, who_b, funding_b, before_b, 32_000_000,
                     following["disbursement_tx_hash"])
    assert operator_nonce(chain) == nonce_before + 2  # the lost nonce was used again, nothing skipped
    used = sorted(a.nonce for a in await attempts(pay_api, charge_id) + await attempts(pay_api, next_id)
                  if a.status == "mined")
    assert used == [nonce_before, nonce_before + 1]
    events = await event_types(pay_api)
    assert events.count(("charge.succeeded", charge_id)) == 2 and ("charge.succeeded", next_id) in events
    assert await restarted.executor.recheck_successes("local") == 0  # the new payment stands


async def test_reorg_removing_a_payment_made_outside_the_service_pays_the_intent_once(pay_api, chain,
                                                                                     database_url, restarted):
    """Another tool holding the operator key paid the intent; the charge settled from its Disbursed log,
    with that transaction recorded as `external`. A reorg removes its block: the re-check reopens the
    charge (the transaction is `external_removed`: we hold no signed bytes of it to send again) and the
    service pays the intent itself, once."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "37",
                                                               lender_index=4)
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    charge_id, payout = await new_charge(pay_api, intent, approval_tx)
    snapshot = chain.node.call("evm_snapshot")
    outside = pay_outside_the_service(chain, payout)
    first = await restarted.finish(pay_api, charge_id)
    assert (first["status"], first["disbursement_tx_hash"]) == ("succeeded", outside)
    [recorded] = await attempts(pay_api, charge_id)
    assert (recorded.status, recorded.raw_tx, recorded.sender) == ("external", "", chain.accounts[1].lower())
    assert await restarted.executor.recheck_successes("local") == 0  # still on the chain

    assert chain.node.call("evm_revert", [snapshot])  # the block holding the outside payment leaves
    chain.mine(3)
    assert balance(chain, "USDC", who.wallet) == before[1]
    assert await restarted.executor.recheck_successes("local") == 1
    charge, reopened = await load(pay_api, charge_id)
    assert (charge.status, reopened.status) == ("pending", "approval_confirmed")
    again = await restarted.finish(pay_api, charge_id)
    removed, ours = await attempts(pay_api, charge_id)
    assert removed.tx_hash == outside and removed.status == "external_removed"
    assert ours.status == "mined" and ours.raw_tx and again["disbursement_tx_hash"] == ours.tx_hash
    assert_paid_once(chain, intent, who, funding, before, 37_000_000, ours.tx_hash)
    assert await restarted.executor.recheck_successes("local") == 0


async def test_a_nonce_nobody_holds_is_used_again(pay_api, chain, database_url, restarted):
    """The stored next nonce ran ahead of the chain (a transaction lost to a reorg or a dropped one whose
    charge settled otherwise): the next charge takes the node's pending nonce, not one past a gap."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "33")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    nonce_before = operator_nonce(chain)
    sender = chain.accounts[1].lower()
    async with pay_api.engine.begin() as conn:
        await conn.execute(pg_insert(operator_nonces).values(network="local", sender=sender,
                                                              next_nonce=nonce_before + 5)
                           .on_conflict_do_update(index_elements=["network", "sender"],
                                                  set_={"next_nonce": nonce_before + 5}))
    charge_id, _ = await new_charge(pay_api, intent, approval_tx)
    charge = await restarted.finish(pay_api, charge_id)
    [sent] = await attempts(pay_api, charge_id)
    assert charge["status"] == "succeeded" and sent.nonce == nonce_before
    assert_paid_once(chain, intent, who, funding, before, 33_000_000, sent.tx_hash)


async def approved_before_expiry(api: ApiHarness, chain, database_url: str, amount: str):
    """An intent whose approval is mined and indexed before `expires_at` but is not final when the time
    passes (the daemon is stopped again, then the chain's clock moves past the expiry)."""
    who = await borrower(api)
    funding = lender(chain, 7)
    intent = await create_intent(api, who, funding, amount)
    calldata = intent["approval_calldata"]
    approval_tx = chain.approve("USDC", funding.lower(), calldata["spender"], int(calldata["amount"]))
    async with daemon(api.settings, database_url):
        for _ in range(600):
            async with api.engine.connect() as conn:
                if await conn.scalar(select(token_approvals.c.tx_hash).where(
                        token_approvals.c.tx_hash == approval_tx.lower())):
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the approval was never indexed")
    chain.node.call("evm_increaseTime", [api.settings.disbursement.intent_ttl_s + 1])
    chain.mine()  # past expires_at; the approval is one block deep, not final (depth 2)
    return who, funding, intent, approval_tx


async def test_approval_mined_in_time_keeps_the_intent_alive_until_final(pay_api, chain, database_url,
                                                                        restarted):
    who, funding, intent, approval_tx = await approved_before_expiry(pay_api, chain, database_url, "34")
    assert await IntentExpirer(pay_api.engine, restarted.clock).step() is False
    body = {"payment_intent_id": intent["id"], "approval_tx_hash": approval_tx}
    resp = await post_json(pay_api, "/v1/charges", body)  # waiting for finality, not expired
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_APPROVAL_NOT_CONFIRMED"
    chain.mine(3)
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, intent["id"], "approval_confirmed")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    resp = await post_json(pay_api, "/v1/charges", body)
    assert resp.status == 202, await resp.text()
    charge = await restarted.finish(pay_api, (await resp.json())["charge"]["id"])
    assert charge["status"] == "succeeded"
    assert_paid_once(chain, intent, who, funding, before, 34_000_000, charge["disbursement_tx_hash"])
    assert ("payment_intent.expired", intent["id"]) not in await event_types(pay_api)


async def test_intent_kept_alive_expires_once_its_final_approval_no_longer_covers_it(pay_api, chain,
                                                                                    database_url, restarted):
    _, funding, intent, approval_tx = await approved_before_expiry(pay_api, chain, database_url, "35")
    chain.approve("USDC", funding.lower(), intent["approval_calldata"]["spender"], 0)  # revoked, late
    chain.mine(3)
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, intent["id"], "expired")
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval_tx})
    assert resp.status == 410
    assert await event_types(pay_api) == [("payment_intent.created", intent["id"]),
                                          ("payment_intent.expired", intent["id"])]


async def test_payment_mined_again_in_another_block_stands(pay_api, chain, database_url, restarted):
    """The reorg's new chain includes the same transaction (a node puts a removed block's transactions back
    in its mempool): the charge stays `succeeded` with its hash, the new block is recorded, no event."""
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "36")
    before = (balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet))
    snapshot = chain.node.call("evm_snapshot")
    charge_id, _ = await new_charge(pay_api, intent, approval_tx)
    paid = await restarted.finish(pay_api, charge_id)
    [sent] = await attempts(pay_api, charge_id)
    assert chain.node.call("evm_revert", [snapshot])
    chain.mine(2)
    chain.node.call("eth_sendRawTransaction", [sent.raw_tx])  # mined again, two blocks later
    assert await restarted.executor.recheck_successes("local") == 0
    [moved] = await attempts(pay_api, charge_id)
    receipt = chain.node.call("eth_getTransactionReceipt", [sent.tx_hash])
    assert moved.status == "mined"
    assert moved.block_number == int(receipt["blockNumber"], 16) == sent.block_number + 2
    charge, _ = await load(pay_api, charge_id)
    assert charge.status == "succeeded" and charge.disbursement_tx_hash == paid["disbursement_tx_hash"]
    assert (await event_types(pay_api)).count(("charge.succeeded", charge_id)) == 1
    assert_paid_once(chain, intent, who, funding, before, 36_000_000, sent.tx_hash)
