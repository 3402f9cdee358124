"""The re-pull of a user's OAuth platform connections that GET /v1/vip-report?refresh=true makes before
it asks for a new report: every connection with a kept token is pulled again with that token (all
pulls first, concurrently; any failure is 502 ERR_PLATFORM_SYNC_FAILED naming the platform and nothing
is stored), then each connection's records are replaced the way a reconnection replaces them, in the
transaction that creates the pending report.

Direct-push connections have no token and are not pulled: their data is what the lender last pushed.

An access token the platform said has expired (its `expires_in`, kept as `expires_at`) is renewed first at
the platform's token endpoint with the kept refresh token (one refresh at a time per connection: a named
lock is held while it runs, and a token another request renewed meanwhile is used as it is). The
new tokens are kept at once, whatever happens to the pull. A refresh the platform refuses (the user's
grant is gone) marks the connection `expired`, deletes its tokens and fires `connection.revoked` ("revoked
by the user or expired"), and the request answers 502 naming the platform.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.config import PlatformConfig, Settings
from vip.connections import platform_tokens
from vip.connections.income_records import PulledAccount
from vip.connections.platform_oauth import RefreshRefused, refresh_grant, repull_account, sync_failed
from vip.connections.platform_tokens import OAuthConnection
from vip.connections.resource import connection_json
from vip.connections.store import resync_platform_connection
from vip.errors import PlatformSyncFailed
from vip.store.locks import held_lock
from vip.store.outbox import record_event
from vip.token_cipher import TokenCipher, TokenUnreadable

log = structlog.get_logger(__name__)

EVENT_REVOKED = "connection.revoked"  # the spec's event: "revoked by the user or expired"
# A token that expires this soon is renewed before the pull rather than risk it expiring mid-pull.
REFRESH_MARGIN = timedelta(seconds=60)


@dataclass(frozen=True)
class Repulled:
    connection: OAuthConnection
    account: PulledAccount


async def _renewed_token(engine: AsyncEngine, session: aiohttp.ClientSession, platform: PlatformConfig,
                         cipher: TokenCipher, target: OAuthConnection, now: datetime) -> str:
    """An access token for the pull: the kept one, or, when it has expired and a refresh token is kept, a
    new one from the platform (kept at once, sealed under the current key)."""
    if not target.expired(now, REFRESH_MARGIN) or target.sealed_refresh_token is None:
        return target.access_token(cipher)
    # One refresh at a time per connection (a refresh token is single use), held across the platform's
    # answer by a named lock rather than a row lock: no transaction waits on the platform.
    async with held_lock(engine, f"platform-token:{target.connection_id}"):
        async with engine.connect() as conn:
            current = await platform_tokens.kept(conn, target)
        if current is None:
            raise sync_failed(platform, "the connection was revoked", connection_id=target.connection_id)
        refresh_token = current.refresh_token(cipher)
        if not current.expired(now, REFRESH_MARGIN) or refresh_token is None:
            return current.access_token(cipher)  # renewed by another request meanwhile
        try:
            grant = await refresh_grant(session, platform, refresh_token)
        except RefreshRefused as refused:
            async with engine.begin() as conn:
                expired = await platform_tokens.expire(conn, target.connection_id, now)
                if expired is not None:
                    await record_event(conn, EVENT_REVOKED, connection_json(expired), created_at=now,
                                       organisation_id=expired.organisation_id)
            # Committed: the connection is expired and the event recorded, whatever the answer becomes.
            raise sync_failed(platform, "the platform refused to renew access; the user must connect it "
                              "again", connection_id=target.connection_id,
                              platform_error=refused.platform_error) from None
        expires_at = now + timedelta(seconds=grant.expires_in) if grant.expires_in is not None else None
        async with engine.begin() as conn:
            # A platform that does not rotate refresh tokens leaves the kept one valid.
            await platform_tokens.save(conn, cipher, connection_id=target.connection_id,
                                       access_token=grant.access_token,
                                       refresh_token=grant.refresh_token or refresh_token,
                                       expires_at=expires_at, now=now)
        log.info("platform token renewed", platform=platform.id, connection_id=target.connection_id)
        return grant.access_token


async def _repull(engine: AsyncEngine, session: aiohttp.ClientSession,
                  platforms: Mapping[str, PlatformConfig], cipher: TokenCipher, target: OAuthConnection,
                  now: datetime) -> Repulled:
    platform = platforms.get(target.provider)
    if platform is None:
        raise PlatformSyncFailed(f"current data could not be retrieved from {target.provider}: the platform "
                                 "is no longer offered", {"platform": target.provider,
                                                          "reason": "platform no longer offered"})
    try:
        token = await _renewed_token(engine, session, platform, cipher, target, now)
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
    cipher = settings.api.cipher()
    try:
        async with asyncio.TaskGroup() as group:  # the first failure cancels the other pulls
            tasks = [group.create_task(_repull(engine, session, platforms, cipher, t, now)) for t in targets]
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
