"""The re-pull of a user's OAuth platform connections that GET /v1/vip-report?refresh=true makes before
it asks for a new report: every connection with a kept token is pulled again with that token (all
pulls first, concurrently; any failure is 502 ERR_PLATFORM_SYNC_FAILED naming the platform and nothing
is stored), then each connection's records are replaced the way a reconnection replaces them, in the
transaction that creates the pending report.

Direct-push connections have no token and are not pulled: their data is what the lender last pushed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.config import PlatformConfig, Settings
from vip.connections import platform_tokens
from vip.connections.income_records import PulledAccount
from vip.connections.platform_oauth import repull_account, sync_failed
from vip.connections.platform_tokens import OAuthConnection
from vip.connections.store import resync_platform_connection
from vip.errors import PlatformSyncFailed
from vip.token_cipher import TokenCipher, TokenUnreadable

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Repulled:
    connection: OAuthConnection
    account: PulledAccount


async def _repull(session: aiohttp.ClientSession, platforms: Mapping[str, PlatformConfig],
                  cipher: TokenCipher, target: OAuthConnection, now: datetime) -> Repulled:
    platform = platforms.get(target.provider)
    if platform is None:
        raise PlatformSyncFailed(f"current data could not be retrieved from {target.provider}: the platform "
                                 "is no longer offered", {"platform": target.provider,
                                                          "reason": "platform no longer offered"})
    try:
        token = target.access_token(cipher)
    except TokenUnreadable as exc:  # the token key changed: only a reconnection gives a new token
        raise sync_failed(platform, "the kept access token cannot be read; reconnect the platform",
                          connection_id=target.connection_id) from exc
    account = await repull_account(session, platform, token, now.astimezone(UTC).date())
    if account.account_id != target.account_id:
        raise sync_failed(platform, "the access token now opens another account",
                          connection_id=target.connection_id)
    return Repulled(target, account)


async def repull_platforms(engine: AsyncEngine, session: aiohttp.ClientSession, settings: Settings,
                           platforms: Mapping[str, PlatformConfig], organisation_id: str, user_id: str,
                           now: datetime) -> list[Repulled]:
    """Pull every OAuth platform connection of the user again with `session`, each from its platform in
    `platforms` (tokens opened with `settings.api.token_key`); nothing is written."""
    async with engine.connect() as conn:
        targets = await platform_tokens.oauth_connections(conn, organisation_id, user_id)
    if not targets:
        return []
    cipher = TokenCipher.from_text(settings.api.token_key.get_secret_value())
    try:
        async with asyncio.TaskGroup() as group:  # the first failure cancels the other pulls
            tasks = [group.create_task(_repull(session, platforms, cipher, t, now)) for t in targets]
    except* PlatformSyncFailed as failures:
        raise failures.exceptions[0] from None
    pulled = [task.result() for task in tasks]
    log.info("platforms re-pulled", user_id=user_id, connections=[p.connection.connection_id for p in pulled],
             records=sum(len(p.account.records) for p in pulled))
    return pulled


async def store_repulled(conn: AsyncConnection, pulled: list[Repulled], now: datetime) -> None:
    """Replace each re-pulled connection's records, in the caller's transaction."""
    for item in pulled:
        await resync_platform_connection(conn, connection_id=item.connection.connection_id,
                                         holder=item.account.holder, records=item.account.records, now=now)
