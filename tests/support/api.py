"""The real API application on loopback HTTP, on a fresh database, with helpers to make keys and users."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from api import keys
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

    async def user(self, org: str = "acme", **body) -> str:
        resp = await self.client.post("/v1/users", json=body, headers=await self.headers(org))
        assert resp.status == 201, await resp.text()
        return (await resp.json())["user"]["id"]
