"""Organisations and API keys: created and listed by the CLI and the admin endpoints, checked on every
request. Only a SHA-256 of each secret is stored (the secrets are 256-bit random, so a fast hash is
enough); the secret is shown once, at creation.

A revocation NOTIFYs `REVOKED_CHANNEL` in its own transaction; every API process LISTENs
(`follow_revocations`) and drops the key from its cache of checked keys at the commit, so a revoked key
stops working on every process at once, whoever revoked it (the CLI, any process's admin endpoint)."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import structlog
from sqlalchemy import Row, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.errors import ERROR_TEXT_LIMIT, NotFound
from vip.ids import new_id
from vip.store.tables import api_keys, organisations

log = structlog.get_logger(__name__)

REVOKED_CHANNEL = "vip_api_key_revoked"  # payload: the key id; sent at the commit of a revocation
SCOPES = ("read", "write", "disburse", "admin")
SECRET_PREFIX = "vip_sk_"
SHOWN_PREFIX_LENGTH = 14  # "vip_sk_" and 7 characters of the random part
LAST_USED_PRECISION = timedelta(minutes=1)  # last_used_at is written at most this often per key


@dataclass(frozen=True)
class Principal:
    """Who is calling: the organisation and the key's scopes."""

    organisation_id: str
    key_id: str
    scopes: frozenset[str]


