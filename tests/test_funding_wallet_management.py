"""An organisation's funding wallets after registration: its default one (set through the API or the
`vip funding-wallets` CLI) used by intents that name none, and removal, refused while an open intent of
the organisation names the wallet. Real Anvil, PostgreSQL and signatures."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from tests.support.api import ApiHarness
from tests.support.payments import (
    approve,
    borrower,
    create_intent,
    daemon,
    intent_body,
    lender,
    post_json,
    register_funding_wallet,
    wait_intent_status,
)
from vip.store.tables import funding_wallets, payment_intents


def vip(*args: str, database_url: str, expect: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("VIP_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "vip.cli", "funding-wallets", *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == expect, (done.stdout, done.stderr)
    return done


async def listed(api: ApiHarness, org: str = "acme") -> dict[str, bool]:
    resp = await api.client.get("/v1/funding-wallets", headers=await api.headers(org))
    assert resp.status == 200
    return {w["address"]: w["default"] for w in (await resp.json())["funding_wallets"]}


async def put_default(api: ApiHarness, address: str, org: str = "acme"):
    return await api.client.put(f"/v1/funding-wallets/{address}/default", headers=await api.headers(org))


async def delete_wallet(api: ApiHarness, address: str, org: str = "acme"):
    return await api.client.delete(f"/v1/funding-wallets/{address}", headers=await api.headers(org))


@pytest.mark.e2e
async def test_the_default_funding_wallet_pays_intents_that_name_none(pay_api, session_chain, database_url):
    chain = session_chain
    who = await borrower(pay_api)
    spec_body = intent_body(who, "x")
    del spec_body["funding_wallet"]  # the spec's body
    resp = await post_json(pay_api, "/v1/payment-intents", spec_body)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_MISSING_FUNDING_WALLET"

    first, second = lender(chain, 3), lender(chain, 4)
    for wallet in (first, second):
        assert (await register_funding_wallet(pay_api, wallet)).status == 201
    # The first one registered became the default: the spec's body works right after onboarding.
    assert await listed(pay_api) == {first: True, second: False}
    resp = await post_json(pay_api, "/v1/payment-intents", spec_body)
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["payment_intent"]["funding_wallet"] == first

    resp = await put_default(pay_api, second.lower())  # any letter case in the path
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["funding_wallet"] == {**(await resp.json())["funding_wallet"],
                                                     "address": second, "default": True}
    assert await listed(pay_api) == {first: False, second: True}
    resp = await post_json(pay_api, "/v1/payment-intents", spec_body)
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["payment_intent"]["funding_wallet"] == second
    # A wallet named in the body still wins over the default.
    resp = await post_json(pay_api, "/v1/payment-intents", {**spec_body, "funding_wallet": first})
    assert (await resp.json())["payment_intent"]["funding_wallet"] == first

    # Only a wallet registered to this organisation can be its default: another's, an unknown one, a
    # malformed address are refused and change nothing.
    other = lender(chain, 5)
    assert (await register_funding_wallet(pay_api, other, org="zeta")).status == 201
    for address, status in ((other, 404), ("0x" + "12" * 20, 404), ("0x1234", 400)):
        resp = await put_default(pay_api, address)
        assert resp.status == status, await resp.text()
    assert await listed(pay_api) == {first: False, second: True}

    # The CLI sets it too, and lists it marked.
    out = vip("default", first, "--org", "acme", database_url=database_url).stdout
    assert out.strip() == f"default funding wallet of acme: {first}"
    lines = vip("list", "--org", "acme", database_url=database_url).stdout.splitlines()
    assert sorted(line[:44] for line in lines) == [f"  {second}", f"* {first}"], lines
    resp = await post_json(pay_api, "/v1/payment-intents", spec_body)
    assert (await resp.json())["payment_intent"]["funding_wallet"] == first
    err = vip("default", other, "--org", "acme", database_url=database_url, expect=1).stderr
    assert err.startswith("ERR_NOT_FOUND")
    vip("default", "0xnope", "--org", "acme", database_url=database_url, expect=2)


@pytest.mark.e2e
async def test_a_funding_wallet_is_removed_only_once_no_open_intent_names_it(pay_api, session_chain,
                                                                            database_url):
    chain = session_chain
    who = await borrower(pay_api)
    funding = lender(chain, 6)
    intent = await create_intent(pay_api, who, funding, "5")  # registers it first: the default
    assert await listed(pay_api) == {funding: True}

    async def refused(expected_ids: list[str]) -> None:
        resp = await delete_wallet(pay_api, funding)
        assert resp.status == 409, await resp.text()
        error = (await resp.json())["error"]
        assert error["code"] == "ERR_FUNDING_WALLET_IN_USE"
        assert error["details"] == {"address": funding, "payment_intent_ids": expected_ids}
        assert await listed(pay_api) == {funding: True}  # nothing changed

    await refused([intent["id"]])  # pending_approval
    err = vip("remove", funding, "--org", "acme", database_url=database_url, expect=1).stderr
    assert err.startswith("ERR_FUNDING_WALLET_IN_USE")
    tx = approve(chain, intent, funding)
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, intent["id"], "approval_confirmed")
    await refused([intent["id"]])  # approval_confirmed
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": tx})
    assert resp.status == 201 and (await resp.json())["charge"]["status"] == "succeeded"

    # Settled: another organisation cannot remove it (the same 404 as for an unknown wallet), its own can.
    assert (await delete_wallet(pay_api, funding, org="zeta")).status == 404
    resp = await delete_wallet(pay_api, funding.lower())
    assert resp.status == 200, await resp.text()
    removed = (await resp.json())["funding_wallet"]
    assert removed["address"] == funding and removed["default"] is False
    assert await listed(pay_api) == {}
    assert (await delete_wallet(pay_api, funding)).status == 404
    # Gone with it: the default (an intent naming none is 422 again) and the right to name it.
    body = intent_body(who, funding)
    resp = await post_json(pay_api, "/v1/payment-intents", body)
    assert (await resp.json())["error"]["code"] == "ERR_FUNDING_WALLET_NOT_REGISTERED"
    del body["funding_wallet"]
    resp = await post_json(pay_api, "/v1/payment-intents", body)
    assert (await resp.json())["error"]["code"] == "ERR_MISSING_FUNDING_WALLET"
    # The address is free: another organisation may register it with a fresh proof.
    assert (await register_funding_wallet(pay_api, funding, org="zeta")).status == 201


async def test_removal_and_a_new_intent_naming_the_wallet_are_ordered(pay_api, session_chain):
    """Concurrent: an intent created with the wallet and the wallet's removal. The wallet's row lock
    (shared by the intent, exclusive for the removal) orders them: either the intent exists and the
    removal is refused, or the wallet is gone and the intent is refused; never both done."""
    chain = session_chain
    outcomes = set()
    for index in (3, 4, 5, 6):
        who = await borrower(pay_api)
        funding = lender(chain, index)
        assert (await register_funding_wallet(pay_api, funding)).status == 201
        created, removed = await asyncio.gather(
            post_json(pay_api, "/v1/payment-intents", intent_body(who, funding)),
            delete_wallet(pay_api, funding))
        outcome = (created.status, removed.status)
        assert outcome in ((201, 409), (422, 200)), (outcome, await created.text(), await removed.text())
        outcomes.add(outcome)
        async with pay_api.engine.connect() as conn:
            naming = await conn.scalar(select(func.count()).select_from(payment_intents).where(
                payment_intents.c.funding_wallet == funding.lower()))
            registered = await conn.scalar(select(func.count()).select_from(funding_wallets).where(
                funding_wallets.c.address == funding.lower()))
        assert (naming, registered) == ((1, 1) if outcome == (201, 409) else (0, 0))
