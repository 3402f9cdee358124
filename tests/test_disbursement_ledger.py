"""One treasury funding many loans at once, on Circle's and Tether's real token contracts: the allowance
ledger confirms an intent only from final, unspent allowance and names the approval that covers it;
approval instructions ask for the total the treasury must allow, never lowering another intent's cover;
USDT's reset never fails a charge in flight; through a reorg every loan is paid exactly once. Real
Anvil, PostgreSQL, API and daemon jobs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import select

from tests.support.api import ApiHarness
from tests.support.indexer import wait_synced
from tests.support.payments import (
    balance,
    borrower,
    create_intent,
    daemon,
    disbursed_logs,
    get_charge,
    lender,
    new_lender,
    organisation_spender,
    payments_api,
    post_json,
    wait_charge_settled,
    wait_intent_status,
)
from tests.support.real_tokens import RealTokenChain, real_chain  # noqa: F401 (fixture)
from vip.chain.rpc import RpcClient
from vip.clock import ChainClock
from vip.payments.rules import chain_intent_id
from vip.payments.worker import ApprovalConfirmer
from vip.store.tables import charges, token_approvals

USD = 10**6


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, real_chain) -> AsyncIterator[ApiHarness]:  # noqa: F811
    async with payments_api(aiohttp_client, database_url, engine, real_chain, charge_wait_s=3.0) as harness:
        yield harness


@asynccontextmanager
async def confirmer(api: ApiHarness):
    """The daemon's approval confirmation job, stepped by the test: with the indexer synced and the chain
    still, one step decides what any daemon would."""
    network = api.settings.network("local")
    rpc = RpcClient("local", network.rpc_url, api.settings.rpc)  # type: ignore[arg-type]
    clock = ChainClock(network.rpc_url)  # type: ignore[arg-type]
    try:
        yield ApprovalConfirmer(network, api.engine, rpc, clock)
    finally:
        await rpc.close()
        await clock.close()


async def intent_now(api: ApiHarness, intent_id: str) -> dict:
    resp = await api.client.get(f"/v1/payment-intents/{intent_id}", headers=await api.headers())
    assert resp.status == 200, await resp.text()
    return (await resp.json())["payment_intent"]


async def charge(api: ApiHarness, intent: dict, approval_tx: str) -> dict:
    """POST /v1/charges, followed to its settlement when the answer is 202."""
    resp = await post_json(api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                "approval_tx_hash": approval_tx})
    assert resp.status in (201, 202), await resp.text()
    body = (await resp.json())["charge"]
    return body if resp.status == 201 else await wait_charge_settled(api, body["id"])


async def wait_claimed(api: ApiHarness, charge_id: str, times: int, timeout_s: float = 60.0) -> None:
    """Until the charge executor has claimed the charge `times` times (each claim is one pass)."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with api.engine.connect() as conn:
            attempts = await conn.scalar(select(charges.c.attempts).where(charges.c.id == charge_id))
        if attempts >= times:
            return
        assert time.monotonic() < deadline, f"charge {charge_id} claimed {attempts} times, not {times}"
        await asyncio.sleep(0.05)


async def covered(api: ApiHarness, intent_id: str) -> tuple[str | None, str | None]:
    """The approval a confirmed intent names, and how it is covered."""
    intent = await intent_now(api, intent_id)
    assert intent["status"] == "approval_confirmed", intent
    return intent["approval_tx_hash"], intent["approval_coverage"]


def amount_of(intent: dict) -> int:
    return int(intent["approval_calldata"]["amount"])


