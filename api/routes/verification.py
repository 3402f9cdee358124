"""GET /v1/vip-report and GET /v1/risk-score.

VIP: the first call (or `refresh=true`) creates a `pending` report (202, event `vip.generating`) that the
daemon's VIP job generates; `refresh=true` first pulls the user's OAuth platform connections again
(api/platform_refresh.py: 502 ERR_PLATFORM_SYNC_FAILED and nothing stored when a pull fails) and replaces
their records in the transaction that creates the report; later calls answer the same report from cache
for 24 hours per user and lookback (200 once finished, 202 while pending). A report that ended in `error`
is not cached: the next call starts a new one. Prerequisites: an active wallet connection (else 422
ERR_MISSING_WALLET) and an active platform connection (else 422 ERR_MISSING_PLATFORM).

Risk score: of the VIP named by `vip_id`, or of the user's most recent finished VIP. 404 ERR_NO_VIP when
there is none; 422 ERR_INSUFFICIENT_HISTORY for an `unverified` VIP; 422 ERR_VIP_PENDING while it is being
generated; 422 ERR_VIP_FAILED for one that ended in `error`. Computed once per VIP and stored.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from aiohttp import web
from pydantic import Field, field_validator
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.accounts.users import load_user
from vip.api.context import CLOCK, ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import json_response
from vip.api.validation import Query, read_query
from vip.connections.platform_refresh import repull_platforms, store_repulled
from vip.errors import NotFound, Unprocessable
from vip.reports import risk_scores, vip_reports
from vip.reports.inputs import active_wallets, has_active_platform

routes = web.RouteTableDef()


class VipReportQuery(Query):
    user_id: str = Field(min_length=1, max_length=100)
    refresh: Literal["true", "false"] = "false"
    lookback_months: int = Field(default=6, ge=1, le=12)

    @field_validator("lookback_months", mode="before")
    @classmethod
    def _digits(cls, value: object) -> object:
        if isinstance(value, str) and not value.isdigit():
            raise ValueError("must be an integer from 1 to 12")
        return value


class RiskScoreQuery(Query):
    user_id: str = Field(min_length=1, max_length=100)
    vip_id: str | None = Field(default=None, min_length=1, max_length=100)


@routes.get("/v1/vip-report")
@requires("read")
async def vip_report(request: web.Request) -> web.Response:
    query = read_query(request, VipReportQuery)
    org = principal(request).organisation_id
    settings = request.app[SETTINGS]
    refresh = query.refresh == "true"
    now = await request.app[CLOCK].now()
    repulled = []
    if refresh:
        # The lender asks for current data: pull the OAuth platforms again first (502, nothing stored,
        # when one fails), outside any transaction; a missing prerequisite answers before any pull.
        async with request.app[ENGINE].begin() as conn:
            await _check_prerequisites(conn, org, query.user_id)
        repulled = await repull_platforms(request.app, org, query.user_id, now)
        now = await request.app[CLOCK].now()  # the pulls may have taken a while
    async with request.app[ENGINE].begin() as conn:
        await _check_prerequisites(conn, org, query.user_id)  # a revoke may have landed meanwhile
        await store_repulled(conn, repulled, now)
        row, _ = await vip_reports.request_report(
            conn, organisation_id=org, user_id=query.user_id, lookback_months=query.lookback_months,
            refresh=refresh, now=now, cache=timedelta(hours=settings.verification.cache_hours))
    status = 202 if row.status == "pending" else 200
    headers = {"Retry-After": "30"} if status == 202 else None
    return json_response({"vip_report": vip_reports.report_body(row)}, status=status, headers=headers)


async def _check_prerequisites(conn: AsyncConnection, org: str, user_id: str) -> None:
    await load_user(conn, org, user_id)
    if not await active_wallets(conn, user_id):
        raise Unprocessable("the user has no active wallet connection; connect one first",
                            {"user_id": user_id, "missing": "wallet"}, code="ERR_MISSING_WALLET")
    if not await has_active_platform(conn, user_id):
        raise Unprocessable("the user has no active platform connection; connect an income source first",
                            {"user_id": user_id, "missing": "platform"}, code="ERR_MISSING_PLATFORM")


@routes.get("/v1/risk-score")
@requires("read")
async def risk_score(request: web.Request) -> web.Response:
    query = read_query(request, RiskScoreQuery)
    org = principal(request).organisation_id
    settings = request.app[SETTINGS]
    now = await request.app[CLOCK].now()
    async with request.app[ENGINE].begin() as conn:
        await load_user(conn, org, query.user_id)
        row = await vip_reports.find(conn, query.user_id, query.vip_id)
        if row is None:
            if query.vip_id is not None:
                raise NotFound(f"no VIP {query.vip_id} for user {query.user_id}",
                               {"vip_id": query.vip_id}, code="ERR_NO_VIP")
            raise NotFound("the user has no VIP; call GET /v1/vip-report first", {"user_id": query.user_id},
                           code="ERR_NO_VIP")
        details = {"vip_id": row.id, "vip_status": row.status}
        if row.status == "pending":
            raise Unprocessable("the VIP is still being generated; retry in 30 seconds", details,
                                code="ERR_VIP_PENDING")
        if row.status == "error":
            raise Unprocessable("the VIP could not be generated; request a new one",
                                {**details, "error_code": row.error_code}, code="ERR_VIP_FAILED")
        if row.status == "unverified":
            raise Unprocessable("no income period could be verified: at least 1 verified period is needed",
                                details, code="ERR_INSUFFICIENT_HISTORY")
        body, _ = await risk_scores.score_for(conn, row, settings.verification.scoring, now)
    return json_response({"risk_score": body})