@dataclass(frozen=True)
class KeyInfo:
    id: str
    organisation_id: str
    prefix: str
    scopes: list[str]
    description: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def validate_scopes(scopes: list[str]) -> list[str]:
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise ValueError(f"scopes must be a non-empty subset of {', '.join(SCOPES)}"
                         + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return [s for s in SCOPES if s in scopes]


async def ensure_organisation(conn: AsyncConnection, name: str) -> str:
    """The id of the organisation called `name`, created if new."""
    org_id = await conn.scalar(pg_insert(organisations).values(id=new_id("org"), name=name)
                               .on_conflict_do_nothing().returning(organisations.c.id))
    found: str | None = org_id or await conn.scalar(
        select(organisations.c.id).where(organisations.c.name == name))
    if found is None:  # the insert met an existing row, which a delete has since taken away
        raise LookupError(f"organisation {name!r} was removed while being looked up")
    return found


async def organisation_named(conn: AsyncConnection, name: str) -> str | None:
    """The id of the organisation called `name`, or None (never creates one: a typo is no organisation)."""
    return await conn.scalar(select(organisations.c.id).where(organisations.c.name == name))


async def create_key(conn: AsyncConnection, organisation_id: str, scopes: list[str],
                     description: str | None = None) -> tuple[str, KeyInfo]:
    """A new key; returns its secret (shown once, never stored) and its listing."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    row = (await conn.execute(api_keys.insert().values(
        id=new_id("key"), organisation_id=organisation_id, prefix=secret[:SHOWN_PREFIX_LENGTH],
        secret_hash=hash_secret(secret), scopes=validate_scopes(scopes), description=description,
    ).returning(*api_keys.c))).one()
    return secret, _info(row)


def _info(row: Row[Any]) -> KeyInfo:
    return KeyInfo(row.id, row.organisation_id, row.prefix, list(row.scopes), row.description,
                   row.created_at, row.last_used_at, row.revoked_at)


async def list_keys(conn: AsyncConnection, organisation_id: str) -> list[KeyInfo]:
    rows = await conn.execute(select(api_keys).where(api_keys.c.organisation_id == organisation_id)
                              .order_by(api_keys.c.created_at, api_keys.c.id))
    return [_info(r) for r in rows]


async def revoke_key(conn: AsyncConnection, organisation_id: str, key_id: str) -> KeyInfo | None:
    row = (await conn.execute(update(api_keys).where(
        api_keys.c.id == key_id, api_keys.c.organisation_id == organisation_id,
    ).values(revoked_at=func.coalesce(api_keys.c.revoked_at, func.now())).returning(*api_keys.c))).first()
    if row is None:
        return None
    # Delivered to every listening API process when (and only if) this transaction commits.
    await conn.execute(select(func.pg_notify(REVOKED_CHANNEL, row.id)))
    return _info(row)


# --- the admin endpoints' service: one transaction each ----------------------------------------------------


async def issue_key(engine: AsyncEngine, organisation_id: str, scopes: list[str],
                    description: str | None) -> tuple[str, KeyInfo]:
    """A new key of the organisation: its secret (shown once) and its listing."""
    async with engine.begin() as conn:
        return await create_key(conn, organisation_id, scopes, description)


async def organisation_keys(engine: AsyncEngine, organisation_id: str) -> list[KeyInfo]:
    async with engine.connect() as conn:
        return await list_keys(conn, organisation_id)


async def revoke_organisation_key(engine: AsyncEngine, organisation_id: str, key_id: str) -> KeyInfo:
    """Revoke one of the organisation's keys (again: no change); 404 for a key not of the organisation."""
    async with engine.begin() as conn:
        info = await revoke_key(conn, organisation_id, key_id)
    if info is None:
        raise NotFound(f"no API key {key_id}", {"key_id": key_id})
    return info


async def authenticate(conn: AsyncConnection, secret: str) -> Principal | None:
    """The principal of an active key with this secret, or None. Touches last_used_at (coarsely)."""
    row = (await conn.execute(select(api_keys.c.id, api_keys.c.organisation_id, api_keys.c.scopes,
                                     api_keys.c.last_used_at)
                              .where(api_keys.c.secret_hash == hash_secret(secret),
                                     api_keys.c.revoked_at.is_(None)))).first()
    if row is None:
        return None
    await conn.execute(update(api_keys).where(
        api_keys.c.id == row.id,
        (api_keys.c.last_used_at.is_(None)) | (api_keys.c.last_used_at < func.now() - LAST_USED_PRECISION),
    ).values(last_used_at=func.now()))
    return Principal(row.organisation_id, row.id, frozenset(row.scopes))


class PrincipalCache:
    """Recently authenticated keys, per API process, for `ttl_s` seconds: a hit skips the database.

    The cache is trusted only while this process LISTENs for revocations (`follow_revocations` sets
    `listening`): a revocation committed anywhere drops the key at once, and while the listener is down
    every request goes to the database. A lookup that raced a revocation is not cached (`generation`).
    Unknown keys are never cached; `ttl_s` bounds how long a key is trusted without a fresh look."""

    MAX_ENTRIES = 10_000

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[Principal, float]] = {}
        self.generation = 0  # moves on every forget: a lookup begun before it is not cached
        self.listening = False

    def get(self, secret_hash: str) -> Principal | None:
        if not self.listening:
            return None
        entry = self._entries.get(secret_hash)
        if entry is None:
            return None
        if entry[1] <= time.monotonic():
            del self._entries[secret_hash]
            return None
        return entry[0]

    def put(self, secret_hash: str, found: Principal, generation: int) -> None:
        """Remember a key checked in the database by a lookup that began at `generation`."""
        if self.ttl_s <= 0 or not self.listening or generation != self.generation:
            return
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[secret_hash] = (found, time.monotonic() + self.ttl_s)

    def forget_key(self, key_id: str) -> None:
        self.generation += 1
        for secret_hash in [h for h, (p, _) in self._entries.items() if p.key_id == key_id]:
            del self._entries[secret_hash]

    def forget_all(self) -> None:
        self.generation += 1
        self._entries.clear()


async def follow_revocations(engine: AsyncEngine, cache: PrincipalCache) -> None:
    """LISTEN for revocations and drop each revoked key from `cache` as its revocation commits; runs until
    cancelled. While the connection is down the cache is not trusted, and it starts empty again after a
    reconnect (a revocation may have been missed meanwhile)."""
    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    failures = 0
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f"LISTEN {REVOKED_CHANNEL}")
                cache.forget_all()
                cache.listening = True
                failures = 0
                async for notice in conn.notifies():
                    cache.forget_key(notice.payload)
        except (psycopg.Error, OSError) as exc:
            failures += 1
            log.warning("key revocation listener lost; keys are checked in the database meanwhile",
                        error=str(exc)[:ERROR_TEXT_LIMIT])
        finally:
            cache.listening = False
            cache.forget_all()
        await asyncio.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))
