"""Wallet connection by Sign-In with Ethereum: nonces, every refusal, contract wallets, idempotent reconnects,
and what a successful sign-in stores (connection, wallet, watched address, one outbox event)."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

from eth_account import Account
from siwe import ISO8601Datetime, SiweMessage

from tests.support.wallets import (
    ALWAYS_VALID_1271,
    NEVER_VALID_1271,
    connect,
    contract_wallet,
    get_nonce,
    service_domain,
    sign,
    sign_in_body,
)
from tests.test_api_access import assert_error
from vip.api.app import create_app
from vip.connections.siwe import STATEMENT

NONCE_URL = "/v1/connect/wallet/nonce"
CONNECT_URL = "/v1/connect/wallet"
TABLES = ("connections", "wallets", "watched_addresses", "outbox_events")


async def counts(api) -> dict[str, int]:
    async with api.engine.connect() as conn:
        return {t: (await conn.exec_driver_sql(f"select count(*) from {t}")).scalar() for t in TABLES}


async def nonce_used_at(api, nonce: str):
    async with api.engine.connect() as conn:
        return (await conn.exec_driver_sql("select used_at from wallet_nonces where nonce = %s",
                                           (nonce,))).scalar_one()


async def post(api, body: dict, org: str = "acme"):
    return await api.client.post(CONNECT_URL, json=body, headers=await api.headers(org))


async def test_nonce_is_issued_to_a_user_of_the_organisation(api):
    user = await api.user()
    nonce, issued = await get_nonce(api, user)
    assert re.fullmatch(r"[A-Za-z0-9]{8,}", nonce)
    async with api.engine.connect() as conn:
        row = (await conn.exec_driver_sql("select * from wallet_nonces where nonce = %s", (nonce,))).one()
    assert row.user_id == user and row.used_at is None
    assert row.issued_at == issued and row.expires_at - row.issued_at == timedelta(minutes=10)

    resp = await api.client.get(NONCE_URL, headers=await api.headers())
    assert resp.status == 400
    assert "X-User-Id" in (await resp.json())["error"]["details"]
    for org, user_id in [("globex", user), ("acme", "usr_missing")]:
        resp = await api.client.get(NONCE_URL, headers={**await api.headers(org), "X-User-Id": user_id})
        assert resp.status == 404
        assert_error(await resp.json(), "ERR_NOT_FOUND")
    resp = await api.client.get(NONCE_URL, headers={**await api.headers("acme", ["read"]), "X-User-Id": user})
    assert resp.status == 403


async def test_sign_in_connects_the_wallet_and_watches_a_year_of_history(api):
    user = await api.user()
    account = Account.create()
    body = await sign_in_body(api, user, account)
    body["provider"] = "metamask"
    resp = await post(api, body)
    assert resp.status == 201, await resp.text()
    connection = (await resp.json())["connection"]
    assert connection["id"].startswith("con_")
    assert {k: connection[k] for k in ("user_id", "type", "provider", "identifier", "network", "status")} == {
        "user_id": user, "type": "wallet", "provider": "metamask", "identifier": account.address,
        "network": "local", "status": "active"}
    assert connection["created_at"] == connection["last_synced_at"]
    now = datetime.fromisoformat(connection["created_at"])

    async with api.engine.connect() as conn:
        wallet = (await conn.exec_driver_sql("select * from wallets")).one()
        watched = (await conn.exec_driver_sql("select * from watched_addresses")).one()
        [event] = (await conn.exec_driver_sql("select * from outbox_events")).all()
    assert wallet.id.startswith("wal_") and wallet.connection_id == connection["id"]
    assert (wallet.address, wallet.network, wallet.user_id) == (account.address.lower(), "local", user)
    assert (watched.address, watched.network, watched.reason) == (account.address.lower(), "local", "wallet")
    assert watched.start_time == now - timedelta(days=365)
    assert event.type == "connection.wallet.created" and event.data == {"object": connection}
    nonce = re.search(r"Nonce: (\w+)", body["message"]).group(1)
    # The nonce is spent at the signer's (wall-clock) time; the connection is dated by the service clock.
    assert abs(await nonce_used_at(api, nonce) - datetime.now(UTC)) < timedelta(minutes=1)


async def test_reconnecting_an_active_wallet_returns_it_and_creates_nothing(api):
    user = await api.user()
    account = Account.create()
    first = await connect(api, user, account)
    before = await counts(api)
    again = await connect(api, user, account, expect=200)
    assert again == first
    assert await counts(api) == before
    # Another user of any organisation connects the same address on its own.
    other = await connect(api, await api.user("globex"), account, org="globex")
    assert other["id"] != first["id"]
    after = await counts(api)
    assert after["connections"] == 2 and after["watched_addresses"] == 1 and after["outbox_events"] == 2


async def test_a_nonce_cannot_be_replayed(api):
    user = await api.user()
    body = await sign_in_body(api, user, Account.create())
    assert (await post(api, body)).status == 201
    resp = await post(api, body)
    assert resp.status == 422
    assert_error(await resp.json(), "ERR_NONCE_INVALID")


async def test_sign_in_times_are_the_signers_wall_clock_not_the_chains(api, anvil):
    """A dApp stamps Issued At with the browser's clock. Moving the development chain's time (here
    ten minutes and a second, past a nonce's lifetime) changes nothing for a sign-in."""
    user = await api.user()
    nonce, _ = await get_nonce(api, user)
    anvil.call("evm_increaseTime", [601])
    anvil.call("anvil_mine", ["0x1"])
    account = Account.create()
    body = await sign_in_body(api, user, account, nonce=nonce, issued_at=datetime.now(UTC))
    resp = await post(api, body)
    assert resp.status == 201, await resp.text()


async def test_an_expired_nonce_is_refused(api):
    user = await api.user()
    account = Account.create()
    body = await sign_in_body(api, user, account)
    nonce = re.search(r"Nonce: (\w+)", body["message"]).group(1)
    async with api.engine.begin() as conn:  # ten minutes and a second later, by the wall clock
        await conn.exec_driver_sql("update wallet_nonces set expires_at = now() - interval '1 second' "
                                   "where nonce = %s", (nonce,))
    before = await counts(api)
    resp = await post(api, body)
    assert resp.status == 422
    assert_error(await resp.json(), "ERR_NONCE_EXPIRED")
    assert await counts(api) == before


async def test_nonce_of_another_user_or_unknown_nonce_is_refused(api):
    alice, bob = await api.user(), await api.user()
    bobs_nonce, issued = await get_nonce(api, bob)
    for nonce in (bobs_nonce, "deadbeef00112233"):
        body = await sign_in_body(api, alice, Account.create(), nonce=nonce, issued_at=issued)
        resp = await post(api, body)
        assert resp.status == 422
        assert_error(await resp.json(), "ERR_NONCE_INVALID")
    assert await nonce_used_at(api, bobs_nonce) is None
    # Another organisation's key cannot spend a nonce of this organisation's user either.
    globex_user = await api.user("globex")
    body = await sign_in_body(api, globex_user, Account.create(), nonce=bobs_nonce, issued_at=issued)
    assert (await post(api, body, org="globex")).status == 422


async def test_each_refusal_has_its_code_and_leaves_the_nonce_unused(api):
    user = await api.user()
    account = Account.create()
    nonce, now = await get_nonce(api, user)
    cases = [
        ({"signer": Account.create()}, "ERR_INVALID_SIGNATURE"),
        ({"domain": "evil.example"}, "ERR_DOMAIN_MISMATCH"),
        ({"chain_id": 1}, "ERR_CHAIN_ID_MISMATCH"),
        ({"issued_at": now - timedelta(minutes=5), "expiration_time": now - timedelta(seconds=1)},
         "ERR_MESSAGE_EXPIRED"),
        ({"issued_at": now + timedelta(hours=1)}, "ERR_MESSAGE_NOT_YET_VALID"),
    ]
    for overrides, code in cases:
        body = await sign_in_body(api, user, account, **{"nonce": nonce, "issued_at": now, **overrides})
        resp = await post(api, body)
        assert resp.status == 422, (code, await resp.text())
        assert_error(await resp.json(), code)
    # The body names one address, the message another.
    body = await sign_in_body(api, user, account, nonce=nonce, issued_at=now)
    body["address"] = Account.create().address
    resp = await post(api, body)
    assert resp.status == 422
    assert_error(await resp.json(), "ERR_ADDRESS_MISMATCH")

    assert await counts(api) == dict.fromkeys(TABLES, 0)
    assert await nonce_used_at(api, nonce) is None
    body = await sign_in_body(api, user, account, nonce=nonce, issued_at=now)
    assert (await post(api, body)).status == 201


async def test_malformed_requests_are_400_naming_the_fields(api):
    user = await api.user()
    good = await sign_in_body(api, user, Account.create())
    cases = [
        ({"address": "0x1234"}, "address"),
        ({"address": good["address"].swapcase().replace("0X", "0x")}, "address"),  # bad checksum
        ({"signature": "not-hex"}, "signature"),
        ({"network": "polygon"}, "network"),
        ({"message": "hello, sign me in"}, "message"),
        ({"message": good["message"].replace("Chain ID: 31337", "Chain ID: x")}, "message"),
        ({"provider": ""}, "provider"),
        ({"extra": 1}, "extra"),
    ]
    for change, field in cases:
        resp = await post(api, {**good, **change})
        assert resp.status == 400, (change, await resp.text())
        payload = await resp.json()
        assert_error(payload, "ERR_VALIDATION")
        assert field in payload["error"]["details"], payload
    resp = await post(api, {k: v for k, v in good.items() if k != "signature"})
    assert resp.status == 400 and "signature" in (await resp.json())["error"]["details"]
    assert await counts(api) == dict.fromkeys(TABLES, 0)
    assert (await post(api, good)).status == 201


async def test_another_organisations_user_is_404(api):
    user = await api.user("acme")
    body = await sign_in_body(api, user, Account.create())
    resp = await post(api, body, org="globex")
    assert resp.status == 404
    assert_error(await resp.json(), "ERR_NOT_FOUND")


async def test_contract_wallets_sign_in_through_erc1271(api, anvil):
    user = await api.user()
    signer = Account.create()  # a contract wallet's signature is whatever the contract accepts
    accepting = contract_wallet(anvil, ALWAYS_VALID_1271)
    body = await sign_in_body(api, user, signer, address=accepting)
    resp = await post(api, body)
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["connection"]["identifier"] == accepting

    refusing = contract_wallet(anvil, NEVER_VALID_1271)
    body = await sign_in_body(api, user, signer, address=refusing)
    resp = await post(api, body)
    assert resp.status == 422
    assert_error(await resp.json(), "ERR_INVALID_SIGNATURE")


async def test_concurrent_sign_ins_create_one_connection(api):
    user = await api.user()
    account = Account.create()
    # Two nonces: both sign-ins are valid; one creates, the other answers with what it created.
    bodies = [await sign_in_body(api, user, account) for _ in range(2)]
    responses = await asyncio.gather(*[post(api, b) for b in bodies])
    assert sorted(r.status for r in responses) == [200, 201]
    assert len({(await r.json())["connection"]["id"] for r in responses}) == 1
    # One nonce sent twice at once: one sign-in, one replay.
    body = await sign_in_body(api, user, Account.create())
    responses = await asyncio.gather(post(api, body), post(api, body))
    assert sorted(r.status for r in responses) == [201, 422]
    assert (await counts(api))["connections"] == 2


async def test_contract_wallet_check_needs_the_rpc_and_eoas_do_not(api, aiohttp_client, database_url):
    # A second network whose RPC is down (nothing listens on port 1).
    local = api.settings.networks["local"]
    dead = local.model_copy(update={"name": "dead", "rpc_url": "http://127.0.0.1:1", "local": False})
    settings = api.settings.model_copy(update={"networks": {"local": local, "dead": dead}})
    client = await aiohttp_client(create_app(settings, database_url))
    headers = await api.headers()
    user = await api.user()
    account = Account.create()
    # A signature that does not recover to the address sends the service to the chain, which is down.
    body = await sign_in_body(api, user, account, signer=Account.create(), network="dead")
    resp = await client.post(CONNECT_URL, json=body, headers=headers)
    assert resp.status == 502
    assert_error(await resp.json(), "ERR_CHAIN_UNAVAILABLE")
    body = await sign_in_body(api, user, account, network="dead")
    resp = await client.post(CONNECT_URL, json=body, headers=headers)
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["connection"]["network"] == "dead"


async def test_a_message_for_another_uri_under_our_domain_is_refused(api):
    user = await api.user()
    account = Account.create()
    nonce, now = await get_nonce(api, user)
    domain = service_domain(api)

    def signed(uri: str) -> dict:
        text = SiweMessage(domain=domain, address=account.address, uri=uri, version="1",
                           chain_id=api.settings.networks["local"].chain_id, nonce=nonce, statement=STATEMENT,
                           issued_at=ISO8601Datetime.from_datetime(now)).prepare_message()
        return {"user_id": user, "address": account.address, "network": "local", "message": text,
                "signature": sign(text, account)}

    for uri in ["https://evil.example/login", f"https://{domain}/", f"http://evil.example/{domain}"]:
        resp = await post(api, signed(uri))
        assert resp.status == 422, (uri, await resp.text())
        payload = await resp.json()
        assert_error(payload, "ERR_URI_MISMATCH")
        assert payload["error"]["details"]["uri"] == uri
    assert await counts(api) == dict.fromkeys(TABLES, 0)
    assert await nonce_used_at(api, nonce) is None
    resp = await post(api, signed(f"http://{domain}/connect/wallet"))  # any path on our origin
    assert resp.status == 201, await resp.text()


async def test_the_statement_is_ours_word_for_word(api):
    """The nonce comes with our statement; a sign-in whose message says anything else (another text, a
    changed letter, none at all) is refused with its own code, and changes nothing, the nonce included."""
    user = await api.user()
    account = Account.create()
    resp = await api.client.get(NONCE_URL, headers={**await api.headers(), "X-User-Id": user})
    assert (await resp.json())["statement"] == STATEMENT == "Connect this wallet to verify my income."
    nonce, now = await get_nonce(api, user)
    domain = service_domain(api)

    def signed(statement: str | None) -> dict:
        text = SiweMessage(domain=domain, address=account.address, uri=f"http://{domain}/", version="1",
                           chain_id=api.settings.networks["local"].chain_id, nonce=nonce, statement=statement,
                           issued_at=ISO8601Datetime.from_datetime(now)).prepare_message()
        return {"user_id": user, "address": account.address, "network": "local", "message": text,
                "signature": sign(text, account)}

    for statement in ("I transfer all my funds to the bearer.", STATEMENT.lower(), STATEMENT + " ", None):
        resp = await post(api, signed(statement))
        assert resp.status in (400, 422), (statement, await resp.text())
        if resp.status == 400:  # the grammar has no room for a trailing space: not even a SIWE message
            assert statement == STATEMENT + " "
            continue
        payload = await resp.json()
        assert_error(payload, "ERR_STATEMENT_MISMATCH")
        assert payload["error"]["details"] == {"statement": statement, "expected_statement": STATEMENT}
    assert await counts(api) == dict.fromkeys(TABLES, 0)
    assert await nonce_used_at(api, nonce) is None
    resp = await post(api, signed(STATEMENT))
    assert resp.status == 201, await resp.text()
