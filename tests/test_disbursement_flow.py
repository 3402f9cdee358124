"""The whole disbursement on Anvil through the HTTP API: intent, approve with the returned calldata,
confirmation by the daemon, charge; balances checked on chain. Each test runs on our test tokens and on
the real ones (Circle's FiatTokenV2_2 behind its proxy, Tether's TetherToken), see
tests/support/real_tokens.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from tests.support.api import ApiHarness
from tests.support.chain import ChainDriver
from tests.support.payments import (
    approve,
    balance,
    borrower,
    create_intent,
    daemon,
    disbursed_logs,
    event_types,
    lender,
    organisation_spender,
    payments_api,
    post_json,
    wait_intent_status,
)
from tests.support.real_tokens import shared_real_chain  # noqa: F401 (fixture)

# Each test takes its chain at run time (the test tokens or the real contracts): a chain test either way.
pytestmark = pytest.mark.chain


@pytest.fixture(params=["test tokens", "real tokens"])
def token_chain(request) -> ChainDriver:
    return request.getfixturevalue("session_chain" if request.param == "test tokens" else "shared_real_chain")


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, token_chain) -> AsyncIterator[ApiHarness]:
    async with payments_api(aiohttp_client, database_url, engine, token_chain) as harness:
        yield harness


@pytest.mark.parametrize("token", ["USDC", "USDT"])
async def test_intent_approve_confirm_charge_moves_exactly_the_amount(pay_api, token_chain, database_url,
                                                                      token):
    chain = token_chain
    who = await borrower(pay_api)
    funding = lender(chain, 6, token)
    intent = await create_intent(pay_api, who, funding, "250.5", token=token)
    assert intent["status"] == "pending_approval"
    # The spender is the organisation's own, never the shared contract (see docs/disbursement.md).
    spender = await organisation_spender(pay_api, chain)
    assert spender != chain.contracts.disbursement
    assert intent["approval_calldata"] == {
        "function": "approve", "spender": spender, "amount": "250500000",
        "token_contract": getattr(chain.contracts, token.lower())}
    assert intent["contract_address"] == spender
    lender_before, borrower_before = balance(chain, token, funding), balance(chain, token, who.wallet)

    approval_tx = approve(chain, intent, funding)
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, intent["id"], "approval_confirmed")
        resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                        "approval_tx_hash": approval_tx})
        assert resp.status == 201, await resp.text()
        charge = (await resp.json())["charge"]

    assert charge["status"] == "succeeded"
    assert charge["amount_usd"] == Decimal("250.5") and charge["token"] == token
    assert charge["recipient_wallet"] == who.wallet and charge["disbursement_tx_hash"].startswith("0x")
    assert balance(chain, token, who.wallet) - borrower_before == 250_500_000
    assert lender_before - balance(chain, token, funding) == 250_500_000
    logs = disbursed_logs(chain)
    assert [lg["transactionHash"] for lg in logs].count(charge["disbursement_tx_hash"]) == 1

    got = await pay_api.client.get(f"/v1/charges/{charge['id']}", headers=await pay_api.headers())
    assert (await got.json())["charge"] == charge
    got = await pay_api.client.get(f"/v1/payment-intents/{intent['id']}", headers=await pay_api.headers())
    assert (await got.json())["payment_intent"]["status"] == "succeeded"
    assert await event_types(pay_api) == [
        ("payment_intent.created", intent["id"]), ("payment_intent.approval_confirmed", intent["id"]),
        ("charge.succeeded", charge["id"])]


async def test_usdt_with_an_allowance_standing_asks_for_approve_zero_first(pay_api, token_chain,
                                                                          database_url):
    """USDT refuses approve(spender, n) while the allowance is not zero: an intent created then says to
    approve 0 first (`reset_calldata`), and following both calls confirms and pays it."""
    chain = token_chain
    who = await borrower(pay_api)
    funding = lender(chain, 8, "USDT")
    spender = await organisation_spender(pay_api, chain)
    # Too large for any allowance below: it never competes with the intent under test.
    untouched = await create_intent(pay_api, who, funding, "900000", token="USDT")
    assert "reset_calldata" not in untouched["approval_calldata"]  # the allowance is zero
    chain.approve("USDT", funding.lower(), spender, 5_000_000)  # a standing allowance
    chain.mine()  # mined whatever mining mode an earlier test of the session left
    intent = await create_intent(pay_api, who, funding, "2", token="USDT")
    reset = intent["approval_calldata"]["reset_calldata"]
    assert reset == {"function": "approve", "spender": spender, "amount": "0",
                     "token_contract": chain.contracts.usdt}
    got = await pay_api.client.get(f"/v1/payment-intents/{intent['id']}", headers=await pay_api.headers())
    assert (await got.json())["payment_intent"]["approval_calldata"] == intent["approval_calldata"]
    amount = int(intent["approval_calldata"]["amount"])
    refused = chain.approve("USDT", funding.lower(), spender, amount)  # straight to the new amount
    chain.mine()
    assert chain.node.call("eth_getTransactionReceipt", [refused])["status"] == "0x0"

    chain.approve("USDT", funding.lower(), reset["spender"], int(reset["amount"]))
    approval_tx = chain.approve("USDT", funding.lower(), spender, amount)
    chain.mine(3)
    before = balance(chain, "USDT", who.wallet)
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, intent["id"], "approval_confirmed")
        resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                        "approval_tx_hash": approval_tx})
        assert resp.status == 201, await resp.text()
    assert (await resp.json())["charge"]["status"] == "succeeded"
    assert balance(chain, "USDT", who.wallet) - before == 2_000_000
