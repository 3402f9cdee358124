"""A user's connections: the list (shape, order, tenancy) and revocation (status, event, watch set)."""

from __future__ import annotations

from datetime import timedelta

from eth_account import Account

from tests.support.wallets import connect
from tests.test_api_access import assert_error
from vip.ids import new_id
from vip.store.tables import connections, income_records, watched_addresses


async def add_platform_connection(api, user_id: str, org: str = "acme") -> str:
    """A platform connection as the platform routes store it, with one income record."""
    async with api.engine.begin() as conn:
        org_id, created_at = (await conn.exec_driver_sql(
            "select organisation_id, created_at from users where id = %s", (user_id,))).one()
        connection_id = new_id("con")
        await conn.execute(connections.insert().values(
            id=connection_id, organisation_id=org_id, user_id=user_id, type="platform", provider="neobank_a",
            identifier="holder-77", source_type="neobank_account", account_id="acc-1", status="active",
            created_at=created_at - timedelta(days=1), last_synced_at=created_at))
        await conn.execute(income_records.insert().values(
            connection_id=connection_id, record_date=created_at.date(), amount="1500.25", currency="USDC",
            direction="inbound", from_reference="0x" + "11" * 20, description="salary"))
    return connection_id


async def watched(api) -> set[tuple[str, str]]:
    async with api.engine.connect() as conn:
        rows = await conn.execute(watched_addresses.select())
        return {(r.network, r.address) for r in rows}


async def events(api, event_type: str) -> list[dict]:
    async with api.engine.connect() as conn:
        rows = await conn.exec_driver_sql("select data from outbox_events where type = %s order by seq",
                                          (event_type,))
        return [r.data["object"] for r in rows]


async def revoke(api, connection_id: str, org: str = "acme"):
    return await api.client.delete(f"/v1/connections/{connection_id}", headers=await api.headers(org))


async def test_list_shows_the_users_connections_newest_first(api, anvil):
    user = await api.user()
    platform_id = await add_platform_connection(api, user)
    first = await connect(api, user, Account.create())
    # The service clock is the chain's: a later block, so the second connection is strictly newer.
    anvil.call("evm_increaseTime", [1])
    anvil.call("anvil_mine", ["0x1"])
    second = await connect(api, user, Account.create())
    await connect(api, await api.user(), Account.create())  # another user's: not listed
    assert (await revoke(api, first["id"])).status == 200

    resp = await api.client.get("/v1/connections", params={"user_id": user}, headers=await api.headers())
    assert resp.status == 200
    items = (await resp.json())["connections"]
    assert [i["id"] for i in items] == [second["id"], first["id"], platform_id]
    assert items[0] == {k: second[k] for k in ("id", "type", "provider", "identifier", "status",
                                                "created_at", "network")}
    assert items[1]["status"] == "revoked"
    assert set(items[2]) == {"id", "type", "provider", "identifier", "status", "created_at", "source_type"}
    assert (items[2]["type"], items[2]["identifier"], items[2]["source_type"]) == (
        "platform", "holder-77", "neobank_account")


async def test_list_requires_a_user_of_the_organisation(api):
    user = await api.user()
    resp = await api.client.get("/v1/connections", headers=await api.headers())
    assert resp.status == 400
    assert "user_id" in (await resp.json())["error"]["details"]
    for org, user_id in [("globex", user), ("acme", "usr_missing")]:
        resp = await api.client.get("/v1/connections", params={"user_id": user_id},
                                    headers=await api.headers(org))
        assert resp.status == 404
        assert_error(await resp.json(), "ERR_NOT_FOUND")
    resp = await api.client.get("/v1/connections", params={"user_id": user},
                                headers=await api.headers("acme", ["read"]))
    assert resp.status == 200 and (await resp.json()) == {"connections": []}


async def test_revoking_a_wallet_fires_one_event_and_unwatches_it(api):
    user = await api.user()
    account = Account.create()
    connection = await connect(api, user, account)
    resp = await revoke(api, connection["id"])
    assert resp.status == 200
    revoked = (await resp.json())["connection"]
    assert revoked == {**connection, "status": "revoked"}
    assert await events(api, "connection.revoked") == [revoked]
    assert await watched(api) == set()
    async with api.engine.connect() as conn:
        row = (await conn.execute(connections.select())).one()
    assert row.revoked_at is not None

    again = await revoke(api, connection["id"])
    assert again.status == 200 and (await again.json())["connection"] == revoked
    assert len(await events(api, "connection.revoked")) == 1
    # Connecting it again is a new connection, watched again.
    fresh = await connect(api, user, account)
    assert fresh["id"] != connection["id"]
    assert await watched(api) == {("local", account.address.lower())}


async def test_an_address_stays_watched_while_any_active_wallet_holds_it(api):
    account = Account.create()
    mine = await connect(api, await api.user("acme"), account)
    theirs = await connect(api, await api.user("globex"), account, org="globex")
    address = ("local", account.address.lower())
    assert (await revoke(api, mine["id"])).status == 200
    assert await watched(api) == {address}
    assert (await revoke(api, theirs["id"], org="globex")).status == 200
    assert await watched(api) == set()


async def test_an_address_watched_for_another_reason_stays_watched(api):
    account = Account.create()
    async with api.engine.begin() as conn:
        await conn.execute(watched_addresses.insert().values(
            network="local", address=account.address.lower(), reason="counterparty"))
    connection = await connect(api, await api.user(), account)
    assert (await revoke(api, connection["id"])).status == 200
    assert await watched(api) == {("local", account.address.lower())}


async def test_revoking_a_platform_connection_keeps_its_records(api):
    user = await api.user()
    platform_id = await add_platform_connection(api, user)
    resp = await revoke(api, platform_id)
    assert resp.status == 200
    body = (await resp.json())["connection"]
    assert (body["type"], body["status"], body["source_type"]) == ("platform", "revoked", "neobank_account")
    assert await events(api, "connection.revoked") == [body]
    async with api.engine.connect() as conn:
        assert (await conn.exec_driver_sql("select count(*) from income_records")).scalar() == 1


async def test_revoke_is_scoped_to_the_organisation_and_needs_write(api):
    connection = await connect(api, await api.user(), Account.create())
    for org, connection_id in [("globex", connection["id"]), ("acme", "con_missing")]:
        resp = await revoke(api, connection_id, org=org)
        assert resp.status == 404
        assert_error(await resp.json(), "ERR_NOT_FOUND")
    resp = await api.client.delete(f"/v1/connections/{connection['id']}",
                                   headers=await api.headers("acme", ["read"]))
    assert resp.status == 403
    assert await events(api, "connection.revoked") == []
