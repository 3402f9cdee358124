"""GET /v1/vip-report?refresh=true pulls the user's OAuth platform connections again before it asks for a
new report: against the real local platform (tests/support/fake_platform.py) over loopback HTTP, with the
app, database and OAuth dance of tests/test_api_platforms.py. Also the kept token's life: sealed at rest,
replaced on reconnection, deleted on revoke."""

from __future__ import annotations

import asyncio
import base64
from datetime import date, timedelta
from decimal import Decimal

import pytest

from tests import test_api_platforms
from tests.support.platforms import load_platforms
from tests.test_api_platforms import EMPLOYER, PLATFORM, START, Env, assert_error
from tests.test_api_transactions import add_wallet
from vip.api.jsonio import dumps, loads
from vip.config import DEFAULT_CONFIG_DIR, DEV_TOKEN_KEY, load_settings
from vip.reports.inputs import income_inputs
from vip.store.tables import connections, income_records, outbox_events, platform_tokens, vip_reports
from vip.token_cipher import TokenCipher, TokenUnreadable

# The app on loopback with the local platform, as in tests/test_api_platforms.py.
fake = test_api_platforms.fake
env = test_api_platforms.env

NEW_SALARY = {"date": "2025-02-28", "amount": "5200.00", "direction": "inbound", "from_reference": EMPLOYER,
              "description": "February salary"}


async def connected_user(env: Env) -> tuple[str, str]:
    """A user with a wallet and the platform connected by OAuth: (user id, connection id)."""
    user_id = await env.api.user()
    await add_wallet(env.api.engine, "acme", user_id, "0x" + "ab" * 20)
    status, body = await env.connect(user_id)
    assert status == 201, body
    return user_id, body["connection"]["id"]


async def vip_report(env: Env, user_id: str, **params: str) -> tuple[int, dict]:
    resp = await env.api.client.get("/v1/vip-report", params={"user_id": user_id, **params},
                                    headers=await env.api.headers())
    return resp.status, loads(await resp.read())


def bearer_tokens(env: Env) -> set[str]:
    return {r["authorization"].removeprefix("Bearer ") for r in env.fake.records_requests}


async def record_rows(env: Env, connection_id: str) -> list[tuple]:
    rows = await env.rows(income_records, income_records.c.connection_id == connection_id)
    return sorted((r.record_date, r.amount, r.direction, r.from_reference, r.description) for r in rows)


