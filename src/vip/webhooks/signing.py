"""Webhook secrets and the spec's signature: `sha256=` + lowercase hex HMAC-SHA256 of the raw body."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

import simplejson

from vip.formats import checksum_addresses

SECRET_PREFIX = "whsec_"
SIGNATURE_HEADER = "Service-Signature"
EVENT_ID_HEADER = "Service-Event-Id"
TIMESTAMP_HEADER = "Service-Timestamp"


def new_secret() -> str:
    """A signing secret: the HMAC key is the UTF-8 bytes of this whole string, prefix included."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signatures(secrets_newest_first: list[str], body: bytes) -> list[str]:
    """One `Service-Signature` value per secret that signs now (two during a rotation's overlap)."""
    return [signature(s, body) for s in secrets_newest_first]


def verify(secret: str, body: bytes, header_values: list[str]) -> bool:
    """True when any of the header values is the signature of `body` with `secret` (constant time)."""
    expected = signature(secret, body).encode()
    return any(hmac.compare_digest(expected, v.strip().encode()) for v in header_values)


def encode_body(envelope: dict[str, Any]) -> bytes:
    """The raw JSON body of a delivery: compact, numbers exact (Decimal, never float), addresses EIP-55
    checksummed like the API's (decision 132)."""
    return simplejson.dumps(checksum_addresses(envelope), use_decimal=True, separators=(",", ":")).encode()
