"""Labels without a VIP (decision 162) through the real daemon on Anvil: the labelling job labels a user's
transfers when records are pushed, a wallet is connected or the user's transfers become final, with the
same pipeline as the VIP job (a self-funded payout claimed by a record is fraud, never income), read back
through GET /v1/transactions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import running_indexer, wait_synced
from tests.support.verification import USDC, Borrower, month_after, months_after, new_borrower, noon
from vip.clock import clock_for
from vip.indexer import store as indexer_store
from vip.reports.labelling import LabellingJob
from vip.store import label_queue
from vip.store.tables import label_cursors, labelling_queue, transfer_labels, vip_reports
from vip.verification.config import CircularFlowConfig, VerificationConfig

SALARY = Decimal(5000)


@pytest.fixture
async def harness(aiohttp_client, chain: ChainDriver, database_url: str,
                  engine: AsyncEngine) -> AsyncIterator[tuple[ApiHarness, str]]:
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    settings = indexer_settings(network).model_copy(update={"verification": VerificationConfig(
        job_idle_s=0.05, circular_flow=CircularFlowConfig(fetch_wait_s=60))})
    async with checked_api(aiohttp_client, settings, database_url, engine) as harness:
        yield harness, database_url


async def queued(b: Borrower) -> int:
    async with b.api.engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(labelling_queue)
                                 .where(labelling_queue.c.user_id == b.user_id)) or 0


async def vips(b: Borrower) -> int:
    async with b.api.engine.connect() as conn:
        return await conn.scalar(select(func.count()).select_from(vip_reports)
                                 .where(vip_reports.c.user_id == b.user_id)) or 0


async def label_cursor_at_final(b: Borrower) -> bool:
    async with b.api.engine.connect() as conn:
        final = await indexer_store.final_block(conn, b.api.settings.networks["local"])
        at = await conn.scalar(select(label_cursors.c.block_number).where(label_cursors.c.network == "local"))
    return final is not None and at == final


async def labelled(b: Borrower, database_url: str) -> None:
    """Run the daemon until the chain is indexed, the labelling job has followed its final block and the
    user's labelling rows are all worked."""
    async with running_indexer(b.api.settings, database_url):
        await wait_synced(b.api.engine, b.chain, "local")
        deadline = time.monotonic() + 60
        while not await label_cursor_at_final(b) or await queued(b):
            assert time.monotonic() < deadline, "the labelling job did not work the user's rows"
            await asyncio.sleep(0.05)


async def txs(b: Borrower, **params) -> dict[str, dict]:
    status, body = await b.get("/v1/transactions", user_id=b.user_id, limit=200, **params)
    assert status == 200, body
    return {t["tx_hash"]: t for t in body["transactions"]}


async def stored_labels(b: Borrower) -> set[tuple]:
    async with b.api.engine.connect() as conn:
        rows = await conn.execute(select(
            transfer_labels.c.tx_hash, transfer_labels.c.log_index, transfer_labels.c.wallet_address,
            transfer_labels.c.classification, transfer_labels.c.fraud_flags, transfer_labels.c.payroll_match))
    return {(r.tx_hash, r.log_index, r.wallet_address, r.classification, tuple(r.fraud_flags),
             repr(sorted((r.payroll_match or {}).items()))) for r in rows}


async def test_pushed_records_label_salaries_without_any_vip_and_a_second_pass_changes_nothing(harness,
                                                                                              chain):
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 3)
    paid = [b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(d)) for d in days]
    spent = b.pay("USDC", b.wallet, b.others[-1], 120 * USDC, noon(days[-1]) + timedelta(days=2))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    assert await txs(b) == {}  # nothing indexed, nothing labelled
    await b.push_records([(d, SALARY) for d in days])
    await labelled(b, url)

    income = await txs(b, classification="verified_income")
    assert set(income) == set(paid)
    for d, h in zip(days, paid, strict=True):
        assert income[h]["payroll_match"] == {"matched": True, "payroll_period": f"{d:%Y-%m}",
                                              "origin_platform": "paystream", "match_confidence": "exact"}
    assert (await txs(b, direction="outbound"))[spent]["classification"] == "p2p"
    assert await vips(b) == 0 and await b.events("vip.") == []

    # Idempotent: the same inputs worked again write the same labels.
    before = await stored_labels(b)
    now = await clock_for(api.settings).now()
    async with api.engine.begin() as conn:
        await label_queue.queue_user(conn, b.user_id, now)
    job = LabellingJob(api.settings, api.engine, clock_for(api.settings), api.settings.platforms)
    while await job.run_once():
        pass
    assert await queued(b) == 0
    assert await stored_labels(b) == before


async def test_a_payout_after_the_vip_is_labelled_without_a_new_vip(harness, chain):
    """The VIP runs after the third payday; the fourth month's record is pushed on its payday, before the
    payout reaches the chain. Only the payout's becoming final can then ask for the labels, and it is
    income without another VIP."""
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 4)
    paid = [b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(d)) for d in days[:3]]
    b.settle(noon(days[2]) + timedelta(days=6))
    await b.push_records([(d, SALARY) for d in days[:3]])
    async with running_indexer(api.settings, url):
        await wait_synced(api.engine, chain, "local")
        vip = await b.vip(3)
        deadline = time.monotonic() + 60
        while await queued(b):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    assert vip["periods_verified"] >= 2
    assert set(await txs(b, classification="verified_income")) == set(paid)

    b.settle(noon(days[3]) - timedelta(hours=2))
    await b.push_records([(d, SALARY) for d in days])  # the payout is announced, not paid yet
    await labelled(b, url)
    assert set(await txs(b, classification="verified_income")) == set(paid)
    assert await queued(b) == 0

    late = b.pay("USDC", b.employer, b.wallet, int(SALARY * USDC), noon(days[3]))
    b.settle(noon(days[3]) + timedelta(days=1))
    assert await queued(b) == 0  # nothing asked for labels yet: the labelling job will, once it is final
    await labelled(b, url)
    income = await txs(b, classification="verified_income")
    assert set(income) == {*paid, late}
    assert income[late]["payroll_match"]["payroll_period"] == f"{days[3]:%Y-%m}"
    assert await vips(b) == 1


