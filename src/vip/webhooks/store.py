"""Webhook endpoints of an organisation: create, list, delete, rotate the signing secret, disable those
that keep failing and enable them again.

Signing secrets are kept sealed (vip.token_cipher, `seal_text`, the endpoint id bound in) under the key
ring of `api.token_key`; they are opened only to sign a delivery (vip.webhooks.claims) and shown in clear
once, when issued."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.formats import iso
from vip.ids import new_id
from vip.store.outbox import record_event
from vip.store.tables import webhook_deliveries, webhook_endpoints
from vip.token_cipher import Resealed, TokenCipher, TokenUnreadable
from vip.webhooks.catalogue import ALL, ENDPOINT_DISABLED
from vip.webhooks.signing import new_secret


@dataclass(frozen=True)
class Endpoint:
    """An endpoint as listed: everything but its secrets."""

    id: str
    organisation_id: str
    url: str
    description: str | None
    event_types: list[str] | None  # None: every type
    created_at: datetime
    previous_secret_expires_at: datetime | None
    deleted_at: datetime | None
    disabled_at: datetime | None = None
    disabled_reason: str | None = None

    @property
    def status(self) -> str:
        if self.deleted_at is not None:
            return "deleted"
        return "disabled" if self.disabled_at is not None else "enabled"


def _endpoint(row: Row[Any]) -> Endpoint:
    return Endpoint(row.id, row.organisation_id, row.url, row.description,
                    list(row.event_types) if row.event_types is not None else None, row.created_at,
                    row.previous_secret_expires_at, row.deleted_at, row.disabled_at, row.disabled_reason)


def endpoint_json(endpoint: Endpoint, secret: str | None = None) -> dict[str, Any]:
    """The WebhookEndpoint resource: API answers and the `webhook_endpoint.disabled` event."""
    body: dict[str, Any] = {
        "id": endpoint.id, "url": endpoint.url, "description": endpoint.description,
        "event_types": endpoint.event_types if endpoint.event_types is not None else [ALL],
        "status": endpoint.status,
        "created_at": iso(endpoint.created_at),
        "previous_secret_expires_at": iso(endpoint.previous_secret_expires_at),
        "deleted_at": iso(endpoint.deleted_at),
        "disabled_at": iso(endpoint.disabled_at),
        "disabled_reason": endpoint.disabled_reason,
    }
    if secret is not None:
        body["secret"] = secret
    return body


def receiving() -> ColumnElement[bool]:
    """Endpoints that receive deliveries: neither deleted nor disabled."""
    return webhook_endpoints.c.deleted_at.is_(None) & webhook_endpoints.c.disabled_at.is_(None)


def secret_context(endpoint_id: str) -> str:
    """What a sealed signing secret is bound to: its endpoint (the current and previous secret alike, so
    a rotation moves the sealed value as it is)."""
    return f"webhook-secret:{endpoint_id}"


def open_secret(cipher: TokenCipher, endpoint_id: str, stored: str | None) -> str | None:
    """A stored signing secret in clear (None when absent or when no key of the ring opens it)."""
    if stored is None:
        return None
    try:
        return cipher.open_text(stored, secret_context(endpoint_id))
    except TokenUnreadable:
        return None


def signing_secrets(secret: str | None, previous_secret: str | None, previous_expires_at: datetime | None,
                    now: datetime) -> list[str]:
    """The secrets that sign a request sent at `now`: the current one, then the previous one during a
    rotation's overlap."""
    current = [secret] if secret else []
    if previous_secret and previous_expires_at is not None and now < previous_expires_at:
        return [*current, previous_secret]
    return current


async def create_endpoint(conn: AsyncConnection, organisation_id: str, url: str,
                          event_types: list[str] | None, description: str | None,
                          now: datetime, *, cipher: TokenCipher) -> tuple[str, Endpoint]:
    """A new endpoint; returns its signing secret (shown once; kept sealed with `cipher`) and its
    listing. `url` and `event_types` must already be checked (vip.webhooks.urls, vip.webhooks.catalogue)."""
    secret, endpoint_id = new_secret(), new_id("whe")
    row = (await conn.execute(webhook_endpoints.insert().values(
        id=endpoint_id, organisation_id=organisation_id, url=url, description=description,
        event_types=event_types, secret=cipher.seal_text(secret, secret_context(endpoint_id)),
        created_at=now,
    ).returning(*webhook_endpoints.c))).one()
    return secret, _endpoint(row)


