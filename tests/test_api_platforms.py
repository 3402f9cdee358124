"""Platform connections: the OAuth dance against a real local platform (tests/support/fake_platform.py)
over real HTTP, and the direct push. Each test runs the real app on loopback on a fresh database, with
`public_base_url` set to its own address so the platform's redirect lands on it, and a service clock the
test moves."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestServer, get_port_socket
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import ApiHarness
from tests.support.fake_platform import FakeAccount, FakePlatform
from tests.support.openapi_check import conformance_middleware
from tests.support.platforms import DEFAULT_PLATFORMS_FILE, load_platforms
from vip.api.app import create_app
from vip.api.context import CLOCK
from vip.api.jsonio import dumps, iso, loads
from vip.config import ApiConfig, PlatformConfig, Settings
from vip.connections.platform_oauth import sign_state
from vip.store.tables import connections, income_records, oauth_states, outbox_events

PLATFORM = "paystream"
SCOPES = "employment:read payments:read"
CLIENT_SECRET = "paystream-test-client-secret"
STATE_SECRET = "test-state-secret"
START = datetime(2025, 3, 15, 12, 0, tzinfo=UTC)
EMPLOYER = "0x5c9108b2532C90C28FdA25a92d732DFfa110aca3"  # checksummed; stored lower-case
SEVEN = {"paystream", "ledgerpay", "crewroll", "novabank", "tidewater", "coinharbor", "blockmart"}


def payroll_records() -> list[dict[str, Any]]:
    # Amounts as exact JSON numbers and as strings; the currency comes from the account when absent.
    return [
        {"date": "2024-10-31", "amount": "5000.00", "direction": "inbound", "from_reference": EMPLOYER,
         "description": "October salary"},
        {"date": "2024-11-30", "amount": Decimal("5000.123456"), "direction": "inbound",
         "from_reference": EMPLOYER, "description": "November salary"},
        {"date": "2024-12-31", "amount": 5100, "direction": "inbound", "from_reference": "ACH-ACME-CORP",
         "currency": "USD"},
        {"date": "2025-01-31", "amount": Decimal("5100.5"), "direction": "inbound",
         "from_reference": EMPLOYER},
        {"date": "2025-02-05", "amount": Decimal("12.34"), "direction": "outbound",
         "description": "fee"},
    ]


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.current = now

    async def now(self) -> datetime:
        return self.current

    def advance(self, **kwargs: float) -> None:
        self.current += timedelta(**kwargs)


@dataclass
class Env:
    api: ApiHarness
    fake: FakePlatform
    clock: FakeClock
    base_url: str
    registry: dict[str, PlatformConfig]

    async def authorize(self, user_id: str, org: str = "acme", platform: str = PLATFORM):
        return await self.api.client.get("/v1/connect/platform/authorize",
                                         params={"platform": platform, "user_id": user_id},
                                         headers=await self.api.headers(org))

    async def consent(self, user_id: str, org: str = "acme") -> str:
        """Authorize on our API, then visit the platform as the user's browser: the callback URL the
        platform redirects to (not yet followed)."""
        resp = await self.authorize(user_id, org)
        assert resp.status == 200, await resp.text()
        async with aiohttp.ClientSession() as browser, \
                browser.get((await resp.json())["redirect_url"], allow_redirects=False) as page:
            assert page.status == 302, await page.text()
            return page.headers["Location"]

    async def callback(self, location: str) -> tuple[int, dict]:
        """The browser follows the platform's redirect to our callback (no API key)."""
        async with aiohttp.ClientSession() as browser, browser.get(location, allow_redirects=False) as resp:
            return resp.status, loads(await resp.read())

    async def connect(self, user_id: str, org: str = "acme") -> tuple[int, dict]:
        return await self.callback(await self.consent(user_id, org))

    async def rows(self, table, *where) -> list:
        async with self.api.engine.connect() as conn:
            return list(await conn.execute(select(table).where(*where)))

    async def counts(self) -> tuple[int, int, int]:
        return (len(await self.rows(connections)), len(await self.rows(income_records)),
                len(await self.rows(outbox_events)))


