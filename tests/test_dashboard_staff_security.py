"""The staff's own security, over real HTTP on the real application: a password someone else chose (a first
password, a reset) must be replaced before any other page opens; the password page is limited like
sign-in; `next` is only ever a dashboard path (a line break in it never reaches a header, and the sign-in
it rides on answers normally); per-client limits read X-Forwarded-For only from trusted proxies; the
per-email sign-in limit is the organisation's own."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import indexer_settings, local_network
from tests.support.dashboard import PASSWORD, add_staff
from vip.api.ratelimit import client_address
from vip.config import ApiConfig
from vip.dashboard import staff as staff_store
from vip.dashboard.session import COOKIE, safe_next
from vip.store.tables import audit_log, staff_sessions

NEW_PASSWORD = "a passphrase of my own"
TOO_MANY = "Too many sign-in attempts"


class Browser:
    """A cookie jar of its own over the test client: a member's browser, without a browser."""

    def __init__(self, api: ApiHarness, forwarded_for: str | None = None) -> None:
        self.api = api
        self.cookies: dict[str, str] = {}
        self.forwarded_for = forwarded_for

    def _headers(self) -> dict[str, str]:
        self.api.client.session.cookie_jar.clear()  # the test client's shared jar: each browser sends its own
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if self.forwarded_for is not None:
            headers["X-Forwarded-For"] = self.forwarded_for
        return headers

    def _keep(self, response) -> None:
        for name, morsel in response.cookies.items():
            if morsel.value:
                self.cookies[name] = morsel.value
            else:
                self.cookies.pop(name, None)

    async def get(self, path: str):
        response = await self.api.client.get(path, headers=self._headers(), allow_redirects=False)
        self._keep(response)
        return response

    async def post(self, path: str, form: dict[str, str]):
        response = await self.api.client.post(path, data=form, headers=self._headers(), allow_redirects=False)
        self._keep(response)
        return response

    async def token(self, path: str) -> str:
        page = await self.get(path)
        return re.search(r'name="csrf_token" value="([^"]+)"', await page.text()).group(1)

    async def sign_in(self, org: str, email: str, password: str = PASSWORD, next_path: str = "/dashboard"):
        token = await self.token("/dashboard/sign-in")
        form = {"csrf_token": token, "organisation": org, "email": email, "password": password,
                "next": next_path}
        return await self.post("/dashboard/sign-in", form)

    async def change_password(self, current: str, new: str, path: str = "/dashboard/password"):
        token = await self.token("/dashboard/password")
        return await self.post(path, {"csrf_token": token, "current": current, "new": new, "again": new})


async def count(engine, table, *where) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(table).where(*where))


async def test_a_first_password_must_be_replaced_before_any_other_page(api):
    admin = await add_staff(api.engine, "admin")
    browser = Browser(api)
    assert (await browser.sign_in("acme", admin.email)).status == 303
    token = await browser.token("/dashboard/staff")
    shown = await browser.post("/dashboard/staff", {"csrf_token": token, "email": "new@acme.test",
                                                     "role": "analyst"})
    assert shown.status == 201
    first = re.search(r'readonly value="([^"]+)"', await shown.text()).group(1)

    member = Browser(api)
    signed_in = await member.sign_in("acme", "new@acme.test", first, next_path="/dashboard/borrowers")
    assert signed_in.status == 303
    assert signed_in.headers["Location"] == "/dashboard/password?next=%2Fdashboard%2Fborrowers"
    for path in ("/dashboard", "/dashboard/borrowers", "/dashboard/borrowers/usr_x"):
        page = await member.get(path)
        assert page.status == 303 and page.headers["Location"].startswith("/dashboard/password?next="), path
    page = await member.get("/dashboard/password")
    assert "chosen by someone else" in await page.text()
    # Keeping the handed-over password is not replacing it.
    kept = await member.change_password(first, first)
    assert kept.status == 400 and "must differ" in await kept.text()
    done = await member.change_password(first, NEW_PASSWORD,
                                        "/dashboard/password?next=%2Fdashboard%2Fborrowers")
    assert done.status == 303 and done.headers["Location"] == "/dashboard/borrowers"
    assert (await member.get("/dashboard/borrowers")).status == 200


