"""The borrowers list an analyst decides from: each borrower with their latest VIP's status, verified income,
fraud flags, and the risk score's recommendation; filtered, sorted, paged by keyset, searched by part of an
id or external id, and exported as CSV.

The score is the one the API gave the lender (`risk_scores`, stored on its first `GET /v1/risk-score`);
a finished VIP the lender has not scored yet shows the score the API will give, computed for the rows
shown and marked as a preview (decision 203: a page stores nothing). Filtering and sorting by
recommendation or score act on stored scores, so they run in the database: "not scored yet" is a filter
of its own (decision 260).

Always one organisation's borrowers. Read-only."""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, cast

from sqlalchemy import (
    DateTime,
    Integer,
    Numeric,
    Select,
    String,
    and_,
    func,
    literal,
    literal_column,
    not_,
    or_,
    select,
    tuple_,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.config import Settings
from vip.formats import iso
from vip.reports import risk_scores as risk_score_store
from vip.store.tables import LATEST_VIP_SORTS, risk_scores, users, vip_reports
from vip.verification.scoring import risk_score

PAGE_SIZE = 50
EXPORT_LIMIT = 10_000
STATUSES = ("verified", "partially_verified", "unverified", "pending", "error", "none")
RECOMMENDATIONS = ("approve", "approve_with_conditions", "refer", "decline", "unscored")
SORTS = {
    "newest": "Newest borrowers first",
    "oldest": "Oldest borrowers first",
    "vip": "Latest VIP first",
    "score": "Highest score first",
    "income": "Highest verified income first",
    "flags": "Most fraud flags first",
}
Sort = Literal["newest", "oldest", "vip", "score", "income", "flags"]
MAX_QUERY = 200
# What a spreadsheet would run as a formula when a cell starts with it (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


@dataclass(frozen=True)
class ListFilters:
    """What the list's form asks for; every field optional. Values are already checked (`from_query`)."""

    q: str = ""
    status: str = ""
    recommendation: str = ""
    flagged: str = ""  # "yes" | "no" | ""
    vip_from: date | None = None  # latest VIP generated on or after this UTC day
    vip_to: date | None = None  # ... on or before this UTC day
    sort: Sort = "newest"

    @classmethod
    def from_query(cls, query: dict[str, str]) -> tuple[ListFilters, dict[str, str]]:
        """The filters of a query string and the problems with it (by field; a bad value is dropped)."""
        problems: dict[str, str] = {}

        def choice(name: str, allowed: Iterable[str]) -> str:
            value = query.get(name, "").strip()
            if value and value not in allowed:
                problems[name] = f"one of {', '.join(allowed)}"
                return ""
            return value

        def day(name: str) -> date | None:
            value = query.get(name, "").strip()
            if not value:
                return None
            try:
                parsed = date.fromisoformat(value)
            except ValueError:
                problems[name] = "a day as YYYY-MM-DD"
                return None
            if parsed.year < 1970 or parsed.year > 9998:
                problems[name] = "a day between 1970 and 9998"
                return None
            return parsed

        q = query.get("q", "").strip()
        if "\x00" in q:
            problems["q"] = "contains a NUL character"
            q = ""
        made = cls(q=q[:MAX_QUERY], status=choice("status", STATUSES),
                   recommendation=choice("recommendation", RECOMMENDATIONS),
                   flagged=choice("flagged", ("yes", "no")),
                   vip_from=day("vip_from"), vip_to=day("vip_to"),
                   sort=cast(Sort, choice("sort", SORTS) or "newest"))
        return made, problems

    def as_query(self) -> dict[str, str]:
        """The filters as query parameters (blank ones left out), for links and the export."""
        values = {"q": self.q, "status": self.status, "recommendation": self.recommendation,
                  "flagged": self.flagged, "vip_from": self.vip_from.isoformat() if self.vip_from else "",
                  "vip_to": self.vip_to.isoformat() if self.vip_to else "",
                  "sort": "" if self.sort == "newest" else self.sort}
        return {k: v for k, v in values.items() if v}


@dataclass(frozen=True)
class ScoreShown:
    composite: int
    recommendation: str
    stored: bool  # False: a preview of what the API will give


@dataclass(frozen=True)
class BorrowerRow:
    """A line of the list (and of the export)."""

    id: str
    external_id: str | None
    created_at: datetime
    metadata: dict[str, Any]
    vip_id: str | None
    vip_status: str | None  # None: no VIP yet
    vip_generated_at: datetime | None
    verified_monthly_income_usd: Decimal | None
    fraud_flags: int
    score: ScoreShown | None = None


@dataclass
class BorrowerPage:
    rows: list[BorrowerRow]
    next_cursor: str | None
    total: int  # the organisation's borrowers matching the filters
    previews: int = 0  # rows whose score is a preview
    notes: list[str] = field(default_factory=list)


def _like(text: str) -> str:
    """`text` as a LIKE pattern matching it anywhere, its own % and _ taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _base(organisation_id: str) -> Select[Any]:
    """Every borrower of the organisation with their latest VIP (a finished one before a pending one, as
    the borrower page and GET /v1/vip-report read it; kept on the user's row, migration 0028) and its stored
    score."""
    u = users.c
    composite = risk_scores.c.score["composite_score"].astext.cast(Integer)
    recommendation = risk_scores.c.score["recommendation"].astext
    return (select(u.id, u.external_id, u.created_at, u.metadata, u.latest_vip_id.label("vip_id"),
                   u.latest_vip_status.label("vip_status"),
                   u.latest_vip_generated_at.label("vip_generated_at"), u.latest_vip_income.label("income"),
                   u.latest_vip_fraud_flags.label("latest_fraud_flags"),
                   composite.label("composite"), recommendation.label("recommendation"))
            .select_from(users.outerjoin(risk_scores, risk_scores.c.vip_id == u.latest_vip_id))
            .where(u.organisation_id == organisation_id))


def _sort_key(index: str, column: Any, type_: Any) -> Any:
    """The sort key of `LATEST_VIP_SORTS[index]` on the list's column, spelled as the index is (a bound
    parameter in place of its constant would not match it, and the sort would read every borrower)."""
    return func.coalesce(column, literal_column(LATEST_VIP_SORTS[index][1], type_))


def _filtered(organisation_id: str, filters: ListFilters) -> Any:
    """The filtered rows as a subquery, with `sort_value` (the sort's key, nulls as a value below any)."""
    base = _base(organisation_id).subquery("base")
    b = base.c
    fraud_flags = _sort_key("ix_users_latest_vip_fraud_flags", b.latest_fraud_flags, Integer())
    conditions = []
    if filters.q:
        pattern = _like(filters.q)
        conditions.append(or_(b.id.ilike(pattern, escape="\\"), b.external_id.ilike(pattern, escape="\\")))
    if filters.status == "none":
        conditions.append(b.vip_status.is_(None))
    elif filters.status:
        conditions.append(b.vip_status == filters.status)
    if filters.recommendation == "unscored":
        conditions.append(and_(b.composite.is_(None), b.vip_status.in_(("verified", "partially_verified"))))
    elif filters.recommendation:
        conditions.append(b.recommendation == filters.recommendation)
    if filters.flagged == "yes":
        conditions.append(fraud_flags > 0)
    elif filters.flagged == "no":
        conditions.append(not_(fraud_flags > 0))
    if filters.vip_from is not None:
        conditions.append(b.vip_generated_at >= datetime.combine(filters.vip_from, time(), UTC))
    if filters.vip_to is not None:
        day_after = datetime.combine(filters.vip_to + timedelta(days=1), time(), UTC)
        conditions.append(b.vip_generated_at < day_after)
    sort_value = {
        "newest": b.created_at, "oldest": b.created_at,
        "vip": _sort_key("ix_users_latest_vip_generated_at", b.vip_generated_at, DateTime(True)),
        "score": func.coalesce(b.composite, -1),
        "income": _sort_key("ix_users_latest_vip_income", b.income, Numeric(38, 6)),
        "flags": fraud_flags,
    }[filters.sort]
    return select(base, fraud_flags.label("fraud_flags"), sort_value.label("sort_value")).where(*conditions) \
        .subquery("rows")


def _encode_cursor(sort: str, value: Any, row_id: str) -> str:
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    raw = json.dumps([sort, text, row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(sort: str, cursor: str) -> tuple[Any, str] | None:
    """(sort value, id) after which the next page starts; None for a cursor not of this sort (the first
    page then: a cursor only ever changes which of the organisation's rows come first)."""
    try:
        given, text, row_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if given != sort or not isinstance(text, str) or not isinstance(row_id, str):
            return None
        if sort in ("newest", "oldest", "vip"):
            moment = datetime.fromisoformat(text)
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)), row_id
        if sort in ("score", "flags"):
            return int(text), row_id
        return Decimal(text), row_id
    except (ValueError, TypeError, InvalidOperation):
        return None


def _row(r: Any) -> BorrowerRow:
    score = (ScoreShown(r.composite, r.recommendation, stored=True) if r.composite is not None else None)
    return BorrowerRow(r.id, r.external_id, r.created_at, r.metadata or {}, r.vip_id, r.vip_status,
                       r.vip_generated_at, Decimal(r.income) if r.income is not None else None,
                       int(r.fraud_flags or 0), score)


async def _with_previews(conn: AsyncConnection, settings: Settings, rows: list[BorrowerRow]
                         ) -> tuple[list[BorrowerRow], int]:
    """Rows whose finished VIP has no stored score get the score the API will give (not stored)."""
    wanted = [r.vip_id for r in rows
              if r.score is None and r.vip_status in ("verified", "partially_verified")]
    if not wanted:
        return rows, 0
    reports = {v.id: v for v in await conn.execute(select(vip_reports).where(vip_reports.c.id.in_(wanted)))}
    out, previews = [], 0
    for r in rows:
        vip_row = reports.get(r.vip_id or "")
        if r.score is None and vip_row is not None and vip_row.report:
            body = risk_score(risk_score_store.score_inputs(vip_row.report, vip_row.cashflow or {}),
                              vip_row.report["fraud_flags"], settings.verification.scoring,
                              score_id="(preview)", user_id=r.id, vip_id=vip_row.id,
                              generated_at=iso(vip_row.generated_at) or "")
            r = BorrowerRow(**{**r.__dict__, "score": ScoreShown(body["composite_score"],
                                                                 body["recommendation"], stored=False)})
            previews += 1
        out.append(r)
    return out, previews


async def borrower_page(engine: AsyncEngine, settings: Settings, organisation_id: str, filters: ListFilters,
                        cursor: str | None, limit: int = PAGE_SIZE) -> BorrowerPage:
    """A page of the organisation's borrowers matching `filters`, in the filters' order, after `cursor`."""
    rows_q = _filtered(organisation_id, filters)
    r = rows_q.c
    ascending = filters.sort == "oldest"
    query = select(rows_q)
    after = _decode_cursor(filters.sort, cursor) if cursor else None
    if after is not None:
        key, position = tuple_(r.sort_value, r.id), tuple_(literal(after[0]), literal(after[1], String))
        query = query.where(key > position if ascending else key < position)
    order = (r.sort_value.asc(), r.id.asc()) if ascending else (r.sort_value.desc(), r.id.desc())
    async with engine.connect() as conn:
        found = list(await conn.execute(query.order_by(*order).limit(limit + 1)))
        # The count reads `users` alone unless a filter is on the stored score (the join to the scores is
        # unique on the VIP, so PostgreSQL drops it).
        total = await conn.scalar(select(func.count()).select_from(rows_q)) or 0
        rows, previews = await _with_previews(conn, settings, [_row(x) for x in found[:limit]])
    next_cursor = (_encode_cursor(filters.sort, found[limit - 1].sort_value, found[limit - 1].id)
                   if len(found) > limit else None)
    return BorrowerPage(rows, next_cursor, total, previews)


async def find_exact(engine: AsyncEngine, organisation_id: str, wanted: str) -> str | None:
    """The id of the organisation's user whose id or external_id is exactly `wanted` (an id first)."""
    async with engine.connect() as conn:
        found = (await conn.execute(select(users.c.id, users.c.external_id).where(
            users.c.organisation_id == organisation_id,
            or_(users.c.id == wanted, users.c.external_id == wanted)))).all()
    by_id = [row.id for row in found if row.id == wanted]
    return by_id[0] if by_id else (found[0].id if found else None)


async def needing_attention(engine: AsyncEngine, organisation_id: str, since: datetime, limit: int = 10
                            ) -> tuple[list[BorrowerRow], int]:
    """Borrowers whose latest VIP, made since `since`, is unverified or fraud-flagged (home page): the
    first few, newest VIP first, and how many in all."""
    rows_q = _filtered(organisation_id, ListFilters(sort="vip"))
    r = rows_q.c
    wanted = and_(r.vip_generated_at >= since, or_(r.vip_status == "unverified", r.fraud_flags > 0))
    async with engine.connect() as conn:
        newest_first = select(rows_q).where(wanted).order_by(r.sort_value.desc(), r.id.desc())
        found = [_row(x) for x in await conn.execute(newest_first.limit(limit))]
        total = await conn.scalar(select(func.count()).select_from(rows_q).where(wanted)) or 0
    return found, total


# --- the export ---------------------------------------------------------------------------------------------

CSV_COLUMNS = ("borrower_id", "external_id", "created_at", "vip_id", "vip_status", "vip_generated_at",
               "verified_monthly_income_usd", "fraud_flags", "score", "recommendation", "score_source",
               "metadata")


def spreadsheet_safe(value: str) -> str:
    """A cell a spreadsheet shows as text: one that would start a formula gets a leading apostrophe."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def csv_text(rows: Sequence[BorrowerRow]) -> str:
    """The rows as CSV (RFC 4180, a header line, UTC times in ISO 8601, exact decimal amounts)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        score, income = row.score, row.verified_monthly_income_usd
        cells = [row.id, row.external_id or "", iso(row.created_at) or "", row.vip_id or "",
                 row.vip_status or "none", iso(row.vip_generated_at) or "",
                 f"{income:f}" if income is not None else "", str(row.fraud_flags),
                 str(score.composite) if score else "", score.recommendation if score else "",
                 ("stored" if score.stored else "preview") if score else "",
                 json.dumps(row.metadata, ensure_ascii=False, sort_keys=True, separators=(",", ":"))]
        writer.writerow([spreadsheet_safe(cell) for cell in cells])
    return out.getvalue()


async def export_rows(engine: AsyncEngine, settings: Settings, organisation_id: str, filters: ListFilters,
                      limit: int = EXPORT_LIMIT) -> tuple[list[BorrowerRow], bool]:
    """Every matching borrower in the list's order, up to `limit` (and whether more matched)."""
    rows: list[BorrowerRow] = []
    cursor: str | None = None
    while len(rows) < limit:
        page = await borrower_page(engine, settings, organisation_id, filters, cursor,
                                   min(500, limit - len(rows)))
        rows.extend(page.rows)
        cursor = page.next_cursor
        if cursor is None:
            return rows, False
    return rows, True
