"""Rate limits in fixed one-minute windows, counted in PostgreSQL so every API process shares them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.config import RateLimitConfig

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


def bucket_for(path: str, key_id: str | None, user_id: str | None, client: str,
               limits: RateLimitConfig) -> tuple[str, int]:
    """The spec's table: per user for /vip-report and /risk-score, per key for the rest."""
    if user_id is not None and not _USER_ID.match(user_id):
        user_id = None
    if key_id is None:
        return f"ip:{client}", limits.default_per_key
    if path == "/v1/vip-report":
        return (f"user:{user_id}:vip-report", limits.vip_report_per_user) if user_id else (
            f"key:{key_id}:vip-report", limits.vip_report_per_user)
    if path == "/v1/risk-score":
        return (f"user:{user_id}:risk-score", limits.risk_score_per_user) if user_id else (
            f"key:{key_id}:risk-score", limits.risk_score_per_user)
    if path == "/v1/transactions":
        return f"key:{key_id}:transactions", limits.transactions_per_key
    return f"key:{key_id}", limits.default_per_key


def decide(count: int, limit: int, window_start: datetime, now: datetime) -> Decision:
    elapsed = (now - window_start).total_seconds()
    reset = max(1, WINDOW_S - int(elapsed))
    return Decision(limit, max(0, limit - count), reset, count <= limit)


async def count_request(conn: AsyncConnection, bucket: str, limit: int) -> Decision:
    row = (await conn.execute(_COUNT, {"bucket": bucket})).one()
    return decide(row.count, limit, row.window_start, row.now)


async def prune(conn: AsyncConnection) -> None:
    """Drop windows older than a few minutes (they no longer count)."""
    await conn.execute(text("DELETE FROM rate_limit_windows"
                            " WHERE window_start < now() - interval '5 minutes'"))
