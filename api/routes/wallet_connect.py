"""GET /v1/connect/wallet/nonce, POST /v1/connect/wallet: connect a wallet by Sign-In with Ethereum."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Annotated
from urllib.parse import urlsplit

from aiohttp import web
from eth_utils import is_checksum_address
from pydantic import Field, StringConstraints, field_validator
from sqlalchemy import delete, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.accounts.users import load_user
from vip.api.context import CLOCK, ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.routes.connections import lock_wallet_address
from vip.api.serializers import connection_json
from vip.api.validation import Body, read_body
from vip.config import NetworkConfig, Settings
from vip.connections.siwe import MAX_MESSAGE_CHARS, parse_message, refused, verify_message
from vip.errors import ValidationFailed
from vip.ids import new_id
from vip.indexer.store import add_watched_address
from vip.store.outbox import record_event
from vip.store.tables import connections, wallet_nonces, wallets

routes = web.RouteTableDef()

NONCE_TTL = timedelta(minutes=10)
NONCE_RETENTION = timedelta(days=1)  # expired nonces are kept this long, so a late client hears "expired"
LOOKBACK = timedelta(days=365)  # a new wallet's history is backfilled 12 months back


class ConnectWallet(Body):
    user_id: str = Field(min_length=1, max_length=100)
    address: str = Field(pattern=r"^0x[0-9a-fA-F]{40}$")
    network: str = Field(min_length=1, max_length=50)
    # The signed text, byte for byte: never stripped.
    message: Annotated[str, StringConstraints(strip_whitespace=False)] = Field(
        min_length=1, max_length=MAX_MESSAGE_CHARS)
    # Hex; any length, since contract wallets sign in their own formats ("0x" for on-chain approvals).
    signature: str = Field(pattern=r"^0x([0-9a-fA-F]{2})*$", max_length=2 + 2 * 8192)
    provider: str = Field(default="siwe", pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        digits = value[2:]
        mixed_case = digits not in (digits.lower(), digits.upper())
        if mixed_case and not is_checksum_address(value):
            raise ValueError("mixed-case address with an invalid EIP-55 checksum")
        return value


def _network(settings: Settings, name: str) -> NetworkConfig:
    network = settings.networks.get(name)
    if network is None or not network.enabled:
        names = ", ".join(n.name for n in settings.enabled_networks())
        raise ValidationFailed(f"unknown network {name}",
                               {"network": f"not a network of this service; one of: {names}"})
    return network


@routes.get("/v1/connect/wallet/nonce")
@requires("write")
async def wallet_nonce(request: web.Request) -> web.Response:
    user_id = request.headers.get("X-User-Id", "").strip()
    if not 1 <= len(user_id) <= 100:
        raise ValidationFailed("the X-User-Id header is required",
                               {"X-User-Id": "required, 1 to 100 characters"})
    org = principal(request).organisation_id
    now = await request.app[CLOCK].now()
    nonce = secrets.token_hex(16)
    async with request.app[ENGINE].begin() as conn:
        await load_user(conn, org, user_id)
        await conn.execute(delete(wallet_nonces).where(wallet_nonces.c.user_id == user_id,
                                                       wallet_nonces.c.expires_at < now - NONCE_RETENTION))
        await conn.execute(wallet_nonces.insert().values(nonce=nonce, organisation_id=org, user_id=user_id,
                                                         issued_at=now, expires_at=now + NONCE_TTL))
    # issued_at is the service clock's now: stamp the message's Issued At with it (on a local chain the
    # service clock follows the chain, which may be far from the client's own clock).
    return json_response({"nonce": nonce, "issued_at": iso(now), "expires_at": iso(now + NONCE_TTL)})


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


async def _active_wallet(conn: AsyncConnection, user_id: str, network: str, address: str):
    return (await conn.execute(select(connections).where(
        connections.c.user_id == user_id, connections.c.type == "wallet", connections.c.status == "active",
        connections.c.network == network, connections.c.identifier == address))).first()


@routes.post("/v1/connect/wallet")
@requires("write")
async def connect_wallet(request: web.Request) -> web.Response:
    body = await read_body(request, ConnectWallet)
    settings = request.app[SETTINGS]
    network = _network(settings, body.network)
    org = principal(request).organisation_id
    engine = request.app[ENGINE]
    async with engine.connect() as conn:
        await load_user(conn, org, body.user_id)
    message = parse_message(body.message)
    now = await request.app[CLOCK].now()
    base = urlsplit(settings.api.public_base_url)
    # Signature checks may call the RPC: done before the transaction, which then stays short.
    await verify_message(message, body.signature, address=body.address, domain=base.netloc.rsplit("@")[-1],
                         scheme=base.scheme, chain_id=network.chain_id, now=now, rpc_url=network.rpc_url,
                         rpc_timeout_s=settings.rpc.timeout_s)
    address = body.address.lower()
    async with engine.begin() as conn:
        # The nonce is spent by any successful sign-in, a reconnect included, so it can never be replayed.
        await _use_nonce(conn, message.nonce, org, body.user_id, now)
        await lock_wallet_address(conn, network.name, address)
        existing = await _active_wallet(conn, body.user_id, network.name, address)
        if existing is None:
            row = (await conn.execute(pg_insert(connections).values(
                id=new_id("con"), organisation_id=org, user_id=body.user_id, type="wallet",
                provider=body.provider, identifier=address, network=network.name, status="active",
                created_at=now, last_synced_at=now,
            ).on_conflict_do_nothing(  # uq_connections_active_wallet: a racing sign-in got there first
                index_elements=["user_id", "network", "identifier"],
                index_where=text("type = 'wallet' AND status = 'active'"),
            ).returning(*connections.c))).first()
            if row is None:
                existing = await _active_wallet(conn, body.user_id, network.name, address)
        if existing is not None:
            return json_response({"connection": connection_json(existing)})
        await conn.execute(wallets.insert().values(
            id=new_id("wal"), organisation_id=org, user_id=body.user_id, connection_id=row.id,
            address=address, network=network.name, created_at=now))
        await add_watched_address(conn, network.name, address, "wallet", start_time=now - LOOKBACK)
        created = connection_json(row)
        await record_event(conn, "connection.wallet.created", created, created_at=now, organisation_id=org)
    return json_response({"connection": created}, status=201)
