"""Resources in the spec's shapes (rows in, JSON-ready dicts out)."""

from __future__ import annotations

from typing import Any

from eth_utils import to_checksum_address

from vip.api.jsonio import iso


def address_out(address: str | None) -> str | None:
    """Addresses are stored lower-case and shown checksummed."""
    return to_checksum_address(address) if address else None


def connection_json(row) -> dict[str, Any]:
    """A Connection as create responses and GET /connections show it."""
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
