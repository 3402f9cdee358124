"""Funding wallets: a lender's treasury is registered to one organisation, with a signature by the wallet
over a message that names the organisation and a single-use nonce, before any payment intent may name it.

The wallet signs the message the service issued (EIP-191 `personal_sign`). A key's signature is
recovered; any other signature is checked with the wallet's ERC-1271 `isValidSignature` on the network the
nonce names, so contract wallets (multisigs, smart accounts) register the same way. An address belongs to
at most one organisation (the table's primary key), whoever asks first with a valid proof.

An organisation's first registered funding wallet becomes its default (used by an intent that names
none); it may name another of its registered funding wallets as its default, and remove one no open
intent of its own names; the wallet's row lock orders a removal against the intents being created with
it (`lock_funding_wallet`).
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import structlog
from eth_abi.abi import encode
from eth_account import Account
from eth_account.messages import defunct_hash_message, encode_defunct
from eth_utils import function_signature_to_4byte_selector, to_checksum_address
from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.chain.clients import RpcClients
from vip.chain.contracts import ERC1271_MAGIC
from vip.chain.rpc import RpcError
from vip.clock import Clock
from vip.config import NetworkConfig, Settings
from vip.errors import ChainUnavailable, Conflict, NotFound, Unprocessable, ValidationFailed
from vip.formats import iso
from vip.payments import rules
from vip.payments.records import FundingWallet
from vip.store.tables import funding_wallet_nonces, funding_wallets, organisations, payment_intents

log = structlog.get_logger(__name__)

NONCE_TTL = timedelta(minutes=10)
NONCE_RETENTION = timedelta(days=1)  # expired nonces of an organisation are pruned when it asks for one
_IS_VALID_SIGNATURE = function_signature_to_4byte_selector("isValidSignature(bytes32,bytes)")


@dataclass(frozen=True)
class Challenge:
    nonce: str
    message: str
    expires_at: datetime


def registration_message(*, domain: str, organisation_id: str, address: str, network: str, chain_id: int,
                         nonce: str, issued_at: datetime, expires_at: datetime) -> str:
    """The text a wallet signs to register as a funding wallet of `organisation_id`."""
    return (f"{domain} asks you to register this wallet as a funding wallet.\n\n"
            f"Wallet: {to_checksum_address(address)}\n"
            f"Organisation: {organisation_id}\n"
            f"Network: {network} (chain id {chain_id})\n"
            f"Nonce: {nonce}\n"
            f"Issued At: {iso(issued_at)}\n"
            f"Expires At: {iso(expires_at)}\n\n"
            "Signing lets this organisation's payment intents pay loans from this wallet once it approves "
            "them; no other organisation can.")


def _network(settings: Settings, name: str) -> NetworkConfig:
    network = settings.networks.get(name)
    if network is None or not network.enabled:
        usable = ", ".join(n.name for n in settings.enabled_networks()) or "(none configured)"
        raise ValidationFailed(f"network {name} is not enabled", {"network": f"one of: {usable}"})
    return network


async def issue_challenge(engine: AsyncEngine, clock: Clock, settings: Settings, *, organisation_id: str,
                          address: str, network: str) -> Challenge:
    """A single-use nonce and the exact message the wallet must sign with it (10 minutes)."""
    chain = _network(settings, network)
    now = await clock.now()
    nonce = secrets.token_hex(16)
    expires_at = now + NONCE_TTL
    domain = urlsplit(settings.api.public_base_url).netloc.rsplit("@")[-1]
    message = registration_message(domain=domain, organisation_id=organisation_id,
                                   address=address, network=chain.name, chain_id=chain.chain_id, nonce=nonce,
                                   issued_at=now, expires_at=expires_at)
    async with engine.begin() as conn:
        await conn.execute(delete(funding_wallet_nonces).where(
            funding_wallet_nonces.c.organisation_id == organisation_id,
            funding_wallet_nonces.c.expires_at < now - NONCE_RETENTION))
        await conn.execute(funding_wallet_nonces.insert().values(
            nonce=nonce, organisation_id=organisation_id, address=address.lower(), network=chain.name,
            message=message, issued_at=now, expires_at=expires_at))
    return Challenge(nonce, message, expires_at)


async def register(engine: AsyncEngine, clock: Clock, settings: Settings, rpcs: RpcClients, *,
                   organisation_id: str, address: str, nonce: str,
                   signature: str) -> tuple[FundingWallet, bool]:
    """Register `address` to the organisation on the proof (the wallet's signature of the nonce's message).
    Returns the registration and whether it is new; an address of another organisation is refused (409),
    and nothing changes on any refusal but the nonce being spent by a valid proof."""
    address = address.lower()
    now = await clock.now()
    async with engine.connect() as conn:
        challenge = (await conn.execute(select(funding_wallet_nonces).where(
            funding_wallet_nonces.c.nonce == nonce))).first()
    if (challenge is None or challenge.organisation_id != organisation_id or challenge.address != address
            or challenge.used_at is not None or challenge.expires_at <= now):
        raise Unprocessable("the nonce is unknown, used, expired, or issued for another wallet",
                            {"nonce": nonce}, code="ERR_INVALID_NONCE")
    kind = await _verify(settings, rpcs, challenge.network, address, challenge.message, signature)
    async with engine.begin() as conn:
        spent = await conn.scalar(funding_wallet_nonces.update().where(
            funding_wallet_nonces.c.nonce == nonce, funding_wallet_nonces.c.used_at.is_(None),
        ).values(used_at=now).returning(funding_wallet_nonces.c.nonce))
        if spent is None:
            raise Unprocessable("the nonce is unknown, used, expired, or issued for another wallet",
                                {"nonce": nonce}, code="ERR_INVALID_NONCE")
        inserted = (await conn.execute(pg_insert(funding_wallets).values(
            address=address, organisation_id=organisation_id, network=challenge.network, kind=kind,
            registered_at=now).on_conflict_do_nothing().returning(*funding_wallets.c))).first()
        if inserted is not None:
            # The organisation's first funding wallet becomes its default, so the spec's intent body (no
            # funding_wallet) works right after onboarding. Atomic: of two first registrations racing, the
            # row lock lets one set it and the other see it set.
            made_default = await conn.scalar(update(organisations).where(
                organisations.c.id == organisation_id, organisations.c.default_funding_wallet.is_(None),
            ).values(default_funding_wallet=address).returning(organisations.c.id))
            log.info("funding wallet registered", organisation_id=organisation_id, address=address, kind=kind,
                     default=made_default is not None)
            return FundingWallet.of(inserted), True
        existing = FundingWallet.of((await conn.execute(select(funding_wallets).where(
            funding_wallets.c.address == address))).one())
    if existing.organisation_id != organisation_id:
        raise Conflict("this wallet is registered to another organisation",
                       {"address": to_checksum_address(address)}, code="ERR_FUNDING_WALLET_TAKEN")
    return existing, False


async def list_wallets(engine: AsyncEngine, organisation_id: str) -> tuple[list[FundingWallet], str | None]:
    """The organisation's funding wallets, oldest first, and its default one (lowercase) or None."""
    async with engine.connect() as conn:
        return await wallets_of(conn, organisation_id), await default_of(conn, organisation_id)


