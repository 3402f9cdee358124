"""Scenario harness for the verification tests: a fresh Anvil with its own time line, the real API and the
real daemon (indexer + VIP job), a user with a SIWE-connected wallet and a pushed payroll platform; fresh
borrowers and addresses as many as a property test needs (Anvil impersonation)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from eth_account import Account
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import running_indexer, wait_synced
from tests.support.wallets import connect
from vip.api.jsonio import dumps, loads
from vip.config import RateLimitConfig
from vip.store.tables import outbox_events, vip_reports, watched_addresses
from vip.verification.config import CircularFlowConfig, VerificationConfig

USDC = 10**6
PAYDAY = 25
DEX = "0x" + "de" * 20


@asynccontextmanager
async def verification_api(aiohttp_client, chain: ChainDriver, database_url: str, engine, *,
                           unmetered: bool = False) -> AsyncIterator[ApiHarness]:
    """The real app on this test's own Anvil (its time moves) and database, checked against OpenAPI, with
    quick jobs and a DEX router the rules know. `unmetered`: rate limits out of the way (a property test
    makes many borrowers a minute with one key)."""
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    settings = indexer_settings(network).model_copy(update={"verification": VerificationConfig(
        job_idle_s=0.05, dex_addresses={"local": (DEX,)},
        circular_flow=CircularFlowConfig(fetch_wait_s=60))})
    if unmetered:
        many = 10**6
        settings = settings.model_copy(update={"api": settings.api.model_copy(update={
            "rate_limits": RateLimitConfig(vip_report_per_user=many, risk_score_per_user=many,
                                           transactions_per_key=many, default_per_key=many)})})
    async with checked_api(aiohttp_client, settings, database_url, engine) as harness:
        yield harness


def months_after(start: datetime, count: int) -> list[date]:
    """The 25th of each of the `count` months after `start`'s month."""
    year, month = start.year, start.month
    days = []
    for _ in range(count):
        month += 1
        if month == 13:
            year, month = year + 1, 1
        days.append(date(year, month, PAYDAY))
    return days


def month_after(day: date) -> date:
    return (day.replace(day=1) + timedelta(days=32)).replace(day=1)


@dataclass
class Borrower:
    """One scenario's user: its wallet (a dev account, SIWE-connected), an employer and free accounts."""

    api: ApiHarness
    chain: ChainDriver
    user_id: str
    wallet: str
    employer: str
    others: list[str]
    start: datetime
    paydays: list[date] = field(default_factory=list)

    def at(self, moment: datetime) -> None:
        """The next block is mined at `moment` (chain time only moves forward)."""
        self.chain.node.call("evm_setNextBlockTimestamp", [int(moment.timestamp())])

    def pay(self, token: str, sender: str, to: str, amount: int, moment: datetime | None = None) -> str:
        if moment is not None:
            self.at(moment)
        tx_hash = self.chain.transfer(token, sender, to, amount)
        # NOTE: Anvil answers before its automine has sealed the block; wait for it, or the next
        # evm_setNextBlockTimestamp would stamp this block instead.
        deadline = time.monotonic() + 10
        while self.chain.node.call("eth_getTransactionReceipt", [tx_hash]) is None:
            assert time.monotonic() < deadline, f"{tx_hash} was not mined"
            time.sleep(0.01)
        return tx_hash

    def settle(self, moment: datetime, blocks: int = 8) -> None:
        """Move the chain to `moment` and bury everything deeper than the finality depth."""
        self.at(moment)
        self.chain.mine(blocks)

    async def push_records(self, records: Sequence[tuple[date, Decimal]], *, platform: str = "paystream",
                           origin: str | None = None) -> None:
        body = {"user_id": self.user_id, "platform": platform, "source_type": "payroll",
                "account_id": f"emp-{self.user_id}", "data": {
                    "account_holder": "Jane Doe", "currency": "USD", "transaction_history": [
                        {"date": d.isoformat(), "amount": amount, "direction": "inbound",
                         "from_reference": origin or self.employer} for d, amount in records]}}
        resp = await self.api.client.post("/v1/connect/platform/direct", data=dumps(body), headers={
            **await self.api.headers(), "Content-Type": "application/json"})
        assert resp.status in (200, 201), await resp.text()

    async def get(self, path: str, **params: Any):
        resp = await self.api.client.get(path, params={k: str(v) for k, v in params.items()},
                                         headers=await self.api.headers())
        return resp.status, loads(await resp.text())  # exact numbers, as a lender should read them

    async def vip(self, lookback_months: int = 6, timeout_s: float = 60.0, **params: Any) -> dict:
        """Ask for the VIP (202 pending), wait for the daemon to finish it, read it (200)."""
        status, body = await self.get("/v1/vip-report", user_id=self.user_id, lookback_months=lookback_months,
                                      **params)
        assert status == 202, body
        assert body["vip_report"]["status"] == "pending"
        vip_id = body["vip_report"]["id"]
        deadline = time.monotonic() + timeout_s
        while True:
            async with self.api.engine.connect() as conn:
                current = await conn.scalar(select(vip_reports.c.status).where(vip_reports.c.id == vip_id))
            if current != "pending":
                break
            assert time.monotonic() < deadline, "the daemon did not finish the VIP"
            await asyncio.sleep(0.1)
        status, body = await self.get("/v1/vip-report", user_id=self.user_id, lookback_months=lookback_months)
        assert status == 200, body
        assert body["vip_report"]["id"] == vip_id
        return body["vip_report"]

    async def events(self, prefix: str = "") -> list[tuple[str, dict]]:
        async with self.api.engine.connect() as conn:
            rows = await conn.execute(select(outbox_events.c.type, outbox_events.c.data)
                                      .order_by(outbox_events.c.seq))
        return [(r.type, r.data["object"]) for r in rows if r.type.startswith(prefix)
                and r.data["object"].get("user_id") == self.user_id]


