"""Encryption at rest of the platforms' OAuth tokens: AES-256-GCM (pycryptodome, already installed with
eth-account) under a 32-byte key from configuration (`api.token_key`, $VIP_TOKEN_KEY).

A sealed value is `version byte || 12-byte nonce || 16-byte tag || ciphertext`. The connection id is bound
in as associated data, so a sealed token copied onto another connection's row does not open. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import secrets

from Crypto.Cipher import AES

VERSION = b"\x01"
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_BYTES = 32


class TokenUnreadable(ValueError):
    """A sealed token that this key cannot open (another key, or altered bytes)."""


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


class TokenCipher:
    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"the token key must be {KEY_BYTES} bytes")
        self._key = key

    @classmethod
    def from_text(cls, text: str) -> TokenCipher:
        return cls(decode_key(text))

    def __repr__(self) -> str:  # never the key
        return "TokenCipher(<key>)"

    def seal(self, token: str, context: str) -> bytes:
        nonce = secrets.token_bytes(NONCE_BYTES)
        cipher = AES.new(self._key, AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
        cipher.update(context.encode())
        ciphertext, tag = cipher.encrypt_and_digest(token.encode())
        return VERSION + nonce + tag + ciphertext

    def open(self, sealed: bytes, context: str) -> str:
        sealed = bytes(sealed)
        if sealed[:1] != VERSION or len(sealed) < 1 + NONCE_BYTES + TAG_BYTES:
            raise TokenUnreadable("not a sealed token")
        nonce = sealed[1:1 + NONCE_BYTES]
        tag = sealed[1 + NONCE_BYTES:1 + NONCE_BYTES + TAG_BYTES]
        cipher = AES.new(self._key, AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
        cipher.update(context.encode())
        try:
            return cipher.decrypt_and_verify(sealed[1 + NONCE_BYTES + TAG_BYTES:], tag).decode()
        except ValueError as exc:
            raise TokenUnreadable("the token does not open with this key") from exc