async def default_wallet(engine: AsyncEngine, organisation_id: str) -> str | None:
    async with engine.connect() as conn:
        return await default_of(conn, organisation_id)


async def wallets_of(conn: AsyncConnection, organisation_id: str) -> list[FundingWallet]:
    return [FundingWallet.of(r) for r in await conn.execute(select(funding_wallets).where(
        funding_wallets.c.organisation_id == organisation_id).order_by(
        funding_wallets.c.registered_at, funding_wallets.c.address))]


async def default_of(conn: AsyncConnection, organisation_id: str) -> str | None:
    return await conn.scalar(select(organisations.c.default_funding_wallet)
                             .where(organisations.c.id == organisation_id))


async def lock_funding_wallet(conn: AsyncConnection, address: str, *,
                              exclusive: bool = False) -> FundingWallet | None:
    """The registration of `address` (lowercase), row-locked until the transaction ends: shared by
    whoever relies on it staying registered (an intent being created, a default being set), exclusive
    for its removal; None when it is not registered."""
    query = select(funding_wallets).where(funding_wallets.c.address == address)
    query = query.with_for_update() if exclusive else query.with_for_update(read=True)
    row = (await conn.execute(query)).first()
    return FundingWallet.of(row) if row is not None else None


def _not_registered(address: str) -> NotFound:
    # The same answer whether the wallet is unknown or another organisation's (decision 104).
    return NotFound("no funding wallet with this address is registered to this organisation",
                    {"address": to_checksum_address(address)})


