"""Disbursement in tests: an API (which holds no operator key) beside a charge daemon that does, lenders
that approve from Anvil dev accounts, borrowers with connected wallets, and on-chain balances as ground
truth."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal

from eth_abi import decode, encode
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_utils import function_signature_to_4byte_selector, to_checksum_address
from pydantic import SecretStr
from sqlalchemy import func, select

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.wallets import connect
from vip.api.jsonio import dumps
from vip.chain.contracts import DISBURSED_TOPIC, contract_at, organisation_key, send_transaction
from vip.chain.rpc import RpcClient
from vip.clock import ChainClock
from vip.config import DisbursementConfig, Settings
from vip.payments.charges import ChargeExecutor
from vip.payments.worker import ChargeCompleter
from vip.store.tables import organisations, outbox_events, payment_intents

_BALANCE_OF = function_signature_to_4byte_selector("balanceOf(address)")


def disbursement_settings(driver: ChainDriver, *, charge_wait_s: float = 10.0, finality_depth: int = 2,
                          **overrides) -> Settings:
    """Settings on the driver's chain, with its operator (dev account 1) as the operator key."""
    network = local_network(driver.node.rpc_url, driver.node.chain_id, driver.contracts,
                            finality_depth=finality_depth)
    config = DisbursementConfig(operator_private_key=SecretStr(driver.node.private_keys[1]),
                                charge_wait_s=charge_wait_s, poll_interval_s=0.1, **overrides)
    return indexer_settings(network).model_copy(update={"disbursement": config})


def balance(driver: ChainDriver, token: str, holder: str) -> int:
    data = "0x" + (_BALANCE_OF + encode(["address"], [to_checksum_address(holder)])).hex()
    result = driver.node.call("eth_call", [{"to": driver.tokens[token], "data": data}, "latest"])
    return decode(["uint256"], bytes.fromhex(result[2:]))[0]


def disbursed_logs(driver: ChainDriver, chain_intent_id: str | None = None) -> list[dict]:
    topics: list = [DISBURSED_TOPIC] + ([chain_intent_id] if chain_intent_id else [])
    return driver.node.call("eth_getLogs", [{"address": driver.contracts.disbursement, "fromBlock": "0x0",
                                             "toBlock": "latest", "topics": topics}])


@dataclass
class Borrower:
    user_id: str
    wallet: str  # checksummed


def pay_outside_the_service(driver: ChainDriver, payout) -> str:
    """Another tool holding the operator key pays the charge's intent straight on the contract (no record
    of ours): the mined transaction's hash, lower-case."""
    contract = contract_at(driver.w3, "Disbursement", driver.contracts.disbursement)
    call = contract.functions.disburse(bytes.fromhex(payout.organisation_key[2:]),
                                       bytes.fromhex(payout.chain_intent_id[2:]),
                                       driver.w3.to_checksum_address(payout.token),
                                       driver.w3.to_checksum_address(payout.funding_wallet),
                                       driver.w3.to_checksum_address(payout.recipient), payout.amount)
    receipt = send_transaction(driver.w3, call, driver.node.private_keys[1])
    return receipt["transactionHash"].to_0x_hex().lower()


async def borrower(api: ApiHarness, org: str = "acme") -> Borrower:
    account = Account.create()
    user_id = await api.user(org)
    await connect(api, user_id, account, org=org)
    return Borrower(user_id, account.address)


# The keys of the dev accounts handed out by `lender`, so `create_intent` can register them first.
_LENDER_KEYS: dict[str, str] = {}


def lender(driver: ChainDriver, index: int, token: str = "USDC", amount: int = 10**13) -> str:
    """Dev account `index` (an unlocked Anvil account), funded with `amount` of `token`; checksummed."""
    address = driver.accounts[index]
    driver.mint(token, address, amount)
    _LENDER_KEYS[address.lower()] = driver.node.private_keys[index]
    return to_checksum_address(address)