async def test_a_reset_password_ends_the_sessions_and_must_be_replaced(api):
    admin = await add_staff(api.engine, "admin")
    analyst = await add_staff(api.engine, "analyst")
    admin_browser, analyst_browser = Browser(api), Browser(api)
    await admin_browser.sign_in("acme", admin.email)
    await analyst_browser.sign_in("acme", analyst.email)
    assert (await analyst_browser.get("/dashboard/borrowers")).status == 200

    token = await admin_browser.token("/dashboard/staff")
    asked = await admin_browser.post(f"/dashboard/staff/{analyst.member_id}/reset-password",
                                     {"csrf_token": token})
    assert asked.status == 200 and "Reset this member" in await asked.text()  # a question, nothing done
    assert (await analyst_browser.get("/dashboard/borrowers")).status == 200
    reset = await admin_browser.post(f"/dashboard/staff/{analyst.member_id}/reset-password",
                                     {"csrf_token": token, "confirmed": "yes"})
    assert reset.status == 200
    password = re.search(r'readonly value="([^"]+)"', await reset.text()).group(1)
    assert (await analyst_browser.get("/dashboard/borrowers")).status == 303  # the session ended
    assert (await Browser(api).sign_in("acme", analyst.email, PASSWORD)).status == 401  # the old one is gone
    again = Browser(api)
    landed = await again.sign_in("acme", analyst.email, password)
    assert landed.headers["Location"].startswith("/dashboard/password")
    assert await count(api.engine, audit_log, audit_log.c.action == "staff.password_reset") == 1


async def test_the_password_page_is_limited_like_sign_in(api):
    member = await add_staff(api.engine, "analyst")
    browser = Browser(api)
    await browser.sign_in("acme", member.email)
    answers = [await browser.change_password(f"not my password {n}", NEW_PASSWORD)
               for n in range(staff_store.PASSWORD_LIMIT_PER_MEMBER)]
    assert [a.status for a in answers] == [400] * staff_store.PASSWORD_LIMIT_PER_MEMBER
    # Past the limit nothing is checked, not even the right password: the old one still signs in.
    limited = await browser.change_password(PASSWORD, NEW_PASSWORD)
    assert limited.status == 429 and "Too many password attempts" in await limited.text()
    assert (await Browser(api).sign_in("acme", member.email, PASSWORD)).status == 303


@pytest.mark.parametrize("given", [
    "/dashboard\r\nSet-Cookie: planted=1", "/dashboard/audit\n", "/dashboard\x00", "/dashboard/\x7f",
    "https://evil.example/dashboard", "//evil.example/dashboard", "/\\evil.example", "/dashboardx/..",
    "javascript:alert(1)", "/dashboard\u2028x", "", None, 12,
])
def test_next_is_a_dashboard_path_without_control_characters(given):
    assert safe_next(given) == "/dashboard"


def test_next_keeps_a_dashboard_path_with_its_query():
    for kept in ("/dashboard", "/dashboard/audit", "/dashboard/borrowers?status=verified&sort=score",
                 "/dashboard/borrowers/usr_1%0D%0A"):  # an encoded line break is harmless text in a path
        assert safe_next(kept) == kept


async def test_a_line_break_in_next_signs_in_normally_once(api):
    member = await add_staff(api.engine, "admin")
    browser = Browser(api)
    answer = await browser.sign_in("acme", member.email,
                                   next_path="/dashboard/audit\r\nSet-Cookie: planted=1")
    assert answer.status == 303 and answer.headers["Location"] == "/dashboard"
    assert "planted" not in browser.cookies and COOKIE in browser.cookies
    assert (await browser.get("/dashboard")).status == 200
    assert await count(api.engine, staff_sessions) == 1
    assert await count(api.engine, audit_log, audit_log.c.action == "staff.signed_in") == 1
    form = await browser.api.client.get("/dashboard/sign-in", params={"next": "/dashboard\r\nX: y"})
    assert 'name="next" value="/dashboard"' in await form.text()


def test_the_client_is_the_peer_unless_the_peer_is_a_trusted_proxy():
    proxies = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")]
    assert client_address("203.0.113.9", ["198.51.100.1"], proxies) == "203.0.113.9"  # not a proxy: ignored
    assert client_address("203.0.113.9", ["198.51.100.1"], []) == "203.0.113.9"
    assert client_address("10.1.2.3", ["198.51.100.1"], proxies) == "198.51.100.1"
    # Each proxy appends what it heard from: the rightmost untrusted address is the client; a spoofed
    # address the client wrote further left is never believed.
    assert client_address("10.1.2.3", ["6.6.6.6, 198.51.100.1, 10.9.9.9"], proxies) == "198.51.100.1"
    assert client_address("10.1.2.3", ["6.6.6.6", "198.51.100.1"], proxies) == "198.51.100.1"
    assert client_address("10.1.2.3", ["junk, 10.9.9.9"], proxies) == "10.9.9.9"  # stops at garbage
    assert client_address("10.1.2.3", [], proxies) == "10.1.2.3"
    assert client_address("fd00::1", ["[2001:db8::7]"], proxies) == "2001:db8::7"
    assert client_address("::ffff:10.0.0.5", ["198.51.100.1"], proxies) == "198.51.100.1"