async def test_a_self_funded_payout_claimed_by_a_record_is_fraud_not_income_without_a_vip(harness, chain):
    """The issue's borrower, no VIP asked: their own money comes back through two addresses as "salary"
    (circular), and once straight back from the payer the records name (wash_trade)."""
    api, url = harness
    b = await new_borrower(api, chain)
    days = months_after(b.start, 2)
    first, payer = b.others[1], b.others[2]
    out = b.pay("USDC", b.wallet, first, int(SALARY * USDC), noon(days[0]) - timedelta(days=3))
    b.pay("USDC", first, payer, int(SALARY * USDC), noon(days[0]) - timedelta(days=1))
    back = b.pay("USDC", payer, b.wallet, int(SALARY * USDC), noon(days[0]))
    sent = b.pay("USDC", b.wallet, payer, int(SALARY * USDC), noon(days[1]) - timedelta(days=2))
    returned = b.pay("USDC", payer, b.wallet, int(SALARY * USDC), noon(days[1]))
    b.settle(noon(month_after(days[-1])) + timedelta(days=1))
    await b.push_records([(d, SALARY) for d in days], origin=payer)
    await labelled(b, url)

    shown = await txs(b, include_filtered="true")
    assert {h: shown[h]["classification"] for h in (out, back, sent, returned)} == {
        out: "circular", back: "circular", sent: "wash_trade", returned: "wash_trade"}
    assert all(shown[h].get("payroll_match") is None for h in (back, returned))
    assert await txs(b, classification="verified_income") == {}
    flagged = {obj["tx_hash"]: obj["fraud_type"] for _, obj in await b.events("fraud.flagged")}
    assert flagged == {out: "circular", back: "circular", sent: "wash_trade", returned: "wash_trade"}
    assert await vips(b) == 0


async def test_a_run_absorbs_the_users_other_rows_it_can_lock_and_keeps_the_earliest_backfill_wait(
        api: ApiHarness):
    """Decision 164: the run of the oldest row removes the user's other rows (their changes are committed,
    its reads see them) but not one another worker holds, and the trace's wait keeps its first start."""
    user, other = await api.user(), await api.user()
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    async with api.engine.begin() as conn:
        for at in (t0, t0 + timedelta(minutes=1), t0 + timedelta(minutes=2)):
            await label_queue.queue_user(conn, user, at)
        await label_queue.queue_user(conn, other, t0)
        ids = list(await conn.scalars(select(labelling_queue.c.id).where(labelling_queue.c.user_id == user)
                                      .order_by(labelling_queue.c.id)))
        await label_queue.mark_fetch_requested(conn, ids[1], t0 - timedelta(minutes=5))
    async with api.engine.connect() as holder:
        await holder.begin()  # another worker holds the user's newest row
        await holder.execute(select(labelling_queue).where(labelling_queue.c.id == ids[2]).with_for_update())
        async with api.engine.begin() as conn:
            row = await label_queue.take_due(conn, t0 + timedelta(hours=1))
            assert (row.id, row.user_id) == (ids[0], user)
            assert await label_queue.absorb_others(conn, row) == t0 - timedelta(minutes=5)
        await holder.rollback()
    async with api.engine.connect() as conn:
        left = (await conn.execute(select(labelling_queue.c.id, labelling_queue.c.user_id,
                                          labelling_queue.c.fetch_requested_at)
                                   .order_by(labelling_queue.c.id))).all()
    assert [(r.id, r.fetch_requested_at) for r in left if r.user_id == user] == [
        (ids[0], t0 - timedelta(minutes=5)), (ids[2], None)]
    assert [r.user_id for r in left if r.user_id != user] == [other]


async def test_the_labelling_cursor_follows_the_final_block_in_steps_and_comes_down_after_a_deep_reorg(
        engine: AsyncEngine):
    """The job's own cursor (decision 281): a new network starts where its index starts, a step queues at
    most the given number of blocks, a cursor another daemon holds is left to it, and a final block lowered
    by a reorg deeper than finality brings the cursor down so that those blocks are queued again."""
    async def at() -> dict[str, int]:
        async with engine.connect() as conn:
            rows = await conn.execute(select(label_cursors.c.network, label_cursors.c.block_number))
            return {row.network: row.block_number for row in rows}

    async def step(finals: dict[str, int]) -> int:
        async with engine.begin() as conn:
            return await label_queue.queue_newly_final(conn, finals, {"a": -1, "b": 99}, max_blocks=1_000)

    assert await step({"a": 2_500, "b": 150}) == 1_000 + 51
    assert await at() == {"a": 999, "b": 150}
    async with engine.begin() as holder:  # another daemon's step holds network a
        await holder.execute(select(label_cursors).where(label_cursors.c.network == "a").with_for_update())
        assert await step({"a": 2_500, "b": 160}) == 10
    assert await at() == {"a": 999, "b": 160}
    assert await step({"a": 2_500, "b": 160}) == 1_000
    assert await step({"a": 2_500, "b": 160}) == 501
    assert await step({"a": 2_500, "b": 160}) == 0
    assert await step({"a": 2_400, "b": 160}) == 0  # a deep reorg lowered a's final block
    assert await at() == {"a": 2_400, "b": 160}