@pytest.fixture
async def fake() -> AsyncIterator[FakePlatform]:
    platform = FakePlatform(client_id="vip-paystream", client_secret=CLIENT_SECRET, scopes=SCOPES,
                            account=FakeAccount(records=payroll_records()), page_size=2)
    await platform.start()
    yield platform
    await platform.close()


@pytest.fixture
async def env(aiohttp_client, database_url: str, engine: AsyncEngine,
              fake: FakePlatform) -> AsyncIterator[Env]:
    # The socket is bound first, so the app's public_base_url is its real address.
    sock = get_port_socket("127.0.0.1", 0, socket.AF_INET)
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    platforms = load_platforms(overrides={PLATFORM: {**fake.endpoints(), "timeout_s": 5.0}},
                               environ={"VIP_PLATFORM_PAYSTREAM_SECRET": CLIENT_SECRET})
    settings = Settings(api=ApiConfig(public_base_url=base_url, state_secret=STATE_SECRET),
                        platforms=platforms)
    app = create_app(settings, database_url)
    registry = settings.platforms  # the routes read it per request: a test may swap a platform's entry
    clock = FakeClock(START)

    async def use_test_clock(app) -> None:  # runs after the app's own resources are set up
        app[CLOCK] = clock

    app.on_startup.append(use_test_clock)
    violations: list = []
    app.middlewares.insert(0, conformance_middleware(violations, base_url))
    client = await aiohttp_client(TestServer(app, host="127.0.0.1", socket_factory=lambda *_: sock))
    yield Env(ApiHarness(client, engine, settings), fake, clock, base_url, registry)
    assert not violations, "responses that break the OpenAPI document:\n" + "\n".join(map(str, violations))


def assert_error(body: dict, code: str) -> dict:
    assert body["error"]["code"] == code, body
    assert body["error"]["message"] and body["error"]["request_id"]
    return body["error"]["details"]


# --- configuration ------------------------------------------------------------------------------------------


def test_shipped_platforms_follow_the_spec_table():
    registry = load_platforms(environ={})
    assert set(registry) == SEVEN
    by_kind: dict[str, list[str]] = {}
    for pid, platform in registry.items():
        assert platform.id == pid
        by_kind.setdefault(platform.source_type, []).append(platform.scopes)
        for url in (platform.authorize_url, platform.token_url, platform.records_url):
            assert url.startswith("https://") and ".example/" in url
        assert all(a == a.lower() and len(a) == 42 for a in platform.whitelisted_addresses)
        assert platform.client_secret.get_secret_value() == ""
    assert sorted(by_kind["payroll"]) == sorted(["employment:read payments:read", "profile:read payroll:read",
                                                 "account:read payroll:read"])
    assert by_kind["neobank_account"] == ["account:read transactions:read"] * 2
    assert sorted(by_kind["exchange_account"]) == ["account:read history:read",
                                                   "account:read transactions:read"]


def test_platform_secrets_come_from_the_environment_never_the_file(tmp_path: Path):
    registry = load_platforms(environ={"VIP_PLATFORM_NOVABANK_SECRET": "nb-secret"})
    assert registry["novabank"].client_secret.get_secret_value() == "nb-secret"
    assert "nb-secret" not in repr(registry["novabank"])
    text = DEFAULT_PLATFORMS_FILE.read_text()
    leaked = tmp_path / "platforms.toml"
    leaked.write_text(text.replace('client_id = "vip-novabank"',
                                   'client_id = "vip-novabank"\nclient_secret = "oops"'))
    with pytest.raises(ValueError, match="client_secret"):
        load_platforms(leaked, environ={})
    unknown = tmp_path / "unknown.toml"
    unknown.write_text(text.replace('name = "Nova Bank"', 'name = "Nova Bank"\nsurprise = 1'))
    with pytest.raises(ValueError, match="surprise"):
        load_platforms(unknown, environ={})
    with pytest.raises(ValueError, match="unknown platform"):
        load_platforms(overrides={"nosuch": {"timeout_s": 1}}, environ={})


