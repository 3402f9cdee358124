"""Asking for a VIP report and reading its risk score.

VIP: the first request (or `refresh`) creates a `pending` report (event `vip.generating`) that the
daemon's VIP job generates; `refresh` first pulls the user's OAuth platform connections again
(vip.connections.platform_refresh: 502 ERR_PLATFORM_SYNC_FAILED and nothing stored when a pull fails) and
replaces their records in the transaction that creates the report; later requests get the same report
from cache for `verification.cache_hours` per user and lookback. A report that ended in `error` is not
cached. Prerequisites: an active wallet connection (else 422 ERR_MISSING_WALLET) and an active platform
connection (else 422 ERR_MISSING_PLATFORM).

Risk score: of the VIP named by `vip_id`, or of the user's most recent finished VIP; computed once per
VIP and stored.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import aiohttp
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.accounts.users import load_user
from vip.clock import Clock
from vip.config import Settings
from vip.connections.platform_refresh import Repulled, repull_platforms, store_repulled
from vip.errors import NotFound, Unprocessable
from vip.reports import risk_scores, vip_reports
from vip.reports.inputs import active_wallets, has_active_platform


async def check_prerequisites(conn: AsyncConnection, organisation_id: str, user_id: str) -> None:
    """404 for a user not of the organisation; 422 without an active wallet or platform connection."""
    await load_user(conn, organisation_id, user_id)
    if not await active_wallets(conn, user_id):
        raise Unprocessable("the user has no active wallet connection; connect one first",
                            {"user_id": user_id, "missing": "wallet"}, code="ERR_MISSING_WALLET")
    if not await has_active_platform(conn, user_id):
        raise Unprocessable("the user has no active platform connection; connect an income source first",
                            {"user_id": user_id, "missing": "platform"}, code="ERR_MISSING_PLATFORM")


async def request_vip_report(engine: AsyncEngine, clock: Clock, session: aiohttp.ClientSession,
                             settings: Settings, *, organisation_id: str, user_id: str,
                             lookback_months: int, refresh: bool) -> Row[Any]:
    """The user's report for this lookback: cached, or a new `pending` one (after the re-pull when
    `refresh`)."""
    now = await clock.now()
    repulled: list[Repulled] = []
    if refresh:
        # The lender asks for current data: pull the OAuth platforms again first (502, nothing stored,
        # when one fails), outside any transaction; a missing prerequisite answers before any pull.
        async with engine.begin() as conn:
            await check_prerequisites(conn, organisation_id, user_id)
        repulled = await repull_platforms(engine, session, settings, settings.platforms, organisation_id,
                                          user_id, now)
        now = await clock.now()  # the pulls may have taken a while
    async with engine.begin() as conn:
        await check_prerequisites(conn, organisation_id, user_id)  # a revoke may have landed meanwhile
        await store_repulled(conn, repulled, now)
        row, _ = await vip_reports.request_report(
            conn, organisation_id=organisation_id, user_id=user_id, lookback_months=lookback_months,
            refresh=refresh, now=now, cache=timedelta(hours=settings.verification.cache_hours))
    return row


async def risk_score(engine: AsyncEngine, clock: Clock, settings: Settings, *, organisation_id: str,
                     user_id: str, vip_id: str | None) -> dict[str, Any]:
    """The risk score of the VIP (`vip_id`, else the user's latest finished one), computed on first
    read. 404 ERR_NO_VIP when there is none; 422 ERR_VIP_PENDING while it is being generated,
    ERR_VIP_FAILED for one that ended in `error`, ERR_INSUFFICIENT_HISTORY for an `unverified` one."""
    now = await clock.now()
    async with engine.begin() as conn:
        await load_user(conn, organisation_id, user_id)
        row = await vip_reports.find(conn, user_id, vip_id)
        if row is None:
            if vip_id is not None:
                raise NotFound(f"no VIP {vip_id} for user {user_id}", {"vip_id": vip_id}, code="ERR_NO_VIP")
            raise NotFound("the user has no VIP; call GET /v1/vip-report first", {"user_id": user_id},
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
    return body
