"""Application factory: settings, engine and clock wired through typed app keys and a cleanup context."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.clock import ChainClock, Clock, clock_for
from vip.config import Settings
from vip.store.engine import create_engine

SETTINGS = web.AppKey("settings", Settings)
ENGINE = web.AppKey("engine", AsyncEngine)
CLOCK = web.AppKey("clock", Clock)


async def health(request: web.Request) -> web.Response:
    """Liveness and readiness: answers 200 when the database answers."""
    async with request.app[ENGINE].connect() as conn:
        await conn.execute(text("SELECT 1"))
    now = await request.app[CLOCK].now()
    return web.json_response({"status": "ok", "time": now.isoformat().replace("+00:00", "Z")})


async def metrics(_: web.Request) -> web.Response:
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


def create_app(settings: Settings, database_url: str) -> web.Application:
    app = web.Application()
    app[SETTINGS] = settings

    async def resources(app: web.Application) -> AsyncIterator[None]:
        app[ENGINE] = create_engine(database_url)
        app[CLOCK] = clock_for(settings)
        yield
        clock = app[CLOCK]
        if isinstance(clock, ChainClock):
            await clock.close()
        await app[ENGINE].dispose()

    app.cleanup_ctx.append(resources)
    app.router.add_get("/v1/health", health)
    app.router.add_get("/healthz", health)
    app.router.add_get("/metrics", metrics)
    return app
