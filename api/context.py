"""Typed application keys and the per-request principal."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from aiohttp import ClientSession, web
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.accounts.keys import Principal, PrincipalCache
from vip.chain.clients import RpcClients
from vip.clock import Clock
from vip.config import Settings
from vip.readiness import CachedReadiness
from vip.store.idempotency import IdempotencyClaim

SETTINGS = web.AppKey("settings", Settings)
ENGINE = web.AppKey("engine", AsyncEngine)
CLAIMS = web.AppKey("claims", AsyncEngine)  # Idempotency-Key claims: a connection held per request
CLOCK = web.AppKey("clock", Clock)
HTTP = web.AppKey("http", ClientSession)  # outbound HTTP (platform OAuth and data pulls)
RPCS = web.AppKey("rpcs", RpcClients)  # one JSON-RPC client per network for the process's chain reads
KEY_CACHE = web.AppKey("key_cache", PrincipalCache)
READINESS = web.AppKey("readiness", CachedReadiness)  # the readiness probe's answer, shared for 2 s

PRINCIPAL = web.RequestKey("principal", Principal)  # set by the access middleware
REQUEST_ID = web.RequestKey("request_id", str)
RATE_HEADERS = web.RequestKey("rate_headers", dict)  # X-RateLimit-* for the response
# A POST's Idempotency-Key claim (set by the idempotency middleware): a handler creating a resource records
# it under the key in its own transaction (vip.store.idempotency.record_resource).
IDEMPOTENCY = web.RequestKey("idempotency", IdempotencyClaim)
# The resource a retried request's first attempt created when its answer was lost: answer with it.
IDEMPOTENT_RESOURCE = web.RequestKey("idempotent_resource", str)


def principal(request: web.Request) -> Principal:
    return request[PRINCIPAL]


P = ParamSpec("P")
R = TypeVar("R")


def _mark(handler: Callable[P, R], scope: str | None) -> Callable[P, R]:
    # The access middleware reads the mark (`required_scope`) off the route's handler.
    vars(handler)["required_scope"] = scope
    return handler


def requires(scope: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a handler as needing an API key with `scope` (read, write, disburse, admin); the handler is
    returned as it is, with its own type."""
    def mark(handler: Callable[P, R]) -> Callable[P, R]:
        return _mark(handler, scope)
    return mark


def public(handler: Callable[P, R]) -> Callable[P, R]:
    """Mark a handler as reachable without an API key (health, docs, the OAuth callback)."""
    return _mark(handler, None)
