"""Disbursement end to end on Anvil: charges per second from intent to `succeeded`, with 20 intents in
flight, then a check that every intent was paid exactly once.

What it does:
  1. Creates a fresh, migrated database (embedded pgserver in a temp dir, or a throw-away database on
     `--database-url` / $DATABASE_URL) and starts its own Anvil (automine, plus a block mined every
     `--block-interval` seconds, default 0.25, so approvals pass the finality depth of 2 blocks).
  2. Deploys the contracts (dev account 1 is the operator), seeds one organisation and key, and for each
     of `--intents` (default 100) payouts a user with a connected wallet (rows written directly) and a
     fresh lender address holding USDC (Anvil impersonates the lenders, so they approve with
     eth_sendTransaction).
  3. Runs the real API (AppRunner on loopback) and the real daemon (follower, backfill, approval
     confirmation, expiry, charge completion) in this process, with `charge_wait_s` 10 s.
  4. `--in-flight` (default 20) lanes each take the next payout and drive it as a lender backend would:
     POST /v1/payment-intents, approve() with the returned calldata, poll GET /v1/payment-intents/{id}
     until `approval_confirmed`, POST /v1/charges, poll GET /v1/charges/{id} while `pending`.
  5. Prints payouts per second (wall clock from the first intent to the last `succeeded`), latency
     percentiles of the whole flow and of POST /v1/charges alone, then verifies on chain: one Disbursed
     log per intent id, every recipient's balance exactly its amount, every lender down by exactly it,
     and the operator's nonce advanced by exactly the number of payouts.

Run (from the repository root):
    .venv/bin/python bench/disbursement_throughput.py
    .venv/bin/python bench/disbursement_throughput.py --intents 200 --in-flight 20 --block-interval 1
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import aiohttp
from aiohttp import web
from eth_abi import encode
from eth_account import Account
from eth_account.messages import encode_defunct
from pydantic import SecretStr
from sqlalchemy import func, select
from web3 import Web3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchdb import throwaway_database
from vip.accounts import keys
from vip.api.app import create_app
from vip.api.jsonio import dumps
from vip.chain.contracts import DISBURSED_TOPIC
from vip.config import (
    ApiConfig,
    DisbursementConfig,
    IndexerConfig,
    NetworkConfig,
    RateLimitConfig,
    RpcConfig,
    Settings,
    TokenConfig,
)
from vip.daemon import run_daemon
from vip.devstack.anvil import free_port, start_anvil
from vip.devstack.deploy import deploy_local_contracts, mint
from vip.ids import new_id
from vip.logging import configure_logging
from vip.payments.rules import chain_intent_id
from vip.store.engine import create_engine
from vip.store.tables import charges, connections, users, wallets

APPROVE = bytes.fromhex("095ea7b3")
BALANCE_OF = bytes.fromhex("70a08231")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def settings_for(rpc_url: str, contracts, operator_key: str, api_port: int) -> Settings:
    network = NetworkConfig(
        name="local", chain_id=31337, rpc_url=rpc_url, local=True, finality_depth=2, poll_interval_s=0.05,
        max_block_range=1000, initial_block_range=100, mode="watched", start_block=0,
        disbursement_contract=contracts.disbursement,
        tokens={"USDC": TokenConfig(address=contracts.usdc), "USDT": TokenConfig(address=contracts.usdt)})
    limits = RateLimitConfig(default_per_key=1_000_000, transactions_per_key=1_000_000)
    return Settings(
        networks={"local": network},
        api=ApiConfig(port=api_port, public_base_url=f"http://127.0.0.1:{api_port}", rate_limits=limits),
        rpc=RpcConfig(timeout_s=10, max_requests_per_s=5000),
        indexer=IndexerConfig(lag_grace_s=0.5),
        disbursement=DisbursementConfig(operator_private_key=SecretStr(operator_key), charge_wait_s=10,
                                        poll_interval_s=0.05))


async def seed(url: str, count: int, network: str = "local") -> tuple[str, list[tuple[str, str]]]:
    """An API key and `count` (user id, checksummed recipient wallet) pairs with active connections on
    `network`."""
    engine = create_engine(url, pool_size=2)
    now = datetime.now(UTC)
    pairs = []
    async with engine.begin() as conn:
        org = await keys.ensure_organisation(conn, "bench-lender")
        secret, _ = await keys.create_key(conn, org, ["read", "write", "disburse"], "bench")
        for _ in range(count):
            user_id, con_id, wallet = new_id("usr"), new_id("con"), Account.create().address
            await conn.execute(users.insert().values(id=user_id, organisation_id=org, created_at=now))
            await conn.execute(connections.insert().values(
                id=con_id, organisation_id=org, user_id=user_id, type="wallet", provider="bench",
                identifier=wallet.lower(), network=network, status="active", created_at=now))
            await conn.execute(wallets.insert().values(
                id=new_id("wal"), organisation_id=org, user_id=user_id, connection_id=con_id,
                address=wallet.lower(), network=network, created_at=now))
            pairs.append((user_id, wallet))
    await engine.dispose()
    return secret, pairs


async def rpc(session: aiohttp.ClientSession, url: str, method: str, params: list):
    async with session.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) as r:
        body = await r.json()
    if "error" in body:
        raise RuntimeError(f"{method}: {body['error']}")
    return body["result"]


async def miner(session, url: str, interval: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await rpc(session, url, "anvil_mine", ["0x1"])
        await asyncio.sleep(interval)


async def register_funding_wallet(http, base: str, secret: str, account, network: str = "local") -> None:
    """The wallet signs the registration message the service issues for the bench's organisation."""
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    async with http.post(f"{base}/v1/funding-wallets/nonce", headers=headers,
                         data=dumps({"address": account.address, "network": network})) as resp:
        assert resp.status == 201, await resp.text()
        challenge = await resp.json()
    signature = account.sign_message(encode_defunct(text=challenge["message"])).signature.hex()
    async with http.post(f"{base}/v1/funding-wallets", headers=headers, data=dumps({
            "address": account.address, "nonce": challenge["nonce"],
            "signature": "0x" + signature.removeprefix("0x")})) as resp:
        assert resp.status == 201, await resp.text()


