"""GET /v1/wallets on the real app and PostgreSQL: validation, tenancy, the fields (balances from
`address_balances`, first-seen block from the indexed transfers), revoked wallets, the network filter, and
balances kept by the real indexer on Anvil."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal

from eth_utils import to_checksum_address
from sqlalchemy import insert

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import running_indexer, wait_synced
from tests.test_api_transactions import Caller, add_transfers, add_wallet, addr, mined, revoke, transfer
from tests.test_indexer_balances import balance_of, wait_balances
from vip.api.app import create_app
from vip.indexer import store
from vip.store.tables import address_balances

UINT256_MAX = 2**256 - 1


async def wallets(caller: Caller, **params) -> tuple[int, dict]:
    return await caller.get("/v1/wallets", params)


async def set_balance(engine, address: str, token: str, raw: int, network: str = "local",
                      block: int = 100) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(address_balances).values(
            network=network, address=address, token=token, balance=raw, block_number=block,
            block_hash="0x" + "ab" * 32))


async def test_validation_and_tenancy(api):
    user_id = await api.user("acme")
    foreign_user = await api.user("globex")
    caller = Caller(api.client, api.engine)
    for params, field in [({}, "user_id"), ({"user_id": ""}, "user_id"),
                          ({"user_id": user_id, "network": "solana"}, "network"),
                          ({"user_id": user_id, "network": "ETHEREUM"}, "network"),
                          ({"user_id": user_id, "surprise": "1"}, "surprise")]:
        status, body = await wallets(caller, **params)
        assert status == 400, params
        assert body["error"]["code"] == "ERR_VALIDATION" and field in body["error"]["details"], body
    # The spec's four names and every configured network are accepted (with or without wallets there).
    for network in ("ethereum", "polygon", "base", "arbitrum", "local"):
        status, body = await wallets(caller, user_id=user_id, network=network)
        assert (status, body) == (200, {"wallets": []}), network
    for other in ("usr_missing", foreign_user):
        status, body = await wallets(caller, user_id=other)
        assert status == 404 and body["error"]["code"] == "ERR_NOT_FOUND"
    status, _ = await wallets(Caller(api.client, api.engine, "globex"), user_id=user_id)
    assert status == 404
    assert (await api.client.get("/v1/wallets", params={"user_id": user_id})).status == 401
    resp = await api.client.get("/v1/wallets", params={"user_id": user_id},
                                headers=await api.headers("acme", ["write"]))
    assert resp.status == 403


async def test_fields_balances_first_seen_and_revocation(api):
    user_id = await api.user("acme")
    created = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    a = await add_wallet(api.engine, "acme", user_id, addr(1), created_at=created)
    b = await add_wallet(api.engine, "acme", user_id, addr(2), network="ethereum",
                         created_at=created + timedelta(days=1))
    c = await add_wallet(api.engine, "acme", user_id, addr(3), created_at=created + timedelta(days=2))
    gone = await add_wallet(api.engine, "acme", user_id, addr(4), created_at=created + timedelta(days=3))
    other_user = await api.user("acme")
    await add_wallet(api.engine, "acme", other_user, addr(5))
    await revoke(api.engine, gone)
    await add_transfers(api.engine, [
        transfer(500, 0, addr(9), a.address, 10),
        transfer(450, 3, a.address, addr(9), 5, token="USDT"),  # the lowest block touching a
        transfer(470, 0, addr(9), a.address, 5, network="ethereum"),  # a's address, but another network
        transfer(900, 1, addr(9), b.address, 1, network="ethereum"),
    ])
    await set_balance(api.engine, a.address, "USDC", 1)
    await set_balance(api.engine, a.address, "USDT", UINT256_MAX)
    await set_balance(api.engine, b.address, "USDC", 123_450_000, network="ethereum")
    await set_balance(api.engine, c.address, "USDC", 77, network="ethereum")  # c is on local: not its
    caller = Caller(api.client, api.engine)
    resp = await api.client.get("/v1/wallets", params={"user_id": user_id}, headers=await caller.headers())
    assert resp.status == 200
    raw = await resp.text()
    listed = json.loads(raw, parse_float=Decimal)["wallets"]
    assert [w["id"] for w in listed] == [a.id, b.id, c.id]  # oldest first; the revoked one is gone
    assert listed[0] == {
        "id": a.id, "connection_id": a.connection_id, "address": to_checksum_address(a.address),
        "network": "local", "usdc_balance": Decimal("0.000001"),
        "usdt_balance": Decimal(UINT256_MAX).scaleb(-6, Context(prec=100)), "first_seen_block": 450,
        "created_at": "2025-03-01T12:00:00Z",
    }
    assert f'"usdt_balance":{str(UINT256_MAX)[:-6]}.{str(UINT256_MAX)[-6:]}' in raw
    assert (listed[1]["usdc_balance"], listed[1]["usdt_balance"], listed[1]["first_seen_block"]) == (
        Decimal("123.45"), 0, 900)
    assert (listed[2]["usdc_balance"], listed[2]["usdt_balance"]) == (0, 0)
    assert listed[2]["first_seen_block"] is None
    # The network filter.
    status, body = await wallets(caller, user_id=user_id, network="ethereum")
    assert status == 200 and [w["id"] for w in body["wallets"]] == [b.id]
    status, body = await wallets(caller, user_id=user_id, network="local")
    assert [w["id"] for w in body["wallets"]] == [a.id, c.id]
    # Revoking takes a wallet off the list at once.
    await revoke(api.engine, a)
    status, body = await wallets(caller, user_id=user_id)
    assert [w["id"] for w in body["wallets"]] == [b.id, c.id]


async def test_balances_from_the_indexer(chain: ChainDriver, database_url, engine, aiohttp_client):
    """End to end: the daemon indexes and reads balances at its cursor; the API shows them."""
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    settings = indexer_settings(network)
    client = await aiohttp_client(create_app(settings, database_url))
    caller = Caller(client, engine, scopes=["read", "write"])
    resp = await client.post("/v1/users", json={}, headers=await caller.headers())
    user_id = (await resp.json())["user"]["id"]
    alice, bob = chain.accounts[2], chain.accounts[3]
    wallet = await add_wallet(engine, "acme", user_id, alice)
    async with engine.begin() as conn:
        await store.add_watched_address(conn, "local", alice, "wallet", start_block=0)
    chain.fund([alice, bob], 5 * 10**6)
    first = chain.head()[0]
    mined(chain, chain.transfer("USDT", alice, bob, 1_250_000))
    async with running_indexer(settings, database_url):
        await wait_synced(engine, chain, "local")
        await wait_balances(engine, chain, [alice])
        status, body = await wallets(caller, user_id=user_id)
        mined(chain, chain.transfer("USDC", bob, alice, 1))
        await wait_synced(engine, chain, "local")
        await wait_balances(engine, chain, [alice])
        status, after = await wallets(caller, user_id=user_id)
    assert status == 200
    [shown] = body["wallets"]
    assert shown["id"] == wallet.id and shown["first_seen_block"] == first
    assert shown["usdc_balance"] == Decimal(5) and shown["usdt_balance"] == Decimal("3.75")
    assert balance_of(chain, "USDT", alice) == 3_750_000
    [shown] = after["wallets"]
    assert shown["usdc_balance"] == Decimal("5.000001")
