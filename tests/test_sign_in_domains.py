"""Each organisation's sign-in domains: a borrower signs in on the lender's own site, registered for its
organisation (API, CLI, dashboard); a message naming another organisation's domain, a URI outside the
domain's prefixes, or (in production) the service's own host is refused, and the nonce endpoint says which
domains are accepted. Real EIP-4361 messages and signatures, the real API on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from eth_account import Account
from sqlalchemy import select

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import indexer_settings, local_network
from tests.support.dashboard import add_staff, dashboard_browser, serious_accessibility_problems
from tests.support.wallets import get_nonce, service_domain, sign_in_body
from vip.store.tables import audit_log, connections

LENDER_SITE = "app.lender.example"
OTHER_SITE = "app.zeta-lending.example"


async def register(api: ApiHarness, domain: str, prefixes: list[str] | None = None, org: str = "acme",
                   expect: int = 201) -> dict:
    body: dict = {"domain": domain} if prefixes is None else {"domain": domain, "uri_prefixes": prefixes}
    resp = await api.client.post("/v1/sign-in-domains", json=body, headers=await api.headers(org))
    assert resp.status == expect, await resp.text()
    return await resp.json()


async def nonce_body(api: ApiHarness, user_id: str, org: str = "acme") -> dict:
    resp = await api.client.get("/v1/connect/wallet/nonce", headers={**await api.headers(org),
                                                                      "X-User-Id": user_id})
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def sign_in(api: ApiHarness, user_id: str, account, *, domain: str, uri: str, org: str = "acme",
                  nonce: str | None = None):
    body = await sign_in_body(api, user_id, account, org=org, domain=domain, uri=uri, nonce=nonce,
                              issued_at=None if nonce is None else (await get_nonce(api, user_id, org))[1])
    return await api.client.post("/v1/connect/wallet", json=body, headers=await api.headers(org))


async def test_a_borrower_signs_in_on_the_lenders_own_domain_and_not_on_anothers(api):
    await register(api, LENDER_SITE, ["https://app.lender.example/connect/"])
    await register(api, OTHER_SITE, org="zeta")
    user_id = await api.user()
    said = await nonce_body(api, user_id)
    # The nonce says where a message may be signed: the lender's site, and (a development stack) ours.
    assert said["sign_in_domains"] == [
        {"domain": LENDER_SITE, "uri_prefixes": ["https://app.lender.example/connect/"]},
        {"domain": service_domain(api), "uri_prefixes": [f"http://{service_domain(api)}/"]}]
    assert OTHER_SITE not in str(said)

    borrower = Account.create()
    # Another organisation's site: refused, naming what is accepted; nothing is connected.
    resp = await sign_in(api, user_id, borrower, domain=OTHER_SITE, uri=f"https://{OTHER_SITE}/connect/")
    assert resp.status == 422, await resp.text()
    error = (await resp.json())["error"]
    assert error["code"] == "ERR_DOMAIN_MISMATCH"
    assert error["details"] == {"domain": OTHER_SITE, "accepted_domains": [LENDER_SITE, service_domain(api)]}
    # The lender's domain, but a URI outside its prefixes: refused too.
    resp = await sign_in(api, user_id, borrower, domain=LENDER_SITE, uri="https://app.lender.example/other")
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_URI_MISMATCH"
    async with api.engine.connect() as conn:
        assert (await conn.execute(select(connections.c.id))).all() == []

    # On the lender's page, as the wallet sees it: connected.
    resp = await sign_in(api, user_id, borrower, domain=LENDER_SITE,
                         uri="https://app.lender.example/connect/wallet?step=2")
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["connection"]["identifier"] == borrower.address

    # zeta's borrower signs in on zeta's site, not on acme's.
    zeta_user = await api.user("zeta")
    resp = await sign_in(api, zeta_user, Account.create(), domain=LENDER_SITE,
                         uri="https://app.lender.example/connect/", org="zeta")
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "ERR_DOMAIN_MISMATCH"
    resp = await sign_in(api, zeta_user, Account.create(), domain=OTHER_SITE,
                         uri=f"https://{OTHER_SITE}/anything", org="zeta")
    assert resp.status == 201, await resp.text()


async def test_a_refused_domain_spends_no_nonce(api):
    await register(api, LENDER_SITE)
    user_id = await api.user()
    borrower = Account.create()
    nonce, _ = await get_nonce(api, user_id)
    resp = await sign_in(api, user_id, borrower, domain=OTHER_SITE, uri=f"https://{OTHER_SITE}/",
                         nonce=nonce)
    assert (await resp.json())["error"]["code"] == "ERR_DOMAIN_MISMATCH"
    resp = await sign_in(api, user_id, borrower, domain=LENDER_SITE, uri=f"https://{LENDER_SITE}/",
                         nonce=nonce)
    assert resp.status == 201, await resp.text()


@pytest.fixture
async def production_api(aiohttp_client, database_url, engine, session_chain) -> AsyncIterator[ApiHarness]:
    """The application as in production: no network is a local one."""
    network = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    settings = indexer_settings(network.model_copy(update={"local": False}))
    async with checked_api(aiohttp_client, settings, database_url, engine) as harness:
        yield harness


async def test_in_production_only_registered_domains_are_accepted(production_api):
    api = production_api
    user_id = await api.user()
    assert (await nonce_body(api, user_id))["sign_in_domains"] == []
    ours = service_domain(api)
    resp = await sign_in(api, user_id, Account.create(), domain=ours, uri=f"http://{ours}/")
    assert resp.status == 422 and (await resp.json())["error"]["details"]["accepted_domains"] == []
    await register(api, LENDER_SITE)
    assert (await nonce_body(api, user_id))["sign_in_domains"] == [
        {"domain": LENDER_SITE, "uri_prefixes": [f"https://{LENDER_SITE}/"]}]
    resp = await sign_in(api, user_id, Account.create(), domain=LENDER_SITE, uri=f"https://{LENDER_SITE}/x")
    assert resp.status == 201, await resp.text()


@pytest.mark.parametrize(("body", "field"), [
    ({"domain": "https://app.lender.example"}, "domain"),
    ({"domain": "app.lender.example/connect"}, "domain"),
    ({"domain": "app.lender.example:99999"}, "domain"),
    ({"domain": "user@app.lender.example"}, "domain"),
    ({"domain": LENDER_SITE, "uri_prefixes": ["http://app.lender.example/"]}, "uri_prefixes"),
    ({"domain": LENDER_SITE, "uri_prefixes": ["https://elsewhere.example/"]}, "uri_prefixes"),
    ({"domain": LENDER_SITE, "uri_prefixes": ["https://app.lender.example/?q=1"]}, "uri_prefixes"),
    ({"domain": LENDER_SITE, "uri_prefixes": ["https://app.lender.example/"] * 11}, "uri_prefixes"),
])
async def test_bad_sign_in_domains_are_refused_and_change_nothing(api, body, field):
    resp = await api.client.post("/v1/sign-in-domains", json=body, headers=await api.headers())
    assert resp.status == 400, await resp.text()
    error = (await resp.json())["error"]
    assert error["code"] == "ERR_VALIDATION" and any(k.startswith(field) for k in error["details"]), error
    listed = await api.client.get("/v1/sign-in-domains", headers=await api.headers())
    assert (await listed.json()) == {"sign_in_domains": []}


async def test_sign_in_domains_are_managed_by_admin_keys_of_their_own_organisation(api):
    created = (await register(api, "App.Lender.Example"))["sign_in_domain"]
    assert (created["domain"], created["uri_prefixes"]) == (LENDER_SITE, [f"https://{LENDER_SITE}/"])
    prefixes = ["https://app.lender.example/a/", "https://app.lender.example/b/"]
    replaced = (await register(api, LENDER_SITE, prefixes, expect=200))["sign_in_domain"]
    assert replaced["uri_prefixes"] == ["https://app.lender.example/a/", "https://app.lender.example/b/"]
    local = (await register(api, "localhost:3000", ["http://localhost:3000/connect"]))["sign_in_domain"]
    assert local["uri_prefixes"] == ["http://localhost:3000/connect"]  # http for a loopback host only
    listed = await api.client.get("/v1/sign-in-domains", headers=await api.headers())
    assert [d["domain"] for d in (await listed.json())["sign_in_domains"]] == ["app.lender.example",
                                                                               "localhost:3000"]
    for scopes in (["read", "write", "disburse"],):
        headers = await api.headers(scopes=scopes)
        assert (await api.client.get("/v1/sign-in-domains", headers=headers)).status == 403
        assert (await api.client.post("/v1/sign-in-domains", json={"domain": "x.example"},
                                      headers=headers)).status == 403
    other = await api.client.get("/v1/sign-in-domains", headers=await api.headers("zeta"))
    assert (await other.json()) == {"sign_in_domains": []}
    gone = await api.client.delete(f"/v1/sign-in-domains/{LENDER_SITE}", headers=await api.headers("zeta"))
    assert gone.status == 404
    gone = await api.client.delete(f"/v1/sign-in-domains/{LENDER_SITE}", headers=await api.headers())
    assert gone.status == 200 and (await gone.json())["sign_in_domain"]["domain"] == LENDER_SITE
    assert (await api.client.delete(f"/v1/sign-in-domains/{LENDER_SITE}",
                                    headers=await api.headers())).status == 404


def vip(*args: str, database_url: str, expect: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    done = subprocess.run([sys.executable, "-m", "vip.cli", "sign-in-domains", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == expect, (done.stdout, done.stderr)
    return done


@pytest.mark.e2e
async def test_the_cli_manages_sign_in_domains(api, database_url):
    await api.key("acme")  # the organisation exists
    out = vip("add", LENDER_SITE, "--uri-prefix", "https://app.lender.example/connect/", "--org", "acme",
              database_url=database_url).stdout
    assert out.strip() == f"added {LENDER_SITE} for acme: https://app.lender.example/connect/"
    assert vip("list", "--org", "acme", database_url=database_url).stdout.strip() == \
        f"{LENDER_SITE}  https://app.lender.example/connect/"
    user_id = await api.user()
    assert (await nonce_body(api, user_id))["sign_in_domains"][0]["domain"] == LENDER_SITE
    err = vip("add", "not a domain", "--org", "acme", database_url=database_url, expect=1).stderr
    assert err.startswith("ERR_VALIDATION")
    vip("list", "--org", "nobody", database_url=database_url, expect=2)
    assert vip("remove", LENDER_SITE, "--org", "acme", database_url=database_url).stdout.strip() == \
        f"removed {LENDER_SITE} from acme"
    assert vip("remove", LENDER_SITE, "--org", "acme", database_url=database_url, expect=1).stderr \
        .startswith("ERR_NOT_FOUND")


@pytest.mark.e2e
async def test_an_admin_manages_sign_in_domains_in_the_dashboard(api):
    member = await add_staff(api.engine, "admin", "acme", "ada@acme.test")
    async with dashboard_browser(str(api.client.make_url("/")), api.engine) as browser:
        page = await browser.sign_in_as("acme", member.email)
        await page.get_by_role("navigation", name="Main").get_by_role("link", name="Sign-in domains").click()
        await page.get_by_role("textbox", name="Domain").fill("app.lender.example:8443")
        await page.get_by_label("URI prefixes").fill("ftp://app.lender.example:8443/")
        await page.get_by_role("button", name="Save domain").click()
        assert "must be an https URI" in await page.get_by_role("alert").inner_text()
        await page.get_by_label("URI prefixes").fill("https://app.lender.example:8443/connect/")
        await page.get_by_role("button", name="Save domain").click()
        assert "is saved" in await page.get_by_role("status").inner_text()
        assert await serious_accessibility_problems(page) == []
        user_id = await api.user()
        assert (await nonce_body(api, user_id))["sign_in_domains"][0] == {
            "domain": "app.lender.example:8443", "uri_prefixes": ["https://app.lender.example:8443/connect/"]}
        await page.get_by_role("button", name="Remove app.lender.example:8443").click()
        # One click only asks; the domain goes on the confirmation page's button.
        assert (await nonce_body(api, user_id))["sign_in_domains"] != []
        await page.get_by_role("button", name="Remove the domain").click()
        assert await page.get_by_role("table").count() == 0
        analyst = await add_staff(api.engine, "analyst", "acme")
        other = await browser.sign_in_as("acme", analyst.email)
        await other.goto(browser.url("/dashboard/sign-in-domains"))
        assert "Your role does not include this page." in await other.content()
    async with api.engine.connect() as conn:
        actions = [r.action for r in await conn.execute(select(audit_log.c.action).where(
            audit_log.c.action.like("sign_in_domain.%")).order_by(audit_log.c.id))]
    assert actions == ["sign_in_domain.added", "sign_in_domain.removed"]
