"""The lender-scale bench (bench/lender_scale.py) end to end on a small lender, so it cannot rot: its
generator's rows as the indexer and the connection flows leave them, its VIP measurement through the
daemon's job, its `GET /v1/transactions` load over real HTTP and its dashboard pages. Figures are not
checked here (speed belongs in the bench); only that every path runs and answers."""

from __future__ import annotations

import psycopg
from aiohttp import web
from sqlalchemy.engine import make_url

from bench.lender_scale import (
    KINDS,
    NETWORKS,
    bench_settings,
    dashboard,
    free_port,
    load,
    run_vips,
    seed,
    sizes,
    staff_cookie,
)
from vip.api.app import create_app
from vip.dashboard.borrower_list import ListFilters, _filtered, borrower_page
from vip.store.engine import create_engine


def plain(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def test_the_bench_generates_a_lender_and_measures_each_path(database_url: str):
    pg_url = plain(database_url)
    data = seed(pg_url, 2_000, 20, seed_value=3, key_count=2, progress=False)

    with psycopg.connect(pg_url) as conn:
        stored = conn.execute("SELECT count(*) FROM token_transfers").fetchone()[0]
        networks = {r[0] for r in conn.execute("SELECT DISTINCT network FROM token_transfers")}
        salaries = conn.execute("SELECT count(*) FROM transfer_labels WHERE classification ="
                                " 'verified_income' AND payroll_match IS NOT NULL").fetchone()[0]
        unlabelled = conn.execute(
            "SELECT count(*) FROM token_transfers t JOIN wallets w ON w.network = t.network AND"
            " w.address IN (t.from_address, t.to_address) WHERE NOT EXISTS (SELECT 1 FROM transfer_labels l"
            " WHERE l.network = t.network AND l.tx_hash = t.tx_hash AND l.log_index = t.log_index"
            " AND l.wallet_address = w.address)").fetchone()[0]
        records = conn.execute("SELECT count(*) FROM income_records").fetchone()[0]
        pending = conn.execute("SELECT count(*) FROM watched_addresses"
                               " WHERE backfill_done_at IS NULL").fetchone()[0]
    assert stored == data.transfers and 1_400 <= stored <= 2_600
    assert networks <= {name for name, *_ in NETWORKS} and len(data.borrowers) == 20
    assert salaries == 20 * 13 and records == 20 * 13  # a salary a month for 13 months, each with its record
    assert unlabelled == 0 and pending == 0

    settings = bench_settings()
    chosen = data.borrowers[:2]
    vips = await run_vips(database_url, settings, data, chosen)
    assert len(vips.latencies) == 2 and vips.statuses == {"verified": 2}
    vip_users = {b.user_id for b in chosen}

    # The list's count agrees with its rows, whatever the filter.
    engine = create_engine(database_url, pool_size=1)
    try:
        for query in ({}, {"sort": "vip"}, {"q": chosen[0].user_id[4:12]}, {"status": "verified"},
                      {"status": "none"}, {"flagged": "no", "sort": "income"}):
            filters, problems = ListFilters.from_query(query)
            assert not problems
            page = await borrower_page(engine, settings, data.organisation_id, filters, None)
            async with engine.connect() as conn:
                every = (await conn.execute(_filtered(data.organisation_id, filters).select())).all()
            assert page.total == len(every), query
        assert (await borrower_page(engine, settings, data.organisation_id, ListFilters(), None)).total == 20
    finally:
        await engine.dispose()

    runner = web.AppRunner(create_app(settings, database_url), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        base = f"http://127.0.0.1:{port}"
        result = await load([base], data, settings, vip_users, clients=4, requests=60, warmup=4, rate=0.0,
                            limit=20, seed_value=5)
        assert sum(len(v) for v in result["latencies"].values()) == 60
        assert set(result["latencies"]) <= set(KINDS)
        token = await staff_cookie(database_url, data.organisation_id)
        pages = await dashboard(base, token, data, vip_users, 1, seed_value=6)
        assert all(len(times) == 1 for times in pages.values()) and len(pages) == 5
    finally:
        await runner.cleanup()

    database, tables = sizes(pg_url)
    assert database > 0 and "token_transfers" in {name for name, *_ in tables}
