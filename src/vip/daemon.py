"""`vip index`: per enabled network, its follower, backfiller and balance refresher while this daemon leads
the network (one daemon at a time does; the others stand by), the shared jobs (VIPs, labels, approvals,
charges of the networks this daemon has, webhooks), plus /metrics."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Coroutine
from typing import Any

import aiohttp
import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from vip import readiness
from vip.chain.budget import Priority, budget_for
from vip.chain.rpc import RpcClient
from vip.clock import ChainClock, WallClock, clock_for
from vip.config import NetworkConfig, Settings
from vip.indexer.backfill import Backfiller
from vip.indexer.balances import BalanceRefresher
from vip.indexer.fetcher import LogFetcher
from vip.indexer.follower import Follower
from vip.indexer.leadership import NetworkLead
from vip.indexer.ranges import AdaptiveRange
from vip.payments.worker import payment_tasks
from vip.reports.labelling import LabellingJob  # verification: labels without a VIP
from vip.reports.worker import VipReportJob  # verification: VIP generation job
from vip.store.engine import create_engine
from vip.store.transaction_guard import http_trace
from vip.webhooks.worker import DeliveryWorker

log = structlog.get_logger(__name__)


def network_client(settings: Settings, network: NetworkConfig) -> RpcClient:
    """The network's RPC client with its budget (decision 233); its callers take views of it by priority."""
    return RpcClient(network.name, network.rpc_url, settings.rpc,  # type: ignore[arg-type]
                     budget_for(network, settings))


def build_network_tasks(settings: Settings, network: NetworkConfig, engine, rpc: RpcClient):
    """The follower and backfiller of one network (each with its own adaptive range): the follower draws
    from the network's budget first, the backfiller from what the follower leaves."""
    def fetcher(client: RpcClient, initial: int, maximum: int) -> LogFetcher:
        sizer = AdaptiveRange(initial, maximum)
        return LogFetcher(client, network, settings.rpc.max_addresses_per_filter, sizer,
                          settings.indexer.max_logs_per_batch)

    follow = rpc.at(Priority.FOLLOW)
    background = rpc.at(Priority.BACKGROUND)
    return (Follower(network, engine, follow, fetcher(follow, network.initial_block_range,
                                                      network.max_block_range), settings.indexer),
            Backfiller(network, engine, fetcher(background, network.history_initial_block_range,
                                                network.history_max_block_range)))


def network_work(settings: Settings, network: NetworkConfig, engine, rpc: RpcClient):
    """What a daemon runs for a network while it leads it: its follower, backfiller and balance refresher,
    made afresh for each term (a new follower loads the watch set whole after taking the lead)."""
    def work(stop: asyncio.Event) -> list[Coroutine[Any, Any, None]]:
        follower, backfiller = build_network_tasks(settings, network, engine, rpc)
        return [follower.run(stop), backfiller.run(stop),
                balance_refresher(settings, network, engine, rpc).run(stop)]
    return work


def balance_refresher(settings: Settings, network: NetworkConfig, engine, rpc: RpcClient) -> BalanceRefresher:
    """The network's balance refresher, on what the follower and the jobs leave of the budget."""
    return BalanceRefresher(network, engine, rpc.at(Priority.BACKGROUND),
                            max_age_s=settings.indexer.balance_max_age_s)


# The cyclic garbage collector's first threshold: a collection after this many new container objects
# rather than Python's 700 (decision 344).
GC_THRESHOLD = 100_000


def tune_runtime() -> None:
    """Large ranges decode on a worker thread while the event loop feeds PostgreSQL the previous one. A
    short GIL switch interval keeps the loop's I/O turns prompt (the default 5 ms delays each). The VIP
    job builds a `Transfer` and its key tuples for each of tens of thousands of rows a VIP reads; with the
    default threshold the cyclic collector ran every 700 of them over everything alive, a quarter of
    the job's CPU at a lender's scale. The code makes few reference cycles (reference counting frees the
    rest), so collecting them less often costs little memory."""
    sys.setswitchinterval(0.0005)
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


async def _metrics_handler(_: web.Request) -> web.Response:
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _health_handler(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "role": "indexer"})