def new_lender(driver: ChainDriver, token: str = "USDC", amount: int = 10**13) -> str:
    """A fresh treasury (not a dev account: its state is this test's alone), given gas money and `amount`
    of `token`, impersonated so the driver can send its approvals; checksummed."""
    account = Account.create()
    driver.node.call("anvil_setBalance", [account.address, hex(10**20)])
    driver.node.call("anvil_impersonateAccount", [account.address])
    driver.mint(token, account.address, amount)
    _LENDER_KEYS[account.address.lower()] = "0x" + account.key.hex().removeprefix("0x")
    return account.address


async def organisation_id(api: ApiHarness, org: str = "acme") -> str:
    await api.key(org)
    async with api.engine.connect() as conn:
        return await conn.scalar(select(organisations.c.id).where(organisations.c.name == org))


async def organisation_spender(api: ApiHarness, driver: ChainDriver, org: str = "acme") -> str:
    """The organisation's spender, as the Disbursement contract on chain computes it (checksummed)."""
    contract = contract_at(driver.w3, "Disbursement", driver.contracts.disbursement)
    key = bytes.fromhex(organisation_key(await organisation_id(api, org))[2:])
    return contract.functions.spenderOf(key).call()


async def funding_challenge(api: ApiHarness, address: str, org: str = "acme", network: str = "local"):
    resp = await post_json(api, "/v1/funding-wallets/nonce", {"address": to_checksum_address(address),
                                                              "network": network}, org)
    assert resp.status == 201, await resp.text()
    return await resp.json()


def personal_sign(private_key: str, message: str) -> str:
    signature = Account.sign_message(encode_defunct(text=message), private_key).signature
    return "0x" + signature.hex().removeprefix("0x")


async def register_funding_wallet(api: ApiHarness, address: str, private_key: str | None = None,
                                  org: str = "acme", network: str = "local"):
    """Register `address` to `org` with a real signature of the issued message (by `private_key`, or the
    key `lender` handed out); returns the response."""
    key = private_key or _LENDER_KEYS[address.lower()]
    challenge = await funding_challenge(api, address, org, network)
    return await post_json(api, "/v1/funding-wallets", {
        "address": to_checksum_address(address), "nonce": challenge["nonce"],
        "signature": personal_sign(key, challenge["message"])}, org)


def intent_body(who: Borrower, funding: str, amount_usd: str = "250.5", token: str = "USDC") -> dict:
    return {"user_id": who.user_id, "amount_usd": Decimal(amount_usd), "token": token, "network": "local",
            "recipient_wallet": who.wallet, "funding_wallet": funding,
            "metadata": {"loan_id": "L-1", "term_months": 12}}


async def post_json(api: ApiHarness, path: str, body: dict, org: str = "acme"):
    """POST with amounts written as exact JSON numbers."""
    return await api.client.post(path, data=dumps(body), headers={
        **await api.headers(org), "Content-Type": "application/json"})


async def create_intent(api: ApiHarness, who: Borrower, funding: str, amount_usd: str = "250.5",
                        token: str = "USDC", org: str = "acme") -> dict:
    """An intent of `org`; a funding wallet handed out by `lender` is registered to `org` first."""
    if funding.lower() in _LENDER_KEYS:
        registered = await register_funding_wallet(api, funding, org=org)
        assert registered.status in (200, 201), await registered.text()
    resp = await post_json(api, "/v1/payment-intents", intent_body(who, funding, amount_usd, token), org)
    assert resp.status == 201, await resp.text()
    return (await resp.json())["payment_intent"]


def approve(driver: ChainDriver, intent: dict, owner: str, amount: int | None = None) -> str:
    """The approve() call of the intent's approval_calldata, from `owner` (0 first, as USDT requires);
    mined, then buried past the test network's finality depth."""
    calldata = intent["approval_calldata"]
    token = next(s for s, a in driver.tokens.items() if a == calldata["token_contract"].lower())
    driver.approve(token, owner.lower(), calldata["spender"], 0)
    tx = driver.approve(token, owner.lower(), calldata["spender"],
                        int(calldata["amount"]) if amount is None else amount)
    driver.mine(3)
    return tx


