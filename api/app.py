"""Application factory: settings, engine, clock and outbound HTTP wired through typed app keys and a
cleanup context; the middleware pipeline; every route group."""

from __future__ import annotations

import asyncio
import functools
import hmac
from collections.abc import AsyncIterator, Callable

import aiohttp
import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from vip.accounts import keys
from vip.api import ratelimit
from vip.api.context import CLAIMS, CLOCK, ENGINE, HTTP, KEY_CACHE, READINESS, RPCS, SETTINGS, public
from vip.api.jsonio import iso, json_response
from vip.api.middleware import MAX_BODY_BYTES, ApiRequest, access, idempotency, request_context
from vip.api.routes import (
    admin,
    connections,
    docs,
    events,
    funding_wallets,
    payments,
    platforms,
    sign_in_domains,
    test_clocks,
    transactions,
    users,
    verification,
    wallet_connect,
    wallets,
    webhooks,
)
from vip.api.routes import dev as dev_routes  # integrators' test clock (local networks only)
from vip.chain.clients import RpcClients
from vip.clock import ChainClock, clock_for
from vip.config import Settings
from vip.dashboard.app import add_dashboard
from vip.errors import ApiError, Unauthorized
from vip.readiness import CachedReadiness
from vip.store.engine import create_engine
from vip.store.outage import database_unreachable, first_line
from vip.store.transaction_guard import http_trace

log = structlog.get_logger(__name__)
API_RPC_ATTEMPTS = 2
ROUTE_GROUPS = (users.routes, admin.routes, wallet_connect.routes, platforms.routes, connections.routes,
                sign_in_domains.routes,  # where borrowers sign in (Sign-In with Ethereum domains)
                wallets.routes, transactions.routes, docs.routes,
                funding_wallets.routes, payments.routes,  # disbursement
                verification.routes,  # VIP report, risk score
                webhooks.routes, events.routes,  # webhook endpoints, events and replay
                dev_routes.routes, test_clocks.routes)  # integrators' test clocks (local networks only)


@public
async def liveness(request: web.Request) -> web.Response:
    """The process answers (see vip.api.readiness for why liveness checks no dependency)."""
    return json_response({"status": "ok"})


@public
async def ready(request: web.Request) -> web.Response:
    """200 when the database and every enabled network's RPC answer; 503 naming what does not."""
    problems = await request.app[READINESS].problems(request.app[ENGINE], request.app[HTTP],
                                                     request.app[SETTINGS].enabled_networks())
    if problems:
        log.warning("not ready", problems=problems)
        summary = "; ".join(f"{name}: {problem}" for name, problem in problems.items())
        raise ApiError(f"this API process is not ready: {summary}", problems, code="ERR_NOT_READY",
                       status=503)
    return json_response({"status": "ok", "time": iso(await request.app[CLOCK].now())})


@public
async def metrics(request: web.Request) -> web.Response:
    """Prometheus exposition; behind `Authorization: Bearer <api.metrics_token>` when one is set."""
    token = request.app[SETTINGS].api.metrics_token
    if token is not None:
        given = request.headers.get("Authorization", "")
        expected = f"Bearer {token.get_secret_value()}"
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise Unauthorized("/metrics wants Authorization: Bearer <the metrics token>")
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


def metrics_listener(settings: Settings) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context serving /metrics on its own listener (api.metrics_host:metrics_port), with the
    API's error bodies and the token check when one is set."""

    async def listener(_: web.Application) -> AsyncIterator[None]:
        app = web.Application(middlewares=[request_context])
        app[SETTINGS] = settings
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, settings.api.metrics_host, settings.api.metrics_port).start()
        log.info("metrics listening", url=f"http://{settings.api.metrics_host}:{settings.api.metrics_port}"
                                          "/metrics")
        yield
        await runner.cleanup()

    return listener


async def _prune_rate_limits(app: web.Application) -> None:
    while True:
        await asyncio.sleep(60)
        try:
            async with app[ENGINE].begin() as conn:
                await ratelimit.prune(conn)
        except Exception as exc:  # housekeeping must never take the API down
            if database_unreachable(exc):  # an outage: one line, the requests say the rest
                log.warning("rate-limit pruning skipped: database unreachable", error=first_line(exc))
            else:
                log.exception("rate-limit pruning failed")


def create_app(settings: Settings, database_url: str) -> web.Application:
    app = web.Application(middlewares=[request_context, access, idempotency], client_max_size=MAX_BODY_BYTES)
    # Requests are built as ApiRequest, so that what the HTTP parser refuses (request lines and headers
    # over aiohttp's limits) is answered in the spec's error body too: the request factory is the one
    # place aiohttp lets an application see those requests.
    make_request = functools.partial(app._make_request, _cls=ApiRequest)
    app._make_request = make_request  # type: ignore[method-assign]  # aiohttp has no public hook for this
    # The API never signs: whatever operator key reached the settings is dropped here (the daemon, `vip
    # index`, is the only process that executes charges; docs/security.md).
    app[SETTINGS] = settings.without_operator()
    app[KEY_CACHE] = keys.PrincipalCache(settings.api.key_cache_s)
    app[READINESS] = CachedReadiness()

    async def resources(app: web.Application) -> AsyncIterator[None]:
        # Pre-ping: a pooled connection is checked before use (one round trip per checkout), so the first
        # request after a database restart gets a fresh connection instead of a dropped one's error.
        app[ENGINE] = create_engine(database_url)
        app[CLAIMS] = create_engine(database_url, pool_size=10)
        app[CLOCK] = clock_for(settings)
        app[HTTP] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15),
                                          trace_configs=[http_trace()])
        # A request's chain reads give up after API_RPC_ATTEMPTS tries: a lender waits seconds, not minutes.
        app[RPCS] = RpcClients(settings.rpc.model_copy(update={
            "max_attempts": min(settings.rpc.max_attempts, API_RPC_ATTEMPTS)}))
        housekeeping = asyncio.create_task(_prune_rate_limits(app))
        revocations = asyncio.create_task(keys.follow_revocations(app[ENGINE], app[KEY_CACHE]))
        yield
        housekeeping.cancel()
        revocations.cancel()
        await asyncio.gather(housekeeping, revocations, return_exceptions=True)
        await app[HTTP].close()
        await app[RPCS].close()
        clock = app[CLOCK]
        if isinstance(clock, ChainClock):
            await clock.close()
        await app[ENGINE].dispose()
        await app[CLAIMS].dispose()

    app.cleanup_ctx.append(resources)
    app.router.add_get("/v1/health", ready)
    app.router.add_get("/readyz", ready)
    app.router.add_get("/healthz", liveness)
    if settings.api.metrics_port is None:
        app.router.add_get("/metrics", metrics)
    else:
        app.cleanup_ctx.append(metrics_listener(settings))
    for group in ROUTE_GROUPS:
        app.router.add_routes(group)
    add_dashboard(app)  # the staff's pages under /dashboard (HTML; not in the OpenAPI document)
    return app
