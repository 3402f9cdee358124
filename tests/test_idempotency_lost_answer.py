"""A lost answer: `vip serve` commits a charge and is SIGKILLed before answering (the client sees its
connection drop); the lender's retry with the same Idempotency-Key and body, on another API process, gets
that charge (as Stripe answers), and the loan is paid once. Another body with the key is 409."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from sqlalchemy import select

from tests.support.payments import (
    balance,
    charge_daemon,
    confirmed_intent,
    disbursed_logs,
    payments_api,
)
from vip.api.jsonio import dumps
from vip.config import NetworkConfig
from vip.devstack.anvil import free_port
from vip.devstack.dev import wait_http
from vip.payments import store
from vip.payments.rules import chain_intent_id
from vip.store.tables import charges


def network_overlay(network: NetworkConfig, port: int, charge_wait_s: float) -> str:
    tokens = "".join(f'\n[networks.local.tokens.{symbol}]\naddress = "{token.address}"\n'
                     for symbol, token in network.tokens.items())
    return (f'[api]\nport = {port}\n\n[disbursement]\ncharge_wait_s = {charge_wait_s}\n\n'
            f'[networks.local]\nchain_id = {network.chain_id}\nrpc_url = "{network.rpc_url}"\nlocal = true\n'
            f'finality_depth = {network.finality_depth}\n'
            f'disbursement_contract = "{network.disbursement_contract}"\n{tokens}')


def spawn_serve(database_url: str, tmp_path: Path, overlay_text: str) -> subprocess.Popen:
    overlay = tmp_path / "serve.toml"
    overlay.write_text(overlay_text)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VIP_RPC_") and k not in ("VIP_CONFIG", "VIP_OPERATOR_KEY")}
    env.update(DATABASE_URL=database_url, VIP_CONFIG=str(overlay))
    with (tmp_path / "serve.log").open("ab") as out:
        return subprocess.Popen([str(Path(sys.executable).with_name("vip")), "serve"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)


@pytest.mark.e2e
async def test_a_retry_after_a_lost_charge_answer_gets_the_same_charge_paid_once(
        aiohttp_client, database_url, engine, session_chain, tmp_path):
    async with payments_api(aiohttp_client, database_url, engine, session_chain, executor=False) as api:
        who, funding, intent, approval = await confirmed_intent(api, session_chain, database_url,
                                                                amount="31.000007", lender_index=8)
        lender_before = balance(session_chain, "USDC", funding)
        port = free_port()
        server = spawn_serve(database_url, tmp_path,
                             network_overlay(api.settings.network("local"), port, charge_wait_s=120))
        body = {"payment_intent_id": intent["id"], "approval_tx_hash": approval}
        headers = {**await api.headers(), "Idempotency-Key": "loan-77-charge",
                   "Content-Type": "application/json"}
        try:
            await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/healthz", 60, server)
            # A daemon registered as the charge executor and then stalled (its heartbeat still fresh: beaten
            # once the server is up, which a loaded machine may take longer than the staleness limit to
            # start): the API takes the charge and waits for it to settle, which it does not, so the API is
            # still waiting when it is killed, after its transaction committed.
            async with engine.begin() as conn:
                await store.beat_executor(conn, "ex_stalled", ["local"], session_chain.accounts[1])
            async with aiohttp.ClientSession() as http:
                first = asyncio.create_task(http.post(f"http://127.0.0.1:{port}/v1/charges", data=dumps(body),
                                                      headers=headers))
                charge_id = None
                for _ in range(1000):  # until the charge is committed
                    async with engine.connect() as conn:
                        charge_id = await conn.scalar(select(charges.c.id).where(
                            charges.c.payment_intent_id == intent["id"]))
                    if charge_id or first.done():
                        break
                    await asyncio.sleep(0.02)
                assert charge_id is not None and not first.done()
                server.send_signal(signal.SIGKILL)
                await asyncio.to_thread(server.wait, 10)
                with pytest.raises(aiohttp.ClientError):
                    await first  # the answer is lost: the connection dropped
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(10)
        assert len(disbursed_logs(session_chain, chain_intent_id(intent["id"]))) == 0

        # The executor works again; the lender retries on another API process.
        async with charge_daemon(api.settings, engine):
            retried = None
            for _ in range(50):  # PostgreSQL may take a moment to drop the killed process's claim
                retried = await api.client.post("/v1/charges", data=dumps(body), headers=headers)
                if retried.status != 409:
                    break
                await asyncio.sleep(0.1)
            assert retried is not None and retried.status == 201, await retried.text()
            assert retried.headers["Idempotent-Replayed"] == "true"
            charge = (await retried.json())["charge"]
            assert charge["id"] == charge_id and charge["status"] == "succeeded"

            # Again: the answer now remembered, byte for byte.
            again = await api.client.post("/v1/charges", data=dumps(body), headers=headers)
            assert again.status == 201 and await again.json() == await retried.json()
            # The key with another body: 409, in the spec's error body.
            changed = {**body, "approval_tx_hash": "0x" + "1" * 64}
            other = await api.client.post("/v1/charges", data=dumps(changed), headers=headers)
            assert other.status == 409
            assert (await other.json())["error"]["code"] == "ERR_IDEMPOTENCY_KEY_REUSED"
            # Another key for the same intent: the intent is charged already.
            fresh = await api.client.post("/v1/charges", data=dumps(body),
                                          headers={**headers, "Idempotency-Key": "loan-77-charge-2"})
            assert fresh.status == 409 and (await fresh.json())["error"]["code"] == "ERR_ALREADY_CHARGED"

        # Exactly one transferFrom: one Disbursed log, the amount moved once.
        assert len(disbursed_logs(session_chain, chain_intent_id(intent["id"]))) == 1
        assert lender_before - balance(session_chain, "USDC", funding) == 31_000_007
        assert balance(session_chain, "USDC", who.wallet) == 31_000_007
