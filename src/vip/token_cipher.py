"""Encryption at rest of stored secrets (platforms' OAuth tokens, webhook signing secrets): AES-256-GCM
(pycryptodome, already installed with eth-account) under a key-encryption key from configuration
(`api.token_key`, $VIP_TOKEN_KEY).

The configuration holds a key ring: comma-separated `id:key` entries (key = URL-safe base64 of 32 bytes;
a bare key has the id `0`). The first key seals; every key opens. To rotate, put a new key first, keep the
old ones after it, run `vip secrets reseal` (everything is sealed again under the first key), then drop
the old keys.

A sealed value is `2 || id length || id || 12-byte nonce || 16-byte tag || ciphertext` (version 2, naming
its key), or `1 || nonce || tag || ciphertext` (version 1, written before key ids: opened by trying every
key). The caller's context (a connection or endpoint id and field) is bound in as associated data, so a
sealed value copied onto another row does not open. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass

from Crypto.Cipher import AES

VERSION_1 = 1
VERSION = 2
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_BYTES = 32
DEFAULT_KEY_ID = "0"
KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
TEXT_PREFIX = "sealed:"  # a sealed value kept in a text column


class TokenUnreadable(ValueError):
    """A sealed value that none of the keys can open (another key, or altered bytes)."""


def decode_key(text: str) -> bytes:
    """A key written as URL-safe base64 of 32 bytes (e.g. `python -c "import secrets, base64;
    print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"`)."""
    try:
        key = base64.urlsafe_b64decode(text.encode())
    except (binascii.Error, ValueError) as exc:
        raise ValueError("the token key must be URL-safe base64") from exc
    if len(key) != KEY_BYTES:
        raise ValueError(f"the token key must be {KEY_BYTES} bytes (URL-safe base64), not {len(key)}")
    return key


def parse_keyring(text: str) -> list[tuple[str, bytes]]:
    """`id:key,id:key,...` (or one bare key) as (id, key) pairs, the sealing key first."""
    ring: list[tuple[str, bytes]] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            raise ValueError("the token key ring has an empty entry")
        key_id, sep, key_text = entry.rpartition(":")
        key_id = key_id if sep else DEFAULT_KEY_ID
        if not KEY_ID.match(key_id):
            raise ValueError(f"a token key id must be 1-32 letters, digits, '_', '.' or '-', not {key_id!r}")
        if any(key_id == known for known, _ in ring):
            raise ValueError(f"the token key id {key_id!r} is listed twice")
        ring.append((key_id, decode_key(key_text)))
    return ring


class TokenCipher:
    def __init__(self, key: bytes, key_id: str = DEFAULT_KEY_ID,
                 older: list[tuple[str, bytes]] | None = None) -> None:
        ring = [(key_id, key), *(older or [])]
        for _, k in ring:
            if len(k) != KEY_BYTES:
                raise ValueError(f"the token key must be {KEY_BYTES} bytes")
        self._ring = dict(ring)
        self.current_id = key_id

    @classmethod
    def from_text(cls, text: str) -> TokenCipher:
        (first_id, first), *older = parse_keyring(text)
        return cls(first, first_id, older)

    def __repr__(self) -> str:  # never the keys
        return f"TokenCipher(sealing key {self.current_id!r}, {len(self._ring)} keys)"

    def has_key(self, key: bytes) -> bool:
        return key in self._ring.values()

    def seal(self, token: str, context: str) -> bytes:
        key_id = self.current_id.encode()
        nonce = secrets.token_bytes(NONCE_BYTES)
        cipher = AES.new(self._ring[self.current_id], AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
        cipher.update(context.encode())
        ciphertext, tag = cipher.encrypt_and_digest(token.encode())
        return bytes([VERSION, len(key_id)]) + key_id + nonce + tag + ciphertext

    def key_id_of(self, sealed: bytes) -> str | None:
        """The id of the key a version-2 value names (None: a version-1 value, which names none)."""
        sealed = bytes(sealed)
        if sealed[:1] == bytes([VERSION]) and len(sealed) > 2:
            return sealed[2:2 + sealed[1]].decode(errors="replace")
        return None

    def is_current(self, sealed: bytes) -> bool:
        """Sealed under the current sealing key (else `vip secrets reseal` seals it again)."""
        return self.key_id_of(sealed) == self.current_id

    def open(self, sealed: bytes, context: str) -> str:
        sealed = bytes(sealed)
        if sealed[:1] == bytes([VERSION]) and len(sealed) > 2:
            end = 2 + sealed[1]
            key = self._ring.get(sealed[2:end].decode(errors="replace"))
            if key is None:
                raise TokenUnreadable("sealed under a key that is not in the key ring")
            return _open(key, sealed[end:], context)
        if sealed[:1] == bytes([VERSION_1]):
            for key in self._ring.values():
                try:
                    return _open(key, sealed[1:], context)
                except TokenUnreadable:
                    continue
            raise TokenUnreadable("the token does not open with any key of the ring")
        raise TokenUnreadable("not a sealed token")

    # --- sealed values in text columns (webhook signing secrets) ----------------------------------------

    def seal_text(self, value: str, context: str) -> str:
        return TEXT_PREFIX + base64.urlsafe_b64encode(self.seal(value, context)).decode()

    def open_text(self, stored: str, context: str) -> str:
        """The value of a `seal_text` result. A value without the prefix was stored before secrets were
        sealed and is returned as it is (`vip secrets reseal` seals it)."""
        if not stored.startswith(TEXT_PREFIX):
            return stored
        return self.open(self.sealed_bytes(stored), context)

    @staticmethod
    def sealed_bytes(stored: str) -> bytes:
        try:
            return base64.urlsafe_b64decode(stored.removeprefix(TEXT_PREFIX).encode())
        except (binascii.Error, ValueError) as exc:
            raise TokenUnreadable("not a sealed value") from exc

    def text_is_current(self, stored: str) -> bool:
        return stored.startswith(TEXT_PREFIX) and self.is_current(self.sealed_bytes(stored))


def _open(key: bytes, body: bytes, context: str) -> str:
    if len(body) < NONCE_BYTES + TAG_BYTES:
        raise TokenUnreadable("not a sealed token")
    nonce, tag = body[:NONCE_BYTES], body[NONCE_BYTES:NONCE_BYTES + TAG_BYTES]
    cipher = AES.new(key, AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
    cipher.update(context.encode())
    try:
        return cipher.decrypt_and_verify(body[NONCE_BYTES + TAG_BYTES:], tag).decode()
    except ValueError as exc:
        raise TokenUnreadable("the token does not open with this key") from exc


@dataclass(frozen=True)
class Resealed:
    """What a re-seal of stored values did: values sealed again under the current key, values already
    under it, and the rows holding a value no key of the ring opens (left as they are)."""

    resealed: int
    current: int
    unreadable: list[str]
