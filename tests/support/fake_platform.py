"""A data platform of our own, on loopback HTTP: the OAuth authorization and token endpoints and the paged
records endpoint, behaving as the service expects a platform to (see vip.connections.platform_oauth), and
misbehaving on demand (consent denied, slow pages, a 503 or garbage on page N, refused client secret).
Access tokens come with a refresh token (rotated at each use, RFC 6749 6); `expire_access_tokens()` makes
the platform stop honouring the access tokens it gave, and `refuse_refresh` makes it refuse every refresh
token (the user withdrew the grant).

    fake = FakePlatform(client_id="vip-paystream", client_secret="s3cret", scopes="...")
    await fake.start()
    platforms = load_platforms(overrides={"paystream": fake.endpoints()}, environ={...: "s3cret"})
    settings = Settings(..., platforms=platforms)  # load_platforms: tests.support.platforms
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from vip.api.jsonio import dumps


@dataclass
class FakeAccount:
    id: str = "acc_0001"
    holder: str = "Jane Q. Worker"
    currency: str = "USDC"
    records: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Grant:
    redirect_uri: str
    client_id: str
    scope: str
    used: bool = False


class FakePlatform:
    """One platform; `account` is what every access token it grants opens."""

    def __init__(self, *, client_id: str, client_secret: str, scopes: str,
                 account: FakeAccount | None = None, page_size: int = 2) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.scopes = scopes
        self.account = account or FakeAccount()
        self.page_size = page_size
        # Misbehaviour switches.
        self.deny = False  # the user declines consent
        self.fail_page: int | None = None  # records page (0-based) answered 503
        self.garbage_page: int | None = None  # records page answered with a body that is not a page
        self.slow_page: int | None = None  # records page answered after `slow_s`
        self.slow_s = 0.0
        self.token_status: int | None = None  # token endpoint answers this status (e.g. 500)
        self.refuse_refresh = False  # refresh_token grants answered 400 invalid_grant
        self.expires_in = 3600
        # What happened.
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.records_requests: list[dict[str, Any]] = []
        self._grants: dict[str, _Grant] = {}
        self._tokens: set[str] = set()
        self._refresh_tokens: set[str] = set()  # valid, unused refresh tokens
        self.refresh_tokens_issued: list[str] = []
        self._server: TestServer | None = None

    # --- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> FakePlatform:
        app = web.Application()
        app.router.add_get("/oauth/authorize", self._authorize)
        app.router.add_post("/oauth/token", self._token)
        app.router.add_get("/v1/records", self._records)
        self._server = TestServer(app, host="127.0.0.1")
        await self._server.start_server()
        return self

    async def close(self) -> None:
        if self._server is not None:
            await self._server.close()

    def url(self, path: str) -> str:
        assert self._server is not None, "start() the platform first"
        return str(self._server.make_url(path))

    def endpoints(self) -> dict[str, str]:
        """Config overrides pointing a platform's endpoints here."""
        return {"authorize_url": self.url("/oauth/authorize"), "token_url": self.url("/oauth/token"),
                "records_url": self.url("/v1/records")}

    def issue_code(self, redirect_uri: str) -> str:
        """A valid code, as if a user had consented (for tests that skip the browser leg)."""
        code = secrets.token_urlsafe(16)
        self._grants[code] = _Grant(redirect_uri, self.client_id, self.scopes)
        return code

    # --- endpoints --------------------------------------------------------------------------------------

    async def _authorize(self, request: web.Request) -> web.Response:
        q = dict(request.query)
        self.authorize_requests.append(q)
        redirect_uri, state = q.get("redirect_uri"), q.get("state")
        if (q.get("response_type") != "code" or q.get("client_id") != self.client_id or not redirect_uri
                or not state or q.get("scope") != self.scopes):
            return web.json_response({"error": "invalid_request"}, status=400)
        if self.deny:
            params = {"error": "access_denied", "error_description": "The user denied access", "state": state}
        else:
            code = secrets.token_urlsafe(16)
            self._grants[code] = _Grant(redirect_uri, q["client_id"], q["scope"])
            params = {"code": code, "state": state}
        raise web.HTTPFound(URL(redirect_uri).update_query(params))

    async def _token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.token_requests.append({k: str(v) for k, v in form.items()})
        if self.token_status is not None:
            return web.json_response({"error": "server_error"}, status=self.token_status)
        if form.get("client_id") != self.client_id or form.get("client_secret") != self.client_secret:
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("grant_type") == "refresh_token":
            offered = str(form.get("refresh_token", ""))
            if self.refuse_refresh or offered not in self._refresh_tokens:
                return web.json_response({"error": "invalid_grant"}, status=400)
            self._refresh_tokens.discard(offered)  # rotated: each refresh token is good once
            return self._issue(self.scopes)
        if form.get("grant_type") != "authorization_code":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        grant = self._grants.get(str(form.get("code", "")))
        if grant is None or grant.used or grant.redirect_uri != form.get("redirect_uri"):
            return web.json_response({"error": "invalid_grant"}, status=400)
        grant.used = True
        return self._issue(grant.scope)

    def _issue(self, scope: str) -> web.Response:
        token, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self._tokens.add(token)
        self._refresh_tokens.add(refresh)
        self.refresh_tokens_issued.append(refresh)
        return web.json_response({"access_token": token, "token_type": "Bearer",
                                  "expires_in": self.expires_in, "refresh_token": refresh, "scope": scope})

    def expire_access_tokens(self) -> None:
        """The access tokens given so far stop being honoured (they expired on the platform's side)."""
        self._tokens.clear()

    async def _records(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        cursor = request.query.get("cursor")
        self.records_requests.append({"authorization": auth, "cursor": cursor})
        if not auth.startswith("Bearer ") or auth.removeprefix("Bearer ") not in self._tokens:
            return web.json_response({"error": "invalid_token"}, status=401)
        page = int(cursor) if cursor is not None else 0
        if page == self.slow_page:
            await asyncio.sleep(self.slow_s)
        if page == self.fail_page:
            return web.json_response({"error": "temporarily_unavailable"}, status=503)
        if page == self.garbage_page:
            return web.Response(text='{"records": "not a list"', content_type="application/json")
        start = page * self.page_size
        records = self.account.records[start:start + self.page_size]
        more = start + self.page_size < len(self.account.records)
        body = {"account": {"id": self.account.id, "holder": self.account.holder,
                            "currency": self.account.currency, "type": "checking"},
                "records": records, "next_cursor": str(page + 1) if more else None}
        # Decimal amounts go out as exact JSON numbers.
        return web.Response(text=dumps(body), content_type="application/json")
