"""The outcome of an attempt: the delivery's next state on the spec's retry schedule, and its writing
with the attempt's record. Outcomes that finish together are written in one transaction (group
commit: one WAL flush for many attempts)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, bindparam, case, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.store.tables import webhook_attempts, webhook_deliveries, webhook_endpoints
from vip.webhooks.claims import Job
from vip.webhooks.schedule import next_attempt_after_failure
from vip.webhooks.sender import Sent

d, ep = webhook_deliveries, webhook_endpoints


def settle(job: Job, attempted_at: datetime, finished_at: datetime, sent: Sent) -> tuple[str, dict[str, Any]]:
    """The outcome (delivered, retrying or failed) and the row `OutcomeWriter.write` takes."""
    attempts = job.attempts_before + 1
    if sent.error is None:
        outcome, status, retry_at = "delivered", "delivered", None
    else:
        retry_at = next_attempt_after_failure(attempts, finished_at)
        outcome, status = ("retrying", "pending") if retry_at is not None else ("failed", "failed")
    return outcome, {
        "b_id": job.delivery_id, "b_endpoint": job.endpoint_id, "b_ok": sent.error is None,
        "b_status": status, "b_attempts": attempts, "b_last": attempted_at,
        "b_next": retry_at, "b_delivered": finished_at if status == "delivered" else None,
        "b_code": sent.status_code, "b_error": sent.error, "b_ms": round(sent.elapsed_s * 1000),
        "b_headers": sent.request_headers, "b_response": sent.response_text}


class OutcomeWriter:
    """Writes outcomes; those written in the same turn of the event loop share one transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._pending: list[dict[str, Any]] = []
        self._flush: asyncio.Future[None] | None = None

    async def write(self, row: dict[str, Any]) -> None:
        """Record the attempt and move the delivery; returns once the row is committed."""
        self._pending.append(row)
        if self._flush is not None:
            await asyncio.shield(self._flush)
            return
        self._flush = asyncio.get_running_loop().create_future()
        flush = self._flush
        await asyncio.sleep(0)  # attempts finishing in this turn of the loop join the batch
        # In id order, like every other multi-row write of deliveries, so two writers never deadlock.
        batch = sorted(self._pending, key=lambda row: row["b_id"])
        self._pending, self._flush = [], None
        try:
            async with self.engine.begin() as conn:
                # Since when each endpoint has only failed: cleared by a delivery, set by the first failure
                # after one (the worker disables an endpoint failing for days). Only a change writes (a
                # healthy endpoint's row is never locked here), endpoints before deliveries and in id
                # order, as deleting an endpoint locks them.
                ok = bindparam("b_ok", type_=Boolean)
                changes = (ok & ep.c.failing_since.is_not(None)) | (~ok & ep.c.failing_since.is_(None))
                await conn.execute(update(ep).where(ep.c.id == bindparam("b_endpoint"), changes).values(
                    failing_since=case((ok, None), else_=bindparam("b_last"))),
                    sorted(batch, key=lambda row: row["b_endpoint"]))
                await conn.execute(webhook_attempts.insert().values(
                    delivery_id=bindparam("b_id"), attempted_at=bindparam("b_last"),
                    status_code=bindparam("b_code"), error=bindparam("b_error"),
                    duration_ms=bindparam("b_ms"), request_headers=bindparam("b_headers", type_=JSONB),
                    response_body=bindparam("b_response")), batch)
                # Only a delivery still ours moves: a deleted endpoint's delivery stays cancelled.
                ours = (d.c.id == bindparam("b_id")) & (d.c.status == "pending")
                await conn.execute(update(d).where(ours).values(
                    status=bindparam("b_status"), attempts=bindparam("b_attempts"),
                    last_attempt_at=bindparam("b_last"), next_attempt_at=bindparam("b_next"),
                    delivered_at=bindparam("b_delivered")), batch)
        except BaseException as exc:
            flush.set_exception(exc)
            flush.exception()  # retrieved here; the joiners re-raise it
            raise
        flush.set_result(None)
