"""POST/GET /v1/payment-intents and /v1/charges: every refusal (with nothing changed), one allowance
never confirming more than it pays, 20 concurrent charges of one intent paying once."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from sqlalchemy import select

from tests.support.payments import (
    approve,
    balance,
    borrower,
    confirmed_intent,
    count,
    create_intent,
    daemon,
    disbursed_logs,
    event_types,
    intent_body,
    lender,
    post_json,
    register_funding_wallet,
    wait_intent_status,
)
from vip.payments.rules import chain_intent_id
from vip.store.tables import charges, organisations, payment_intents


@pytest.mark.parametrize(("change", "status", "code", "field"), [
    ({"amount_usd": Decimal(0)}, 400, "ERR_VALIDATION", "amount_usd"),
    ({"amount_usd": Decimal("-5")}, 400, "ERR_VALIDATION", "amount_usd"),
    ({"amount_usd": Decimal("1.0000001")}, 400, "ERR_VALIDATION", "amount_usd"),
    ({"amount_usd": "10"}, 400, "ERR_VALIDATION", "amount_usd"),
    ({"amount_usd": Decimal("1000000.000001")}, 400, "ERR_VALIDATION", "amount_usd"),
    ({"amount_usd": Decimal("1E+40")}, 400, "ERR_VALIDATION", "amount_usd"),
    ({"token": "DAI"}, 400, "ERR_VALIDATION", "token"),
    ({"network": "ethereum"}, 400, "ERR_VALIDATION", "network"),
    ({"network": "nowhere"}, 400, "ERR_VALIDATION", "network"),
    ({"recipient_wallet": "bad checksum"}, 400, "ERR_VALIDATION", "recipient_wallet"),
    ({"recipient_wallet": "0x" + "ab" * 19}, 400, "ERR_VALIDATION", "recipient_wallet"),
    ({"recipient_wallet": "0x" + "ab" * 20}, 422, "ERR_RECIPIENT_NOT_CONNECTED", "recipient_wallet"),
    ({"recipient_wallet": "0x000000000000000000000000000000000000dEaD"}, 422, "ERR_RECIPIENT_NOT_CONNECTED",
     "recipient_wallet"),
    ({"funding_wallet": None}, 422, "ERR_MISSING_FUNDING_WALLET", "funding_wallet"),
    ({"funding_wallet": "unregistered"}, 422, "ERR_FUNDING_WALLET_NOT_REGISTERED", "funding_wallet"),
    ({"metadata": {"term_months": "12"}}, 400, "ERR_VALIDATION", "metadata"),
    ({"user_id": "usr_nobody"}, 404, "ERR_NOT_FOUND", "user_id"),
])
async def test_bad_intents_are_refused_and_change_nothing(pay_api, session_chain, change, status, code,
                                                          field):
    who = await borrower(pay_api)
    funding = lender(session_chain, 5)
    assert (await register_funding_wallet(pay_api, funding)).status == 201
    body = intent_body(who, funding)
    if change.get("recipient_wallet") == "bad checksum":
        # Mixed case whose letters are all the wrong case: refused; one case alone is accepted.
        change = {"recipient_wallet": "0x" + who.wallet[2:].swapcase()}
    if change.get("funding_wallet") == "unregistered":
        change = {"funding_wallet": session_chain.contracts.sprayer}
    if "funding_wallet" in change and change["funding_wallet"] is None:
        # The registration made it the default; an organisation without one is what this case is about.
        async with pay_api.engine.begin() as conn:
            await conn.execute(organisations.update().values(default_funding_wallet=None))
    body.update(change)
    body = {k: v for k, v in body.items() if v is not None}
    resp = await post_json(pay_api, "/v1/payment-intents", body)
    assert resp.status == status, await resp.text()
    error = (await resp.json())["error"]
    assert error["code"] == code
    assert any(key.startswith(field) for key in error["details"]), error
    assert await count(pay_api, payment_intents) == 0 and await event_types(pay_api) == []


async def test_intent_needs_disburse_scope_and_is_private_to_its_organisation(pay_api, session_chain):
    who = await borrower(pay_api)
    funding = lender(session_chain, 5)
    body = intent_body(who, funding)
    resp = await pay_api.client.post("/v1/payment-intents", json={**body, "amount_usd": 5},
                                     headers=await pay_api.headers(scopes=["read", "write"]))
    assert resp.status == 403
    intent = await create_intent(pay_api, who, funding)
    other = await pay_api.client.get(f"/v1/payment-intents/{intent['id']}",
                                     headers=await pay_api.headers("zeta"))
    assert other.status == 404
    mine = await pay_api.client.get(f"/v1/payment-intents/{intent['id']}", headers=await pay_api.headers())
    assert (await mine.json())["payment_intent"] == intent
    assert intent["funding_wallet"] == funding
    assert intent["approval_tx_hash"] is None and intent["metadata"] == {"loan_id": "L-1", "term_months": 12}


async def test_organisation_default_funding_wallet(pay_api, session_chain):
    who = await borrower(pay_api)
    await pay_api.key()
    async with pay_api.engine.begin() as conn:
        await conn.execute(organisations.update().where(organisations.c.name == "acme").values(
            default_funding_wallet=session_chain.accounts[8]))
    body = intent_body(who, "x")
    del body["funding_wallet"]
    # The default is no exception: it must be registered to the organisation like any funding wallet.
    resp = await post_json(pay_api, "/v1/payment-intents", body)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_FUNDING_WALLET_NOT_REGISTERED"
    assert (await register_funding_wallet(pay_api, session_chain.accounts[8],
                                          session_chain.node.private_keys[8])).status == 201
    resp = await post_json(pay_api, "/v1/payment-intents", body)
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["payment_intent"]["funding_wallet"].lower() == session_chain.accounts[8]


async def test_charge_refusals(pay_api, session_chain, database_url):
    chain = session_chain
    who = await borrower(pay_api)
    waiting = await create_intent(pay_api, who, lender(chain, 7))
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": waiting["id"],
                                                    "approval_tx_hash": "0x" + "ab" * 32})
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_APPROVAL_NOT_CONFIRMED"
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": "pi_missing",
                                                    "approval_tx_hash": "0x" + "ab" * 32})
    assert resp.status == 404

    _, _, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url)
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": "0x" + "cd" * 32})
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_APPROVAL_NOT_CONFIRMED"
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval_tx}, org="zeta")
    assert resp.status == 404
    assert await count(pay_api, charges) == 0
    first = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                     "approval_tx_hash": approval_tx})
    assert first.status == 201
    again = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                     "approval_tx_hash": approval_tx})
    assert again.status == 409 and (await again.json())["error"]["code"] == "ERR_ALREADY_CHARGED"
    assert await count(pay_api, charges) == 1


async def test_twenty_concurrent_charges_of_one_intent_pay_once(pay_api, session_chain, database_url):
    chain = session_chain
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "77.000001")
    lender_before, borrower_before = balance(chain, "USDC", funding), balance(chain, "USDC", who.wallet)
    body = {"payment_intent_id": intent["id"], "approval_tx_hash": approval_tx}
    responses = await asyncio.gather(*(post_json(pay_api, "/v1/charges", body) for _ in range(20)))
    statuses = sorted(r.status for r in responses)
    assert statuses == [201] + [409] * 19
    assert await count(pay_api, charges) == 1
    assert len(disbursed_logs(chain, chain_intent_id(intent["id"]))) == 1
    assert balance(chain, "USDC", who.wallet) - borrower_before == 77_000_001
    assert lender_before - balance(chain, "USDC", funding) == 77_000_001
    assert [t for t, _ in await event_types(pay_api)].count("charge.succeeded") == 1


async def test_allowance_revoked_after_confirmation_fails_the_charge(pay_api, session_chain, database_url):
    chain = session_chain
    who, funding, intent, approval_tx = await confirmed_intent(pay_api, chain, database_url, "40")
    # The lender changes its mind.
    chain.approve("USDC", funding.lower(), intent["approval_calldata"]["spender"], 0)
    before = balance(chain, "USDC", who.wallet)
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval_tx})
    assert resp.status == 201, await resp.text()
    charge = (await resp.json())["charge"]
    # The token's own reason, kept by the contract, names the cause: the allowance, not a vague refusal.
    assert charge["status"] == "failed" and charge["failure_code"] == "ERR_INSUFFICIENT_ALLOWANCE"
    assert "allowance to the spender" in charge["failure_message"]
    assert "InsufficientAllowance()" in charge["failure_message"]
    assert "nothing was sent" in charge["failure_message"]
    assert charge["disbursement_tx_hash"] is None
    assert balance(chain, "USDC", who.wallet) == before
    got = await pay_api.client.get(f"/v1/payment-intents/{intent['id']}", headers=await pay_api.headers())
    assert (await got.json())["payment_intent"]["status"] == "failed"
    assert (await event_types(pay_api))[-1] == ("charge.failed", charge["id"])


async def test_one_allowance_never_confirms_more_than_it_pays(pay_api, session_chain, database_url):
    chain = session_chain
    who = await borrower(pay_api)
    funding = lender(chain, 9)
    older = await create_intent(pay_api, who, funding, "100")
    younger = await create_intent(pay_api, who, funding, "100")
    small = await create_intent(pay_api, who, funding, "30")
    approve(chain, older, funding, amount=150_000_000)  # covers one 100 and the 30, not both 100s
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, small["id"], "approval_confirmed")
        await wait_intent_status(pay_api, older["id"], "approval_confirmed")
        async with pay_api.engine.connect() as conn:
            status = await conn.scalar(select(payment_intents.c.status)
                                       .where(payment_intents.c.id == younger["id"]))
        assert status == "pending_approval"
