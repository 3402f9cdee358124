"""Rate limits in fixed one-minute windows, counted in PostgreSQL so every API process shares them."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from aiohttp import hdrs, web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.accounts.keys import Principal
from vip.api.context import SETTINGS
from vip.config import RateLimitConfig

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

WINDOW_S = 60
# A user id worth a bucket of its own; anything else (NUL characters, which PostgreSQL text refuses, or
# junk the handler will reject anyway) is counted against the key.
_USER_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")

_COUNT = text("""
    INSERT INTO rate_limit_windows AS w (bucket, window_start, count)
    VALUES (:bucket, date_trunc('minute', now()), 1)
    ON CONFLICT (bucket, window_start) DO UPDATE SET count = w.count + 1
    RETURNING count, window_start, now() AS now
""")


@dataclass(frozen=True)
class Decision:
    limit: int
    remaining: int
    reset_s: int  # seconds until the window resets
    allowed: bool

    def headers(self) -> dict[str, str]:
        return {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(self.remaining),
                "X-RateLimit-Reset": str(self.reset_s)}


DASHBOARD = "/dashboard"
# Served from memory, asked by every page: never counted.
DASHBOARD_STATIC = DASHBOARD + "/static/"


def bucket_for(path: str, principal: Principal | None, user_id: str | None, client: str,
               limits: RateLimitConfig) -> tuple[str, int]:
    """The spec's table: per user for /vip-report and /risk-score, per key for the rest.

    A user's bucket is the calling organisation's: (organisation, user). A request another organisation
    makes for a user id, refused by authorisation (404) or not, spends that organisation's own budget and
    never the owning organisation's. Unauthenticated requests count against the client's address."""
    if user_id is not None and not _USER_ID.match(user_id):
        user_id = None
    if path == DASHBOARD or path.startswith(DASHBOARD + "/"):
        # Staff pages: a session, not a key; an office's staff share one address (decision 214).
        return f"dashboard:{client}", limits.dashboard_per_client
    if principal is None:
        return f"ip:{client}", limits.default_per_key
    key_id, org = principal.key_id, principal.organisation_id
    per_user = {"/v1/vip-report": ("vip-report", limits.vip_report_per_user),
                "/v1/risk-score": ("risk-score", limits.risk_score_per_user)}
    if path in per_user:
        name, limit = per_user[path]
        return (f"user:{org}:{user_id}:{name}", limit) if user_id else (f"key:{key_id}:{name}", limit)
    if path == "/v1/transactions":
        return f"key:{key_id}:transactions", limits.transactions_per_key
    return f"key:{key_id}", limits.default_per_key


def decide(count: int, limit: int, window_start: datetime, now: datetime) -> Decision:
    elapsed = (now - window_start).total_seconds()
    reset = max(1, WINDOW_S - int(elapsed))
    return Decision(limit, max(0, limit - count), reset, count <= limit)


async def count_request(conn: AsyncConnection, bucket: str, limit: int) -> Decision:
    row = (await conn.execute(_COUNT, {"bucket": bucket})).one()
    # `count` by key: Row.count is also the tuple method's name
    return decide(row._mapping["count"], limit, row.window_start, row.now)


async def prune(conn: AsyncConnection) -> None:
    """Drop windows older than a few minutes (they no longer count)."""
    await conn.execute(text("DELETE FROM rate_limit_windows"
                            " WHERE window_start < now() - interval '5 minutes'"))


def _ip(text_: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as X-Forwarded-For writes it (bare, or an IPv6 one in brackets), None if it is not one."""
    value = text_.strip()
    if value.startswith("[") and "]" in value:
        value = value[1:value.index("]")]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    # An IPv4 client behind an IPv6 listener arrives mapped (::ffff:a.b.c.d): one client, one bucket.
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def _trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address, proxies: Sequence[Network]) -> bool:
    return any(address.version == net.version and address in net for net in proxies)


def client_address(peer: str | None, forwarded_for: Iterable[str], proxies: Sequence[Network]) -> str:
    """Who a request comes from, for per-client limits. The TCP peer, unless it is a trusted proxy: then
    X-Forwarded-For is read from the right (each proxy appends the address it heard from), trusted proxies
    skipped, and the first other address is the client. An entry that is not an address stops the walk:
    whatever stands left of it was written by nobody we trust, so the last trusted hop is counted. Pure."""
    peer_ip = _ip(peer or "")
    if peer_ip is None:
        return peer or "unknown"
    if not proxies or not _trusted(peer_ip, proxies):
        return str(peer_ip)
    hops = [part for header in forwarded_for for part in header.split(",") if part.strip()]
    client = peer_ip
    for hop in reversed(hops):
        address = _ip(hop)
        if address is None:
            break
        client = address
        if not _trusted(address, proxies):
            break
    return str(client)


def request_client(request: web.Request) -> str:
    """The client of a request (`client_address` with the settings' `api.trusted_proxies`)."""
    proxies = request.app[SETTINGS].api.trusted_proxies
    return client_address(request.remote, request.headers.getall(hdrs.X_FORWARDED_FOR, []), proxies)
