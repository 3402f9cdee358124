"""Record an event in the transactional outbox, in the same transaction as the change that causes it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from vip.formats import iso
from vip.store.tables import outbox_events

API_VERSION = "v1"


def new_event_id() -> str:
    return f"evt_{uuid.uuid4().hex}"


async def record_event(
    conn: AsyncConnection,
    event_type: str,
    obj: dict[str, Any],
    *,
    created_at: datetime,
    organisation_id: str | None = None,
    test: bool = False,
) -> str:
    """Insert an event row on `conn` (which must be inside the caller's transaction); return its id.

    The row commits or rolls back with the caller's change, so an event is never sent for a change that
    did not happen and never missing for one that did. A `test` event (`vip trigger`) carries a sample
    object and `data.test: true`.
    """
    if not conn.in_transaction():
        raise RuntimeError("record_event must run inside the transaction of the change it describes")
    event_id = new_event_id()
    await conn.execute(
        outbox_events.insert().values(
            id=event_id,
            organisation_id=organisation_id,
            type=event_type,
            api_version=API_VERSION,
            data={"object": obj, "test": True} if test else {"object": obj},
            created_at=created_at,
        )
    )
    return event_id


def envelope(row: Any) -> dict[str, Any]:
    """The spec's webhook envelope for a stored event row."""
    return {
        "id": row.id,
        "type": row.type,
        # NOTE: psycopg returns timestamptz in the session's time zone; the envelope is always UTC.
        "created_at": iso(row.created_at),
        "api_version": row.api_version,
        "data": row.data,
    }
