"""GET /v1/vip-report and GET /v1/risk-score.

VIP: the first call (or `refresh=true`) creates a `pending` report (202, event `vip.generating`) that the
daemon's VIP job generates; `refresh=true` first pulls the user's OAuth platform connections again
(502 ERR_PLATFORM_SYNC_FAILED and nothing stored when a pull fails); later calls answer the same report
from cache for 24 hours per user and lookback (200 once finished, 202 while pending). A report that ended
in `error` is not cached: the next call starts a new one. Prerequisites: an active wallet connection (else
422 ERR_MISSING_WALLET) and an active platform connection (else 422 ERR_MISSING_PLATFORM).

Risk score: of the VIP named by `vip_id`, or of the user's most recent finished VIP. 404 ERR_NO_VIP when
there is none; 422 ERR_INSUFFICIENT_HISTORY for an `unverified` VIP; 422 ERR_VIP_PENDING while it is being
generated; 422 ERR_VIP_FAILED for one that ended in `error`. Computed once per VIP and stored.
(vip.reports.service has the rules.)
"""

from __future__ import annotations

from typing import Literal

from aiohttp import web
from pydantic import Field, field_validator

from vip.api.context import CLOCK, ENGINE, HTTP, SETTINGS, principal, requires
from vip.api.jsonio import json_response
from vip.api.validation import Query, read_query
from vip.reports import service, vip_reports

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
    row = await service.request_vip_report(
        request.app[ENGINE], request.app[CLOCK], request.app[HTTP], request.app[SETTINGS],
        organisation_id=principal(request).organisation_id, user_id=query.user_id,
        lookback_months=query.lookback_months, refresh=query.refresh == "true")
    status = 202 if row.status == "pending" else 200
    headers = {"Retry-After": "30"} if status == 202 else None
    return json_response({"vip_report": vip_reports.report_body(row)}, status=status, headers=headers)


@routes.get("/v1/risk-score")
@requires("read")
async def risk_score(request: web.Request) -> web.Response:
    query = read_query(request, RiskScoreQuery)
    body = await service.risk_score(request.app[ENGINE], request.app[CLOCK], request.app[SETTINGS],
                                    organisation_id=principal(request).organisation_id, user_id=query.user_id,
                                    vip_id=query.vip_id)
    return json_response({"risk_score": body})