def _ready_handler(engine, networks: list[NetworkConfig], rpcs: dict[str, RpcClient] | None,
                   gates: dict[str, asyncio.Event] | None = None):
    probe = readiness.CachedReadiness()

    async def handler(_: web.Request) -> web.Response:
        async with aiohttp.ClientSession(trace_configs=[http_trace()]) as http:
            problems = await probe.problems(engine, http, networks, rpcs)
        problems.update(readiness.gate_problems(gates or {}))
        if problems:
            return web.json_response({"status": "not_ready", "role": "indexer", "problems": problems},
                                     status=503)
        return web.json_response({"status": "ok", "role": "indexer"})

    return handler


async def start_metrics_server(host: str, port: int, engine=None, networks: list[NetworkConfig] | None = None,
                               rpcs: dict[str, RpcClient] | None = None,
                               gates: dict[str, asyncio.Event] | None = None) -> web.AppRunner:
    """/metrics, /healthz (liveness) and, given the engine, /readyz (database and RPCs answer; through
    `rpcs`, the networks' budgeted clients, when given; and every gate in `gates` is set: the jobs this
    daemon must have started before it counts as ready, such as its registration as a charge executor)."""
    app = web.Application()
    app.router.add_get("/metrics", _metrics_handler)
    app.router.add_get("/healthz", _health_handler)
    if engine is not None:
        app.router.add_get("/readyz", _ready_handler(engine, networks or [], rpcs, gates))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def run_daemon(settings: Settings, database_url: str, stop: asyncio.Event,
                     networks: list[str] | None = None, serve_metrics: bool = True) -> None:
    """Run until `stop` is set. Each network is independent: one failing RPC stalls only itself."""
    tune_runtime()
    chosen = [n for n in settings.enabled_networks() if networks is None or n.name in networks]
    if not chosen:
        log.warning("no network to index: set an RPC URL (see docs/operations.md)")
    engine = create_engine(database_url, pool_size=4 + 3 * len(chosen))  # one holds each network's lead
    # One client and one budget per network, shared by all its callers (decision 233).
    rpcs = [network_client(settings, n) for n in chosen]
    # What must have happened before /readyz answers 200 (filled by the jobs that start below).
    gates: dict[str, asyncio.Event] = {}
    runner = None
    if serve_metrics:
        runner = await start_metrics_server(settings.daemon.metrics_host, settings.daemon.metrics_port,
                                            engine, chosen, {r.network: r for r in rpcs}, gates)
        log.info("metrics listening", url=f"http://{settings.daemon.metrics_host}:"
                                          f"{settings.daemon.metrics_port}/metrics")
    tasks = []
    for network, rpc in zip(chosen, rpcs, strict=True):
        # One daemon at a time follows a network: the others stand by (decision 300).
        lead = NetworkLead(network.name, engine, network_work(settings, network, engine, rpc),
                           settings.indexer.lead_poll_s)
        tasks.append(asyncio.create_task(lead.run(stop), name=f"lead-{network.name}"))
        log.info("network configured", network=network.name, chain_id=network.chain_id, mode=network.mode,
                 finality=network.finality, finality_depth=network.finality_depth,
                 budget=f"{rpc.budget.units_per_s:g} {rpc.budget.unit}/s")
    # Disbursement: approval confirmation, intent expiry, charge completion.
    jobs = {r.network: r.at(Priority.JOBS) for r in rpcs}
    clock = clock_for(settings, jobs)
    tasks += payment_tasks(settings, engine, jobs, clock, stop, gates)
    # Verification: the VIP generation job (not bound to a network; several daemons share its rows).
    vip_job = VipReportJob(settings, engine, clock, settings.platforms)
    tasks.append(asyncio.create_task(vip_job.run(stop), name="vip-report-job"))
    # Labels between VIPs: records stored, wallets connected, transfers become final (decision 162).
    labelling = LabellingJob(settings, engine, clock, settings.platforms)
    tasks.append(asyncio.create_task(labelling.run(stop), name="labelling-job"))
    # Webhooks (issue 6): the retry schedule runs on the wall clock (receivers recover in real time, not in
    # chain time). The worker stops on `stop` by itself, letting attempts under way finish.
    worker = DeliveryWorker(engine, WallClock(), settings.webhooks, cipher=settings.api.cipher())
    webhooks = asyncio.create_task(worker.run(stop), name="webhooks")
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(clock, ChainClock):
            await clock.close()
        await asyncio.gather(webhooks, return_exceptions=True)
        for rpc in rpcs:
            await rpc.close()
        if runner is not None:
            await runner.cleanup()
        await engine.dispose()
