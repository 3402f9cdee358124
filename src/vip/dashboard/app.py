"""Mounting the dashboard on the API's application: every page's route table and the static files."""

from __future__ import annotations

import asyncio
import importlib.resources
import mimetypes
from collections.abc import AsyncIterator

import structlog
from aiohttp import web

from vip.api.context import ENGINE, public
from vip.dashboard import (
    audit_routes,
    borrowers_routes,
    keys_routes,
    networks_routes,
    session_routes,
    sign_in_domains_routes,
    staff_routes,
    webhooks_routes,
)
from vip.dashboard import staff as staff_store
from vip.dashboard.session import error_page

log = structlog.get_logger(__name__)

ROUTE_TABLES = (session_routes.routes, keys_routes.routes, webhooks_routes.routes, staff_routes.routes,
                audit_routes.routes, borrowers_routes.routes, networks_routes.routes,
                sign_in_domains_routes.routes)
STATIC_PREFIX = "/dashboard/static"
PRUNE_EVERY_S = 600


def _static_files() -> dict[str, bytes]:
    """The shipped static files by name, read once (a few kilobytes): only these names are served, so no
    path a client sends ever reaches the file system."""
    folder = importlib.resources.files("vip.dashboard") / "static"
    return {entry.name: entry.read_bytes() for entry in folder.iterdir()
            if entry.is_file() and not entry.name.startswith(".")}


_STATIC = _static_files()


@public
async def static_file(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    body = _STATIC.get(name)
    if body is None:
        raise web.HTTPNotFound(reason=f"no static file {name}")
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    headers = {"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"}
    return web.Response(body=body, content_type=content_type, headers=headers)


async def _prune_sessions(app: web.Application) -> None:
    while True:
        await asyncio.sleep(PRUNE_EVERY_S)
        try:
            async with app[ENGINE].begin() as conn:
                await staff_store.prune_sessions(conn)
        except Exception:  # housekeeping must never take the API down
            log.exception("pruning expired dashboard sessions failed")


async def _housekeeping(app: web.Application) -> AsyncIterator[None]:
    await asyncio.to_thread(staff_store.unknown_email_hash)  # before the first sign-in, not during it
    task = asyncio.create_task(_prune_sessions(app))
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@public
async def no_such_page(request: web.Request) -> web.Response:
    """Any other path under /dashboard: a page saying so (a browser is on the other end), not the API's
    JSON 404."""
    return error_page(request, 404, f"There is no dashboard page at {request.path}.")


def add_dashboard(app: web.Application) -> None:
    """Serve the dashboard under /dashboard on `app` (the API's application, whose resources, the
    engine among them, are set up by a cleanup context added before this one)."""
    for table in ROUTE_TABLES:
        app.router.add_routes(table)
    app.router.add_get(STATIC_PREFIX + "/{name}", static_file)
    app.router.add_route("*", "/dashboard/{path:.*}", no_such_page)  # last: matched when nothing else is
    app.cleanup_ctx.append(_housekeeping)  # expired sessions are deleted every 10 minutes
