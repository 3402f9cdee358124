"""How times, amounts and addresses are written wherever the service shows them (API bodies, webhook
payloads): ISO 8601 UTC with a Z, USD with at most 6 decimals, token amounts exact for any uint256,
addresses EIP-55 checksummed (stored lower-case); and how an address is read from a client."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Context, Decimal
from functools import lru_cache
from typing import Any, overload

import orjson
import simplejson
from eth_hash.auto import keccak

USD_PLACES = Decimal("0.000001")


@overload
def iso(ts: datetime) -> str: ...
@overload
def iso(ts: datetime | None) -> str | None: ...
def iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iso_date(day: date | None) -> str | None:
    return day.isoformat() if day is not None else None


def usd(value: Decimal) -> Decimal:
    """A USD amount as it is serialised: at most 6 decimals, trailing zeros dropped."""
    quantised = value.quantize(USD_PLACES)
    return quantised.normalize() if quantised != quantised.to_integral() else quantised.quantize(Decimal(1))


_EXACT = Context(prec=100)  # more digits than any uint256 has


def token_units(raw: int, decimals: int) -> Decimal:
    """Base units -> token units, exact for any uint256, never written with an exponent (10, not 1E+1)."""
    if raw == 0:
        return Decimal(0)
    value = Decimal(raw).scaleb(-decimals, _EXACT).normalize(_EXACT)
    return value.quantize(Decimal(1), context=_EXACT) if value.as_tuple().exponent > 0 else value


# --- JSON with exact numbers ------------------------------------------------------------------------


def _exact_number(value: Any) -> orjson.Fragment:
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))  # the Decimal's own digits, written as a JSON number
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps_bytes(obj: Any) -> bytes:
    """Compact JSON; Decimals as numbers with all their digits (never through a float). orjson is about
    six times faster than simplejson on a page of transactions; simplejson takes what orjson refuses
    (integers beyond 64 bits, non-string keys)."""
    try:
        return orjson.dumps(obj, default=_exact_number)
    except orjson.JSONEncodeError:
        return simplejson.dumps(obj, use_decimal=True, separators=(",", ":")).encode()


def dumps(obj: Any) -> str:
    return dumps_bytes(obj).decode()


def loads(text: str | bytes) -> Any:
    # Numbers with a fraction become Decimal, so client amounts are never rounded through a float.
    return simplejson.loads(text, use_decimal=True)


# --- addresses ---------------------------------------------------------------------------------------

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
# Lender-owned objects given back as they were sent (a payment intent's `metadata`): never rewritten.
VERBATIM_KEYS = frozenset({"metadata"})


@lru_cache(maxsize=65536)
def checksummed(address: str) -> str:
    """EIP-55 form of a 0x address in any case. Same result as eth_utils' `to_checksum_address`, about
    15 times cheaper and cached: a page shows 100 addresses, mostly the same few."""
    body = address[2:].lower()
    digest = keccak(body.encode()).hex()
    return "0x" + "".join(c.upper() if d in "89abcdef" else c for c, d in zip(body, digest, strict=False))


def address_in(value: str) -> str:
    """An address a client sent, in its EIP-55 form: all lower-case, all upper-case hex digits or
    checksummed are accepted; mixed case is a checksum and must be right (decision 132). Raises
    ValueError (a 400 through the request models) otherwise."""
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise ValueError("must be an address: 0x and 40 hex digits")
    digits = value[2:]
    if digits not in (digits.lower(), digits.upper()) and checksummed(value) != value:
        raise ValueError("mixed-case address with a wrong EIP-55 checksum (send it checksummed, or all "
                         "lower-case)")
    return checksummed(value)


def checksum_addresses(obj: Any) -> Any:
    """`obj` with every string that is an address (0x and 40 hex digits, exactly) in its EIP-55 form: the
    one place API bodies and webhook payloads get their addresses' case (decision 132). Transaction
    hashes (64 digits) are not addresses; what a lender sent as `metadata` is left as it is."""
    if isinstance(obj, str):
        return _address_out(obj)
    if isinstance(obj, dict):
        return {k: v if k in VERBATIM_KEYS else _value(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_value(v) for v in obj]
    return obj


def _address_out(text: str) -> str:
    return checksummed(text) if len(text) == 42 and _ADDRESS.fullmatch(text) else text


def _value(v: Any) -> Any:
    # Exact type checks first: this runs over every value of every response.
    kind = type(v)
    if kind is str:
        return checksummed(v) if len(v) == 42 and _ADDRESS.fullmatch(v) else v
    if kind in _SCALARS:
        return v
    return checksum_addresses(v)


_SCALARS = frozenset({int, bool, float, Decimal, type(None)})