# --- the OAuth dance ----------------------------------------------------------------------------------------


async def test_oauth_dance_creates_the_connection_its_records_and_the_event(env: Env):
    user_id = await env.api.user()
    resp = await env.authorize(user_id)
    assert resp.status == 200
    body = await resp.json()
    assert body["expires_at"] == iso(START + timedelta(minutes=10))
    url = urlsplit(body["redirect_url"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == env.fake.url("/oauth/authorize")
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert query["client_id"] == "vip-paystream"
    assert query["scope"] == SCOPES and "%20" in url.query  # one space-separated scope string
    assert query["redirect_uri"] == f"{env.base_url}/v1/connect/platform/callback"
    assert query["response_type"] == "code"
    state_id, mac = query["state"].split(".")
    assert len(mac) == 64
    [state] = await env.rows(oauth_states)
    assert (state.id, state.user_id, state.platform) == (state_id, user_id, PLATFORM)
    assert state.expires_at == START + timedelta(minutes=10) and state.used_at is None

    # The whole browser leg, redirects followed: platform consent -> our callback.
    async with aiohttp.ClientSession() as browser, browser.get(body["redirect_url"]) as final:
        assert final.status == 201, await final.text()
        assert str(final.url).startswith(f"{env.base_url}/v1/connect/platform/callback?code=")
        connection = loads(await final.read())["connection"]
    assert connection == {
        "id": connection["id"], "user_id": user_id, "type": "platform", "provider": PLATFORM,
        "identifier": "Jane Q. Worker", "source_type": "payroll", "status": "active",
        "created_at": iso(START), "last_synced_at": iso(START)}

    [row] = await env.rows(connections)
    assert row.account_id == "acc_0001" and row.organisation_id != ""
    records = sorted(await env.rows(income_records), key=lambda r: r.record_date)
    assert [(r.record_date, r.amount, r.currency, r.direction, r.from_reference, r.description)
            for r in records] == [
        (date(2024, 10, 31), Decimal("5000.000000"), "USDC", "inbound", EMPLOYER.lower(), "October salary"),
        (date(2024, 11, 30), Decimal("5000.123456"), "USDC", "inbound", EMPLOYER.lower(), "November salary"),
        (date(2024, 12, 31), Decimal("5100.000000"), "USD", "inbound", "ACH-ACME-CORP", None),
        (date(2025, 1, 31), Decimal("5100.500000"), "USDC", "inbound", EMPLOYER.lower(), None),
        (date(2025, 2, 5), Decimal("12.340000"), "USDC", "outbound", None, "fee"),
    ]
    assert all(r.connection_id == connection["id"] for r in records)
    [event] = await env.rows(outbox_events)
    assert event.type == "connection.platform.created"
    assert event.data == {"object": connection}
    assert event.organisation_id == row.organisation_id and event.created_at == START
    # The platform saw our client credentials, one code exchange and three bearer-authorised pages.
    [token_request] = env.fake.token_requests
    assert token_request["client_secret"] == CLIENT_SECRET
    assert token_request["redirect_uri"] == query["redirect_uri"]
    assert [r["cursor"] for r in env.fake.records_requests] == [None, "1", "2"]
    assert len({r["authorization"] for r in env.fake.records_requests}) == 1
    [state] = await env.rows(oauth_states)
    assert state.used_at == START


async def test_reconnecting_the_same_account_replaces_its_records(env: Env):
    user_id = await env.api.user()
    status, first = await env.connect(user_id)
    assert status == 201
    env.clock.advance(days=3)
    env.fake.account.holder = "Jane Q. Worker-Smith"
    env.fake.account.records = [*payroll_records()[:2], {
        "date": "2025-03-01", "amount": "5200", "direction": "inbound", "from_reference": EMPLOYER}]
    status, second = await env.connect(user_id)
    assert status == 200
    assert second["connection"]["id"] == first["connection"]["id"]
    assert second["connection"]["identifier"] == "Jane Q. Worker-Smith"
    assert second["connection"]["created_at"] == iso(START)
    assert second["connection"]["last_synced_at"] == iso(START + timedelta(days=3))
    assert await env.counts() == (1, 3, 1)  # one connection, the new records only, one event
    # Another user connecting the same platform account gets a connection of their own.
    other = await env.api.user()
    status, third = await env.connect(other)
    assert status == 201 and third["connection"]["id"] != first["connection"]["id"]
    assert await env.counts() == (2, 6, 2)


async def test_denied_consent_is_400_and_spends_the_state(env: Env):
    env.fake.deny = True
    user_id = await env.api.user()
    location = await env.consent(user_id)
    assert "error=access_denied" in location
    status, body = await env.callback(location)
    assert status == 400
    assert assert_error(body, "ERR_OAUTH_DENIED") == {"platform": PLATFORM}
    assert env.fake.token_requests == []
    assert await env.counts() == (0, 0, 0)
    status, body = await env.callback(location)
    assert status == 400
    assert assert_error(body, "ERR_OAUTH_STATE_INVALID")["state"] == "already used"


async def test_a_refused_code_is_400(env: Env):
    user_id = await env.api.user()
    location = await env.consent(user_id)
    state = parse_qs(urlsplit(location).query)["state"][0]
    callback = f"{env.base_url}/v1/connect/platform/callback"
    status, body = await env.callback(f"{callback}?code=forged&state={state}")
    assert status == 400
    assert assert_error(body, "ERR_OAUTH_CODE_INVALID")["platform_error"] == "invalid_grant"
    # A code the platform already redeemed is refused too, even with a fresh state.
    status, _ = await env.callback(await env.consent(user_id))
    assert status == 201
    redeemed = env.fake.token_requests[-1]["code"]
    fresh = parse_qs(urlsplit(await env.consent(user_id)).query)["state"][0]
    status, body = await env.callback(
        f"{env.base_url}/v1/connect/platform/callback?code={redeemed}&state={fresh}")
    assert status == 400
    assert_error(body, "ERR_OAUTH_CODE_INVALID")
    assert await env.counts() == (1, 5, 1)


async def test_a_refused_client_secret_is_a_platform_failure(env: Env):
    env.fake.client_secret = "rotated-on-the-platform"
    status, body = await env.connect(await env.api.user())
    assert status == 502
    details = assert_error(body, "ERR_PLATFORM_SYNC_FAILED")
    assert details["platform"] == PLATFORM and "401" in details["reason"]
    assert await env.counts() == (0, 0, 0)


@pytest.mark.parametrize("failure", ["token_500", "page_503", "page_garbage", "page_slow", "bad_record",
                                     "future_record"])
async def test_platform_failures_are_502_and_store_nothing(env: Env, failure: str):
    fake = env.fake
    if failure == "token_500":
        fake.token_status = 500
    elif failure == "page_503":
        fake.fail_page = 1
    elif failure == "page_garbage":
        fake.garbage_page = 2
    elif failure == "page_slow":
        env.registry[PLATFORM] = env.registry[PLATFORM].model_copy(update={"timeout_s": 0.3})
        fake.slow_page, fake.slow_s = 1, 1.0
    elif failure == "bad_record":
        fake.account.records[3]["amount"] = "5100.0000001"
    else:
        fake.account.records[4]["date"] = (START + timedelta(days=2)).date().isoformat()
    user_id = await env.api.user()
    status, body = await env.connect(user_id)
    assert status == 502, body
    details = assert_error(body, "ERR_PLATFORM_SYNC_FAILED")
    assert details["platform"] == PLATFORM
    assert await env.counts() == (0, 0, 0)
    [state] = await env.rows(oauth_states)
    assert state.used_at is not None  # spent before the platform was called


async def test_forged_missing_and_unknown_states_are_refused_before_the_platform(env: Env):
    user_id = await env.api.user()
    location = await env.consent(user_id)
    query = parse_qs(urlsplit(location).query)
    code, state = query["code"][0], query["state"][0]
    state_id, mac = state.split(".")
    flipped = ("0" if mac[0] != "0" else "1") + mac[1:]
    cases = {
        f"code={code}&state={state_id}.{flipped}": "bad signature",
        f"code={code}&state={state_id}": "bad signature",
        f"code={code}&state={sign_state('another-secret', state_id)}": "bad signature",
        f"code={code}&state={sign_state(STATE_SECRET, 'A' * 32)}": "unknown",
        f"code={code}": "missing",
        "error=access_denied": "missing",
        "": "missing",
    }
    for params, reason in cases.items():
        status, body = await env.callback(f"{env.base_url}/v1/connect/platform/callback?{params}")
        assert status == 400, params
        assert assert_error(body, "ERR_OAUTH_STATE_INVALID")["state"] == reason, params
    assert env.fake.token_requests == []
    # The genuine state is still good: the forgeries did not spend it.
    status, _ = await env.callback(location)
    assert status == 201


async def test_code_is_required_with_a_state(env: Env):
    location = await env.consent(await env.api.user())
    state = parse_qs(urlsplit(location).query)["state"][0]
    status, body = await env.callback(f"{env.base_url}/v1/connect/platform/callback?state={state}")
    assert status == 400
    assert assert_error(body, "ERR_VALIDATION") == {"code": "required"}
    status, _ = await env.callback(location)  # not spent
    assert status == 201


async def test_states_expire_after_ten_minutes_of_service_time(env: Env):
    user_id = await env.api.user()
    early = await env.consent(user_id)
    env.clock.advance(minutes=9, seconds=59)
    status, _ = await env.callback(early)
    assert status == 201
    late = await env.consent(user_id)
    env.clock.advance(minutes=10)
    status, body = await env.callback(late)
    assert status == 400
    details = assert_error(body, "ERR_OAUTH_STATE_INVALID")
    assert details["state"] == "expired"
    assert len(env.fake.token_requests) == 1


async def test_a_state_is_single_use(env: Env):
    location = await env.consent(await env.api.user())
    status, _ = await env.callback(location)
    assert status == 201
    status, body = await env.callback(location)
    assert status == 400
    assert assert_error(body, "ERR_OAUTH_STATE_INVALID")["state"] == "already used"
    assert len(env.fake.token_requests) == 1
    assert await env.counts() == (1, 5, 1)


async def test_racing_callbacks_with_one_state_connect_once(env: Env):
    location = await env.consent(await env.api.user())
    results = await asyncio.gather(*(env.callback(location) for _ in range(3)))
    assert sorted(status for status, _ in results) == [201, 400, 400]
    assert len(env.fake.token_requests) == 1
    assert await env.counts() == (1, 5, 1)


async def test_authorize_refuses_unknown_platforms_other_orgs_users_and_weak_keys(env: Env):
    user_id = await env.api.user()
    for platform in ("nosuch", "PAYSTREAM"):
        resp = await env.authorize(user_id, platform=platform)
        assert resp.status == 400
        details = assert_error(await resp.json(), "ERR_VALIDATION")
        assert set(details["supported_platforms"]) == SEVEN
        assert "paystream" in details["platform"]
    resp = await env.authorize(user_id, org="globex")
    assert resp.status == 404
    assert_error(await resp.json(), "ERR_NOT_FOUND")
    resp = await env.api.client.get("/v1/connect/platform/authorize",
                                    params={"platform": PLATFORM, "user_id": user_id},
                                    headers=await env.api.headers("acme", ["read"]))
    assert resp.status == 403
    resp = await env.api.client.get("/v1/connect/platform/authorize",
                                    params={"platform": PLATFORM, "user_id": user_id})
    assert resp.status == 401
    resp = await env.authorize("")
    assert resp.status == 400
    assert "user_id" in assert_error(await resp.json(), "ERR_VALIDATION")
    assert await env.rows(oauth_states) == []


# --- direct push --------------------------------------------------------------------------------------------


def direct_body(user_id: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "user_id": user_id, "platform": "acme_neobank", "source_type": "neobank_account",
        "account_id": "ACC-778-1",
        "data": {"account_holder": "holder-778", "currency": "usdc", "transaction_history": [
            {"date": "2025-01-31", "amount": Decimal("4200.50"), "direction": "inbound",
             "from_reference": EMPLOYER, "description": "Payroll"},
            {"date": "2025-02-28", "amount": 4200, "direction": "inbound", "from_reference": "ACME LTD"},
            {"date": "2025-03-15", "amount": Decimal("0.000001"), "direction": "outbound",
             "description": "rounding"},
        ]}}
    body.update(overrides)
    return body


async def push(env: Env, body: Any, org: str = "acme", scopes: list[str] | None = None):
    raw = body if isinstance(body, str) else dumps(body)
    resp = await env.api.client.post("/v1/connect/platform/direct", data=raw,
                                     headers={**await env.api.headers(org, scopes),
                                              "Content-Type": "application/json"})
    return resp.status, loads(await resp.read())


async def test_direct_push_creates_then_replaces(env: Env):
    user_id = await env.api.user()
    status, body = await push(env, direct_body(user_id))
    assert status == 201, body
    connection = body["connection"]
    assert connection == {
        "id": connection["id"], "user_id": user_id, "type": "platform", "provider": "acme_neobank",
        "identifier": "holder-778", "source_type": "neobank_account", "status": "active",
        "created_at": iso(START), "last_synced_at": iso(START)}
    records = sorted(await env.rows(income_records), key=lambda r: r.record_date)
    assert [(r.record_date, r.amount, r.currency, r.from_reference) for r in records] == [
        (date(2025, 1, 31), Decimal("4200.500000"), "USDC", EMPLOYER.lower()),
        (date(2025, 2, 28), Decimal("4200.000000"), "USDC", "ACME LTD"),
        (date(2025, 3, 15), Decimal("0.000001"), "USDC", None),
    ]
    [event] = await env.rows(outbox_events)
    assert event.type == "connection.platform.created" and event.data == {"object": connection}

    # The same account pushed again: same connection, history replaced, no second event.
    env.clock.advance(hours=6)
    again = direct_body(user_id)
    again["data"]["account_holder"] = "holder-778-b"
    again["data"]["transaction_history"] = again["data"]["transaction_history"][:2]
    status, body = await push(env, again)
    assert status == 200, body
    assert body["connection"]["id"] == connection["id"]
    assert body["connection"]["identifier"] == "holder-778-b"
    assert body["connection"]["last_synced_at"] == iso(START + timedelta(hours=6))
    assert await env.counts() == (1, 2, 1)
    status, body = await push(env, again)  # idempotent in effect
    assert status == 200 and await env.counts() == (1, 2, 1)

    # Another account of the same platform is another connection; an empty history is allowed.
    other = direct_body(user_id, account_id="ACC-778-2")
    other["data"]["transaction_history"] = []
    status, body = await push(env, other)
    assert status == 201 and body["connection"]["id"] != connection["id"]
    assert await env.counts() == (2, 2, 2)


async def test_racing_pushes_of_one_account_make_one_connection(env: Env):
    user_id = await env.api.user()
    results = await asyncio.gather(*(push(env, direct_body(user_id)) for _ in range(4)))
    assert sorted(status for status, _ in results) == [200, 200, 200, 201]
    assert len({answer["connection"]["id"] for _, answer in results}) == 1
    assert await env.counts() == (1, 3, 1)


def _item(index: int, **changes: Any):
    def mutate(body: dict) -> None:
        item = body["data"]["transaction_history"][index]
        for key, value in changes.items():
            if value is _DROP:
                item.pop(key)
            else:
                item[key] = value
    return mutate


def _set(path: str, value: Any):
    def mutate(body: dict) -> None:
        *parents, last = path.split(".")
        target = body
        for part in parents:
            target = target[part]
        if value is _DROP:
            target.pop(last)
        else:
            target[last] = value
    return mutate


_DROP = object()
TOMORROW = (START + timedelta(days=1)).date().isoformat()

BAD_FIELDS = [
    (_item(1, amount=0), "data.transaction_history.1.amount"),
    (_item(1, amount=-5), "data.transaction_history.1.amount"),
    (_item(1, amount="4200.00"), "data.transaction_history.1.amount"),
    (_item(1, amount=True), "data.transaction_history.1.amount"),
    (_item(1, amount=None), "data.transaction_history.1.amount"),
    (_item(1, amount=Decimal("1.0000001")), "data.transaction_history.1.amount"),
    (_item(1, amount=Decimal("1E+16")), "data.transaction_history.1.amount"),
    (_item(1, amount=_DROP), "data.transaction_history.1.amount"),
    (_item(0, date="2025-02-30"), "data.transaction_history.0.date"),
    (_item(0, date="2025/01/31"), "data.transaction_history.0.date"),
    (_item(0, date="2025-01-31T00:00:00Z"), "data.transaction_history.0.date"),
    (_item(0, date=20250131), "data.transaction_history.0.date"),
    (_item(2, date=TOMORROW), "data.transaction_history.2.date"),
    (_item(0, direction="sideways"), "data.transaction_history.0.direction"),
    (_item(0, from_reference="0x1234"), "data.transaction_history.0.from_reference"),
    (_item(0, from_reference=EMPLOYER[:-1] + "A"), "data.transaction_history.0.from_reference"),  # checksum
    (_item(0, from_reference="0x" + "g" * 40), "data.transaction_history.0.from_reference"),
    (_item(0, from_reference="   "), "data.transaction_history.0.from_reference"),
    (_item(0, from_reference=_DROP), "data.transaction_history.0.from_reference"),
    (_item(0, description="x" * 501), "data.transaction_history.0.description"),
    (_item(0, surprise=1), "data.transaction_history.0.surprise"),
    (_set("platform", "Acme Neobank"), "platform"),
    (_set("platform", "a"), "platform"),
    (_set("source_type", "bank"), "source_type"),
    (_set("account_id", ""), "account_id"),
    (_set("user_id", _DROP), "user_id"),
    (_set("data.account_holder", ""), "data.account_holder"),
    (_set("data.currency", "US D"), "data.currency"),
    (_set("data.currency", 840), "data.currency"),
    (_set("data.transaction_history", {"0": {}}), "data.transaction_history"),
    (_set("data.surprise", True), "data.surprise"),
]


async def test_direct_push_refuses_each_bad_field_and_stores_nothing(env: Env):
    user_id = await env.api.user()
    for mutate, field in BAD_FIELDS:
        body = direct_body(user_id)
        mutate(body)
        status, answer = await push(env, body)
        assert status == 400, (field, answer)
        details = assert_error(answer, "ERR_VALIDATION")
        assert field in details, (field, details)
    # Too many records.
    body = direct_body(user_id)
    body["data"]["transaction_history"] = [
        {"date": "2024-12-01", "amount": 1, "direction": "outbound"}] * 5001
    status, answer = await push(env, body)
    assert status == 400 and "data.transaction_history" in assert_error(answer, "ERR_VALIDATION")
    # A configured platform's identifier must come with its kind.
    status, answer = await push(env, direct_body(user_id, platform="paystream"))
    assert status == 400 and "source_type" in assert_error(answer, "ERR_VALIDATION")
    # Not JSON: refused whole.
    status, answer = await push(env, '{"user_id": ')
    assert status == 400 and "body" in assert_error(answer, "ERR_VALIDATION")
    assert await env.counts() == (0, 0, 0)
    status, answer = await push(env, direct_body(user_id))
    assert status == 201


async def test_direct_push_tenancy_and_scope(env: Env):
    user_id = await env.api.user()
    status, answer = await push(env, direct_body(user_id), org="globex")
    assert status == 404
    assert_error(answer, "ERR_NOT_FOUND")
    status, answer = await push(env, direct_body(user_id), scopes=["read"])
    assert status == 403
    status, answer = await push(env, direct_body("usr_nobody"))
    assert status == 404
    assert await env.counts() == (0, 0, 0)