async def set_default(conn: AsyncConnection, organisation_id: str, address: str) -> FundingWallet:
    """Make a registered funding wallet of the organisation its default (what an intent naming no
    funding wallet uses). Returns the registration."""
    address = address.lower()
    row = await lock_funding_wallet(conn, address)
    if row is None or row.organisation_id != organisation_id:
        raise _not_registered(address)
    await conn.execute(update(organisations).where(organisations.c.id == organisation_id)
                       .values(default_funding_wallet=address))
    log.info("default funding wallet set", organisation_id=organisation_id, address=address)
    return row


async def open_intents_naming(conn: AsyncConnection, organisation_id: str, address: str,
                              limit: int = 10) -> list[str]:
    """Ids of the organisation's intents naming the funding wallet that may still pay (waiting for their
    approval, or confirmed and not yet settled: a pending charge included), oldest first."""
    return list((await conn.scalars(select(payment_intents.c.id).where(
        payment_intents.c.organisation_id == organisation_id, payment_intents.c.funding_wallet == address,
        payment_intents.c.status.in_((rules.PENDING_APPROVAL, rules.APPROVAL_CONFIRMED)),
    ).order_by(payment_intents.c.seq).limit(limit))).all())


async def remove(conn: AsyncConnection, organisation_id: str, address: str) -> FundingWallet:
    """Remove a funding wallet of the organisation (its default too, if it was); refused with 409
    ERR_FUNDING_WALLET_IN_USE while an open intent of the organisation names it. Returns the removed
    registration. Afterwards the address may be registered again, by any organisation, with a new proof."""
    address = address.lower()
    row = await lock_funding_wallet(conn, address, exclusive=True)
    if row is None or row.organisation_id != organisation_id:
        raise _not_registered(address)
    open_ids = await open_intents_naming(conn, organisation_id, address)
    if open_ids:
        raise Conflict("open payment intents name this funding wallet: let them settle or expire first",
                       {"address": to_checksum_address(address), "payment_intent_ids": open_ids},
                       code="ERR_FUNDING_WALLET_IN_USE")
    await conn.execute(update(organisations).where(
        organisations.c.id == organisation_id, organisations.c.default_funding_wallet == address,
    ).values(default_funding_wallet=None))
    await conn.execute(delete(funding_wallets).where(funding_wallets.c.address == address))
    log.info("funding wallet removed", organisation_id=organisation_id, address=address)
    return row


async def set_default_wallet(engine: AsyncEngine, organisation_id: str, address: str) -> FundingWallet:
    async with engine.begin() as conn:
        return await set_default(conn, organisation_id, address)


async def remove_wallet(engine: AsyncEngine, organisation_id: str, address: str) -> FundingWallet:
    async with engine.begin() as conn:
        return await remove(conn, organisation_id, address)


async def _verify(settings: Settings, rpcs: RpcClients, network: str, address: str, message: str,
                  signature: str) -> str:
    """`eoa` when the key of `address` signed `message`, `contract` when the wallet's ERC-1271 check
    accepts it; else a 422."""
    signable = encode_defunct(text=message)
    raw = bytes.fromhex(signature[2:])
    if len(raw) == 65:
        try:
            signer = await asyncio.to_thread(Account.recover_message, signable, signature=raw)
        except Exception:  # malformed r, s or v: not this key's signature; a contract may still accept it
            signer = None
        if signer is not None and signer.lower() == address:
            return "eoa"
    rpc = rpcs.of(settings.network(network))  # the process's client (read before any transaction)
    if rpc is None:
        raise ChainUnavailable(f"network {network} has no RPC endpoint to check a contract wallet",
                               {"network": network})
    digest = defunct_hash_message(text=message)
    data = "0x" + (_IS_VALID_SIGNATURE + encode(["bytes32", "bytes"], [digest, raw])).hex()
    try:
        code = await rpc.call("eth_getCode", [to_checksum_address(address), "latest"], max_attempts=2)
        result = None
        if code not in (None, "0x", "0x0"):
            result = await rpc.call("eth_call", [{"to": to_checksum_address(address), "data": data},
                                                 "latest"], max_attempts=2)
    except RpcError as exc:
        if "revert" in exc.message.lower():
            result = None
        else:
            raise ChainUnavailable(f"network {network} did not answer the contract wallet check",
                                   {"network": network}) from exc
    if isinstance(result, str) and result[:10].lower() == ERC1271_MAGIC:
        return "contract"
    raise Unprocessable("the signature is not the wallet's signature of the registration message",
                        {"signature": "invalid"}, code="ERR_INVALID_SIGNATURE")
