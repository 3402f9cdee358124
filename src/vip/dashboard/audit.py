"""The audit log: what staff changed through the dashboard, one row per change, written on the change's
own connection inside its transaction (so a change and its record commit or roll back together)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.dashboard.staff import StaffIdentity
from vip.store.tables import audit_log


@dataclass(frozen=True)
class AuditEntry:
    id: int
    member_email: str
    action: str
    target: str | None
    details: dict[str, Any]
    at: datetime
    request_id: str | None


async def record(conn: AsyncConnection, staff: StaffIdentity, action: str, target: str | None,
                 details: dict[str, Any] | None = None, request_id: str | None = None) -> None:
    await conn.execute(audit_log.insert().values(
        organisation_id=staff.organisation_id, member_id=staff.member_id, member_email=staff.email,
        action=action, target=target, details=details or {}, request_id=request_id))


@dataclass(frozen=True)
class AuditFilters:
    action: str | None = None  # exactly, or a family: "endpoint." takes every endpoint.* action
    member: str | None = None  # part of the member's email
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive


async def actions_of(conn: AsyncConnection, organisation_id: str) -> list[str]:
    """The actions the organisation's log holds (for the filter's choices)."""
    ours = audit_log.c.organisation_id == organisation_id
    query = select(audit_log.c.action).where(ours).distinct().order_by(audit_log.c.action)
    return list(await conn.scalars(query))


async def entries(conn: AsyncConnection, organisation_id: str, *, limit: int = 50,
                  before: int | None = None, filters: AuditFilters | None = None) -> list[AuditEntry]:
    """The organisation's entries, newest first; `before` an entry id to page back from."""
    query = select(audit_log).where(audit_log.c.organisation_id == organisation_id)
    f = filters or AuditFilters()
    if f.action:
        query = query.where(audit_log.c.action.startswith(f.action, autoescape=True) if f.action.endswith(".")
                            else audit_log.c.action == f.action)
    if f.member:
        query = query.where(audit_log.c.member_email.contains(f.member.lower(), autoescape=True))
    if f.since is not None:
        query = query.where(audit_log.c.at >= f.since)
    if f.until is not None:
        query = query.where(audit_log.c.at < f.until)
    if before is not None:
        query = query.where(audit_log.c.id < before)
    rows = await conn.execute(query.order_by(audit_log.c.id.desc()).limit(limit))
    return [AuditEntry(r.id, r.member_email, r.action, r.target, r.details, r.at, r.request_id) for r in rows]
