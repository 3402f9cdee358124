"""Secrets at rest and rotating the key that seals them: webhook signing secrets and platform tokens are
stored sealed; `vip secrets reseal` (the real command) seals everything again under the first key of
VIP_TOKEN_KEY, after which the old key can be dropped; deliveries are still signed with the plain secret
(checked at a real receiver); a value no key opens stops the re-seal without changing anything."""

from __future__ import annotations

import asyncio
import base64
import hmac
import os
import subprocess
import sys

import pytest
from Crypto.Cipher import AES
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.webhooks import START, ManualClock, Receiver, make_endpoint, organisation
from vip.config import WebhookConfig
from vip.connections import platform_tokens as tokens
from vip.store.outbox import record_event
from vip.store.tables import connections, platform_tokens, users, webhook_endpoints
from vip.token_cipher import TokenCipher, TokenUnreadable
from vip.webhooks import events
from vip.webhooks.store import open_secret
from vip.webhooks.worker import DeliveryWorker

OLD = "old:" + base64.urlsafe_b64encode(b"o" * 32).decode()
NEW = "new:" + base64.urlsafe_b64encode(b"n" * 32).decode()
STRANGER = "other:" + base64.urlsafe_b64encode(b"x" * 32).decode()
LEGACY_SECRET = "whsec_stored_in_clear_before_secrets_were_sealed_0001"


def reseal(database_url: str, token_key: str, expect: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VIP_CONFIG"}
    env.update(DATABASE_URL=database_url, VIP_TOKEN_KEY=token_key)
    done = subprocess.run([sys.executable, "-m", "vip.cli", "secrets", "reseal"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == expect, (done.stdout, done.stderr)
    return done


async def platform_connection(engine: AsyncEngine, org: str, cipher: TokenCipher) -> str:
    async with engine.begin() as conn:
        await conn.execute(insert(users).values(id="usr_r", organisation_id=org, created_at=START))
        await conn.execute(insert(connections).values(
            id="con_r", organisation_id=org, user_id="usr_r", type="platform", provider="paystream",
            identifier="acct", account_id="acct", source_type="payroll", status="active", created_at=START))
        await tokens.save(conn, cipher, connection_id="con_r", access_token="access-1",
                          refresh_token="refresh-1", expires_at=None, now=START)
    return "con_r"


async def stored(engine: AsyncEngine):
    async with engine.connect() as conn:
        hooks = (await conn.execute(select(webhook_endpoints).order_by(webhook_endpoints.c.id))).all()
        kept = (await conn.execute(select(platform_tokens))).one()
    return hooks, kept


@pytest.mark.e2e
async def test_rotate_the_key_ring_with_reseal(database_url, engine):
    old = TokenCipher.from_text(OLD)
    receiver = await Receiver().start()
    try:
        org = await organisation(engine)
        endpoint_id, secret = await make_endpoint(engine, org, receiver.url, cipher=old)
        legacy_id, _ = await make_endpoint(engine, org, receiver.url + "?legacy", cipher=old)
        async with engine.begin() as conn:  # as stored before secrets were sealed
            await conn.execute(update(webhook_endpoints).where(webhook_endpoints.c.id == legacy_id)
                               .values(secret=LEGACY_SECRET))
        connection_id = await platform_connection(engine, org, old)
        hooks, kept = await stored(engine)
        assert secret not in hooks[0].secret + hooks[1].secret  # sealed at rest
        assert b"access-1" not in bytes(kept.access_token)

        # A key the values were not sealed with: nothing changes, the command names what it cannot open.
        done = reseal(database_url, STRANGER, expect=1)
        assert "nothing re-sealed" in done.stderr and f"{endpoint_id}.secret" in done.stderr
        assert f"{connection_id}.access_token" in done.stderr
        assert await stored(engine) == (hooks, kept)

        # The new key first, the old one still in the ring: everything is sealed again under the new one.
        done = reseal(database_url, f"{NEW},{OLD}", expect=0)
        assert "re-sealed under key 'new': 2 webhook secret(s) and 2 platform token(s)" in done.stdout
        again = reseal(database_url, f"{NEW},{OLD}", expect=0)
        assert "0 webhook secret(s) and 0 platform token(s); 4 already were" in again.stdout

        # The old key dropped: every value opens with the new key alone, and no longer with the old one.
        new = TokenCipher.from_text(NEW)
        hooks, kept = await stored(engine)
        by_id = {h.id: h.secret for h in hooks}
        assert open_secret(new, endpoint_id, by_id[endpoint_id]) == secret
        assert open_secret(new, legacy_id, by_id[legacy_id]) == LEGACY_SECRET
        assert open_secret(old, endpoint_id, by_id[endpoint_id]) is None
        assert new.open(kept.access_token, connection_id) == "access-1"
        assert new.open(kept.refresh_token, connection_id) == "refresh-1"
        with pytest.raises(TokenUnreadable):
            old.open(kept.access_token, connection_id)

        # Deliveries are signed with the plain secret, opened with the new ring.
        async with engine.begin() as conn:
            await record_event(conn, "connection.revoked", {"id": "con_1"}, organisation_id=org,
                               created_at=START)
        worker = DeliveryWorker(engine, ManualClock(), WebhookConfig(allow_http=True), cipher=new)
        await worker.drain()
        stop = asyncio.Event()
        stop.set()
        await worker.run(stop)
        signed_with = {s for got in receiver.received for s in (secret, LEGACY_SECRET)
                       if got.one("Service-Signature")
                       == "sha256=" + hmac.new(s.encode(), got.body, "sha256").hexdigest()}
        assert len(receiver.received) == 2 and signed_with == {secret, LEGACY_SECRET}
    finally:
        await receiver.stop()


async def test_a_secret_no_key_opens_is_never_sent_unsigned(engine):
    receiver = await Receiver().start()
    try:
        org = await organisation(engine)
        await make_endpoint(engine, org, receiver.url, cipher=TokenCipher.from_text(OLD))
        async with engine.begin() as conn:
            event_id = await record_event(conn, "connection.revoked", {"id": "con_1"}, organisation_id=org,
                                          created_at=START)
        worker = DeliveryWorker(engine, ManualClock(), WebhookConfig(allow_http=True),
                                cipher=TokenCipher.from_text(NEW))  # the old key dropped too early
        await worker.drain()
        stop = asyncio.Event()
        stop.set()
        await worker.run(stop)
        assert receiver.received == []
        async with engine.connect() as conn:
            [(_, [attempt])] = await events.deliveries_of(conn, event_id)
        assert "does not open with the key ring" in attempt.error
    finally:
        await receiver.stop()


def test_values_sealed_before_key_ids_still_open():
    """Platform tokens stored before the key ring (version 1: no key id) open with any key of the ring
    that sealed them, and count as due for re-sealing."""
    key = b"o" * 32
    nonce = b"\x07" * 12
    aes = AES.new(key, AES.MODE_GCM, nonce=nonce, mac_len=16)
    aes.update(b"con_1")
    ciphertext, tag = aes.encrypt_and_digest(b"legacy-token")
    version_1 = b"\x01" + nonce + tag + ciphertext
    ring = TokenCipher.from_text(f"{NEW},{OLD}")
    assert ring.open(version_1, "con_1") == "legacy-token" and not ring.is_current(version_1)
    with pytest.raises(TokenUnreadable):
        ring.open(version_1, "con_2")
    with pytest.raises(TokenUnreadable):
        TokenCipher.from_text(NEW).open(version_1, "con_1")
    assert ring.is_current(ring.seal("x", "c")) and ring.key_id_of(ring.seal("x", "c")) == "new"
    assert "o" * 8 not in repr(ring)
