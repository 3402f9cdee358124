"""Request pipeline, outermost first: request id and error rendering, access (API key, scope, rate limit),
idempotent POSTs."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import hdrs, web
from sqlalchemy import and_, delete, func, or_, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.accounts import keys
from vip.api import ratelimit
from vip.api.context import (
    CLAIMS,
    ENGINE,
    IDEMPOTENCY,
    IDEMPOTENT_RESOURCE,
    KEY_CACHE,
    PRINCIPAL,
    RATE_HEADERS,
    REQUEST_ID,
    SETTINGS,
)
from vip.api.jsonio import dumps_bytes, json_response
from vip.errors import (
    ApiError,
    Conflict,
    Forbidden,
    InternalError,
    NotFound,
    RateLimited,
    Unauthorized,
    ValidationFailed,
    error_body,
)
from vip.store.engine import autocommit_connection
from vip.store.idempotency import IdempotencyClaim
from vip.store.locks import LockBusy, held_lock
from vip.store.outage import database_unreachable, first_line
from vip.store.tables import idempotency_keys

log = structlog.get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,100}$")
_BEARER = re.compile(r"^Bearer ([A-Za-z0-9_\-]{16,200})$")
IDEMPOTENCY_TTL = "24 hours"
MAX_BODY_BYTES = 1024 * 1024  # the application's client_max_size
UNMETERED = ("/healthz", "/readyz", "/metrics")  # operational endpoints: probed and scraped, never throttled
access_log = structlog.get_logger("vip.access")
OUTAGE_RETRY_AFTER_S = 5  # Retry-After of a 503 while the database is unreachable


def _render(request: web.Request, exc: ApiError) -> web.Response:
    body = error_body(exc.code, exc.message, exc.details, request[REQUEST_ID])
    return json_response(body, status=exc.status, headers=exc.headers)


def _new_request_id() -> str:
    return f"req_{secrets.token_hex(12)}"


class ApiRequest(web.Request):
    """The application's request class (installed by `create_app` as the request factory's class).

    A request aiohttp cannot parse (a request line or header over its 8190-byte limits, bad syntax) is
    answered by the server itself, before routing or any middleware, in plain text. Such a request is
    never routed, so its refusal is recognised here, at the last moment before the headers are written,
    and rewritten into the spec's error body with a request id."""

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        if (self._match_info is None and isinstance(response, web.Response) and response.status < 500
                and response.content_type != "application/json"):
            _as_error_body(response)
        await super()._prepare_hook(response)


def _as_error_body(response: web.Response) -> None:
    reason = response.text or ""
    too_long = "Got more than" in reason or "too long" in reason.lower()
    detail = ("the request line or a header is longer than the server accepts (8190 bytes)" if too_long
              else "not a valid HTTP/1.1 request")
    request_id = _new_request_id()
    body = dumps_bytes(error_body(ValidationFailed.code, "the request could not be read: " + detail,
                                  {"request": detail}, request_id))
    response.body = body
    response.content_type = "application/json"
    response.charset = "utf-8"
    response.headers[hdrs.CONTENT_LENGTH] = str(len(body))
    response.headers["X-Request-Id"] = request_id