async def wait_intent_status(api: ApiHarness, intent_id: str, status: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        async with api.engine.connect() as conn:
            current = await conn.scalar(select(payment_intents.c.status)
                                        .where(payment_intents.c.id == intent_id))
        if current == status:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"intent {intent_id} is {current}, not {status}, after {timeout_s}s")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def daemon(settings: Settings, database_url: str):
    from tests.support.indexer import running_indexer
    async with running_indexer(settings, database_url) as task:
        yield task


@asynccontextmanager
async def charge_daemon(settings: Settings, engine) -> AsyncIterator[ChargeCompleter]:
    """The daemon's charge executor on `settings` (operator key included) in this process: it announces
    itself, wakes on every new charge and runs until the block ends."""
    network = settings.network("local")
    rpc = RpcClient("local", network.rpc_url, settings.rpc)  # type: ignore[arg-type]
    clock = ChainClock(network.rpc_url)  # type: ignore[arg-type]
    operator = Account.from_key(settings.disbursement.operator_private_key.get_secret_value())
    config = settings.disbursement
    completer = ChargeCompleter(ChargeExecutor(settings, engine, {"local": rpc}, operator, clock), engine,
                                config.poll_interval_s, config.lease_s, config.executor_stale_s)
    stop = asyncio.Event()
    task = asyncio.create_task(completer.run(stop))
    try:
        await asyncio.wait_for(completer.listening.wait(), 30)
        await asyncio.wait_for(completer.announced.wait(), 30)
        yield completer
    finally:
        stop.set()
        await task
        await rpc.close()
        await clock.close()


@asynccontextmanager
async def payments_api(aiohttp_client, database_url: str, engine, driver: ChainDriver, *,
                       executor: bool = True, **overrides):
    """The real app on the driver's chain (it drops the operator key the settings carry), and, unless
    `executor` is False, a charge daemon with that key beside it; every response checked against the
    OpenAPI document."""
    settings = disbursement_settings(driver, **overrides)
    async with checked_api(aiohttp_client, settings, database_url, engine) as harness:
        if not executor:
            yield harness
            return
        async with charge_daemon(settings, engine):
            yield harness


async def get_charge(api: ApiHarness, charge_id: str, org: str = "acme") -> dict:
    """GET /v1/charges/{id} as a lender's poller does it: a 429 (60 requests a minute per key) waits the
    Retry-After it names and asks again."""
    while True:
        resp = await api.client.get(f"/v1/charges/{charge_id}", headers=await api.headers(org))
        if resp.status == 429:
            await asyncio.sleep(int(resp.headers["Retry-After"]))
            continue
        assert resp.status == 200, await resp.text()
        charge: dict = (await resp.json())["charge"]
        return charge


async def wait_charge_settled(api: ApiHarness, charge_id: str, org: str = "acme",
                              timeout_s: float = 60.0) -> dict:
    """GET /v1/charges/{id} until the daemon settled it (how a lender follows a 202)."""
    deadline = time.monotonic() + timeout_s
    while True:
        charge = await get_charge(api, charge_id, org)
        if charge["status"] != "pending":
            return charge
        if time.monotonic() > deadline:
            raise AssertionError(f"charge {charge_id} still pending after {timeout_s}s")
        await asyncio.sleep(0.05)


async def count(api: ApiHarness, table) -> int:
    async with api.engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(table))


async def event_types(api: ApiHarness) -> list[tuple[str, str]]:
    """(type, object id) of the disbursement events, in order."""
    async with api.engine.connect() as conn:
        rows = await conn.execute(select(outbox_events.c.type, outbox_events.c.data)
                                  .order_by(outbox_events.c.seq))
        return [(r.type, r.data["object"]["id"]) for r in rows
                if r.type.startswith(("payment_intent.", "charge."))]


async def confirmed_intent(api: ApiHarness, chain: ChainDriver, database_url: str, amount: str = "12.345678",
                           token: str = "USDC", lender_index: int = 7):
    """A borrower, a funded lender, and an intent the daemon confirmed; the daemon is stopped again."""
    who = await borrower(api)
    funding = lender(chain, lender_index, token)
    intent = await create_intent(api, who, funding, amount, token)
    tx = approve(chain, intent, funding)
    async with daemon(api.settings, database_url):
        await wait_intent_status(api, intent["id"], "approval_confirmed")
    return who, funding, intent, tx
