"""GET /v1/transactions: the user's normalized, fraud-filtered transactions, newest first, keyset-paginated.

Parameters (all validated; an unknown or repeated parameter is a 400):

- user_id: required; a user of the caller's organisation, else 404.
- wallet_id: optional; an active wallet of that user, else 404.
- direction: `inbound` or `outbound` (relative to the wallet).
- classification: `verified_income`, `p2p`, `dex_trade`, `unknown`; also `wash_trade` and `circular`, but
  only together with `include_filtered=true` (they are excluded otherwise, so asking for them without it
  is a 400 rather than a silently empty list).
- token: `USDC` or `USDT`.
- from_date, to_date: ISO 8601 date (`2025-01-31`: the whole UTC day) or date-time
  (`2025-01-31T12:00:00Z`, with an offset, or without one = UTC); both bounds are inclusive on
  `block_timestamp`; from after to is a 400.
- include_filtered: `true` or `false` (default); `wash_trade` and `circular` transactions are excluded
  unless it is true, and then listed with their `fraud_flags`.
- limit: 1 to 200, default 50.
- cursor: `pagination.cursor` of the previous page, unchanged, with the same filters (else 400); the
  limit may change between pages. `pagination.cursor` is null when `has_more` is false.

The query itself and the cursor format: `vip.transactions.query`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from aiohttp import web
from pydantic import Field, field_validator

from vip.api.context import ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import json_response
from vip.api.validation import Query, read_query
from vip.errors import ValidationFailed
from vip.transactions.query import FILTERED_CLASSES, Filters, transactions_json
from vip.transactions.service import transactions_page

routes = web.RouteTableDef()

MAX_LIMIT = 200
DEFAULT_LIMIT = 50
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?$")


def parse_instant(value: str, *, end_of_day: bool) -> datetime:
    """An ISO 8601 date or date-time as an aware UTC datetime. A date is its first instant, or with
    `end_of_day` the first instant of the next day (an exclusive end)."""
    try:
        if _DATE.match(value):
            start = datetime.combine(date.fromisoformat(value), time(0), UTC)
            return start + timedelta(days=1) if end_of_day else start
        if not _DATETIME.match(value):
            raise ValueError("must be an ISO 8601 date (YYYY-MM-DD) or date-time (YYYY-MM-DDTHH:MM:SSZ)")
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        moment = moment.astimezone(UTC)
        # An inclusive date-time end becomes exclusive one microsecond later (PostgreSQL's resolution).
        return moment + timedelta(microseconds=1) if end_of_day else moment
    except OverflowError as exc:  # the last instants of year 9999 (or before year 1 in UTC)
        raise ValueError("is out of the supported range") from exc


class TransactionsQuery(Query):
    user_id: str = Field(min_length=1, max_length=100)
    wallet_id: str | None = Field(default=None, min_length=1, max_length=100)
    direction: Literal["inbound", "outbound"] | None = None
    classification: Literal["verified_income", "p2p", "dex_trade", "unknown", "wash_trade",
                            "circular"] | None = None
    token: Literal["USDC", "USDT"] | None = None
    from_date: str | None = Field(default=None, description="ISO 8601 date or date-time, inclusive")
    to_date: str | None = Field(default=None, description="ISO 8601 date or date-time, inclusive")
    include_filtered: Literal["true", "false"] = "false"
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    cursor: str | None = Field(default=None, min_length=1, max_length=400)

    @field_validator("limit", mode="before")
    @classmethod
    def _digits(cls, value: object) -> object:
        if isinstance(value, str) and not value.isdigit():
            raise ValueError("must be an integer from 1 to 200")
        return value

    @field_validator("from_date")
    @classmethod
    def _from(cls, value: str | None) -> str | None:
        if value is not None:
            parse_instant(value, end_of_day=False)
        return value

    @field_validator("to_date")
    @classmethod
    def _to(cls, value: str | None) -> str | None:
        if value is not None:
            parse_instant(value, end_of_day=True)
        return value

    def check(self) -> None:
        """Rules across parameters (400s naming the parameter)."""
        if self.classification in FILTERED_CLASSES and self.include_filtered != "true":
            message = (f"classification {self.classification} is excluded by default: add "
                       "include_filtered=true to list it")
            raise ValidationFailed(message, {"classification": message})
        since, until = self.since(), self.until()
        if since is not None and until is not None and since >= until:
            raise ValidationFailed("from_date is after to_date",
                                   {"from_date": "after to_date", "to_date": "before from_date"})

    def since(self) -> datetime | None:
        return parse_instant(self.from_date, end_of_day=False) if self.from_date else None

    def until(self) -> datetime | None:
        return parse_instant(self.to_date, end_of_day=True) if self.to_date else None

    def filters(self) -> Filters:
        return Filters(user_id=self.user_id, wallet_id=self.wallet_id, direction=self.direction,
                       classification=self.classification, token=self.token, since=self.since(),
                       until=self.until(), include_filtered=self.include_filtered == "true")


@routes.get("/v1/transactions")
@requires("read")
async def list_transactions(request: web.Request) -> web.Response:
    query = read_query(request, TransactionsQuery)
    query.check()
    settings = request.app[SETTINGS]
    page = await transactions_page(request.app[ENGINE], settings, principal(request).organisation_id,
                                   query.filters(), query.cursor, query.limit)
    return json_response({
        "transactions": transactions_json(page.rows, query.user_id, settings),
        "pagination": {"cursor": page.cursor, "has_more": page.has_more},
    })
