"""Connecting an income platform: by OAuth (a signed single-use `state`, then the callback exchanges the
code and pulls every record) or by a direct push of the integrating platform.

Rules shared by both ways in:
- One active connection per (user, platform, account id) (`uq_connections_active_account`). Connecting the
  same account again reuses it: its records are replaced (delete + insert, never duplicated), its account
  holder and source type refreshed, `last_synced_at` set; no event is fired.
- A new connection fires `connection.platform.created` with the connection as `data.object`, in the same
  transaction as the connection and its records.
- An OAuth connection keeps its tokens, sealed (`platform_tokens`), for the re-pull of
  GET /v1/vip-report?refresh=true (vip.connections.platform_refresh), which replaces the records the
  same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from sqlalchemy import Row, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts.users import load_user
from vip.clock import Clock
from vip.config import PlatformConfig, Settings
from vip.connections import platform_tokens, store
from vip.connections.income_records import IncomeRecord
from vip.connections.platform_oauth import (
    STATE_RETENTION,
    STATE_TTL,
    OAuthDenied,
    OAuthStateInvalid,
    authorize_redirect,
    callback_url,
    fetch_account,
    new_state_id,
    sign_state,
    state_id_of,
    sync_failed,
)
from vip.connections.resource import connection_json
from vip.errors import ValidationFailed
from vip.formats import iso
from vip.store.outbox import record_event
from vip.store.tables import oauth_states
from vip.token_cipher import TokenCipher

EVENT_CREATED = "connection.platform.created"


@dataclass(frozen=True)
class Authorization:
    """Where to send the user, and until when the state in it is good."""

    redirect_url: str
    expires_at: dt.datetime


def _today(now: dt.datetime) -> dt.date:
    return now.astimezone(dt.UTC).date()


async def _store(conn: AsyncConnection, *, organisation_id: str, user_id: str, provider: str,
                 source_type: str, account_id: str, holder: str, records: list[IncomeRecord],
                 now: dt.datetime) -> tuple[Row[Any], bool]:
    """The connection and its records; the creation event when it is new."""
    row, created = await store.upsert_platform_connection(
        conn, organisation_id=organisation_id, user_id=user_id, provider=provider, source_type=source_type,
        account_id=account_id, holder=holder, records=records, now=now)
    if created:
        await record_event(conn, EVENT_CREATED, connection_json(row), created_at=now,
                           organisation_id=organisation_id)
    return row, created


# --- OAuth --------------------------------------------------------------------------------------------------


async def start_authorization(engine: AsyncEngine, clock: Clock, settings: Settings, organisation_id: str,
                              platform_id: str, user_id: str) -> Authorization:
    """A single-use, 10-minute `state` bound to the user and the platform, and the platform's
    authorization address to send the user to."""
    platform = settings.platforms.get(platform_id)
    if platform is None:
        known = sorted(settings.platforms)
        raise ValidationFailed(f"unknown platform {platform_id}", {
            "platform": f"not a supported platform; one of: {', '.join(known)}",
            "supported_platforms": known})
    now = await clock.now()
    state_id = new_state_id()
    async with engine.begin() as conn:
        await load_user(conn, organisation_id, user_id)
        await conn.execute(delete(oauth_states).where(oauth_states.c.user_id == user_id,
                                                      oauth_states.c.expires_at < now - STATE_RETENTION))
        await conn.execute(oauth_states.insert().values(
            id=state_id, organisation_id=organisation_id, user_id=user_id, platform=platform.id,
            expires_at=now + STATE_TTL))
    state = sign_state(settings.api.state_secret, state_id)
    redirect_url = authorize_redirect(platform, state, callback_url(settings.api.public_base_url))
    return Authorization(redirect_url, now + STATE_TTL)


async def _spend_state(engine: AsyncEngine, secret: str, state: str | None, now: dt.datetime) -> Row[Any]:
    """The state's row, marked used (committed before the platform is called, so a state is spent even
    when the sync fails). Anything else is 400 ERR_OAUTH_STATE_INVALID."""
    if not state:
        raise OAuthStateInvalid("the state parameter is missing", {"state": "missing"})
    state_id = state_id_of(secret, state)
    if state_id is None:
        raise OAuthStateInvalid("the state was not issued by this service", {"state": "bad signature"})
    async with engine.begin() as conn:
        row = (await conn.execute(select(oauth_states).where(oauth_states.c.id == state_id)
                                  .with_for_update())).first()
        if row is None:
            raise OAuthStateInvalid("the state is unknown; start the connection again", {"state": "unknown"})
        if row.used_at is not None:
            raise OAuthStateInvalid("the state was already used; start the connection again",
                                    {"state": "already used"})
        if row.expires_at <= now:
            raise OAuthStateInvalid("the state has expired; start the connection again",
                                    {"state": "expired", "expired_at": iso(row.expires_at)})
        await conn.execute(update(oauth_states).where(oauth_states.c.id == state_id).values(used_at=now))
    return row


async def complete_authorization(engine: AsyncEngine, clock: Clock, session: aiohttp.ClientSession,
                                 settings: Settings, *, state: str | None, code: str | None,
                                 error: str | None) -> tuple[Row[Any], bool]:
    """The platform's answer: check and spend the state, exchange the code, pull every record, store the
    connection and its sealed tokens. Returns (row, created)."""
    now = await clock.now()
    spent = await _spend_state(engine, settings.api.state_secret, state, now)
    platform = settings.platforms.get(spent.platform)
    if platform is None:
        raise OAuthStateInvalid("the state's platform is no longer offered", {"state": "unknown platform"})
    if error is not None:
        if error == "access_denied":
            raise OAuthDenied("the user declined to share the data", {"platform": platform.id})
        raise sync_failed(platform, "authorization failed", platform_error=error[:100])
    pulled, grant = await fetch_account(session, platform, code or "",
                                        callback_url(settings.api.public_base_url), _today(now))
    synced_at = await clock.now()  # the pull may have taken a while
    expires_at = synced_at + dt.timedelta(seconds=grant.expires_in) if grant.expires_in is not None else None
    async with engine.begin() as conn:
        row, created = await _store(
            conn, organisation_id=spent.organisation_id, user_id=spent.user_id, provider=platform.id,
            source_type=platform.source_type, account_id=pulled.account_id, holder=pulled.holder,
            records=pulled.records, now=synced_at)
        # Kept for re-pulls on refresh (sealed; see vip.connections.platform_tokens).
        await platform_tokens.save(conn, TokenCipher.from_text(settings.api.token_key.get_secret_value()),
                                   connection_id=row.id, access_token=grant.access_token,
                                   refresh_token=grant.refresh_token, expires_at=expires_at, now=synced_at)
    return row, created


# --- direct push --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DirectPush:
    """An account and its whole history as the integrating platform pushed it (`records` in the order of
    `data.transaction_history`)."""

    user_id: str
    platform: str
    source_type: str
    account_id: str
    holder: str
    records: Sequence[IncomeRecord]


def _check_source_type(push: DirectPush, configured: PlatformConfig | None) -> None:
    if configured is not None and configured.source_type != push.source_type:
        raise ValidationFailed(f"{push.platform} is a {configured.source_type} platform",
                               {"source_type": f"must be {configured.source_type} for {push.platform}"})


def _check_dates(push: DirectPush, today: dt.date) -> None:
    future = {f"data.transaction_history.{i}.date": f"is after the service's current date ({today})"
              for i, record in enumerate(push.records) if record.record_date > today}
    if future:
        raise ValidationFailed("invalid body: records dated in the future", dict(list(future.items())[:50]))


async def push_direct(engine: AsyncEngine, clock: Clock, settings: Settings, organisation_id: str,
                      push: DirectPush) -> tuple[Row[Any], bool]:
    """Store a pushed account and its history (a push replaces the history). Returns (row, created)."""
    _check_source_type(push, settings.platforms.get(push.platform))
    now = await clock.now()
    _check_dates(push, _today(now))
    async with engine.begin() as conn:
        await load_user(conn, organisation_id, push.user_id)
        return await _store(
            conn, organisation_id=organisation_id, user_id=push.user_id, provider=push.platform,
            source_type=push.source_type, account_id=push.account_id, holder=push.holder,
            records=list(push.records), now=now)
