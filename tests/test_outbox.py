"""The transactional outbox: an event row commits or rolls back with the change it describes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.indexer.store import add_watched_address
from vip.store.outbox import envelope, record_event
from vip.store.tables import outbox_events, watched_addresses

ADDRESS = "0x8Ba1f109551bD432803012645Ac136ddd64DBA72"
CREATED = datetime(2024, 5, 17, 9, 30, 15, 123456, tzinfo=UTC)


class Boom(Exception):
    pass


async def event_rows(engine: AsyncEngine) -> list:
    async with engine.connect() as conn:
        return list(await conn.execute(select(outbox_events).order_by(outbox_events.c.seq)))


async def watched_count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(watched_addresses))


async def test_committed_event_is_stored_with_envelope_fields(engine: AsyncEngine):
    obj = {"id": "wal_1", "object": "wallet", "address": ADDRESS.lower(), "amount": "1000000"}
    async with engine.begin() as conn:
        event_id = await record_event(conn, "wallet.watched", obj, created_at=CREATED,
                                      organisation_id="org_1")

    rows = await event_rows(engine)
    assert len(rows) == 1
    row = rows[0]
    assert row.id == event_id
    assert event_id.startswith("evt_") and len(event_id) > len("evt_")
    assert row.type == "wallet.watched"
    assert row.api_version == "v1"
    assert row.data == {"object": obj}
    assert row.created_at == CREATED
    assert row.organisation_id == "org_1"


async def test_event_ids_are_unique(engine: AsyncEngine):
    async with engine.begin() as conn:
        ids = [await record_event(conn, "t", {"n": n}, created_at=CREATED) for n in range(20)]
    assert len(set(ids)) == 20
    assert {r.id for r in await event_rows(engine)} == set(ids)


async def test_rollback_drops_event_and_change_together(engine: AsyncEngine):
    with pytest.raises(Boom):  # noqa: PT012 - the whole transaction is what raises (and rolls back)
        async with engine.begin() as conn:
            await add_watched_address(conn, "ethereum", ADDRESS, "wallet")
            await record_event(conn, "wallet.watched", {"address": ADDRESS.lower()}, created_at=CREATED)
            raise Boom

    assert await event_rows(engine) == []
    assert await watched_count(engine) == 0


async def test_explicit_rollback_drops_event_and_change(engine: AsyncEngine):
    async with engine.connect() as conn, conn.begin() as tx:
        await add_watched_address(conn, "ethereum", ADDRESS, "wallet")
        await record_event(conn, "wallet.watched", {"address": ADDRESS.lower()}, created_at=CREATED)
        await tx.rollback()

    assert await event_rows(engine) == []
    assert await watched_count(engine) == 0


async def test_commit_keeps_event_and_change_together(engine: AsyncEngine):
    async with engine.begin() as conn:
        await add_watched_address(conn, "ethereum", ADDRESS, "wallet")
        await record_event(conn, "wallet.watched", {"address": ADDRESS.lower()}, created_at=CREATED)

    rows = await event_rows(engine)
    assert [(r.type, r.data) for r in rows] == [("wallet.watched", {"object": {"address": ADDRESS.lower()}})]
    async with engine.connect() as conn:
        watched = list(await conn.execute(select(watched_addresses)))
    assert [(w.network, w.address, w.reason) for w in watched] == [("ethereum", ADDRESS.lower(), "wallet")]


async def test_event_recorded_only_for_a_change_that_happened(engine: AsyncEngine):
    # The natural caller pattern: watching an address is idempotent, and the "watched" event must be
    # emitted exactly once, for the call that actually added the row.
    for _ in range(2):
        async with engine.begin() as conn:
            if await add_watched_address(conn, "ethereum", ADDRESS, "wallet"):
                await record_event(conn, "wallet.watched", {"address": ADDRESS.lower()}, created_at=CREATED)

    assert await watched_count(engine) == 1
    assert [r.type for r in await event_rows(engine)] == ["wallet.watched"]


async def test_record_event_outside_transaction_raises(engine: AsyncEngine):
    async with engine.connect() as conn:
        assert not conn.in_transaction()
        with pytest.raises(RuntimeError):
            await record_event(conn, "wallet.watched", {}, created_at=CREATED)
    assert await event_rows(engine) == []


async def test_envelope_shape(engine: AsyncEngine):
    obj = {"id": "dsb_1", "object": "disbursement", "nested": {"list": [1, 2, 3]}}
    async with engine.begin() as conn:
        event_id = await record_event(conn, "disbursement.confirmed", obj, created_at=CREATED)

    (row,) = await event_rows(engine)
    env = envelope(row)
    assert set(env) == {"id", "type", "created_at", "api_version", "data"}
    assert env["id"] == event_id
    assert env["type"] == "disbursement.confirmed"
    assert env["api_version"] == "v1"
    assert env["data"] == {"object": obj}
    assert env["created_at"].endswith("Z")
    assert "+" not in env["created_at"]
    assert datetime.fromisoformat(env["created_at"]) == CREATED


async def test_envelope_timestamp_is_utc_for_non_utc_input(engine: AsyncEngine):
    # An instant given with another offset is the same instant; the envelope states it in UTC.
    local = CREATED.astimezone(timezone(timedelta(hours=-5)))
    async with engine.begin() as conn:
        await record_event(conn, "t", {}, created_at=local)
    (row,) = await event_rows(engine)
    env = envelope(row)
    assert env["created_at"].endswith("Z")
    assert datetime.fromisoformat(env["created_at"]) == CREATED


async def test_envelope_timestamp_is_utc_whatever_the_session_time_zone(engine: AsyncEngine):
    # A PostgreSQL server (or role/database) configured with a local TimeZone hands timestamptz values
    # back in that zone; webhook envelopes must still carry a UTC "Z" timestamp.
    async with engine.begin() as conn:
        await record_event(conn, "t", {}, created_at=CREATED)
    async with engine.connect() as conn:
        await conn.exec_driver_sql("SET TIME ZONE 'America/New_York'")
        row = (await conn.execute(select(outbox_events))).one()
    env = envelope(row)
    assert env["created_at"].endswith("Z"), env["created_at"]
    assert datetime.fromisoformat(env["created_at"]) == CREATED


async def test_seq_increases_in_insertion_order(engine: AsyncEngine):
    ids = []
    for n in range(3):
        async with engine.begin() as conn:
            ids.append(await record_event(conn, "t", {"n": n}, created_at=CREATED - timedelta(minutes=n)))
    async with engine.begin() as conn:
        ids.append(await record_event(conn, "t", {"n": 3}, created_at=CREATED))
        ids.append(await record_event(conn, "t", {"n": 4}, created_at=CREATED))

    rows = await event_rows(engine)  # ordered by seq
    assert [r.id for r in rows] == ids
    seqs = [r.seq for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
