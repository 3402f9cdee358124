"""A real webhook receiver on loopback, a clock tests move by hand, and helpers to make endpoints."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.accounts import keys
from vip.config import DEV_TOKEN_KEY
from vip.store.tables import webhook_deliveries
from vip.token_cipher import TokenCipher
from vip.webhooks import store

START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
DEV_CIPHER = TokenCipher.from_text(DEV_TOKEN_KEY)  # what the test settings seal secrets with
# Production secrets (no development value): for a `vip index` started without a local network.
PRODUCTION_TOKEN_KEY = "prod1:" + base64.urlsafe_b64encode(b"production-test-token-key-32byte").decode()
PRODUCTION_SECRETS = {"VIP_TOKEN_KEY": PRODUCTION_TOKEN_KEY,
                      "VIP_STATE_SECRET": "production-test-state-secret-of-40-chars!"}


class ManualClock:
    """The service clock, moved only by the test: the retry schedule runs without real waiting."""

    def __init__(self, start: datetime = START) -> None:
        self.current = start

    async def now(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta

    def set(self, moment: datetime) -> None:
        self.current = moment


@dataclass
class Received:
    headers: list[tuple[str, str]]  # every header line, in order (repeated names kept)
    body: bytes
    at: float  # time.monotonic() when the body was read

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def one(self, name: str) -> str:
        [value] = self.all(name)
        return value


@dataclass
class Receiver:
    """Answers each request with `respond(n)` (n counts from 1): a status code, or None to hang until
    released. Records every request."""

    respond: Callable[[int], int | None] = lambda n: 200
    received: list[Received] = field(default_factory=list)
    answer: str = "ok"  # the body of every answer
    url: str = ""
    release: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = [(k.decode(), v.decode()) for k, v in request.raw_headers]
        self.received.append(Received(headers, body, time.monotonic()))
        status = self.respond(len(self.received))
        if status is None:
            await self.release.wait()
            status = 200
        return web.Response(status=status, text=self.answer)

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def stop(self) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def event_ids(self) -> list[str]:
        return [r.one("Service-Event-Id") for r in self.received]


async def organisation(engine: AsyncEngine, name: str = "acme") -> str:
    async with engine.begin() as conn:
        return await keys.ensure_organisation(conn, name)


async def make_endpoint(engine: AsyncEngine, org_id: str, url: str, event_types: list[str] | None = None,
                        now: datetime = START, cipher: TokenCipher = DEV_CIPHER) -> tuple[str, str]:
    """(endpoint id, signing secret)."""
    async with engine.begin() as conn:
        secret, endpoint = await store.create_endpoint(conn, org_id, url, event_types, None, now,
                                                       cipher=cipher)
    return endpoint.id, secret


async def deliveries(engine: AsyncEngine, event_id: str | None = None) -> list:
    query = select(webhook_deliveries).order_by(webhook_deliveries.c.created_at, webhook_deliveries.c.id)
    if event_id is not None:
        query = query.where(webhook_deliveries.c.event_id == event_id)
    async with engine.connect() as conn:
        return list(await conn.execute(query))
