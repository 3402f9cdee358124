"""Each user's latest VIP kept on their row (migration 0028, decision 359): the dashboard's list sorts by it
as an index range, so it must always equal what the reports say (a finished one before a pending one, the
newest of each), whatever changes a report, and when two transactions change one user's reports at once.
The list's order by latest VIP, income and fraud flags is checked page by page against an order worked out
here from the reports themselves."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tests.support.webhooks import organisation
from vip.accounts.users import create_user
from vip.config import load_settings
from vip.dashboard.borrower_list import ListFilters, borrower_page
from vip.reports import vip_reports as reports
from vip.store.tables import users, vip_reports

NOW = datetime(2026, 7, 3, 12, tzinfo=UTC)
CACHE = timedelta(hours=24)


def body(status: str, income: str, flags: int) -> dict[str, Any]:
    """What the list reads of a report (the score's inputs too: a finished VIP shows a preview score)."""
    return {"status": status, "verified_monthly_income_usd": Decimal(income),
            "fraud_flags": [{"type": "wash_trade", "severity": "high"}] * flags,
            "periods_requested": 12, "verified_periods": [{"period": "2026-05"}],
            "unverified_periods": [{"period": "2026-06"}], "consistency_rate": Decimal("0.5")}


async def request(conn: AsyncConnection, org: str, user_id: str, now: datetime = NOW) -> Any:
    row, _ = await reports.request_report(conn, organisation_id=org, user_id=user_id, lookback_months=12,
                                          refresh=True, now=now, cache=CACHE)
    return row


async def kept(conn: AsyncConnection, user_id: str) -> tuple[Any, ...]:
    row = (await conn.execute(select(users.c.latest_vip_id, users.c.latest_vip_status,
                                     users.c.latest_vip_generated_at, users.c.latest_vip_income,
                                     users.c.latest_vip_fraud_flags).where(users.c.id == user_id))).one()
    return tuple(row)


async def from_reports(conn: AsyncConnection, user_id: str) -> tuple[Any, ...]:
    """The latest VIP as the borrower page reads it: the reports themselves, not the kept copy."""
    rows = (await conn.execute(select(vip_reports).where(vip_reports.c.user_id == user_id))).all()
    if not rows:
        return (None, None, None, None, None)
    v = sorted(rows, key=lambda r: (r.status == "pending", -r.seq))[0]
    return (v.id, v.status, v.generated_at, v.verified_monthly_income,
            len((v.report or {}).get("fraud_flags", [])))


async def new_user(engine: AsyncEngine, org: str, created: datetime) -> str:
    return (await create_user(engine, organisation_id=org, external_id=None, metadata={}, now=created)).id


async def test_the_user_row_follows_every_change_of_their_reports(engine: AsyncEngine):
    org = await organisation(engine)
    user = await new_user(engine, org, NOW)
    other = await new_user(engine, org, NOW)
    async with engine.begin() as conn:
        assert await kept(conn, user) == (None,) * 5

    async def agreed(conn: AsyncConnection) -> tuple[Any, ...]:
        """The kept copy, checked against the reports in the same transaction."""
        copy = await kept(conn, user)
        assert copy == await from_reports(conn, user)
        return copy

    async with engine.begin() as conn:
        first = await request(conn, org, user)
        shown = await agreed(conn)
        assert shown[:2] == (first.id, "pending")
    async with engine.begin() as conn:
        await reports.finish(conn, first, body("verified", "4200.5", 2), {}, NOW)
        shown = await agreed(conn)
        assert shown == (first.id, "verified", NOW, Decimal("4200.500000"), 2)
    async with engine.begin() as conn:
        # A refresh under way: the finished report stays the latest one shown, and the user's row is not
        # written again (no new row version: its xmin stays).
        before = await conn.scalar(text("SELECT xmin::text FROM users WHERE id = :u"), {"u": user})
        second = await request(conn, org, user, NOW + timedelta(days=1))
        shown = await agreed(conn)
        assert shown[0] == first.id
        assert await conn.scalar(text("SELECT xmin::text FROM users WHERE id = :u"), {"u": user}) == before
    async with engine.begin() as conn:
        # Out of attempts: an error is a finished report, and the newer one.
        await reports.fail(conn, second, error_code="ERR_X", retry_at=None, now=NOW + timedelta(days=1))
        shown = await agreed(conn)
        assert shown[:2] == (second.id, "error") and shown[3] is None
    async with engine.begin() as conn:
        # A statement of no service function changes a report: the row follows all the same.
        await conn.execute(update(vip_reports).where(vip_reports.c.id == first.id)
                           .values(verified_monthly_income=Decimal("1"), status="unverified"))
        await conn.execute(delete(vip_reports).where(vip_reports.c.id == second.id))
        shown = await agreed(conn)
        assert shown[:2] == (first.id, "unverified")
    async with engine.begin() as conn:
        await conn.execute(delete(vip_reports).where(vip_reports.c.user_id == user))
        shown = await agreed(conn)
        assert shown == (None,) * 5
        assert await kept(conn, other) == (None,) * 5  # nobody else's row is touched


async def race(engine: AsyncEngine, org: str, worker_first: bool) -> str:
    """Report A finished by a worker and report B inserted by another writer, in two transactions at once, the
    second started while the first is not committed. Returns the user."""
    user = await new_user(engine, org, NOW)
    async with engine.begin() as conn:
        a = await request(conn, org, user)
    async with engine.connect() as worker, engine.connect() as api:
        async def finish_a() -> None:
            await worker.begin()
            await reports.finish(worker, a, body("verified", "3000", 0), {}, NOW)

        async def insert_b() -> None:
            await api.begin()
            # Not request_report: it would see A pending and answer with it (its own lock serialises
            # requests); another writer's report for the user, of another lookback.
            await api.execute(vip_reports.insert().values(
                id=f"vip_b_{worker_first}", organisation_id=org, user_id=user, lookback_months=6,
                status="pending", requested_at=NOW, next_attempt_at=NOW))

        first, second = (finish_a, insert_b) if worker_first else (insert_b, finish_a)
        await first()
        waiting = asyncio.create_task(second())
        await asyncio.sleep(0.3)
        assert not waiting.done()  # blocked on the user's row until the first commits
        await (worker if worker_first else api).commit()
        await waiting
        await (api if worker_first else worker).commit()
    return user


async def test_two_transactions_changing_one_user_s_reports_leave_the_truth(engine: AsyncEngine):
    """A worker finishes report A while report B is inserted for the same user. B's trigger runs while A's
    change is not committed; it waits for the user's row, then reads the reports afresh: the finished A, not
    the pending B, is the latest (without the wait it would compute B and write it last). Both orders."""
    org = await organisation(engine)
    for worker_first in (True, False):
        user = await race(engine, org, worker_first)
        async with engine.connect() as conn:
            assert await kept(conn, user) == await from_reports(conn, user)
            assert (await kept(conn, user))[1] == "verified"


async def test_writers_already_referencing_the_user_do_not_deadlock(engine: AsyncEngine):
    """Two transactions that each already reference the user (a foreign-key check of a row naming them holds
    the user's row FOR KEY SHARE until commit: here taken as such a check takes it) then each write a report
    of that user: the second waits for the first, neither deadlocks, and the user's row ends as the reports
    say (a lock on the user's row that waited for key-share holders would have each wait for the other)."""
    org = await organisation(engine)
    user = await new_user(engine, org, NOW)
    share = text("SELECT 1 FROM users WHERE id = :u FOR KEY SHARE")
    async with engine.connect() as one, engine.connect() as two:
        for conn in (one, two):
            await conn.begin()
            await conn.execute(share, {"u": user})

        async def insert(conn: AsyncConnection, name: str, months: int) -> None:
            await conn.execute(vip_reports.insert().values(
                id=name, organisation_id=org, user_id=user, lookback_months=months, status="pending",
                requested_at=NOW, next_attempt_at=NOW))

        # The first writer must not wait for the second's key share (with FOR UPDATE it waits for ever).
        await asyncio.wait_for(insert(one, "vip_one", 12), 10)
        waiting = asyncio.create_task(insert(two, "vip_two", 6))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # blocked on the user's row until the first commits
        await one.commit()
        await asyncio.wait_for(waiting, 10)
        await two.commit()
    async with engine.connect() as conn:
        assert await kept(conn, user) == await from_reports(conn, user)
        assert (await kept(conn, user))[0] == "vip_two"


async def test_the_list_sorted_by_latest_vip_income_and_flags_pages_in_the_reports_order(engine: AsyncEngine):
    org = await organisation(engine)
    settings = load_settings(environ={})
    made: list[str] = []
    # Users with: no VIP, a pending first VIP, finished VIPs of several incomes, flags and days, a finished
    # VIP with a refresh pending, ties on income (the id breaks them).
    shapes = [None, "pending", ("verified", "5000", 0, 1), ("unverified", "0", 3, 2),
              ("partially_verified", "2500", 1, 3), ("verified", "5000", 0, 4), ("verified", "7000", 2, 5),
              ("verified", "1200.25", 0, 6, "refresh"), None, ("unverified", "300", 1, 7)]
    for n, shape in enumerate(shapes):
        user = await new_user(engine, org, NOW - timedelta(days=100 - n))
        made.append(user)
        if shape is None:
            continue
        async with engine.begin() as conn:
            row = await request(conn, org, user, NOW - timedelta(days=20))
            if shape != "pending":
                status, income, flags, day, *refresh = shape
                await reports.finish(conn, row, body(status, income, flags), {}, NOW - timedelta(days=day))
                if refresh:
                    await request(conn, org, user, NOW)

    async with engine.connect() as conn:
        truth = {u: await from_reports(conn, u) for u in made}
    floor = datetime(1, 1, 1, tzinfo=UTC)
    expected = {
        "vip": sorted(made, key=lambda u: (truth[u][2] or floor, u), reverse=True),
        "income": sorted(made, key=lambda u: (truth[u][3] if truth[u][3] is not None else Decimal(-1), u),
                         reverse=True),
        "flags": sorted(made, key=lambda u: (truth[u][4] or 0, u), reverse=True),
    }
    for sort, order in expected.items():
        filters, problems = ListFilters.from_query({"sort": sort})
        assert not problems
        seen: list[str] = []
        cursor = None
        while True:
            page = await borrower_page(engine, settings, org, filters, cursor, limit=3)
            seen += [r.id for r in page.rows]
            for r in page.rows:
                vip_id, status, generated_at, income, flags = truth[r.id]
                assert (r.vip_id, r.vip_status, r.vip_generated_at, r.verified_monthly_income_usd,
                        r.fraud_flags) == (vip_id, status, generated_at, income, flags or 0)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == order, sort

    # The filters read the kept copy too: flagged borrowers, and one status.
    flagged, _ = ListFilters.from_query({"flagged": "yes", "sort": "vip"})
    page = await borrower_page(engine, settings, org, flagged, None)
    assert [r.id for r in page.rows] == [u for u in expected["vip"] if (truth[u][4] or 0) > 0]
    assert page.total == 4
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM users WHERE latest_vip_status = 'pending'"))
                ).scalar() == 1