async def test_five_loans_in_flight_from_one_treasury(pay_api, real_chain, database_url):  # noqa: F811
    chain: RealTokenChain = real_chain
    treasury = lender(chain, 5, "USDC")
    lender(chain, 5, "USDT")
    people = [await borrower(pay_api) for _ in range(3)]
    spender = None
    approvals: dict[str, str] = {}

    def approve(token: str, amount: int) -> str:
        return chain.approve(token, treasury.lower(), spender, amount)

    async with daemon(pay_api.settings, database_url), confirmer(pay_api) as job:
        # 1-2. A USDC loan and a USDT loan: nothing else open, each asks for its own amount.
        i1 = await create_intent(pay_api, people[0], treasury, "300", "USDC")
        i2 = await create_intent(pay_api, people[1], treasury, "40", "USDT")
        spender = i1["approval_calldata"]["spender"]
        assert (amount_of(i1), amount_of(i2)) == (300 * USD, 40 * USD)
        assert "reset_calldata" not in i2["approval_calldata"]
        approvals["i1"], approvals["i2"] = approve("USDC", 300 * USD), approve("USDT", 40 * USD)
        chain.mine(3)
        for intent, name in ((i1, "i1"), (i2, "i2")):
            await wait_intent_status(pay_api, intent["id"], "approval_confirmed")
            assert await covered(pay_api, intent["id"]) == (approvals[name], "approval")

        # 3. A second USDC loan while the first is confirmed and unpaid: the instructions ask for both, so
        # following them never takes the first one's cover away.
        i3 = await create_intent(pay_api, people[2], treasury, "250", "USDC")
        assert amount_of(i3) == 550 * USD

        # 4. The first is paid (its pull is not final yet); the lender then sends i3's approve. Until that
        # approve is final nothing covers i3: the allowance at the final block still holds the 300 the
        # charge took (consumed, not final), and the spent approval of i1 must not confirm it.
        paid1 = await charge(pay_api, i1, approvals["i1"])
        assert paid1["status"] == "succeeded"
        approvals["i3"] = approve("USDC", 550 * USD)
        await wait_synced(pay_api.engine, chain, "local")
        await job.step()
        assert (await intent_now(pay_api, i3["id"]))["status"] == "pending_approval"
        chain.mine(2)  # now final
        await wait_intent_status(pay_api, i3["id"], "approval_confirmed")
        assert await covered(pay_api, i3["id"]) == (approvals["i3"], "approval")

        # 5. A third USDC loan fits in what i3's approval left standing (550 - 250 reserved): confirmed with
        # no new approval, naming the approval whose allowance covers it, as a standing allowance.
        i4 = await create_intent(pay_api, people[0], treasury, "60", "USDC")
        assert amount_of(i4) == (60 + 250) * USD  # i3 is still open
        await wait_intent_status(pay_api, i4["id"], "approval_confirmed")
        assert await covered(pay_api, i4["id"]) == (approvals["i3"],
                                                                                   "standing_allowance")

        # 6. A second USDT loan while i2 is confirmed and unpaid: Tether refuses approve(n) over a non-zero
        # allowance, so the instructions begin with approve(0), and ask for both loans.
        i5 = await create_intent(pay_api, people[1], treasury, "75", "USDT")
        assert amount_of(i5) == 115 * USD
        reset = i5["approval_calldata"]["reset_calldata"]
        assert (reset["amount"], reset["spender"]) == ("0", spender)
        refused = approve("USDT", 115 * USD)  # straight to the total: Tether's rule refuses it
        assert chain.receipt(refused)["status"] == "0x0"
        approve("USDT", 0)  # the reset is mined...
        held = await post_json(pay_api, "/v1/charges", {"payment_intent_id": i2["id"],
                                                        "approval_tx_hash": approvals["i2"]})
        assert held.status == 202, await held.text()  # ...and i2's charge, in flight, waits for the raise
        held_id = (await held.json())["charge"]["id"]
        await wait_claimed(pay_api, held_id, 3)
        assert await charge_status(pay_api, held_id) == "pending"
        approvals["i5"] = approve("USDT", 115 * USD)
        paid2 = await wait_charge_settled(pay_api, held_id)
        assert paid2["status"] == "succeeded"
        await wait_synced(pay_api.engine, chain, "local")
        await job.step()
        assert (await intent_now(pay_api, i5["id"]))["status"] == "pending_approval"  # not final yet
        chain.mine(2)
        await wait_intent_status(pay_api, i5["id"], "approval_confirmed")
        assert await covered(pay_api, i5["id"]) == (approvals["i5"], "approval")

        # 7. i3 is paid, then a reorg removes the block that paid it: the charge is reopened and i3 paid
        # again on the canonical chain, once.
        snapshot = chain.node.call("evm_snapshot")
        paid3 = await charge(pay_api, i3, approvals["i3"])
        assert paid3["status"] == "succeeded"
        assert chain.node.call("evm_revert", [snapshot])
        chain.mine(3)
        assert chain.node.call("eth_getTransactionReceipt", [paid3["disbursement_tx_hash"]]) is None
        await wait_paid_on_chain(pay_api, chain, paid3["id"], i3)

        # 8. The last two.
        paid4 = await charge(pay_api, i4, approvals["i3"])
        paid5 = await charge(pay_api, i5, approvals["i5"])
        assert paid4["status"] == paid5["status"] == "succeeded"

    # Every loan paid exactly once, from the one treasury, to its borrower.
    for intent in (i1, i2, i3, i4, i5):
        assert len(disbursed_logs(chain, chain_intent_id(intent["id"]))) == 1, intent["id"]
    usdc_paid = {people[0].wallet: 360 * USD, people[2].wallet: 250 * USD}
    usdt_paid = {people[1].wallet: 115 * USD}
    for wallet, amount in usdc_paid.items():
        assert balance(chain, "USDC", wallet) == amount
    for wallet, amount in usdt_paid.items():
        assert balance(chain, "USDT", wallet) == amount
    assert balance(chain, "USDC", treasury) == 10**13 - 610 * USD
    assert balance(chain, "USDT", treasury) == 10**13 - 115 * USD
    # What is left standing is what i3's approval asked for beyond the loans it then covered.
    assert chain.read("USDC", "allowance(address,address)", ["address", "address"], [treasury, spender],
                      "uint256") == (550 - 250 - 60) * USD
    assert chain.read("USDT", "allowance(address,address)", ["address", "address"], [treasury, spender],
                      "uint256") == 0


