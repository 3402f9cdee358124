"""What the funding trace's fetch leaves unread must not change a report: an omnibus payer's year (only its
last `max_pieces` inflows before each payment the trace follows, and the payments between, decision 355)
and the payers met at the last hop that the wallets never paid (decision 356). The adversarial corpus (busy
exchanges and payroll hubs, round trips through up to four intermediaries) through the real VIP job twice
on real PostgreSQL, once as shipped and once reading every history whole, compared report by report; and
the windows read must be small while the hubs are not."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.verification_adversarial import FRAUD, HONEST, KNOWN_LIMITS, NETWORK, OPAQUE, Case, build
from tests.test_verification_adversarial_job import MERCHANTS, generate, seed, settings
from vip.ids import new_id
from vip.reports import inputs, trace_inputs
from vip.store.tables import chain_cursors, organisations, token_transfers, transfer_labels, vip_reports

# Families whose money goes through a busy hub: the ones the windows change what is read for.
THROUGH_HUBS = ("busy_hub", "hub_user", "escrow_via_exchange", "exchange_savings")


def verdict(report: dict[str, Any]) -> dict[str, Any]:
    """What a lender acts on in a report: flags, status, income."""
    return {
        "status": report["status"],
        "flags": sorted((f["tx_hash"], f["fraud_type"]) for f in report["fraud_flags"]),
        "income": [(p["period"], p["received_amount"], p["match_confidence"])
                   for p in report["verified_periods"]],
        "verified_monthly_income_usd": report["verified_monthly_income_usd"],
        "self_funded": report["fraud_trace"]["self_funded"],
    }


def opaque(report: dict[str, Any]) -> set[str]:
    return {o["tx_hash"] for o in report["fraud_trace"]["opaque"]}


@pytest.mark.timeout(600)
async def test_windows_at_omnibus_payers_give_the_reports_whole_reads_give(engine: AsyncEngine,
                                                                            monkeypatch: pytest.MonkeyPatch):
    org = new_id("org")
    async with engine.begin() as conn:
        await conn.execute(insert(organisations).values(id=org, name="windows"))
    cases: dict[str, Case] = {}
    families = [f for f in FRAUD if f not in KNOWN_LIMITS] + list(OPAQUE) + list(HONEST)
    # Round trips through up to four intermediaries, the last hop's payer paid by the wallets: several draws.
    draws = [(f, 0) for f in families] + [("multi_hop", n) for n in range(1, 6)]
    for family, n in draws:
        rng = random.Random(f"{family}-{n}")
        hubs = {name: "0x" + rng.randbytes(20).hex() for name in ("payroll", "exchange", "dex")}
        case = build(family, rng, MERCHANTS, hubs)
        cases[await seed(engine, org, case)] = case

    probe = trace_inputs.OMNIBUS_PROBE
    windows: list[tuple[str, int]] = []  # (omnibus address, rows read around its payments)
    real_windows = inputs.windows_before

    async def counted(conn, network, address, payments, since, depth):
        rows = await real_windows(conn, network, address, payments, since, depth)
        windows.append((address, len(rows)))
        return rows

    monkeypatch.setattr(inputs, "windows_before", counted)
    unread: set[str] = set()  # last-hop payers left unread
    real_frontier = trace_inputs.TraceCollector._trace_frontier

    async def frontier(self, *args):
        found = await real_frontier(self, *args)
        unread.update(found.unread)
        return found

    monkeypatch.setattr(trace_inputs.TraceCollector, "_trace_frontier", frontier)
    windowed = await generate(engine, settings(), org, list(cases))
    assert unread, "no last-hop payer was left unread: the comparison would not show decision 356"

    async with engine.begin() as conn:
        for table in (vip_reports, transfer_labels, chain_cursors):  # as before the first run
            await conn.execute(delete(table))
    monkeypatch.setattr(trace_inputs, "OMNIBUS_PROBE", 10**9)  # nobody is busy enough: every history whole
    monkeypatch.setattr(trace_inputs, "LAST_HOPS_PRUNED", False)
    whole = await generate(engine, settings(), org, list(cases))

    for user, case in cases.items():
        assert verdict(windowed[user]) == verdict(whole[user]), case.family
        assert {f["tx_hash"] for f in windowed[user]["fraud_flags"]} == case.fraud_txs, case.family
        # What the trace names as come through an omnibus where the user keeps money: never less. (It can
        # be more: the whole read also follows an omnibus's largest inflows, reaches the address cap
        # sooner, and leaves a transfer with an untraced payer out of the list.)
        assert opaque(windowed[user]) >= opaque(whole[user]), case.family

    # The hubs were read in windows, and a window is a small part of a hub's history.
    hubs = {case.exchange for case in cases.values() if case.family in THROUGH_HUBS}
    read = {address for address, _ in windows}
    assert read & hubs, "no busy hub was read in windows"
    async with engine.connect() as conn:
        for address, rows in windows:
            history = await conn.scalar(select(func.count()).select_from(token_transfers).where(
                token_transfers.c.network == NETWORK,
                (token_transfers.c.from_address == address) | (token_transfers.c.to_address == address)))
            assert history >= probe
            assert rows < history // 2, (address, rows, history)