async def payout(http, session, base: str, rpc_url: str, secret: str, user_id: str, wallet: str, lender: str,
                 amount_usd: Decimal, network: str = "local") -> tuple[float, float, dict]:
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    started = time.perf_counter()
    async with http.post(f"{base}/v1/payment-intents", headers=headers, data=dumps({
            "user_id": user_id, "amount_usd": amount_usd, "token": "USDC", "network": network,
            "recipient_wallet": wallet, "funding_wallet": lender})) as resp:
        assert resp.status == 201, await resp.text()
        intent = (await resp.json())["payment_intent"]
    call = intent["approval_calldata"]
    data = "0x" + (APPROVE + encode(["address", "uint256"], [call["spender"], int(call["amount"])])).hex()
    approval_tx = await rpc(session, rpc_url, "eth_sendTransaction", [
        {"from": lender, "to": call["token_contract"], "data": data, "gas": hex(100_000)}])
    while True:
        async with http.get(f"{base}/v1/payment-intents/{intent['id']}", headers=headers) as resp:
            if (await resp.json())["payment_intent"]["status"] == "approval_confirmed":
                break
        await asyncio.sleep(0.05)
    charge_started = time.perf_counter()
    async with http.post(f"{base}/v1/charges", headers=headers, data=dumps({
            "payment_intent_id": intent["id"], "approval_tx_hash": approval_tx})) as resp:
        assert resp.status in (201, 202), await resp.text()
        charge = (await resp.json())["charge"]
    charge_s = time.perf_counter() - charge_started
    while charge["status"] == "pending":
        await asyncio.sleep(0.05)
        async with http.get(f"{base}/v1/charges/{charge['id']}", headers=headers) as resp:
            charge = (await resp.json())["charge"]
    assert charge["status"] == "succeeded", charge
    return time.perf_counter() - started, charge_s, intent


def paid_exactly_once(node, w3, contracts, results: list[tuple[float, float, dict]],
                      pairs: list[tuple[str, str]], amounts: list[Decimal],
                      lenders: list[str]) -> tuple[int, int]:
    """Checks each paid intent on chain: one Disbursed log for its id, its recipient holding exactly its
    amount, its lender down by exactly it (funded with twice the amount). Prints each intent that is not;
    returns (how many are not, Disbursed logs of the contract)."""
    failures = 0
    logs = node.call("eth_getLogs", [{"address": contracts.disbursement, "fromBlock": "0x0",
                                      "toBlock": "latest", "topics": [DISBURSED_TOPIC]}])
    by_intent: dict[str, int] = {}
    for lg in logs:
        by_intent[lg["topics"][1].lower()] = by_intent.get(lg["topics"][1].lower(), 0) + 1
    for i, (_, _, intent) in enumerate(results):
        index = next(j for j, (u, _) in enumerate(pairs) if u == intent["user_id"])
        expected = int(amounts[index] * 10**6)
        paid = w3.eth.call({"to": contracts.usdc, "data": "0x" + (BALANCE_OF + encode(
            ["address"], [pairs[index][1]])).hex()})
        left = w3.eth.call({"to": contracts.usdc, "data": "0x" + (BALANCE_OF + encode(
            ["address"], [lenders[index]])).hex()})
        if (by_intent.get(chain_intent_id(intent["id"]), 0) != 1 or int(paid.hex(), 16) != expected
                or int(left.hex(), 16) != expected):
            failures += 1
            print(f"  NOT PAID EXACTLY ONCE: intent {intent['id']} (#{i})")
    return failures, len(logs)


