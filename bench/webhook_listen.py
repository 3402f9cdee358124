"""`vip listen --forward-to`: the lag from an event's commit to its forwarded receipt, and what a stream
costs the API.

What it does:
  1. Creates a fresh, migrated database (embedded pgserver in a temp dir, or a throw-away database on
     `--database-url` / $DATABASE_URL), one organisation and an admin key; starts `vip serve` (no network,
     production secrets of its own, `webhooks.stream_poll_s` from `--poll`) and `vip listen --forward-to`
     a receiver in this process that answers 200 and notes the wall-clock time each event arrives.
  2. Commits `--events` events (record_event, one transaction each) at `--rate` per second and measures,
     per event, receipt time minus the time the commit returned: p50/p99/max.
  3. Prints the figures with the CPU seconds `vip serve` and `vip listen` used per event, and the API's
     CPU while the stream is open and idle (`--idle` seconds).

Run (from the repository root):
    .venv/bin/python bench/webhook_listen.py
    .venv/bin/python bench/webhook_listen.py --events 500 --rate 100 --poll 0.1
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
import urllib.request
from datetime import UTC, datetime

import psutil
from aiohttp import web
from benchdb import throwaway_database

from vip.accounts import keys
from vip.devstack.anvil import free_port
from vip.devstack.console import vip_console_script
from vip.store.engine import create_engine
from vip.store.outbox import record_event


class Receiver:
    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}  # event id -> time.time()
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.arrivals.setdefault(request.headers["Service-Event-Id"], time.time())
        return web.Response(status=200)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
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


def cpu(proc: psutil.Process) -> float:
    return sum(proc.cpu_times()[:2])


async def run(args: argparse.Namespace) -> None:
    with throwaway_database(args.database_url, "vip-bench-listen", ("synchronous_commit",)) as db:
        engine = create_engine(db.url, pool_size=2)
        receiver = Receiver()
        await receiver.start()
        async with engine.begin() as conn:
            org = await keys.ensure_organisation(conn, "bench")
            api_key, _ = await keys.create_key(conn, org, ["admin"])
        port = free_port()
        config = db.tmp / "serve.toml"
        config.write_text(f"[api]\nport = {port}\nhost = \"127.0.0.1\"\n\n"
                          f"[webhooks]\nstream_poll_s = {args.poll}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIP_RPC_", "VIP_API_"))}
        env.update({"DATABASE_URL": db.url, "VIP_CONFIG": str(config), "VIP_LOG_FORMAT": "json",
                    "VIP_TOKEN_KEY": "bench:" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
                    "VIP_STATE_SECRET": secrets.token_urlsafe(32)})
        base_url = f"http://127.0.0.1:{port}"
        log = open(db.tmp / "serve.log", "ab")  # noqa: ASYNC230, SIM115 - handed to the children, once
        serve = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
            [vip_console_script(), "serve", "--allow-no-networks"], env=env, stdout=log,
            stderr=subprocess.STDOUT)
        listen = None
        try:
            def healthy() -> bool:
                try:
                    with urllib.request.urlopen(base_url + "/healthz", timeout=1) as resp:
                        return resp.status == 200
                except OSError:
                    return False

            await wait_until(healthy, 120, "vip serve")
            listen = await asyncio.create_subprocess_exec(
                vip_console_script(), "listen", "--forward-to", receiver.url, "--api-url", base_url,
                "--api-key", api_key, env=env, stdout=asyncio.subprocess.PIPE, stderr=log)
            async with asyncio.timeout(60):
                while not (await listen.stdout.readline()).startswith(b"Ready!"):
                    pass
            drain = asyncio.create_task(listen.stdout.read())  # the listener's lines, unread
            api, listener = psutil.Process(serve.pid), psutil.Process(listen.pid)

            idle_before = cpu(api)
            await asyncio.sleep(args.idle)
            idle_cpu = cpu(api) - idle_before

            api_before, listen_before = cpu(api), cpu(listener)
            committed: list[tuple[str, float]] = []
            started = time.monotonic()
            for i in range(args.events):
                async with engine.begin() as conn:
                    event_id = await record_event(conn, "connection.revoked", {
                        "id": f"con_{i}", "user_id": "usr_bench", "type": "wallet", "status": "revoked"},
                        created_at=datetime.now(UTC), organisation_id=org)
                committed.append((event_id, time.time()))
                delay = started + (i + 1) / args.rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            await wait_until(lambda: len(receiver.arrivals) >= args.events, 300, "the forwarded events")
            api_cpu, listen_cpu = cpu(api) - api_before, cpu(listener) - listen_before
            lags = [receiver.arrivals[event_id] - at for event_id, at in committed]
        finally:
            if listen is not None:
                listen.terminate()
                await listen.wait()
                drain.cancel()
            serve.terminate()
            serve.wait(30)
            await receiver.stop()
            await engine.dispose()

    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, database: {db.source} "
          f"{db.settings}")
    print(f"stream: webhooks.stream_poll_s={args.poll}; one `vip listen --forward-to` a local receiver")
    print(f"{args.events} events at {args.rate:g}/s: lag commit->forwarded receipt "
          f"p50 {1000 * statistics.median(lags):.0f} ms, p99 {1000 * pct(lags, 0.99):.0f} ms, "
          f"max {1000 * max(lags):.0f} ms; CPU per event: vip serve {1000 * api_cpu / args.events:.2f} ms, "
          f"vip listen {1000 * listen_cpu / args.events:.2f} ms")
    print(f"idle stream: vip serve used {100 * idle_cpu / args.idle:.1f}% of a core over {args.idle:g} s")
    print(f"events forwarded: {len(receiver.arrivals)} of {args.events}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0, help="events per second")
    parser.add_argument("--poll", type=float, default=0.25, help="webhooks.stream_poll_s")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds the stream stays idle, measured")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
