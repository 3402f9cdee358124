"""JSON in and out: exact Decimal numbers (never floats), ISO 8601 UTC timestamps with a Z."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from vip.formats import (
    USD_PLACES,
    checksum_addresses,
    dumps,
    dumps_bytes,
    iso,
    iso_date,
    loads,
    token_units,
    usd,
)

# The API's JSON helpers: this module's own, and vip.formats' re-exported for the routes.
__all__ = ["USD_PLACES", "checksum_addresses", "dumps", "dumps_bytes", "iso", "iso_date", "json_response",
           "loads", "token_units", "usd"]


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """Every JSON body the API answers: its addresses EIP-55 checksummed here, whatever shape built it
    (decision 132)."""
    return web.Response(body=dumps_bytes(checksum_addresses(obj)), status=status,
                        content_type="application/json", charset="utf-8", headers=headers)
