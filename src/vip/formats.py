"""How times and amounts are written wherever the service shows them (API bodies, webhook payloads):
ISO 8601 UTC with a Z, USD with at most 6 decimals, token amounts exact for any uint256."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Context, Decimal
from typing import Any

import orjson
import simplejson

USD_PLACES = Decimal("0.000001")


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
