"""One lender's money moves only on that lender's word: funding wallets are registered to one organisation
with the wallet's signature (a key's, or a contract wallet's ERC-1271 check), intents name only their own
organisation's, an approval confirms only intents of the organisation whose spender it names, and the
contract itself refuses to pull a treasury through another organisation's spender. Real Anvil, real
PostgreSQL, real signatures; the two cross-tenant cases of the security report are replayed, including with
a database that says the wrong thing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from eth_account import Account
from eth_utils import to_checksum_address
from sqlalchemy import select, update

from tests.support.api import ApiHarness
from tests.support.payments import (
    approve,
    balance,
    borrower,
    count,
    create_intent,
    daemon,
    funding_challenge,
    intent_body,
    lender,
    organisation_id,
    organisation_spender,
    personal_sign,
    post_json,
    register_funding_wallet,
    wait_intent_status,
)
from vip.chain.contracts import (
    TransactionReverted,
    contract_at,
    deploy_contract,
    organisation_key,
    send_transaction,
    spender_of,
)
from vip.ids import new_id
from vip.payments import rules, store
from vip.store.tables import funding_wallet_nonces, funding_wallets, payment_intents

A, B = "acme", "beta"
USDC = "USDC"


async def forged_intent(api: ApiHarness, chain, *, org: str, who, funding: str, amount: int,
                        spender: str) -> str:
    """An intent of `org` written straight into the database (as a bug or an intruder with database
    access would), naming `funding` and `spender` whatever they belong to."""
    now = datetime.fromtimestamp(chain.w3.eth.get_block("latest")["timestamp"], UTC)  # the chain's clock
    async with api.engine.begin() as conn:
        intent_id = new_id("pi")
        await store.create_intent(conn, {
            "id": intent_id, "organisation_id": await organisation_id(api, org), "user_id": who.user_id,
            "amount_usd": Decimal(amount).scaleb(-6), "amount": amount, "token": USDC,
            "token_address": chain.tokens[USDC],
            "network": "local", "recipient_wallet": who.wallet.lower(), "funding_wallet": funding.lower(),
            "contract_address": spender.lower(), "metadata": {}, "expires_at": now + timedelta(days=1),
        }, now)
    return intent_id


async def intent_status(api: ApiHarness, intent_id: str) -> str:
    async with api.engine.connect() as conn:
        return await conn.scalar(select(payment_intents.c.status).where(payment_intents.c.id == intent_id))


def operator_disburse(chain, org_id: str, intent_key: bytes, funding: str, to: str, amount: int):
    contract = contract_at(chain.w3, "Disbursement", chain.contracts.disbursement)
    return contract.functions.disburse(bytes.fromhex(organisation_key(org_id)[2:]), intent_key,
                                       to_checksum_address(chain.tokens[USDC]), to_checksum_address(funding),
                                       to_checksum_address(to), amount)


async def assert_operator_cannot_pull(api: ApiHarness, chain, funding: str, to: str, amount: int) -> None:
    """The same pull made directly against the contract with the operator's key, for organisation A: it
    reverts at estimation and, forced on chain, reverts there too."""
    call = operator_disburse(chain, await organisation_id(api, A), b"\x42" * 32, funding, to, amount)
    operator_key = chain.node.private_keys[1]
    with pytest.raises(TransactionReverted, match="TokenReverted"):
        send_transaction(chain.w3, call, operator_key)
    forced = call.build_transaction({"from": to_checksum_address(chain.accounts[1]), "gas": 400_000})
    with pytest.raises(TransactionReverted) as reverted:
        send_transaction(chain.w3, forced, operator_key)
    assert reverted.value.receipt["status"] == 0


async def test_a_cannot_name_register_or_spend_bs_treasury(pay_api, session_chain, database_url):
    """Case 1 of the report: A names B's treasury, which has a standing approval for B."""
    chain = session_chain
    treasury_b = lender(chain, 4)
    b_borrower, a_borrower = await borrower(pay_api, B), await borrower(pay_api, A)
    b_intent = await create_intent(pay_api, b_borrower, treasury_b, "10", org=B)  # registers it to B
    approve(chain, b_intent, treasury_b, amount=10**12)  # B's standing approval, of B's spender
    assert b_intent["approval_calldata"]["spender"] == await organisation_spender(pay_api, chain, B)
    before = balance(chain, USDC, treasury_b)

    # Through the API: refused, nothing written.
    intents_before = await count(pay_api, payment_intents)
    resp = await post_json(pay_api, "/v1/payment-intents", intent_body(a_borrower, treasury_b, "50"), A)
    assert resp.status == 422, await resp.text()
    assert (await resp.json())["error"]["code"] == "ERR_FUNDING_WALLET_NOT_REGISTERED"
    assert await count(pay_api, payment_intents) == intents_before

    # A cannot make B's treasury its own: no key, B's signature replayed, or B's key while it is B's.
    challenge = await funding_challenge(pay_api, treasury_b, A)
    forged = personal_sign(Account.create().key.hex(), challenge["message"])
    resp = await post_json(pay_api, "/v1/funding-wallets", {
        "address": treasury_b, "nonce": challenge["nonce"], "signature": forged}, A)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_INVALID_SIGNATURE"
    b_challenge = await funding_challenge(pay_api, treasury_b, B)
    b_signature = personal_sign(chain.node.private_keys[4], b_challenge["message"])
    resp = await post_json(pay_api, "/v1/funding-wallets", {
        "address": treasury_b, "nonce": b_challenge["nonce"], "signature": b_signature}, A)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_INVALID_NONCE"
    resp = await register_funding_wallet(pay_api, treasury_b, chain.node.private_keys[4], org=A)
    assert resp.status == 409 and (await resp.json())["error"]["code"] == "ERR_FUNDING_WALLET_TAKEN"
    async with pay_api.engine.connect() as conn:
        owners = (await conn.execute(select(funding_wallets.c.organisation_id).where(
            funding_wallets.c.address == treasury_b.lower()))).scalars().all()
    assert owners == [await organisation_id(pay_api, B)]
    listed = await pay_api.client.get("/v1/funding-wallets", headers=await pay_api.headers(A))
    assert (await listed.json()) == {"funding_wallets": []}
    listed = await pay_api.client.get("/v1/funding-wallets", headers=await pay_api.headers(B))
    assert [w["address"] for w in (await listed.json())["funding_wallets"]] == [treasury_b]

    # Whatever the database says: A's intent naming B's treasury, once with A's spender and once with
    # B's, written straight into the table.
    spender_a = spender_of(chain.contracts.disbursement, await organisation_id(pay_api, A))
    spender_b = b_intent["approval_calldata"]["spender"]
    with_a_spender = await forged_intent(pay_api, chain, org=A, who=a_borrower, funding=treasury_b,
                                         amount=50_000_000, spender=spender_a)
    with_b_spender = await forged_intent(pay_api, chain, org=A, who=a_borrower, funding=treasury_b,
                                         amount=50_000_000, spender=spender_b)
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, b_intent["id"], "approval_confirmed")
        chain.mine(3)
        await wait_intent_status(pay_api, b_intent["id"], "approval_confirmed")
        assert await intent_status(pay_api, with_a_spender) == "pending_approval"
        assert await intent_status(pay_api, with_b_spender) == "pending_approval"

    # Even confirmed by hand, A's charge moves nothing: the contract pulls through A's spender.
    async with pay_api.engine.begin() as conn:
        approval_tx = await conn.scalar(select(payment_intents.c.approval_tx_hash).where(
            payment_intents.c.id == b_intent["id"]))
        await conn.execute(update(payment_intents).where(payment_intents.c.id == with_b_spender).values(
            status=rules.APPROVAL_CONFIRMED, approval_tx_hash=approval_tx))
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": with_b_spender,
                                                    "approval_tx_hash": approval_tx}, A)
    assert resp.status == 201, await resp.text()
    charge = (await resp.json())["charge"]
    # The token refuses: A's spender has no allowance of B's treasury, and the failure says so.
    assert charge["status"] == "failed" and charge["failure_code"] == "ERR_INSUFFICIENT_ALLOWANCE"
    await assert_operator_cannot_pull(pay_api, chain, treasury_b, a_borrower.wallet, 50_000_000)
    assert balance(chain, USDC, treasury_b) == before  # B's treasury keeps every unit
    assert balance(chain, USDC, a_borrower.wallet) == 0


