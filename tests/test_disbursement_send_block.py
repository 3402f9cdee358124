"""A charge's `Disbursed` log is searched from the block it was sent at (or, with no transaction of ours,
from its approval's block), never from the network's start: behind a provider with a block-range cap a
search from the start is refused, the search from the send block is not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from eth_account import Account
from sqlalchemy import select

from tests.support.api import ApiHarness
from tests.support.payments import confirmed_intent, pay_outside_the_service, payments_api
from tests.test_disbursement_exactly_once import load, new_charge
from vip.chain.rpc import RangeTooLargeError, RpcClient
from vip.clock import ChainClock
from vip.devstack.provider import PROFILES, ProviderStandIn
from vip.payments.charges import ChargeExecutor
from vip.payments.rules import chain_intent_id
from vip.store.tables import disbursement_transactions

RANGE_CAP = 20


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, chain) -> AsyncIterator[ApiHarness]:
    # No charge daemon: the test drives its own executor, behind the capped provider.
    async with payments_api(aiohttp_client, database_url, engine, chain, executor=False,
                            charge_wait_s=5.0) as harness:
        yield harness


@pytest.fixture
def capped_provider(chain) -> ProviderStandIn:
    """A provider allowing RANGE_CAP blocks per eth_getLogs, on a chain already longer than that."""
    with ProviderStandIn(chain.node.rpc_url, replace(PROFILES["quicknode"], range_cap=RANGE_CAP)) as provider:
        yield provider


async def executor_behind(api: ApiHarness, url: str) -> tuple[ChargeExecutor, RpcClient, ChainClock]:
    rpc = RpcClient("local", url, api.settings.rpc)
    clock = ChainClock(url)
    operator = Account.from_key(api.settings.disbursement.operator_private_key.get_secret_value())
    return ChargeExecutor(api.settings, api.engine, {"local": rpc}, operator, clock), rpc, clock


async def test_charge_records_its_send_block_and_its_log_is_found_from_there(pay_api, chain, database_url,
                                                                             capped_provider):
    _, _, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "21")
    chain.mine(3 * RANGE_CAP)  # the chain is now far longer than one query may span
    charge_id, payout = await new_charge(pay_api, intent, approval_tx)
    executor, rpc, clock = await executor_behind(pay_api, capped_provider.url)
    try:
        await executor.advance(charge_id, wait_s=5.0)
        charge, _ = await load(pay_api, charge_id)
        assert charge.status == "succeeded"
        async with pay_api.engine.connect() as conn:
            sent = (await conn.execute(select(disbursement_transactions).where(
                disbursement_transactions.c.charge_id == charge_id))).one()
        assert sent.sent_from_block is not None and sent.sent_from_block < sent.block_number
        assert sent.block_number - sent.sent_from_block < RANGE_CAP
        disburser = executor.disburser("local")
        chain.mine(3)
        found = await disburser.disbursed_log_tx(payout.chain_intent_id, sent.sent_from_block)
        assert found == charge.disbursement_tx_hash
        # The search the charge executor used to make, from the network's start, is refused here.
        with pytest.raises(RangeTooLargeError):
            await disburser.disbursed_log_tx(payout.chain_intent_id, 0)
    finally:
        await rpc.close()
        await clock.close()


async def test_charge_paid_outside_our_records_is_found_from_its_approval_block(pay_api, chain, database_url,
                                                                                capped_provider):
    """Someone used the operator key to pay the intent (no transaction of ours is recorded): the executor
    finds the payment from the approval's block, the earliest it can be, behind the capped provider."""
    chain.mine(3 * RANGE_CAP)  # the chain's start is far more than one query behind the approval
    _, _, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "22")
    charge_id, payout = await new_charge(pay_api, intent, approval_tx)
    paid_by = pay_outside_the_service(chain, payout)
    chain.mine(2)
    executor, rpc, clock = await executor_behind(pay_api, capped_provider.url)
    try:
        await executor.advance(charge_id)
    finally:
        await rpc.close()
        await clock.close()
    charge, _ = await load(pay_api, charge_id)
    assert (charge.status, charge.disbursement_tx_hash) == ("succeeded", paid_by)
    assert chain_intent_id(intent["id"]) == payout.chain_intent_id
    assert capped_provider.refusals["range_cap"] == 0