async def test_refresh_pulls_records_the_platform_added_since_the_connection(env: Env):
    user_id, connection_id = await connected_user(env)
    # A direct-push connection of the same user: its data is the lender's, never pulled.
    push = {"user_id": user_id, "platform": "novabank", "source_type": "neobank_account",
            "account_id": "nb-1",
            "data": {"account_holder": "Jane", "currency": "USD", "transaction_history": [
                {"date": "2025-01-10", "amount": 100, "direction": "inbound", "from_reference": "ACH-GIG"}]}}
    resp = await env.api.client.post("/v1/connect/platform/direct", data=dumps(push),
                                     headers={**await env.api.headers(), "Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()
    pushed_id = (await resp.json())["connection"]["id"]
    pushed_before = await record_rows(env, pushed_id)
    pulls_at_connection = len(env.fake.records_requests)

    # Without refresh nothing is pulled.
    status, first = await vip_report(env, user_id)
    assert status == 202 and len(env.fake.records_requests) == pulls_at_connection
    async with env.api.engine.begin() as conn:  # the job finished it (a refresh of a pending one waits)
        await conn.execute(vip_reports.update().where(vip_reports.c.id == first["vip_report"]["id"])
                           .values(status="unverified"))

    env.fake.account.records.append(NEW_SALARY)
    env.clock.advance(days=1)
    status, body = await vip_report(env, user_id, refresh="true")
    assert status == 202, body
    assert body["vip_report"]["status"] == "pending" and body["vip_report"]["id"] != first["vip_report"]["id"]
    # Pulled again, every page; a day on, the callback's one-hour token had expired, so it was renewed
    # first with the kept refresh token.
    assert [r["cursor"] for r in env.fake.records_requests[pulls_at_connection:]] == [None, "1", "2"]
    assert len(bearer_tokens(env)) == 2
    assert [r["grant_type"] for r in env.fake.token_requests] == ["authorization_code", "refresh_token"]

    records = await record_rows(env, connection_id)
    assert len(records) == 6  # replaced, not duplicated
    assert (date(2025, 2, 28), Decimal("5200.000000"), "inbound", EMPLOYER.lower(),
            "February salary") in records
    assert await record_rows(env, pushed_id) == pushed_before
    [row] = await env.rows(connections, connections.c.id == connection_id)
    assert row.last_synced_at == START + timedelta(days=1) and row.status == "active"
    # The new report's input (what the VIP job reads) has the new salary.
    async with env.api.engine.connect() as conn:
        inputs, _ = await income_inputs(conn, user_id, load_platforms(environ={}),
                                        START - timedelta(days=60), START + timedelta(days=1))
    assert (PLATFORM, date(2025, 2, 28), Decimal("5200")) in {
        (r.platform, r.record_date, r.amount) for r in inputs}
    generating = await env.rows(outbox_events, outbox_events.c.type == "vip.generating")
    assert [e.data["object"]["id"] for e in generating] == [first["vip_report"]["id"],
                                                            body["vip_report"]["id"]]


@pytest.mark.parametrize("failure", ["records page 1 answered 503", "records page 0 answered 401"])
async def test_a_failed_pull_answers_502_and_changes_nothing(env: Env, failure: str):
    user_id, connection_id = await connected_user(env)
    env.fake.account.records.append(NEW_SALARY)
    if "503" in failure:
        env.fake.fail_page = 1
    else:  # the platform no longer honours the token (expired or revoked on its side)
        env.fake._tokens.clear()
    before = (await record_rows(env, connection_id), await env.rows(connections), await env.counts())
    env.clock.advance(minutes=30)  # the token has not expired by the platform's word

    status, body = await vip_report(env, user_id, refresh="true")
    assert status == 502, body
    details = assert_error(body, "ERR_PLATFORM_SYNC_FAILED")
    assert details["platform"] == PLATFORM and details["reason"] == failure
    assert PLATFORM in body["error"]["message"]
    assert await env.rows(vip_reports) == []
    assert (await record_rows(env, connection_id), await env.rows(connections), await env.counts()) == before

    # Once the platform answers again, the refresh goes through.
    env.fake.fail_page = None
    if "401" in failure:
        return  # a token the platform dropped stays dropped: only a reconnection mends it
    status, body = await vip_report(env, user_id, refresh="true")
    assert status == 202 and len(await record_rows(env, connection_id)) == 6


async def test_the_token_is_sealed_replaced_on_reconnection_and_deleted_on_revoke(env: Env):
    user_id, connection_id = await connected_user(env)
    [token] = bearer_tokens(env)
    [kept] = await env.rows(platform_tokens)
    assert kept.connection_id == connection_id
    assert kept.expires_at == START + timedelta(seconds=3600)  # the fake says expires_in 3600
    assert token.encode() not in bytes(kept.access_token)  # sealed at rest
    cipher = TokenCipher.from_text(DEV_TOKEN_KEY)
    assert cipher.open(kept.access_token, connection_id) == token
    [refresh_token] = env.fake.refresh_tokens_issued
    assert refresh_token.encode() not in bytes(kept.refresh_token)
    assert cipher.open(kept.refresh_token, connection_id) == refresh_token
    with pytest.raises(TokenUnreadable):  # bound to its connection
        cipher.open(kept.access_token, "con_other")
    with pytest.raises(TokenUnreadable):
        TokenCipher(b"k" * 32).open(kept.access_token, connection_id)

    # Connecting the same account again keeps one row, with the new token.
    status, body = await env.connect(user_id)
    assert status == 200 and body["connection"]["id"] == connection_id
    [kept] = await env.rows(platform_tokens)
    assert cipher.open(kept.access_token, connection_id) != token
    # The token never leaves through the API.
    resp = await env.api.client.get("/v1/connections", params={"user_id": user_id},
                                    headers=await env.api.headers())
    listed = await resp.text()
    assert all(t not in listed for t in bearer_tokens(env))

    resp = await env.api.client.delete(f"/v1/connections/{connection_id}", headers=await env.api.headers())
    assert resp.status == 200, await resp.text()
    assert await env.rows(platform_tokens) == []
    pulls = len(env.fake.records_requests)
    status, body = await vip_report(env, user_id, refresh="true")
    assert (status, body["error"]["code"]) == (422, "ERR_MISSING_PLATFORM")
    assert len(env.fake.records_requests) == pulls


def test_the_token_key_comes_from_the_environment_and_must_be_32_bytes():
    key = base64.urlsafe_b64encode(b"p" * 32).decode()
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={"VIP_TOKEN_KEY": key})
    assert settings.api.token_key.get_secret_value() == key and key not in repr(settings)
    assert load_settings(DEFAULT_CONFIG_DIR, environ={}).api.token_key.get_secret_value() == DEV_TOKEN_KEY
    for bad in (base64.urlsafe_b64encode(b"short").decode(), "not base64 at all!"):
        with pytest.raises(ValueError, match="token key"):
            load_settings(DEFAULT_CONFIG_DIR, environ={"VIP_TOKEN_KEY": bad})


# --- OAuth refresh: an expired access token is renewed before the pull -----------------------------------

async def test_an_expired_token_is_renewed_with_the_refresh_token_and_kept(env: Env):
    user_id, connection_id = await connected_user(env)
    env.fake.account.records.append(NEW_SALARY)
    env.fake.expire_access_tokens()  # the platform's side of the expiry
    env.clock.advance(hours=2)  # past the token's expires_in (3600 s)
    [first_refresh] = env.fake.refresh_tokens_issued

    status, body = await vip_report(env, user_id, refresh="true")
    assert status == 202, body
    [renewal] = [r for r in env.fake.token_requests if r["grant_type"] == "refresh_token"]
    assert renewal["refresh_token"] == first_refresh and renewal["client_id"] == "vip-paystream"
    assert len(await record_rows(env, connection_id)) == 6  # pulled with the new token
    # The new tokens are kept (sealed): the renewed access token with its new expiry, the rotated
    # refresh token; a refresh within the hour uses them without asking the platform again.
    [kept] = await env.rows(platform_tokens)
    cipher = TokenCipher.from_text(DEV_TOKEN_KEY)
    new_access = env.fake.records_requests[-1]["authorization"].removeprefix("Bearer ")
    assert cipher.open(kept.access_token, connection_id) == new_access
    rotated = env.fake.refresh_tokens_issued[-1]
    assert cipher.open(kept.refresh_token, connection_id) == rotated != first_refresh
    assert kept.expires_at == START + timedelta(hours=2, seconds=3600)
    async with env.api.engine.begin() as conn:
        await conn.execute(vip_reports.update().values(status="unverified"))
    env.clock.advance(minutes=30)
    status, _ = await vip_report(env, user_id, refresh="true")
    assert status == 202
    assert [r["grant_type"] for r in env.fake.token_requests].count("refresh_token") == 1
    [row] = await env.rows(connections, connections.c.id == connection_id)
    assert row.status == "active"


async def test_a_refused_refresh_expires_the_connection_and_fires_connection_revoked(env: Env):
    user_id, connection_id = await connected_user(env)
    env.fake.refuse_refresh = True  # the user withdrew the grant on the platform
    env.clock.advance(hours=2)
    status, body = await vip_report(env, user_id, refresh="true")
    assert status == 502, body
    details = assert_error(body, "ERR_PLATFORM_SYNC_FAILED")
    assert details["platform"] == PLATFORM and "renew" in details["reason"]
    assert details["platform_error"] == "invalid_grant"
    assert await env.rows(vip_reports) == []

    [row] = await env.rows(connections, connections.c.id == connection_id)
    assert row.status == "expired"
    assert await env.rows(platform_tokens) == []  # nothing left to pull with
    [event] = await env.rows(outbox_events, outbox_events.c.type == "connection.revoked")
    assert event.data["object"]["id"] == connection_id and event.data["object"]["status"] == "expired"
    resp = await env.api.client.get("/v1/connections", params={"user_id": user_id},
                                    headers=await env.api.headers())
    listed = {c["id"]: c["status"] for c in (await resp.json())["connections"]}
    assert listed[connection_id] == "expired"
    # The lender learns to ask the user to connect again: no platform connection is left to refresh.
    status, body = await vip_report(env, user_id, refresh="true")
    assert (status, body["error"]["code"]) == (422, "ERR_MISSING_PLATFORM")


async def test_concurrent_refreshes_renew_once(env: Env):
    """Two refresh=true requests at once with an expired token: one renews (the platform rotates refresh
    tokens, so a second renewal with the old one would be refused and expire the connection); the other
    waits for it and pulls with the renewed token."""
    user_id, connection_id = await connected_user(env)
    env.fake.expire_access_tokens()
    env.clock.advance(hours=2)
    answers = await asyncio.gather(vip_report(env, user_id, refresh="true"),
                                   vip_report(env, user_id, refresh="true"))
    assert sorted(status for status, _ in answers) == [202, 202], answers
    assert [r["grant_type"] for r in env.fake.token_requests].count("refresh_token") == 1
    [row] = await env.rows(connections, connections.c.id == connection_id)
    assert row.status == "active"