async def test_bs_exact_approval_never_confirms_as_older_intent(pay_api, session_chain, database_url):
    """Case 2 of the report: B approves exactly 25 for its own loan; A's older intent of 25 naming B's
    treasury (written into the database, spender B's) must stay unconfirmed, and B's is confirmed."""
    chain = session_chain
    treasury_b = lender(chain, 3)
    b_borrower, a_borrower = await borrower(pay_api, B), await borrower(pay_api, A)
    assert (await register_funding_wallet(pay_api, treasury_b, org=B)).status == 201
    spender_b = await organisation_spender(pay_api, chain, B)
    older = await forged_intent(pay_api, chain, org=A, who=a_borrower, funding=treasury_b,
                                amount=25_000_000, spender=spender_b)
    b_intent = await create_intent(pay_api, b_borrower, treasury_b, "25", org=B)
    before = balance(chain, USDC, treasury_b)
    approval_tx = approve(chain, b_intent, treasury_b)  # exactly 25 USDC, for B's spender
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, b_intent["id"], "approval_confirmed")
        assert await intent_status(pay_api, older) == "pending_approval"
        resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": b_intent["id"],
                                                        "approval_tx_hash": approval_tx}, B)
        assert resp.status == 201 and (await resp.json())["charge"]["status"] == "succeeded"
    assert await intent_status(pay_api, older) == "pending_approval"
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": older,
                                                    "approval_tx_hash": approval_tx}, A)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_APPROVAL_NOT_CONFIRMED"
    chain.approve(USDC, treasury_b.lower(), spender_b, 10**12)  # even a generous standing approval of B's
    await assert_operator_cannot_pull(pay_api, chain, treasury_b, a_borrower.wallet, 25_000_000)
    assert before - balance(chain, USDC, treasury_b) == 25_000_000  # to B's borrower, once
    assert balance(chain, USDC, b_borrower.wallet) == 25_000_000
    assert balance(chain, USDC, a_borrower.wallet) == 0


