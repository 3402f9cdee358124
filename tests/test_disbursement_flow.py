"""The whole disbursement on Anvil through the HTTP API: intent, approve with the returned calldata,
confirmation by the daemon, charge; balances checked on chain."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from tests.support.api import ApiHarness
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


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, session_chain) -> AsyncIterator[ApiHarness]:
    async with payments_api(aiohttp_client, database_url, engine, session_chain) as harness:
        yield harness


@pytest.mark.parametrize("token", ["USDC", "USDT"])
async def test_intent_approve_confirm_charge_moves_exactly_the_amount(pay_api, session_chain, database_url,
                                                                      token):
    chain = session_chain
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