@pytest.fixture
async def behind_a_proxy(aiohttp_client, database_url, engine, session_chain) -> AsyncIterator[ApiHarness]:
    """The application as deployed behind a load balancer on loopback (the test client's peer)."""
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    base = indexer_settings(network)
    api_config = ApiConfig(public_base_url=base.api.public_base_url,
                           trusted_proxies=["127.0.0.0/8", "::1/128"])
    async with checked_api(aiohttp_client, base.model_copy(update={"api": api_config}), database_url,
                           engine) as harness:
        yield harness


async def sign_in_attempts(api: ApiHarness, forwarded_for: str | None, n: int) -> list[int]:
    """`n` failed sign-ins from one browser, each for another email (so only the client limit bites)."""
    browser = Browser(api, forwarded_for)
    return [(await browser.sign_in("acme", f"nobody{i}@acme.test", "wrong password")).status
            for i in range(n)]


async def test_behind_a_trusted_proxy_each_client_has_its_own_sign_in_limit(behind_a_proxy):
    api = behind_a_proxy
    member = await add_staff(api.engine, "admin")
    limit = staff_store.SIGN_IN_LIMIT_PER_CLIENT
    assert await sign_in_attempts(api, "198.51.100.7", limit) == [401] * limit
    assert await sign_in_attempts(api, "198.51.100.7", 1) == [429]
    # Another office behind the same load balancer still signs in.
    assert (await Browser(api, "203.0.113.20").sign_in("acme", member.email)).status == 303
    # The API's keyless budget is counted per forwarded client too.
    one = await api.client.get("/v1/users/usr_x", headers={"X-Forwarded-For": "192.0.2.1"})
    other = await api.client.get("/v1/users/usr_x", headers={"X-Forwarded-For": "192.0.2.2"})
    assert one.headers["X-RateLimit-Remaining"] == other.headers["X-RateLimit-Remaining"]


async def test_a_forwarded_header_from_an_untrusted_peer_is_ignored(api):
    """Without trusted proxies (the default), a client writing X-Forwarded-For cannot escape its limit by
    claiming to be someone else every time."""
    limit = staff_store.SIGN_IN_LIMIT_PER_CLIENT
    statuses = [(await Browser(api, f"198.51.100.{i}").sign_in("acme", f"nobody{i}@acme.test", "wrong"))
                .status for i in range(limit + 1)]
    assert statuses == [401] * limit + [429]


async def test_the_per_email_limit_belongs_to_the_organisation(api):
    """Whoever knows an email cannot lock that member out by failing sign-ins in another organisation's
    name (or in a made-up one's)."""
    member = await add_staff(api.engine, "admin", "acme")
    await add_staff(api.engine, "admin", "globex", member.email)
    limit = staff_store.SIGN_IN_LIMIT_PER_EMAIL
    for org in ("globex", "no such organisation"):
        statuses = [(await Browser(api, str(n)).sign_in(org, member.email, "wrong")).status
                    for n in range(limit + 1)]
        assert statuses == [401] * limit + [429], org
    assert (await Browser(api).sign_in("acme", member.email)).status == 303


async def test_the_audit_log_filters_by_action_member_and_day(api):
    admin = await add_staff(api.engine, "admin", email="ada@acme.test")
    other = await add_staff(api.engine, "admin", email="bob@acme.test")
    ada, bob = Browser(api), Browser(api)
    await ada.sign_in("acme", admin.email)
    await bob.sign_in("acme", other.email)
    token = await ada.token("/dashboard/keys")
    await ada.post("/dashboard/keys", {"csrf_token": token, "scopes": "read", "description": "=1+1 <b>x</b>"})

    async def actions(query: str) -> list[str]:
        page = await ada.get(f"/dashboard/audit?{query}")
        assert page.status == 200, await page.text()
        return re.findall(r"<td><code>([a-z_.]+)</code></td>", await page.text())

    assert await actions("") == ["key.created", "staff.signed_in", "staff.signed_in"]
    assert await actions("action=key.created") == ["key.created"]
    assert await actions("action=staff.") == ["staff.signed_in", "staff.signed_in"]
    assert await actions("member=BOB") == ["staff.signed_in"]
    assert await actions("from=2000-01-01&to=2000-12-31") == []
    assert len(await actions("from=2000-01-01")) == 3
    bad = await ada.get("/dashboard/audit?from=not-a-day")
    assert bad.status == 400 and "YYYY-MM-DD" in await bad.text()
    assert "&lt;b&gt;x&lt;/b&gt;" in await (await ada.get("/dashboard/audit")).text()  # escaped
