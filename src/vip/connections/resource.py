"""A connection as the API answers it and its events carry it (`data.object`): one shape for both."""

from __future__ import annotations

from typing import Any

from eth_utils import to_checksum_address
from sqlalchemy import Row

from vip.formats import iso

# The spec's list item (GET /v1/connections) keeps these fields of the full connection.
LIST_FIELDS = ("id", "type", "provider", "identifier", "status", "created_at", "network", "source_type")


def address_out(address: str | None) -> str | None:
    """Addresses are stored lower-case and shown checksummed."""
    return to_checksum_address(address) if address else None


def connection_json(row: Row[Any]) -> dict[str, Any]:
    """A Connection as create responses, GET /connections and the connection events show it."""
    is_wallet = row.type == "wallet"
    body: dict[str, Any] = {
        "id": row.id,
        "user_id": row.user_id,
        "type": row.type,
        "provider": row.provider,
        "identifier": address_out(row.identifier) if is_wallet else row.identifier,
        "status": row.status,
        "created_at": iso(row.created_at),
        "last_synced_at": iso(row.last_synced_at),
    }
    if is_wallet:
        body["network"] = row.network
    else:
        body["source_type"] = row.source_type
    return body


def list_item(row: Row[Any]) -> dict[str, Any]:
    """The spec's list item: id, type, provider, identifier, status, created_at, plus network (wallet)
    or source_type (platform)."""
    return {k: v for k, v in connection_json(row).items() if k in LIST_FIELDS}
