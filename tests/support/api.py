"""The real API application on loopback HTTP, on a fresh database, with helpers to make keys and users."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp.test_utils import TestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.accounts import keys
from vip.config import Settings

ALL_SCOPES = ["read", "write", "disburse", "admin"]


@dataclass
class ApiHarness:
    client: TestClient
    engine: AsyncEngine
    settings: Settings
    _keys: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)

    async def key(self, org: str = "acme", scopes: list[str] | None = None) -> str:
        """A secret key of `org` with `scopes` (all by default), created once per harness."""
        wanted = tuple(scopes or ALL_SCOPES)
        if (org, wanted) not in self._keys:
            async with self.engine.begin() as conn:
                org_id = await keys.ensure_organisation(conn, org)
                secret, _ = await keys.create_key(conn, org_id, list(wanted))
            self._keys[(org, wanted)] = secret
        return self._keys[(org, wanted)]

    async def headers(self, org: str = "acme", scopes: list[str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {await self.key(org, scopes)}"}

    async def in_one_rate_window(self, seconds: float = 20.0) -> None:
        """Wait, if need be, until the API's fixed one-minute rate-limit window (PostgreSQL's clock) has at
        least `seconds` left: a test that spends a whole budget and then expects a 429 must not see the
        window turn under it."""
        async with self.engine.connect() as conn:
            left = await conn.scalar(text(
                "SELECT 60 - extract(epoch FROM now() - date_trunc('minute', now()))::float8"))
        if left < seconds:
            await asyncio.sleep(left + 0.05)

    async def user(self, org: str = "acme", **body) -> str:
        resp = await self.client.post("/v1/users", json=body, headers=await self.headers(org))
        assert resp.status == 201, await resp.text()
        return (await resp.json())["user"]["id"]


@asynccontextmanager
async def checked_api(aiohttp_client, settings: Settings, database_url: str,
                      engine: AsyncEngine) -> AsyncIterator[ApiHarness]:
    """The real application on loopback with `settings`, on `database_url`; every response it gives is
    checked against its own OpenAPI document, and the test fails on any that breaks it."""
    from tests.support.openapi_check import conformance_middleware
    from vip.api.app import create_app

    app = create_app(settings, database_url)
    violations: list = []
    app.middlewares.insert(0, conformance_middleware(violations, settings.api.public_base_url))
    client = await aiohttp_client(app)
    yield ApiHarness(client, engine, settings)
    assert not violations, "responses that break the OpenAPI document:\n" + "\n".join(map(str, violations))