async def test_contract_wallet_registers_with_erc1271(pay_api, session_chain):
    chain = session_chain
    owner = Account.create()
    wallet = deploy_contract(chain.w3, "OwnedWallet", owner.address, private_key=chain.node.private_keys[0])
    challenge = await funding_challenge(pay_api, wallet, A)
    assert f"Organisation: {await organisation_id(pay_api, A)}" in challenge["message"]
    assert f"Wallet: {wallet}" in challenge["message"] and challenge["nonce"] in challenge["message"]
    stranger = personal_sign(Account.create().key.hex(), challenge["message"])
    resp = await post_json(pay_api, "/v1/funding-wallets", {"address": wallet, "nonce": challenge["nonce"],
                                                            "signature": stranger}, A)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_INVALID_SIGNATURE"
    assert await count(pay_api, funding_wallets) == 0
    signature = personal_sign(owner.key.hex(), challenge["message"])
    resp = await post_json(pay_api, "/v1/funding-wallets", {"address": wallet, "nonce": challenge["nonce"],
                                                            "signature": signature}, A)
    assert resp.status == 201, await resp.text()
    body = (await resp.json())["funding_wallet"]
    assert body["address"] == wallet and body["kind"] == "contract" and body["network"] == "local"
    # The nonce is single use; registering again with a fresh one answers 200 with the same wallet.
    resp = await post_json(pay_api, "/v1/funding-wallets", {"address": wallet, "nonce": challenge["nonce"],
                                                            "signature": signature}, A)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_INVALID_NONCE"
    again = await funding_challenge(pay_api, wallet, A)
    resp = await post_json(pay_api, "/v1/funding-wallets", {
        "address": wallet, "nonce": again["nonce"], "signature": personal_sign(owner.key.hex(),
                                                                               again["message"])}, A)
    assert resp.status == 200 and (await resp.json())["funding_wallet"] == body
    # And an intent may now name it.
    who = await borrower(pay_api, A)
    resp = await post_json(pay_api, "/v1/payment-intents", intent_body(who, wallet, "5"), A)
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["payment_intent"]["funding_wallet"] == wallet


async def test_registration_refusals_change_nothing(pay_api, session_chain):
    chain = session_chain
    wallet, key = to_checksum_address(chain.accounts[2]), chain.node.private_keys[2]
    for body, field in (({"address": wallet, "network": "nowhere"}, "network"),
                        ({"address": "0x" + wallet[2:].swapcase(), "network": "local"}, "address"),
                        ({"network": "local"}, "address")):
        resp = await post_json(pay_api, "/v1/funding-wallets/nonce", body, A)
        assert resp.status == 400, await resp.text()
        assert any(k.startswith(field) for k in (await resp.json())["error"]["details"])
    resp = await pay_api.client.post("/v1/funding-wallets/nonce",
                                     json={"address": wallet, "network": "local"},
                                     headers=await pay_api.headers(A, scopes=["read", "write"]))
    assert resp.status == 403
    # A nonce issued for another address, or expired, proves nothing even with the right key's signature.
    other = await funding_challenge(pay_api, to_checksum_address(chain.accounts[3]), A)
    resp = await post_json(pay_api, "/v1/funding-wallets", {
        "address": wallet, "nonce": other["nonce"], "signature": personal_sign(key, other["message"])}, A)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_INVALID_NONCE"
    challenge = await funding_challenge(pay_api, wallet, A)
    async with pay_api.engine.begin() as conn:  # ten minutes pass (the session chain's clock is shared)
        await conn.execute(update(funding_wallet_nonces).where(
            funding_wallet_nonces.c.nonce == challenge["nonce"]).values(
            expires_at=funding_wallet_nonces.c.issued_at))
    signature = personal_sign(key, challenge["message"])
    resp = await post_json(pay_api, "/v1/funding-wallets", {
        "address": wallet, "nonce": challenge["nonce"], "signature": signature}, A)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_INVALID_NONCE"
    assert await count(pay_api, funding_wallets) == 0
