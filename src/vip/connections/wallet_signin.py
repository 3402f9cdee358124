"""Connecting a wallet by Sign-In with Ethereum: the single-use nonce, then the signed message checked
(vip.connections.siwe) and the wallet connection stored, watched by the indexer and announced."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Row, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts.users import load_user
from vip.clock import Clock
from vip.config import NetworkConfig, Settings
from vip.connections import store
from vip.connections.resource import connection_json
from vip.connections.sign_in_domains import SignInSite, accepted_sites
from vip.connections.siwe import parse_message, refused, verify_message
from vip.errors import Conflict, ValidationFailed
from vip.formats import iso
from vip.indexer.store import add_watched_address
from vip.store.outbox import record_event
from vip.store.tables import wallet_nonces

NONCE_TTL = timedelta(minutes=10)
NONCE_RETENTION = timedelta(days=1)  # expired nonces are kept this long, so a late client hears "expired"
LOOKBACK = timedelta(days=365)  # a new wallet's history is backfilled 12 months back
EVENT_CREATED = "connection.wallet.created"


def wall_clock_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Nonce:
    value: str
    issued_at: datetime
    expires_at: datetime
    sites: list[SignInSite]  # where a message with it may be signed (its domain and URI)


@dataclass(frozen=True)
class SignIn:
    """A wallet sign-in as the client sent it (the message byte for byte)."""

    user_id: str
    address: str
    network: str
    message: str
    signature: str
    provider: str


async def issue_nonce(engine: AsyncEngine, settings: Settings, organisation_id: str, user_id: str) -> Nonce:
    """A new single-use nonce for the user's next sign-in (expired ones past retention are pruned).

    A sign-in happens in the signer's world, not the chain's: `issued_at`, the nonce's lifetime and the
    message's times are checked against the wall clock (a dApp stamps Issued At with the browser's clock,
    while a development chain's time may be months away from it). Business time (the connection's
    dates) stays the service clock's."""
    now = wall_clock_now()
    nonce = secrets.token_hex(16)
    async with engine.begin() as conn:
        await load_user(conn, organisation_id, user_id)
        await conn.execute(delete(wallet_nonces).where(wallet_nonces.c.user_id == user_id,
                                                       wallet_nonces.c.expires_at < now - NONCE_RETENTION))
        await conn.execute(wallet_nonces.insert().values(
            nonce=nonce, organisation_id=organisation_id, user_id=user_id, issued_at=now,
            expires_at=now + NONCE_TTL))
        sites = await accepted_sites(conn, settings, organisation_id)
    return Nonce(nonce, now, now + NONCE_TTL, sites)


async def _use_nonce(conn: AsyncConnection, nonce: str, org: str, user_id: str, now: datetime) -> None:
    """Mark the nonce used, in the caller's transaction; refuse one that is not this user's to use."""
    row = (await conn.execute(select(wallet_nonces).where(wallet_nonces.c.nonce == nonce)
                              .with_for_update())).first()
    if row is None or row.used_at is not None or row.user_id != user_id or row.organisation_id != org:
        raise refused("ERR_NONCE_INVALID", "the nonce is unknown, already used or issued to another user; "
                      "request a new one", {"nonce": nonce})
    if row.expires_at <= now:
        raise refused("ERR_NONCE_EXPIRED", "the nonce has expired; request a new one",
                      {"nonce": nonce, "expires_at": iso(row.expires_at)})
    await conn.execute(update(wallet_nonces).where(wallet_nonces.c.nonce == nonce).values(used_at=now))


def enabled_network(settings: Settings, name: str) -> NetworkConfig:
    """The enabled network called `name`; 400 naming the others otherwise."""
    network = settings.networks.get(name)
    if network is None or not network.enabled:
        names = ", ".join(n.name for n in settings.enabled_networks())
        raise ValidationFailed(f"unknown network {name}",
                               {"network": f"not a network of this service; one of: {names}"})
    return network


async def connect_wallet(engine: AsyncEngine, clock: Clock, settings: Settings, organisation_id: str,
                         sign_in: SignIn) -> tuple[Row[Any], bool]:
    """Check the sign-in and connect the wallet: (the new connection, True), or (the user's active
    connection to this address, False) when it is already connected. The nonce is spent either way."""
    network = enabled_network(settings, sign_in.network)
    async with engine.connect() as conn:
        await load_user(conn, organisation_id, sign_in.user_id)
    message = parse_message(sign_in.message)
    now = await clock.now()
    signed = wall_clock_now()  # the message's times and the nonce's lifetime: the signer's clock
    async with engine.connect() as conn:
        sites = await accepted_sites(conn, settings, organisation_id)
    # Signature checks may call the RPC: done before the transaction, which then stays short.
    await verify_message(message, sign_in.signature, address=sign_in.address, sites=sites,
                         chain_id=network.chain_id, now=signed, rpc_url=network.rpc_url,
                         rpc_timeout_s=settings.rpc.timeout_s)
    async with engine.begin() as conn:
        # The nonce is spent by any successful sign-in, a reconnect included, so it can never be replayed.
        await _use_nonce(conn, message.nonce, organisation_id, sign_in.user_id, signed)
        return await record_wallet_connection(conn, organisation_id=organisation_id, user_id=sign_in.user_id,
                                              provider=sign_in.provider, network=network.name,
                                              address=sign_in.address, now=now)


async def record_wallet_connection(conn: AsyncConnection, *, organisation_id: str, user_id: str,
                                   provider: str, network: str, address: str,
                                   now: datetime) -> tuple[Row[Any], bool]:
    """Store a wallet whose control was proven (a sign-in, or a development persona whose address the
    service made up), watch and backfill it, announce it: (the connection, True), or (the user's active
    connection to this address, False)."""
    address = address.lower()
    await store.lock_wallet_address(conn, network, address)
    existing = await store.active_wallet(conn, user_id, network, address)
    if existing is not None:
        return existing, False
    row = await store.insert_wallet_connection(conn, organisation_id=organisation_id, user_id=user_id,
                                               provider=provider, network=network, address=address, now=now)
    if row is None:  # a racing sign-in of the same user connected it first
        raced = await store.active_wallet(conn, user_id, network, address)
        if raced is None:  # ... and it was revoked again before this read
            raise Conflict("the connection changed while it was being made; retry",
                           {"address": address}, code="ERR_CONNECTION_CHANGED")
        return raced, False
    await add_watched_address(conn, network, address, "wallet", start_time=now - LOOKBACK)
    await record_event(conn, EVENT_CREATED, connection_json(row), created_at=now,
                       organisation_id=organisation_id)
    return row, True