async def list_endpoints(conn: AsyncConnection, organisation_id: str) -> list[Endpoint]:
    rows = await conn.execute(select(webhook_endpoints).where(
        webhook_endpoints.c.organisation_id == organisation_id, webhook_endpoints.c.deleted_at.is_(None),
    ).order_by(webhook_endpoints.c.created_at, webhook_endpoints.c.id))
    return [_endpoint(r) for r in rows]


async def get_endpoint(conn: AsyncConnection, organisation_id: str, endpoint_id: str) -> Endpoint | None:
    """The organisation's endpoint (None: no such endpoint, or deleted)."""
    row = (await conn.execute(select(webhook_endpoints).where(_active(organisation_id, endpoint_id)))).first()
    return _endpoint(row) if row is not None else None


def _active(organisation_id: str, endpoint_id: str) -> ColumnElement[bool]:
    return ((webhook_endpoints.c.id == endpoint_id)
            & (webhook_endpoints.c.organisation_id == organisation_id)
            & webhook_endpoints.c.deleted_at.is_(None))


async def delete_endpoint(conn: AsyncConnection, organisation_id: str, endpoint_id: str,
                          now: datetime) -> Endpoint | None:
    """Stop delivering to an endpoint: its pending deliveries are cancelled; its history stays."""
    row = (await conn.execute(update(webhook_endpoints).where(_active(organisation_id, endpoint_id))
                              .values(deleted_at=now).returning(*webhook_endpoints.c))).first()
    if row is None:
        return None
    # The fan-out reads endpoints FOR SHARE, so no pending delivery for this endpoint can appear after
    # this statement: it either committed before (and is cancelled here) or sees the endpoint deleted.
    await _cancel_pending(conn, endpoint_id)
    return _endpoint(row)


async def _cancel_pending(conn: AsyncConnection, endpoint_id: str) -> None:
    pending = (webhook_deliveries.c.endpoint_id == endpoint_id) & (webhook_deliveries.c.status == "pending")
    # Locked in id order first, like the worker's outcome writes, so the two never deadlock.
    await conn.execute(select(webhook_deliveries.c.id).where(pending).order_by(webhook_deliveries.c.id)
                       .with_for_update())
    await conn.execute(update(webhook_deliveries).where(pending).values(status="cancelled",
                                                                        next_attempt_at=None))


async def enable_endpoint(conn: AsyncConnection, organisation_id: str, endpoint_id: str) -> Endpoint | None:
    """Deliver to a disabled endpoint again (events of the disabled time reach it only by replay); an
    enabled endpoint is answered as it is. None: no such endpoint (or deleted)."""
    row = (await conn.execute(update(webhook_endpoints).where(_active(organisation_id, endpoint_id))
                              .values(disabled_at=None, disabled_reason=None, failing_since=None)
                              .returning(*webhook_endpoints.c))).first()
    return _endpoint(row) if row is not None else None


async def update_endpoint(conn: AsyncConnection, organisation_id: str, endpoint_id: str, url: str,
                          event_types: list[str] | None, description: str | None) -> Endpoint | None:
    """Change an endpoint's URL, event types and description (checked already). None: no such endpoint."""
    row = (await conn.execute(update(webhook_endpoints).where(_active(organisation_id, endpoint_id))
                              .values(url=url, event_types=event_types, description=description)
                              .returning(*webhook_endpoints.c))).first()
    return _endpoint(row) if row is not None else None


