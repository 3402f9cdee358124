"""The sealed OAuth tokens of platform connections (table `platform_tokens`): kept at the callback,
read for a re-pull (GET /v1/vip-report?refresh=true), deleted when the connection is revoked. Tokens are
sealed by the caller's `TokenCipher` before they reach the database and opened only to call the platform;
they are never logged nor returned by the API."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.store.tables import connections, platform_tokens
from vip.token_cipher import Resealed, TokenCipher, TokenUnreadable


@dataclass(frozen=True)
class OAuthConnection:
    """An active OAuth platform connection and its sealed access token."""

    connection_id: str
    provider: str
    account_id: str
    sealed_access_token: bytes = field(repr=False)
    expires_at: datetime | None
    sealed_refresh_token: bytes | None = field(default=None, repr=False)

    def access_token(self, cipher: TokenCipher) -> str:
        """The token itself (raises TokenUnreadable under another key)."""
        return cipher.open(self.sealed_access_token, self.connection_id)

    def refresh_token(self, cipher: TokenCipher) -> str | None:
        """The refresh token, if the platform gave one (raises TokenUnreadable under another key)."""
        if self.sealed_refresh_token is None:
            return None
        return cipher.open(self.sealed_refresh_token, self.connection_id)

    def expired(self, now: datetime, margin: timedelta) -> bool:
        """The access token has expired by `now` (or will within `margin`), as the platform said."""
        return self.expires_at is not None and self.expires_at <= now + margin


async def save(conn: AsyncConnection, cipher: TokenCipher, *, connection_id: str, access_token: str,
               refresh_token: str | None, expires_at: datetime | None, now: datetime) -> None:
    """Keep (or replace, on a reconnection) the tokens of a connection, in the caller's transaction."""
    values = {"access_token": cipher.seal(access_token, connection_id),
              "refresh_token": cipher.seal(refresh_token, connection_id) if refresh_token else None,
              "expires_at": expires_at, "updated_at": now}
    await conn.execute(pg_insert(platform_tokens).values(connection_id=connection_id, **values)
                       .on_conflict_do_update(index_elements=["connection_id"], set_=values))


async def forget(conn: AsyncConnection, connection_id: str) -> None:
    await conn.execute(delete(platform_tokens).where(platform_tokens.c.connection_id == connection_id))


async def oauth_connections(conn: AsyncConnection, organisation_id: str,
                            user_id: str) -> list[OAuthConnection]:
    """The user's active platform connections that have a kept token (the OAuth ones), oldest first."""
    rows = (await conn.execute(
        select(connections.c.id, connections.c.provider, connections.c.account_id,
               platform_tokens.c.access_token, platform_tokens.c.expires_at,
               platform_tokens.c.refresh_token)
        .join(platform_tokens, platform_tokens.c.connection_id == connections.c.id)
        .where(connections.c.organisation_id == organisation_id, connections.c.user_id == user_id,
               connections.c.type == "platform", connections.c.status == "active")
        .order_by(connections.c.created_at, connections.c.id))).all()
    return [OAuthConnection(r.id, r.provider, r.account_id, bytes(r.access_token), r.expires_at,
                            bytes(r.refresh_token) if r.refresh_token is not None else None) for r in rows]


async def kept(conn: AsyncConnection, target: OAuthConnection) -> OAuthConnection | None:
    """The connection's kept tokens as they are now; None when they are gone (revoked meanwhile)."""
    row = (await conn.execute(select(platform_tokens)
                              .where(platform_tokens.c.connection_id == target.connection_id))).first()
    if row is None:
        return None
    refresh = bytes(row.refresh_token) if row.refresh_token is not None else None
    return OAuthConnection(target.connection_id, target.provider, target.account_id, bytes(row.access_token),
                           row.expires_at, refresh)


async def expire(conn: AsyncConnection, connection_id: str, now: datetime) -> Row[Any] | None:
    """The platform refused to renew access: the connection becomes `expired` (if it was active) and its
    tokens are deleted. The expired connection's row, or None when it was not active."""
    row = (await conn.execute(update(connections)
                              .where(connections.c.id == connection_id, connections.c.status == "active")
                              .values(status="expired", revoked_at=now).returning(*connections.c))).first()
    await forget(conn, connection_id)
    return row



async def reseal(conn: AsyncConnection, cipher: TokenCipher) -> Resealed:
    """Seal every kept token (access and refresh) again under the ring's sealing key, in the caller's
    transaction (rows locked)."""
    rows = (await conn.execute(select(platform_tokens).order_by(platform_tokens.c.connection_id)
                               .with_for_update())).all()
    resealed = current = 0
    unreadable: list[str] = []
    for row in rows:
        values = {}
        for column in ("access_token", "refresh_token"):
            sealed = getattr(row, column)
            if sealed is None:
                continue
            if cipher.is_current(sealed):
                current += 1
                continue
            try:
                values[column] = cipher.seal(cipher.open(sealed, row.connection_id), row.connection_id)
            except TokenUnreadable:
                unreadable.append(f"{row.connection_id}.{column}")
        if values:
            await conn.execute(update(platform_tokens)
                               .where(platform_tokens.c.connection_id == row.connection_id).values(**values))
            resealed += len(values)
    return Resealed(resealed, current, unreadable)