async def charge_status(api: ApiHarness, charge_id: str) -> str:
    status: str = (await get_charge(api, charge_id))["status"]
    return status


async def wait_paid_on_chain(api: ApiHarness, chain: RealTokenChain, charge_id: str, intent: dict,
                             timeout_s: float = 90.0) -> None:
    """Until the charge is succeeded with a transaction the canonical chain holds (the daemon re-checked
    it, reopened it and paid it again, or saw the same bytes mined again)."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = await get_charge(api, charge_id)
        tx = current["disbursement_tx_hash"]
        if (current["status"] == "succeeded" and tx
                and chain.node.call("eth_getTransactionReceipt", [tx]) is not None
                and disbursed_logs(chain, chain_intent_id(intent["id"]))):
            return
        assert time.monotonic() < deadline, f"charge {charge_id} not paid again: {current}"
        await asyncio.sleep(0.1)


async def test_a_standing_allowance_older_than_the_indexed_history_confirms_naming_none(
        pay_api, real_chain, database_url):  # noqa: F811
    """The treasury approved long ago (before its spender was watched): no indexed Approval covers the
    intent, yet the allowance on chain does. The intent is confirmed from it, naming no approval and
    saying the allowance stood; a charge naming the lender's old approval transaction is accepted (the
    node shows it is an Approval of this wallet to this spender) and pays."""
    chain: RealTokenChain = real_chain
    treasury = new_lender(chain, "USDC", 1000 * USD)
    who = await borrower(pay_api)
    spender = await organisation_spender(pay_api, chain)
    old_approval = chain.approve("USDC", treasury.lower(), spender, 500 * USD)
    chain.mine(3)
    # A month later the lender starts with the service: the indexer has long passed that block, and the
    # spender is watched from the first intent on, with 7 days of history.
    chain.node.call("evm_increaseTime", [30 * 86400])
    chain.mine(3)
    async with daemon(pay_api.settings, database_url):
        await wait_synced(pay_api.engine, chain, "local")
        intent = await create_intent(pay_api, who, treasury, "120", "USDC")
        await wait_intent_status(pay_api, intent["id"], "approval_confirmed")
        assert await covered(pay_api, intent["id"]) == (None, "standing_allowance")
        async with pay_api.engine.connect() as conn:
            indexed = await conn.scalar(select(token_approvals.c.tx_hash).where(
                token_approvals.c.tx_hash == old_approval.lower()))
        assert indexed is None  # older than the indexed history
        paid = await charge(pay_api, intent, old_approval)
    assert paid["status"] == "succeeded"
    assert balance(chain, "USDC", who.wallet) == 120 * USD