async def disable_endpoint(conn: AsyncConnection, organisation_id: str, endpoint_id: str, now: datetime,
                           reason: str) -> Endpoint | None:
    """Disable an endpoint by hand (a disabled one is answered as it is): its pending deliveries are
    cancelled. None: no such endpoint (or deleted)."""
    row = (await conn.execute(update(webhook_endpoints).where(
        _active(organisation_id, endpoint_id), webhook_endpoints.c.disabled_at.is_(None),
    ).values(disabled_at=now, disabled_reason=reason).returning(*webhook_endpoints.c))).first()
    if row is None:
        return await get_endpoint(conn, organisation_id, endpoint_id)
    await _cancel_pending(conn, endpoint_id)
    return _endpoint(row)


def disable_reason(failing_since: datetime, days: float) -> str:
    return f"every delivery attempt failed since {iso(failing_since)} (more than {days:g} days)"


async def disable_failing(conn: AsyncConnection, endpoint_ids: list[str], now: datetime,
                          after: timedelta) -> list[Endpoint]:
    """Disable those of `endpoint_ids` whose attempts have all failed for `after` or longer: their
    pending deliveries are cancelled and `webhook_endpoint.disabled` is recorded for their organisation
    (delivered to its other endpoints, seen by `vip listen`). Returns the endpoints disabled."""
    rows = list(await conn.execute(
        select(webhook_endpoints.c.id, webhook_endpoints.c.failing_since).where(
            webhook_endpoints.c.id.in_(endpoint_ids), receiving(),
            webhook_endpoints.c.failing_since <= now - after)
        .order_by(webhook_endpoints.c.id).with_for_update(skip_locked=True)))
    disabled = []
    for candidate in rows:
        row = (await conn.execute(update(webhook_endpoints).where(webhook_endpoints.c.id == candidate.id)
                                  .values(disabled_at=now,
                                          disabled_reason=disable_reason(
                                              candidate.failing_since, after / timedelta(days=1)))
                                  .returning(*webhook_endpoints.c))).one()
        endpoint = _endpoint(row)
        await _cancel_pending(conn, endpoint.id)
        await record_event(conn, ENDPOINT_DISABLED, endpoint_json(endpoint), created_at=now,
                           organisation_id=endpoint.organisation_id)
        disabled.append(endpoint)
    return disabled


async def rotate_secret(conn: AsyncConnection, organisation_id: str, endpoint_id: str, now: datetime,
                        overlap: timedelta, *, cipher: TokenCipher) -> tuple[str, Endpoint] | None:
    """A new signing secret; the current one keeps signing for `overlap` (a secret older than that is
    dropped at once)."""
    current = (await conn.execute(select(webhook_endpoints.c.secret)
                                  .where(_active(organisation_id, endpoint_id)).with_for_update())).first()
    if current is None:
        return None
    secret = new_secret()
    row = (await conn.execute(update(webhook_endpoints).where(webhook_endpoints.c.id == endpoint_id).values(
        secret=cipher.seal_text(secret, secret_context(endpoint_id)), previous_secret=current.secret,
        previous_secret_expires_at=now + overlap,
    ).returning(*webhook_endpoints.c))).one()
    return secret, _endpoint(row)



async def reseal_secrets(conn: AsyncConnection, cipher: TokenCipher) -> Resealed:
    """Seal every endpoint's signing secrets (current and previous) again under the ring's sealing key,
    in the caller's transaction (rows locked); secrets stored in clear before sealing existed are sealed."""
    rows = (await conn.execute(select(webhook_endpoints.c.id, webhook_endpoints.c.secret,
                                      webhook_endpoints.c.previous_secret)
                               .order_by(webhook_endpoints.c.id).with_for_update())).all()
    resealed = current = 0
    unreadable: list[str] = []
    for row in rows:
        values: dict[str, str] = {}
        for column in ("secret", "previous_secret"):
            stored = getattr(row, column)
            if stored is None:
                continue
            if cipher.text_is_current(stored):
                current += 1
                continue
            plain = open_secret(cipher, row.id, stored)
            if plain is None:
                unreadable.append(f"{row.id}.{column}")
                continue
            values[column] = cipher.seal_text(plain, secret_context(row.id))
        if values:
            await conn.execute(update(webhook_endpoints).where(webhook_endpoints.c.id == row.id)
                               .values(**values))
            resealed += len(values)
    return Resealed(resealed, current, unreadable)
