"""An Idempotency-Key's claim, and the resource its request created, recorded in the transaction that
created it. The answer itself is remembered by `api/middleware.py` once it is sent; if that answer is lost
(the process dies, the client gives up) after the resource committed, a retry with the same key and body
finds the resource here and is answered with it, as the first answer would have been (decision 312)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.store.tables import idempotency_keys


@dataclass(frozen=True)
class IdempotencyClaim:
    """An Idempotency-Key of an API key, and the request that came with it."""

    key_id: str
    key: str
    request_hash: str

    @property
    def lock_name(self) -> str:
        return f"idempotency:{self.key_id}:{self.key}"

    @property
    def row(self) -> ColumnElement[bool]:
        return and_(idempotency_keys.c.api_key_id == self.key_id, idempotency_keys.c.key == self.key)


async def record_resource(conn: AsyncConnection, claim: IdempotencyClaim | None, resource_id: str) -> None:
    """In the caller's transaction (the one creating the resource): the key's request created
    `resource_id`. No answer is recorded yet (status_code null); the middleware adds it once sent."""
    if claim is None:
        return
    statement = pg_insert(idempotency_keys).values(
        api_key_id=claim.key_id, key=claim.key, request_hash=claim.request_hash, resource_id=resource_id)
    await conn.execute(statement.on_conflict_do_update(
        index_elements=[idempotency_keys.c.api_key_id, idempotency_keys.c.key],
        set_={"resource_id": resource_id, "request_hash": claim.request_hash}))