async def run(args, url: str) -> int:
    node = start_anvil(chain_id=31337, port=free_port())
    stop = asyncio.Event()
    try:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 30}))
        deployer, operator_key = node.private_keys[0], node.private_keys[1]
        operator = Account.from_key(operator_key).address
        contracts = deploy_local_contracts(w3, deployer, operator, Account.from_key(deployer).address)
        print(f"anvil {node.rpc_url}; disbursement contract {contracts.disbursement}", flush=True)
        secret, pairs = await seed(url, args.intents)
        lender_accounts = [Account.create() for _ in range(args.intents)]
        lenders = [a.address for a in lender_accounts]
        amounts = [Decimal(100 + i) + Decimal(i) / 1000 for i in range(args.intents)]
        node.call("anvil_autoImpersonateAccount", [True])
        for lender, amount in zip(lenders, amounts, strict=True):
            node.call("anvil_setBalance", [lender, hex(10**20)])
            mint(w3, contracts.usdc, lender, int(amount * 10**6) * 2, deployer)
        print(f"seeded {args.intents} borrowers and funded lenders", flush=True)

        api_port = free_port()
        settings = settings_for(node.rpc_url, contracts, operator_key, api_port)
        runner = web.AppRunner(create_app(settings, url), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", api_port).start()
        daemon = asyncio.create_task(run_daemon(settings, url, stop, serve_metrics=False))
        nonce_before = w3.eth.get_transaction_count(operator)
        async with aiohttp.ClientSession() as session, aiohttp.ClientSession() as http:
            mining = asyncio.create_task(miner(session, node.rpc_url, args.block_interval, stop))
            base = f"http://127.0.0.1:{api_port}"
            for account in lender_accounts:  # untimed: each lender registers its funding wallet once
                await register_funding_wallet(http, base, secret, account)
            queue = list(range(args.intents))
            results: list[tuple[float, float, dict]] = []

            async def lane() -> None:
                while queue:
                    i = queue.pop(0)
                    results.append(await payout(http, session, f"http://127.0.0.1:{api_port}", node.rpc_url,
                                                secret, pairs[i][0], pairs[i][1], lenders[i], amounts[i]))
                    if len(results) % 20 == 0:
                        print(f"  {len(results)}/{args.intents} paid", flush=True)

            started = time.perf_counter()
            await asyncio.gather(*(lane() for _ in range(args.in_flight)))
            elapsed = time.perf_counter() - started
            stop.set()
            await mining
        await daemon
        await runner.cleanup()

        flows = [r[0] for r in results]
        charge_calls = [r[1] for r in results]
        print(f"\n{args.intents} payouts, {args.in_flight} in flight, block every {args.block_interval}s, "
              f"finality depth 2")
        print(f"  throughput  {args.intents / elapsed:.2f} payouts/s end to end ({elapsed:.1f} s)")
        print(f"  flow        p50 {statistics.median(flows):.2f} s, p90 {percentile(flows, 90):.2f} s, "
              f"max {max(flows):.2f} s (intent, approve, confirmation, charge, succeeded)")
        print(f"  POST charge p50 {statistics.median(charge_calls) * 1000:.0f} ms, "
              f"p90 {percentile(charge_calls, 90) * 1000:.0f} ms, max {max(charge_calls) * 1000:.0f} ms")

        # Exactly once, on chain and in the database.
        failures, logs = paid_exactly_once(node, w3, contracts, results, pairs, amounts, lenders)
        engine = create_engine(url, pool_size=1)
        async with engine.connect() as conn:
            succeeded = await conn.scalar(select(func.count()).select_from(charges).where(
                charges.c.status == "succeeded"))
        await engine.dispose()
        nonce_used = w3.eth.get_transaction_count(operator) - nonce_before
        ok = failures == 0 and logs == args.intents and succeeded == args.intents \
            and nonce_used == args.intents
        verdict = "exactly once" if ok else "FAILED"
        print(f"  check       {logs} Disbursed logs, {succeeded} charges succeeded, "
              f"{nonce_used} operator transactions for {args.intents} intents: {verdict}")
        return 0 if ok else 1
    finally:
        stop.set()
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intents", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=20)
    parser.add_argument("--block-interval", type=float, default=0.25)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    configure_logging("console", logging.WARNING)  # one line per charge would drown the figures
    with throwaway_database(args.database_url or os.environ.get("DATABASE_URL"), "vip-bench-disbursement",
                            ("max_connections",)) as db:
        print(f"database: {db.source}", flush=True)
        sys.exit(asyncio.run(run(args, db.url)))


if __name__ == "__main__":
    main()