async def indexed_from(engine, network: str, addresses: Sequence[str], start: datetime,
                       reason: str = "counterparty") -> None:
    """Addresses as the indexer leaves them once their history from `start` is backfilled (no indexer
    runs in the test: the job never waits on a fetch)."""
    async with engine.begin() as conn:
        await conn.execute(pg_insert(watched_addresses).on_conflict_do_nothing(), [
            {"network": network, "address": a, "reason": reason, "start_time": start,
             "backfill_done_at": start} for a in addresses])


def fresh_address(chain: ChainDriver) -> str:
    """A new address that can send transactions (impersonated, with gas) and holds no tokens."""
    address = Account.create().address
    chain.node.call("anvil_impersonateAccount", [address])
    chain.node.call("anvil_setBalance", [address, hex(10**20)])
    return address.lower()


async def fresh_borrower(api: ApiHarness, chain: ChainDriver, *, funds: int = 10**12) -> Borrower:
    """A new user with a new SIWE-connected wallet holding `funds` USDC, a new employer, four free
    addresses; the start is the chain's time now."""
    account = Account.create()
    wallet = account.address.lower()
    chain.node.call("anvil_impersonateAccount", [account.address])
    chain.node.call("anvil_setBalance", [account.address, hex(10**20)])
    user_id = await api.user()
    await connect(api, user_id, account)
    employer, others = fresh_address(chain), [fresh_address(chain) for _ in range(4)]
    chain.set_automine(False)
    for holder in (wallet, employer):
        chain.mint("USDC", holder, funds)
    chain.mine()
    chain.set_automine(True)
    head = chain.node.call("eth_getBlockByNumber", ["latest", False])
    start = datetime.fromtimestamp(int(head["timestamp"], 16), UTC)
    return Borrower(api, chain, user_id, wallet, employer, others, start)


async def vip_when_synced(b: Borrower, database_url: str, lookback_months: int = 6, **params: Any) -> dict:
    """The VIP of the borrower, the daemon running from the chain's state now."""
    async with running_indexer(b.api.settings, database_url):
        await wait_synced(b.api.engine, b.chain, "local")
        return await b.vip(lookback_months, **params)


async def new_borrower(api: ApiHarness, chain: ChainDriver) -> Borrower:
    accounts = chain.accounts
    wallet_key = chain.node.private_keys[3]
    account = Account.from_key(wallet_key)
    assert account.address.lower() == accounts[3]
    chain.fund([accounts[i] for i in range(2, 10)])
    user_id = await api.user()
    await connect(api, user_id, account)
    head = chain.node.call("eth_getBlockByNumber", ["latest", False])
    start = datetime.fromtimestamp(int(head["timestamp"], 16), UTC)
    return Borrower(api, chain, user_id, accounts[3], accounts[2], accounts[4:10], start)


def noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
