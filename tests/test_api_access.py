"""Access to the API: keys (401), scopes (403), tenancy (404), request ids and the error body, rate limits
shared through PostgreSQL, Idempotency-Key replays."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from vip.accounts import keys
from vip.api.app import create_app
from vip.api.context import KEY_CACHE


def assert_error(body: dict, code: str) -> None:
    error = body["error"]
    assert error["code"] == code
    assert error["message"] and isinstance(error["details"], dict)
    assert error["request_id"].startswith("req_") or len(error["request_id"]) >= 8


async def test_missing_malformed_unknown_and_revoked_keys_are_401(api):
    cases = [{}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer vip_sk_" + "x" * 43}]
    secret = await api.key("acme", ["read"])
    async with api.engine.begin() as conn:
        org = await keys.ensure_organisation(conn, "acme")
        [info] = [k for k in await keys.list_keys(conn, org) if secret.startswith(k.prefix)]
        await keys.revoke_key(conn, org, info.id)
    cases.append({"Authorization": f"Bearer {secret}"})
    for headers in cases:
        resp = await api.client.get("/v1/users/usr_x", headers=headers)
        assert resp.status == 401, headers
        assert_error(await resp.json(), "ERR_UNAUTHORIZED")
        assert resp.headers["X-Request-Id"] == (await resp.json())["error"]["request_id"]


async def test_scopes_are_enforced(api):
    read_only = await api.headers("acme", ["read"])
    resp = await api.client.post("/v1/users", json={}, headers=read_only)
    assert resp.status == 403
    assert_error(await resp.json(), "ERR_FORBIDDEN")
    assert (await resp.json())["error"]["details"] == {"required_scope": "write"}
    resp = await api.client.get("/v1/api-keys", headers=await api.headers("acme", ["read", "write"]))
    assert resp.status == 403


async def test_another_organisation_sees_404(api):
    user_id = await api.user("acme", external_id="emp-1")
    resp = await api.client.get(f"/v1/users/{user_id}", headers=await api.headers("acme"))
    assert resp.status == 200
    assert (await resp.json())["user"]["external_id"] == "emp-1"
    resp = await api.client.get(f"/v1/users/{user_id}", headers=await api.headers("globex"))
    assert resp.status == 404
    body = await resp.json()
    assert_error(body, "ERR_NOT_FOUND")
    assert "emp-1" not in await resp.text()


async def test_validation_errors_name_the_fields_and_change_nothing(api):
    headers = await api.headers()
    for body, field in [({"external_id": ""}, "external_id"), ({"metadata": "x"}, "metadata"),
                        ({"surprise": 1}, "surprise")]:
        resp = await api.client.post("/v1/users", json=body, headers=headers)
        assert resp.status == 400, body
        payload = await resp.json()
        assert_error(payload, "ERR_VALIDATION")
        assert field in payload["error"]["details"]
    resp = await api.client.post("/v1/users", data=b"{not json", headers=headers)
    assert resp.status == 400
    async with api.engine.connect() as conn:
        assert (await conn.exec_driver_sql("select count(*) from users")).scalar() == 0


async def test_unknown_route_and_method_use_the_error_body(api):
    resp = await api.client.get("/v1/nothing-here", headers=await api.headers())
    assert resp.status == 404
    assert_error(await resp.json(), "ERR_NOT_FOUND")
    resp = await api.client.put("/v1/users", headers=await api.headers())
    assert resp.status == 405


async def test_request_id_is_echoed_when_sane(api):
    resp = await api.client.get("/v1/health", headers={"X-Request-Id": "lender-abc-123"})
    assert resp.headers["X-Request-Id"] == "lender-abc-123"
    resp = await api.client.get("/v1/health", headers={"X-Request-Id": "bad id with spaces"})
    assert resp.headers["X-Request-Id"].startswith("req_")


async def test_rate_limit_headers_and_429_shared_across_processes(api, aiohttp_client, database_url):
    # A second application instance on the same database stands for a second API process.
    other = await aiohttp_client(create_app(api.settings, database_url))
    headers = await api.headers()
    limit = api.settings.api.rate_limits.default_per_key
    await api.in_one_rate_window()
    statuses = []
    for i in range(limit + 1):
        client = api.client if i % 2 else other
        resp = await client.get("/v1/users/usr_missing", headers=headers)
        statuses.append(resp.status)
        assert resp.headers["X-RateLimit-Limit"] == str(limit)
        assert int(resp.headers["X-RateLimit-Remaining"]) == max(0, limit - i - 1)
        assert 1 <= int(resp.headers["X-RateLimit-Reset"]) <= 60
    assert statuses[:-1] == [404] * limit
    assert statuses[-1] == 429
    assert 1 <= int(resp.headers["Retry-After"]) <= 60
    assert_error(await resp.json(), "ERR_RATE_LIMITED")
    # Another key has its own budget.
    resp = await api.client.get("/v1/users/usr_missing", headers=await api.headers("acme", ["read"]))
    assert resp.status == 404


async def test_idempotency_key_replays_and_refuses_reuse(api):
    headers = {**await api.headers(), "Idempotency-Key": "create-emp-7"}
    first = await api.client.post("/v1/users", json={"external_id": "emp-7"}, headers=headers)
    again = await api.client.post("/v1/users", json={"external_id": "emp-7"}, headers=headers)
    assert first.status == again.status == 201
    assert await first.json() == await again.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    other = await api.client.post("/v1/users", json={"external_id": "emp-8"}, headers=headers)
    assert other.status == 409
    assert_error(await other.json(), "ERR_IDEMPOTENCY_KEY_REUSED")
    async with api.engine.connect() as conn:
        assert (await conn.exec_driver_sql("select count(*) from users")).scalar() == 1


async def test_concurrent_requests_with_one_idempotency_key_create_once(api):
    headers = {**await api.headers(), "Idempotency-Key": "burst"}
    responses = await asyncio.gather(*[
        api.client.post("/v1/users", json={"metadata": {"n": 1}}, headers=headers) for _ in range(10)])
    statuses = sorted(r.status for r in responses)
    assert statuses.count(201) >= 1 and set(statuses) <= {201, 409}
    async with api.engine.connect() as conn:
        assert (await conn.exec_driver_sql("select count(*) from users")).scalar() == 1


async def test_admin_key_management(api):
    admin = await api.headers("acme", ["admin"])
    resp = await api.client.post("/v1/api-keys", json={"scopes": ["read"], "description": "reporting"},
                                 headers=admin)
    assert resp.status == 201
    created = (await resp.json())["api_key"]
    assert created["secret"].startswith(created["prefix"]) and created["scopes"] == ["read"]
    listing = await (await api.client.get("/v1/api-keys", headers=admin)).json()
    assert created["id"] in [k["id"] for k in listing["api_keys"]]
    assert all("secret" not in k for k in listing["api_keys"])
    new_key = {"Authorization": f"Bearer {created['secret']}"}
    assert (await api.client.get("/v1/users/usr_x", headers=new_key)).status == 404
    resp = await api.client.delete(f"/v1/api-keys/{created['id']}", headers=admin)
    assert (await resp.json())["api_key"]["status"] == "revoked"
    assert (await api.client.get("/v1/users/usr_x", headers=new_key)).status == 401
    bad = await api.client.post("/v1/api-keys", json={"scopes": ["root"]}, headers=admin)
    assert bad.status == 400
    # Another organisation's key cannot be revoked from here.
    globex_admin = await api.headers("globex", ["admin"])
    resp = await api.client.delete(f"/v1/api-keys/{created['id']}", headers=globex_admin)
    assert resp.status == 404


async def test_unexpected_errors_are_500_with_the_body_and_no_trace(api, monkeypatch):
    from vip.accounts import users

    async def broken(*args, **kwargs):
        raise RuntimeError("database exploded: secret detail")

    monkeypatch.setattr(users, "get_user", broken)
    resp = await api.client.get("/v1/users/usr_1", headers=await api.headers())
    assert resp.status == 500
    text = await resp.text()
    assert "secret detail" not in text and "Traceback" not in text
    assert_error(await resp.json(), "ERR_INTERNAL")


def test_checked_keys_are_trusted_for_the_cache_period_only_and_while_listening(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(keys.time, "monotonic", lambda: now[0])
    cache = keys.PrincipalCache(ttl_s=5)
    acme = keys.Principal("org_a", "key_a", frozenset({"read"}))
    cache.put("hash-a", acme, cache.generation)
    assert cache.get("hash-a") is None  # not listening for revocations: never trusted
    cache.listening = True
    cache.put("hash-a", acme, cache.generation)
    assert cache.get("hash-a") == acme
    now[0] += 5.01
    assert cache.get("hash-a") is None
    cache.put("hash-a", acme, cache.generation)
    cache.forget_key("key_a")  # a revocation committed anywhere: forgotten at once
    assert cache.get("hash-a") is None
    begun = cache.generation
    cache.forget_key("key_other")  # a revocation lands while a lookup is in the database
    cache.put("hash-a", acme, begun)
    assert cache.get("hash-a") is None
    cache.put("hash-a", acme, cache.generation)
    cache.listening = False  # the listener is lost: the database decides again
    assert cache.get("hash-a") is None
    never = keys.PrincipalCache(ttl_s=0)
    never.listening = True
    never.put("hash-a", acme, never.generation)
    assert never.get("hash-a") is None


@pytest.mark.e2e
async def test_a_key_revoked_by_the_cli_stops_working_on_every_api_process_at_once(
        api, aiohttp_client, database_url):
    # Two more application instances on the same database stand for two other API processes, with a
    # key cache long enough that only the revocation's notification can explain a refusal.
    settings = api.settings.model_copy(update={"api": api.settings.api.model_copy(
        update={"key_cache_s": 600})})
    processes = [await aiohttp_client(create_app(settings, database_url)) for _ in range(2)]
    secret = await api.key("acme", ["read"])
    headers = {"Authorization": f"Bearer {secret}"}
    for client in processes:
        app_cache = client.server.app[KEY_CACHE]
        for _ in range(100):  # the listener connects in the background
            if app_cache.listening:
                break
            await asyncio.sleep(0.05)
        assert app_cache.listening
        for _ in range(2):  # the second answer comes from the cache
            assert (await client.get("/v1/users/usr_x", headers=headers)).status == 404
    async with api.engine.connect() as conn:
        org = (await conn.exec_driver_sql("select id from organisations where name = 'acme'")).scalar()
        key_id = (await conn.exec_driver_sql(
            f"select id from api_keys where organisation_id = '{org}'")).scalar()
    cli = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("vip")), "keys", "revoke", "--org", "acme", key_id,
        env={**{k: v for k, v in os.environ.items() if k != "VIP_CONFIG"}, "DATABASE_URL": database_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    _out, err = await cli.communicate()
    assert cli.returncode == 0, err
    revoked_at = time.monotonic()
    for client in processes:
        # The notification is on its way at the commit; allow it a moment to be read, far below the cache.
        while (status := (await client.get("/v1/users/usr_x", headers=headers)).status) != 401:
            assert status == 404
            assert time.monotonic() - revoked_at < 1.0, "the revocation did not reach this process"
            await asyncio.sleep(0.01)




async def test_requests_refused_for_another_organisations_user_spend_only_their_own_budget(api):
    user_id = await api.user("acme")
    limit = api.settings.api.rate_limits.vip_report_per_user
    globex = await api.headers("globex")
    await api.in_one_rate_window()
    for _ in range(limit):
        resp = await api.client.get(f"/v1/vip-report?user_id={user_id}", headers=globex)
        assert resp.status == 404
    resp = await api.client.get(f"/v1/vip-report?user_id={user_id}", headers=globex)
    assert resp.status == 429  # globex spent its own budget for that user id
    # Acme's budget for its own user is untouched: its first request is its first.
    resp = await api.client.get(f"/v1/vip-report?user_id={user_id}", headers=await api.headers("acme"))
    assert resp.status != 429
    assert resp.headers["X-RateLimit-Remaining"] == str(limit - 1)