@web.middleware
async def request_context(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id on every response and log line; every error in the spec's body, never a trace."""
    started = time.perf_counter()
    incoming = request.headers.get("X-Request-Id", "")
    request[REQUEST_ID] = incoming if _REQUEST_ID.match(incoming) else _new_request_id()
    structlog.contextvars.bind_contextvars(request_id=request[REQUEST_ID])
    try:
        try:
            _refuse_nul(request)
            response = await handler(request)
        except ApiError as exc:
            response = _render(request, exc)
        except web.HTTPRequestEntityTooLarge:
            # The body limit is a bad request like any other in the spec's table (which has no 413).
            response = _render(request, ValidationFailed(
                f"the body is larger than {MAX_BODY_BYTES} bytes",
                {"body": f"larger than {MAX_BODY_BYTES} bytes"}, code="ERR_BODY_TOO_LARGE"))
        except web.HTTPException as exc:
            if exc.status < 400:  # a redirect (OAuth): answered by aiohttp, observed here
                _observe(request, exc.status, time.perf_counter() - started)
                raise
            code = {404: NotFound.code, 405: "ERR_METHOD_NOT_ALLOWED"}.get(
                exc.status, "ERR_HTTP")
            # A 405 names the methods the resource has (RFC 9110: Allow is required on a 405).
            kept: dict[str, str] = {name: exc.headers[name] for name in (hdrs.ALLOW,) if name in exc.headers}
            response = _render(request, ApiError(exc.reason, code=code, status=exc.status, headers=kept))
        except Exception as exc:
            if database_unreachable(exc):
                # An outage, not a bug: one line per request, no traceback; the client retries later.
                log.warning("database unreachable: request answered 503", method=request.method,
                            path=request.path, error=first_line(exc))
                response = _render(request, ApiError(
                    "the database is not reachable right now; retry shortly", {"database": "unreachable"},
                    code="ERR_NOT_READY", status=503, headers={"Retry-After": str(OUTAGE_RETRY_AFTER_S)}))
            else:
                log.exception("unhandled error", method=request.method, path=request.path)
                response = _render(request, InternalError("an unexpected error occurred; it has been logged"))
        response.headers["X-Request-Id"] = request[REQUEST_ID]
        for name, value in request.get(RATE_HEADERS, {}).items():
            response.headers[name] = value
        _observe(request, response.status, time.perf_counter() - started)
        return response
    finally:
        structlog.contextvars.unbind_contextvars("request_id")


def route_template(request: web.Request) -> str:
    """The matched route's template (`/v1/users/{user_id}`), never the raw path, so metric labels stay
    bounded whatever clients send; `unmatched` for a path no route has."""
    resource = request.match_info.route.resource if request.match_info.http_exception is None else None
    return resource.canonical if resource is not None else "unmatched"


def _observe(request: web.Request, status: int, seconds: float) -> None:
    """Request metrics for every answer, and one access-log line (not for probes and scrapes)."""
    route = route_template(request)
    metrics.HTTP_REQUESTS.labels(request.method, route, str(status)).inc()
    metrics.HTTP_REQUEST_SECONDS.labels(request.method, route).observe(seconds)
    if request.path in UNMETERED:
        return
    principal = request.get(PRINCIPAL)
    access_log.info("request", request_id=request[REQUEST_ID], method=request.method, route=route,
                    path=request.path, status=status,
                    duration_ms=round(seconds * 1000, 1),
                    organisation_id=principal.organisation_id if principal else None,
                    key_id=principal.key_id if principal else None, client=_client(request))


def _refuse_nul(request: web.Request) -> None:
    """A NUL anywhere in the path or the query is refused before any handler or store sees it (PostgreSQL
    text cannot hold one)."""
    if "\x00" in request.path:
        raise ValidationFailed("the path may not contain NUL characters", {"path": "contains NUL"})
    for name, value in request.query.items():
        if "\x00" in name or "\x00" in value:
            raise ValidationFailed("query parameters may not contain NUL characters",
                                   {name.replace("\x00", "") or "query": "contains NUL"})


def _client(request: web.Request) -> str:
    # The TCP peer, or behind a trusted proxy the client it forwards for (api.trusted_proxies).
    return ratelimit.request_client(request)


@web.middleware
async def access(request: web.Request, handler: Handler) -> web.StreamResponse:
    """API key (401), scope (403) and rate limit (429), with X-RateLimit-* headers on the response."""
    if request.path in UNMETERED or request.path.startswith(ratelimit.DASHBOARD_STATIC):
        return await handler(request)
    route_handler = request.match_info.handler
    matched = request.match_info.http_exception is None
    required = getattr(route_handler, "required_scope", "read") if matched else None
    engine = request.app[ENGINE]
    limits = request.app[SETTINGS].api.rate_limits
    principal = None
    auth_error: ApiError | None = None
    header = request.headers.get("Authorization", "")
    match = _BEARER.match(header)
    if required is not None and not header:
        auth_error = Unauthorized("missing API key: send Authorization: Bearer <key>")
    elif required is not None and match is None:
        auth_error = Unauthorized("malformed Authorization header: expected Bearer <key>")
    # Autocommit: each statement commits on its own, so the shared rate-limit row is locked for one
    # statement, not across a round trip.
    async with autocommit_connection(engine) as conn:
        if required is not None and match is not None:
            cache = request.app[KEY_CACHE]
            secret_hash = keys.hash_secret(match.group(1))
            principal = cache.get(secret_hash)
            if principal is None:
                generation = cache.generation
                principal = await keys.authenticate(conn, match.group(1))
                if principal is not None:
                    cache.put(secret_hash, principal, generation)
            if principal is None:
                auth_error = Unauthorized("unknown or revoked API key")
        bucket, limit = ratelimit.bucket_for(request.path, principal,
                                             request.query.get("user_id"), _client(request), limits)
        decision = await ratelimit.count_request(conn, bucket, limit)
    request[RATE_HEADERS] = decision.headers()
    if not decision.allowed:
        raise RateLimited(f"rate limit of {limit} requests per minute exceeded", {"limit": limit},
                          headers={"Retry-After": str(decision.reset_s)})
    if auth_error is not None:
        raise auth_error
    if principal is not None:
        if required not in principal.scopes:
            raise Forbidden(f"this API key lacks the '{required}' scope", {"required_scope": required})
        request[PRINCIPAL] = principal
    return await handler(request)


def _request_hash(request: web.Request, body: bytes) -> str:
    digest = hashlib.sha256()
    for part in (request.method.encode(), request.path_qs.encode(), body):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


IN_PROGRESS_WAIT_S = 0.2  # how long a second request waits for the first one's claim before its 409


def _in_progress(key: str) -> Conflict:
    return Conflict("a request with this Idempotency-Key is still in progress; retry shortly",
                    {"Idempotency-Key": key}, code="ERR_IDEMPOTENCY_IN_PROGRESS")


@web.middleware
async def idempotency(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Idempotency-Key on a POST: the same key and request within 24 h gets the first response again;
    the same key with another request is 409.

    Three steps, under the key's claim: an advisory lock (`vip.store.locks.held_lock`) held on a
    connection of the claims pool while the request runs, so that a claim never waits for the connection
    its own handler needs and no transaction stays open across the handler's network calls. (1) An
    answer remembered for the key is sent again (`_remembered`); (2) otherwise the handler runs (`_answer`:
    a refusal below 500 is an answer too); (3) an answer below 500 is remembered (`_remember`). A process
    killed mid-request takes its connection, and so the claim, with it: the next attempt runs afresh. A
    second request with the key while the first runs waits `IN_PROGRESS_WAIT_S` for the claim, then gets
    409 `ERR_IDEMPOTENCY_IN_PROGRESS` (or, if the first finished meanwhile, its answer).

    A lost answer: a handler that creates a resource records it under the key in its own transaction
    (`vip.store.idempotency.record_resource`, given `request[IDEMPOTENCY]`). If the answer never reached
    the client (the process died, the client gave up) and so was never remembered, the retry with the same
    body finds the resource and the handler answers with it (`request[IDEMPOTENT_RESOURCE]`), marked
    `Idempotent-Replayed: true`; with another body it is 409 `ERR_IDEMPOTENCY_KEY_REUSED`."""
    key = request.headers.get("Idempotency-Key")
    if request.method != "POST" or key is None or PRINCIPAL not in request:
        return await handler(request)
    if not 1 <= len(key) <= 255:
        raise ValidationFailed("Idempotency-Key must be 1 to 255 characters", {"Idempotency-Key": key[:50]})
    if "\x00" in key:
        raise ValidationFailed("Idempotency-Key may not contain NUL characters", {"Idempotency-Key": "NUL"})
    claims = request.app[CLAIMS]
    claim = IdempotencyClaim(request[PRINCIPAL].key_id, key, _request_hash(request, await request.read()))
    request[IDEMPOTENCY] = claim
    try:
        async with held_lock(claims, claim.lock_name, IN_PROGRESS_WAIT_S):
            remembered = await _remembered(claims, claim)
            if isinstance(remembered, web.Response):
                return remembered
            if remembered is not None:
                request[IDEMPOTENT_RESOURCE] = remembered
            response = await _answer(request, handler)
            if remembered is not None:
                response.headers["Idempotent-Replayed"] = "true"
            if isinstance(response, web.Response) and response.status < 500:
                await _remember(claims, claim, response)
            return response
    except LockBusy:
        raise _in_progress(key) from None


async def _remembered(claims: AsyncEngine, claim: IdempotencyClaim) -> web.Response | str | None:
    """The answer remembered for the key (409 if it was for another request); the id of the resource its
    request created when the answer was lost; None when there is neither."""
    async with autocommit_connection(claims) as conn:
        await conn.execute(delete(idempotency_keys).where(claim.row, or_(
            # Expired, or left with neither an answer nor a resource (a version that committed claims
            # before the request).
            and_(idempotency_keys.c.status_code.is_(None), idempotency_keys.c.resource_id.is_(None)),
            idempotency_keys.c.created_at < func.now() - text(f"interval '{IDEMPOTENCY_TTL}'"))))
        existing = (await conn.execute(select(idempotency_keys).where(claim.row))).first()
    if existing is None:
        return None
    if existing.request_hash != claim.request_hash:
        raise Conflict("this Idempotency-Key was used with a different request",
                       {"Idempotency-Key": claim.key}, code="ERR_IDEMPOTENCY_KEY_REUSED")
    if existing.status_code is None:
        resource: str = existing.resource_id
        return resource
    return web.Response(text=existing.response_body, status=existing.status_code,
                        content_type="application/json", headers={"Idempotent-Replayed": "true"})


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The handler's response; a refusal below 500 rendered as the response (the same request gets the same
    refusal), a 5xx raised (never remembered: the request may be retried)."""
    try:
        return await handler(request)
    except ApiError as exc:
        if exc.status >= 500:
            raise
        return _render(request, exc)


async def _remember(claims: AsyncEngine, claim: IdempotencyClaim, response: web.Response) -> None:
    async with claims.begin() as conn:
        statement = pg_insert(idempotency_keys).values(
            api_key_id=claim.key_id, key=claim.key, request_hash=claim.request_hash,
            status_code=response.status, response_body=response.text)
        # The row of the resource the handler created (record_resource) gets its answer.
        await conn.execute(statement.on_conflict_do_update(
            index_elements=[idempotency_keys.c.api_key_id, idempotency_keys.c.key],
            set_={"status_code": response.status, "response_body": response.text}))
