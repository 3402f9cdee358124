"""Webhook delivery: deliveries per second to a fast local receiver, and the lag from an event's commit
to its receipt.

What it does:
  1. Creates a fresh, migrated database (embedded pgserver in a temp dir, or a throw-away database on
     `--database-url` / $DATABASE_URL), one organisation and `--endpoints` webhook endpoints (all event
     types), all pointing at one aiohttp receiver in this process that answers 200 at once and notes the
     wall-clock time each event arrives.
  2. Backlog: commits `--backlog` events (record_event, one transaction each) while no daemon runs, then
     starts `vip index` as a subprocess (no network configured: only the webhook worker works) and times
     the deliveries from the first receipt to the last: deliveries/s.
  3. Lag: with the daemon running, commits `--events` events at `--rate` per second and measures, per
     event and endpoint, receipt time minus the time the commit returned: p50/p99/max.
  4. Prints the figures with the daemon's webhook settings (`--poll-interval`, per-endpoint slots) and the
     CPU seconds the daemon used per delivery.

Run (from the repository root):
    .venv/bin/python bench/webhook_delivery.py
    .venv/bin/python bench/webhook_delivery.py --endpoints 8 --backlog 4000 --poll-interval 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import platform
import secrets
import statistics
import subprocess
import time
from datetime import UTC, datetime

import psutil
from aiohttp import web
from benchdb import throwaway_database

from vip.accounts import keys
from vip.devstack.anvil import free_port
from vip.devstack.console import vip_console_script
from vip.store.engine import create_engine
from vip.store.outbox import record_event
from vip.token_cipher import TokenCipher
from vip.webhooks import store

# The receiver is plain http on loopback: a development set-up, so one network is marked local (it has no
# RPC URL: nothing is followed), else the daemon refuses `webhooks.allow_http` as production would.
DEVELOPMENT = "\n[networks.ethereum]\nlocal = true\n"


class FastReceiver:
    def __init__(self) -> None:
        self.arrivals: dict[tuple[str, int], float] = {}  # (event id, endpoint index) -> time.time()
        self.count = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        key = (request.headers["Service-Event-Id"], int(request.match_info["n"]))
        self.arrivals.setdefault(key, time.time())
        self.count += 1
        return web.Response(status=200)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook/{n}", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}/hook"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def run(args: argparse.Namespace) -> None:
    shown = ("shared_buffers", "synchronous_commit")
    with throwaway_database(args.database_url, "vip-bench-webhooks", shown) as db:
        engine = create_engine(db.url, pool_size=4)
        receiver = FastReceiver()
        await receiver.start()
        now = datetime.now(UTC)
        # No local network: the daemon runs as in production, with secrets of its own.
        token_key = "bench:" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
        cipher = TokenCipher.from_text(token_key)
        async with engine.begin() as conn:
            org = await keys.ensure_organisation(conn, "bench")
            for n in range(args.endpoints):
                await store.create_endpoint(conn, org, f"{receiver.url}/{n}", None, None, now, cipher=cipher)

        async def commit(i: int) -> tuple[str, float]:
            async with engine.begin() as conn:
                event_id = await record_event(conn, "connection.revoked", {
                    "id": f"con_{i}", "user_id": "usr_bench", "type": "wallet", "status": "revoked"},
                    created_at=datetime.now(UTC), organisation_id=org)
            return event_id, time.time()

        for i in range(args.backlog):
            await commit(i)
        config = db.tmp / "daemon.toml"
        config.write_text(f"[daemon]\nmetrics_port = {free_port()}\n\n[webhooks]\nallow_http = true\n"
                          f"poll_interval_s = {args.poll_interval}\n" + DEVELOPMENT)
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIP_RPC_")}
        env.update({"DATABASE_URL": db.url, "VIP_CONFIG": str(config), "VIP_LOG_FORMAT": "json",
                    "VIP_TOKEN_KEY": token_key, "VIP_STATE_SECRET": secrets.token_urlsafe(32)})
        log = open(db.tmp / "daemon.log", "ab")  # noqa: ASYNC230, SIM115 - handed to the child, once
        daemon = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
            [vip_console_script(), "index", "--allow-no-networks"], env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
        proc = psutil.Process(daemon.pid)
        try:
            backlog_total = args.backlog * args.endpoints
            await wait_until(lambda: len(receiver.arrivals) >= backlog_total, 600, "the backlog")
            times = sorted(receiver.arrivals.values())
            backlog_s = times[-1] - times[0]
            cpu_before = sum(proc.cpu_times()[:2])

            lags: list[float] = []
            committed: list[tuple[str, float]] = []
            started = time.monotonic()
            for i in range(args.events):
                committed.append(await commit(args.backlog + i))
                delay = started + (i + 1) / args.rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            total = backlog_total + args.events * args.endpoints
            await wait_until(lambda: len(receiver.arrivals) >= total, 300, "the steady-state events")
            cpu_used = sum(proc.cpu_times()[:2]) - cpu_before
            for event_id, at in committed:
                lags += [receiver.arrivals[(event_id, n)] - at for n in range(args.endpoints)]
        finally:
            daemon.terminate()
            daemon.wait(30)
            await receiver.stop()
            await engine.dispose()

    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, database: {db.source} "
          f"{db.settings}")
    print(f"daemon: webhooks.poll_interval_s={args.poll_interval}, max_in_flight_per_endpoint=4 (default), "
          f"{args.endpoints} endpoint(s)")
    print(f"backlog: {backlog_total} deliveries in {backlog_s:.2f} s = {backlog_total / backlog_s:,.0f} "
          f"deliveries/s (first to last receipt)")
    print(f"steady state: {args.events} events at {args.rate:g}/s x {args.endpoints} endpoint(s): "
          f"lag commit->receipt p50 {1000 * statistics.median(lags):.0f} ms, "
          f"p99 {1000 * pct(lags, 0.99):.0f} ms, "
          f"max {1000 * max(lags):.0f} ms; daemon CPU {1000 * cpu_used / len(lags):.2f} ms per delivery")
    print(f"duplicates received: {receiver.count - len(receiver.arrivals)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--endpoints", type=int, default=1)
    parser.add_argument("--backlog", type=int, default=3000, help="events committed before the daemon starts")
    parser.add_argument("--events", type=int, default=1000, help="events committed with the daemon running")
    parser.add_argument("--rate", type=float, default=50.0, help="events per second in the steady state")
    parser.add_argument("--poll-interval", type=float, default=0.2, help="webhooks.poll_interval_s")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
