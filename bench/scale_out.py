"""Scaling out: charges/s with one `vip index` daemon for two networks or one daemon per network, and API
requests/s and webhook deliveries/s with one `vip serve` and one daemon or two of each, in one run.

What it does (every database is a throw-away one, migrated, on one PostgreSQL server: embedded pgserver in
a temp dir, or the server of `--database-url` / $DATABASE_URL):
  1. Charges, twice (1 daemon, then 2): two fresh Anvils (`local`, chain 31337, and `local2`, 31338,
     automine plus a block every `--block-interval` s, finality depth 2), the contracts on both, one
     organisation and key, `--payouts` borrowers and funded lenders split evenly over the two networks
     (bench/disbursement_throughput.py's seeding), one `vip serve` for both networks (charge_wait_s 10 s)
     and the daemon(s), real processes, holding the operator key: either one `vip index` following both
     networks, or `vip index --network local` and `vip index --network local2` (each the leader and
     charge executor of its network, decision 300). `--in-flight` lanes drive the payouts, alternating
     networks, as a lender backend would (intent, approve(), `approval_confirmed`, POST /v1/charges,
     `succeeded`); charges/s is payouts over the wall clock from the first intent to the last success.
     Then every payout is checked on its chain: one Disbursed log per intent, recipient and lender
     balances exact, the operator's nonce up by exactly the network's payouts, every charge `succeeded`.
  2. API and webhooks, twice (1 `vip serve` and 1 daemon, then 2 and 2), no chain: a fresh database with
     an organisation for the API (no webhook endpoints) and one for webhooks (`--endpoints` endpoints at
     a fast receiver in this process, bench/webhook_delivery.py's).
     - API: the `vip serve` process(es) on their own ports; `--clients` clients send POST
       /v1/events/trigger (a write: one event committed, with its NOTIFY) round robin over the ports,
       each again as soon as answered, until `--events` requests or `--seconds`: requests/s and the
       servers' CPU per request.
     - Webhooks: the servers stopped, the `vip index --allow-no-networks` daemon(s) started (only their
       webhook workers have work) and ready, `--events` events committed in one transaction; deliveries/s
       from that commit to the last receipt, and a check that every event reached every endpoint once.
  3. Prints each figure for 1 and 2 and the ratio 2 / 1, with the load average (os.getloadavg()) before
     and after each part. Exit status 1 when a check fails.

Run (from the repository root):
    .venv/bin/python bench/scale_out.py                                   # 100 payouts, 2,000 events
    .venv/bin/python bench/scale_out.py --payouts 200 --events 4000 --seconds 30
    .venv/bin/python bench/scale_out.py --payouts 4 --events 40 --seconds 5     # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import logging
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import aiohttp
import psutil
from eth_account import Account
from sqlalchemy import func, select
from web3 import Web3

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benches import their neighbours so
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api_transactions_load import wait_ready
from bench.benchdb import BenchDatabase, throwaway_database
from bench.disbursement_throughput import (
    miner,
    paid_exactly_once,
    payout,
    percentile,
    register_funding_wallet,
    seed,
)
from bench.webhook_delivery import DEVELOPMENT, FastReceiver, wait_until
from vip.accounts import keys
from vip.devstack.anvil import AnvilNode, free_port, start_anvil
from vip.devstack.console import vip_console_script
from vip.devstack.deploy import deploy_local_contracts, mint
from vip.logging import configure_logging
from vip.store.engine import create_engine
from vip.store.outbox import record_event
from vip.store.tables import charge_executors, charges, outbox_events
from vip.token_cipher import TokenCipher
from vip.webhooks import store

NETWORKS = (("local", 31337), ("local2", 31338))


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class Window:
    """The load average at a timed part's start and end, and how busy the machine's cores were in it."""

    def __init__(self) -> None:
        self.before = load()
        psutil.cpu_percent(None)  # starts psutil's interval

    def end(self) -> str:
        return f"{self.before} -> {load()}; cores {psutil.cpu_percent(None):.0f}% busy"


@dataclass
class Chain:
    """One network of the charges part: its Anvil, contracts, borrowers and lenders."""
    name: str
    node: AnvilNode
    w3: Web3
    contracts: object
    pairs: list[tuple[str, str]] = field(default_factory=list)
    lenders: list[Account] = field(default_factory=list)
    amounts: list[Decimal] = field(default_factory=list)
    results: list[tuple[float, float, dict]] = field(default_factory=list)


def spawn(tmp: Path, name: str, config: str, env_extra: dict[str, str], argv: list[str]) -> subprocess.Popen:
    """A real `vip` process with its own configuration file and log in `tmp`."""
    (tmp / f"{name}.toml").write_text(config)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VIP_RPC_", "VIP_API_", "VIP_OPERATOR_")) and k != "VIP_CONFIG"}
    env.update(VIP_CONFIG=str(tmp / f"{name}.toml"), VIP_LOG_FORMAT="json", **env_extra)
    with open(tmp / f"{name}.log", "ab") as out:
        return subprocess.Popen([vip_console_script(), *argv], env=env, stdout=out, stderr=subprocess.STDOUT)


async def ready(tmp: Path, procs: list[subprocess.Popen], bases: list[str]) -> None:
    """Until each process answers /healthz; else the end of their logs."""
    try:
        async with aiohttp.ClientSession() as http:
            for base in bases:
                await wait_ready(http, base, 120)
    except RuntimeError as exc:
        stop_all(procs)
        logs = "".join(log.read_text()[-2000:] for log in tmp.glob("*.log"))  # noqa: ASYNC240 - failing
        raise SystemExit(f"{exc}:\n{logs}") from exc


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def network_section(chain: Chain) -> str:
    c = chain.contracts
    return (f"\n[networks.{chain.name}]\nchain_id = {chain.node.chain_id}\n"
            f"rpc_url = \"{chain.node.rpc_url}\"\nlocal = true\nfinality_depth = 2\n"
            f"poll_interval_s = 0.05\nmax_block_range = 1000\n"
            f"initial_block_range = 100\nmode = \"watched\"\nstart_block = 0\n"
            f"disbursement_contract = \"{c.disbursement}\"\n"  # type: ignore[attr-defined]
            f"\n[networks.{chain.name}.tokens.USDC]\naddress = \"{c.usdc}\"\n"  # type: ignore[attr-defined]
            f"\n[networks.{chain.name}.tokens.USDT]\naddress = \"{c.usdt}\"\n")  # type: ignore[attr-defined]


def api_section(port: int) -> str:
    """The API on loopback with the per-key rate limits out of the way."""
    return (f"\n[api]\nhost = \"127.0.0.1\"\nport = {port}\n\n[api.rate_limits]\ndefault_per_key = 1000000\n"
            "transactions_per_key = 1000000\n")


def daemon_config(chains: list[Chain]) -> str:
    """The daemon's tuning of disbursement_throughput.py's in-process daemon, as a configuration file."""
    return (f"[daemon]\nmetrics_port = {free_port()}\n\n[indexer]\nlead_poll_s = 0.2\nlag_grace_s = 0.5\n\n"
            "[rpc]\ntimeout_s = 10\nmax_requests_per_s = 5000\n\n"
            "[disbursement]\ncharge_wait_s = 10\npoll_interval_s = 0.05\n"
            + "".join(network_section(c) for c in chains))


def start_chain(name: str, chain_id: int, count: int, offset: int) -> Chain:
    node = start_anvil(chain_id=chain_id, port=free_port())
    w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 30}))
    deployer, operator_key = node.private_keys[0], node.private_keys[1]
    contracts = deploy_local_contracts(w3, deployer, Account.from_key(operator_key).address,
                                       Account.from_key(deployer).address)
    chain = Chain(name, node, w3, contracts)
    chain.lenders = [Account.create() for _ in range(count)]
    chain.amounts = [Decimal(100 + offset + i) + Decimal(i) / 1000 for i in range(count)]
    node.call("anvil_autoImpersonateAccount", [True])
    for lender, amount in zip(chain.lenders, chain.amounts, strict=True):
        node.call("anvil_setBalance", [lender.address, hex(10**20)])
        mint(w3, contracts.usdc, lender.address, int(amount * 10**6) * 2, deployer)
    return chain


async def wait_executors(url: str, networks: set[str], procs: list[subprocess.Popen]) -> None:
    """Until a daemon announced itself as the charge executor of every network."""
    engine = create_engine(url, pool_size=1)
    try:
        for _ in range(6000):
            async with engine.connect() as conn:
                found = set((await conn.execute(select(charge_executors.c.network))).scalars())
            if found >= networks:
                return
            if any(p.poll() is not None for p in procs):
                raise SystemExit("a daemon exited before announcing itself")
            await asyncio.sleep(0.05)
        raise SystemExit(f"charge executors announced: {sorted(found)}")
    finally:
        await engine.dispose()


async def charges_side(args, server_url: str, daemons: int) -> dict:
    """Part 1 with one daemon for both networks (`daemons` 1) or one per network (2)."""
    per_network = [args.payouts // 2 + args.payouts % 2, args.payouts // 2]
    chains: list[Chain] = []
    procs: list[subprocess.Popen] = []
    stop = asyncio.Event()
    try:
        chains += await asyncio.gather(*(asyncio.to_thread(start_chain, name, chain_id, count, 1000 * n)
                                         for n, ((name, chain_id), count) in enumerate(
                                             zip(NETWORKS, per_network, strict=True))))
        with throwaway_database(server_url, f"vip-bench-scale-charges{daemons}", ()) as db:
            secret = ""
            for chain, count in zip(chains, per_network, strict=True):
                secret, chain.pairs = await seed(db.url, count, chain.name)
            operator_key = chains[0].node.private_keys[1]  # the same dev account operates both contracts
            api_port = free_port()  # one `vip serve` on both networks, as a real process
            procs.append(spawn(db.tmp, "serve", daemon_config(chains) + api_section(api_port),
                               {"DATABASE_URL": db.url}, ["serve"]))
            base = f"http://127.0.0.1:{api_port}"
            env = {"DATABASE_URL": db.url, "VIP_OPERATOR_KEY": operator_key}
            if daemons == 1:
                procs.append(spawn(db.tmp, "index-both", daemon_config(chains), env, ["index"]))
            else:
                procs += [spawn(db.tmp, f"index-{c.name}", daemon_config(chains), env,
                                ["index", "--network", c.name]) for c in chains]
            await ready(db.tmp, procs[:1], [base])
            await wait_executors(db.url, {c.name for c in chains}, procs)
            nonces = [c.w3.eth.get_transaction_count(Account.from_key(operator_key).address) for c in chains]
            async with aiohttp.ClientSession() as session, aiohttp.ClientSession() as http:
                mining = [asyncio.create_task(miner(session, c.node.rpc_url, args.block_interval, stop))
                          for c in chains]
                for chain in chains:  # untimed: each lender registers its funding wallet once
                    for account in chain.lenders:
                        await register_funding_wallet(http, base, secret, account, chain.name)
                queue = [(chain, i) for i in range(max(per_network))
                         for chain in chains if i < len(chain.pairs)]

                async def lane() -> None:
                    while queue:
                        chain, i = queue.pop(0)
                        (user_id, wallet), lender = chain.pairs[i], chain.lenders[i].address
                        chain.results.append(await payout(
                            http, session, base, chain.node.rpc_url, secret, user_id, wallet, lender,
                            chain.amounts[i], chain.name))

                window, cpu_before = Window(), cpu(procs)
                started = time.perf_counter()
                await asyncio.gather(*(lane() for _ in range(args.in_flight)))
                elapsed = time.perf_counter() - started
                measured, vip_cpu = window.end(), cpu(procs) - cpu_before
                stop.set()
                await asyncio.gather(*mining)
            stop_all(procs)
            failures, checked = 0, []
            for chain, before in zip(chains, nonces, strict=True):
                bad, logs = paid_exactly_once(chain.node, chain.w3, chain.contracts, chain.results,
                                              chain.pairs, chain.amounts, [a.address for a in chain.lenders])
                sent = chain.w3.eth.get_transaction_count(Account.from_key(operator_key).address) - before
                failures += bad + (logs != len(chain.pairs)) + (sent != len(chain.pairs))
                checked.append(f"{chain.name}: {logs} Disbursed logs, {sent} operator transactions "
                               f"for {len(chain.pairs)} payouts")
            engine = create_engine(db.url, pool_size=1)
            async with engine.connect() as conn:
                succeeded = await conn.scalar(select(func.count()).select_from(charges).where(
                    charges.c.status == "succeeded"))
            await engine.dispose()
            failures += succeeded != args.payouts
        flows = [r[0] for c in chains for r in c.results]
        return {"rate": args.payouts / elapsed, "seconds": elapsed, "ok": failures == 0,
                "flow_p50": statistics.median(flows), "flow_p90": percentile(flows, 90),
                "check": "; ".join(checked) + f"; {succeeded} charges succeeded",
                "load": measured, "cpu_ms": 1000 * vip_cpu / args.payouts}
    finally:
        stop.set()
        stop_all(procs)
        for chain in chains:
            chain.node.stop()


def cpu(procs: list[subprocess.Popen]) -> float:
    return sum(sum(psutil.Process(p.pid).cpu_times()[:2]) for p in procs)


async def api_requests(args, bases: list[str], api_key: str) -> tuple[int, float, list[float]]:
    """`--clients` closed-loop clients POSTing test events round robin over `bases` until `--events`
    requests or `--seconds`; returns (requests answered, seconds, latencies)."""
    turn = itertools.count()
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    deadline = time.perf_counter() + args.seconds

    async def client(http: aiohttp.ClientSession) -> None:
        while time.perf_counter() < deadline:
            n = next(turn)
            if n >= args.events:
                return
            sent = time.perf_counter()
            async with http.post(f"{bases[n % len(bases)]}/v1/events/trigger", headers=headers,
                                 json={"type": "connection.revoked"}) as resp:
                body = await resp.read()
                if resp.status != 201:
                    raise SystemExit(f"POST /v1/events/trigger answered {resp.status}: {body[:300]!r}")
            latencies.append(time.perf_counter() - sent)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(args.clients)))
        return len(latencies), time.perf_counter() - started, latencies


async def api_side(args, db: BenchDatabase, processes: int) -> dict:
    """Part 2 with `processes` API servers, then as many webhook-delivering daemons, on `db` (organisations
    of their own: the other side's events are all delivered)."""
    token_key = "bench:" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    env = {"VIP_TOKEN_KEY": token_key, "VIP_STATE_SECRET": secrets.token_urlsafe(32)}
    receiver = FastReceiver()
    await receiver.start()
    procs: list[subprocess.Popen] = []
    try:
        env["DATABASE_URL"] = db.url
        engine = create_engine(db.url, pool_size=2)
        now = datetime.now(UTC)
        async with engine.begin() as conn:
            api_org = await keys.ensure_organisation(conn, f"bench-api-{processes}")  # no endpoints
            api_key, _ = await keys.create_key(conn, api_org, ["admin"], "bench")
            hooks_org = await keys.ensure_organisation(conn, f"bench-hooks-{processes}")
            for n in range(args.endpoints):
                await store.create_endpoint(conn, hooks_org, f"{receiver.url}/{n}", None, None, now,
                                            cipher=TokenCipher.from_text(token_key))
        # API: the servers alone.
        ports = [free_port() for _ in range(processes)]
        procs = [spawn(db.tmp, f"serve-{port}", api_section(port), env, ["serve", "--allow-no-networks"])
                 for port in ports]
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        await ready(db.tmp, procs, bases)
        window, cpu_before = Window(), cpu(procs)
        answered, api_s, latencies = await api_requests(args, bases, api_key)
        api_cpu, api_load = cpu(procs) - cpu_before, window.end()
        stop_all(procs)
        # Webhooks: the daemons alone, ready (the API's events fanned out: they have no endpoint).
        metrics = [free_port() for _ in range(processes)]
        config = "[webhooks]\nallow_http = true\n\n[daemon]\nmetrics_port = {}\n" + DEVELOPMENT
        procs = [spawn(db.tmp, f"index-{port}", config.format(port), env,
                       ["index", "--allow-no-networks"]) for port in metrics]
        await ready(db.tmp, procs, [f"http://127.0.0.1:{port}" for port in metrics])
        for _ in range(6000):
            async with engine.connect() as conn:
                if not await conn.scalar(select(func.count()).select_from(outbox_events).where(
                        outbox_events.c.fanned_out_at.is_(None))):
                    break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # every worker listening
        window, cpu_before = Window(), cpu(procs)
        event_ids: list[str] = []
        async with engine.begin() as conn:  # one commit: every worker wakes at once
            for i in range(args.events):
                event_ids.append(await record_event(conn, "connection.revoked", {  # noqa: PERF401
                    "id": f"con_{i}", "user_id": "usr_bench", "type": "wallet", "status": "revoked"},
                    created_at=datetime.now(UTC), organisation_id=hooks_org))
        committed = time.time()
        total = args.events * args.endpoints
        await wait_until(lambda: len(receiver.arrivals) >= total, 600, "the deliveries")
        hooks_s = max(receiver.arrivals.values()) - committed
        hooks_cpu, hooks_load = cpu(procs) - cpu_before, window.end()
        stop_all(procs)
        await engine.dispose()
        missing = sum((e, n) not in receiver.arrivals for e in event_ids for n in range(args.endpoints))
        duplicates = receiver.count - len(receiver.arrivals)
        return {"api_rate": answered / api_s, "api_n": answered, "api_s": api_s,
                "api_p50": statistics.median(latencies), "api_p99": percentile(latencies, 99),
                "api_cpu_ms": 1000 * api_cpu / answered, "api_load": api_load,
                "hooks_rate": total / hooks_s, "hooks_n": total, "hooks_s": hooks_s,
                "hooks_cpu_ms": 1000 * hooks_cpu / total,
                "hooks_load": hooks_load,
                "ok": missing == 0 and duplicates == 0,
                "check": f"{total - missing} of {total} deliveries received, {duplicates} duplicates"}
    finally:
        stop_all(procs)
        await receiver.stop()


def verdict(side: dict) -> str:
    return "exactly once" if side["ok"] else "FAILED"


def ratio(one: float, two: float) -> str:
    return f"{two / one:.2f}" if one else "-"


async def run(args, db: BenchDatabase) -> int:
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}; {load()}", flush=True)
    charged = {}
    if args.payouts:
        for daemons in (1, 2):
            charged[daemons] = await charges_side(args, db.url, daemons)
            c = charged[daemons]
            print(f"charges, {daemons} daemon(s): {args.payouts} payouts in {c['seconds']:.1f} s = "
                  f"{c['rate']:.2f}/s; flow p50 {c['flow_p50']:.2f} s, p90 {c['flow_p90']:.2f} s; "
                  f"vip serve + index CPU {c['cpu_ms']:.0f} ms/payout; "
                  f"{c['load']}\n  check: {c['check']}: {verdict(c)}", flush=True)
    served = {}
    if args.events:
        for processes in (1, 2):
            served[processes] = await api_side(args, db, processes)
            s = served[processes]
            print(f"API, {processes} vip serve: {s['api_n']} POST /v1/events/trigger in {s['api_s']:.1f} s "
                  f"= {s['api_rate']:.0f}/s; p50 {1000 * s['api_p50']:.0f} ms, "
                  f"p99 {1000 * s['api_p99']:.0f} ms; server CPU {s['api_cpu_ms']:.2f} ms/request; "
                  f"{s['api_load']}", flush=True)
            print(f"webhooks, {processes} daemon(s): {s['hooks_n']} deliveries in {s['hooks_s']:.1f} s = "
                  f"{s['hooks_rate']:.0f}/s; daemon CPU {s['hooks_cpu_ms']:.2f} ms/delivery; "
                  f"{s['hooks_load']}\n  check: {s['check']}: {verdict(s)}", flush=True)
    print(f"\n{'figure':<42}{'1':>10}{'2':>10}{'2 / 1':>8}")
    if charged:
        print(f"{'charges/s (1 daemon vs 1 per network)':<42}"
              f"{charged[1]['rate']:>10.2f}{charged[2]['rate']:>10.2f}"
              f"{ratio(charged[1]['rate'], charged[2]['rate']):>8}")
    if served:
        for label, key in (("API requests/s (vip serve processes)", "api_rate"),
                           ("webhook deliveries/s (daemons)", "hooks_rate")):
            print(f"{label:<42}{served[1][key]:>10.0f}{served[2][key]:>10.0f}"
                  f"{ratio(served[1][key], served[2][key]):>8}")
    print(load())
    ok = all(side["ok"] for side in [*charged.values(), *served.values()])
    print("all checks: " + ("exactly once" if ok else "FAILED"))
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payouts", type=int, default=100, help="payouts per side, split over the networks "
                                                                 "(0: skip the charges part)")
    parser.add_argument("--in-flight", type=int, default=20, help="payouts driven at once")
    parser.add_argument("--block-interval", type=float, default=0.25)
    parser.add_argument("--events", type=int, default=2000, help="API requests (at most) and webhook events "
                                                                 "per side (0: skip the API part)")
    parser.add_argument("--seconds", type=float, default=20.0, help="longest the API is driven, per side")
    parser.add_argument("--clients", type=int, default=16, help="concurrent API clients")
    parser.add_argument("--endpoints", type=int, default=2, help="webhook endpoints receiving each event")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    args = parser.parse_args()
    configure_logging("console", logging.WARNING)
    with throwaway_database(args.database_url, "vip-bench-scale", ("max_connections",)) as db:
        print(f"database: {db.source} {db.settings}", flush=True)
        sys.exit(asyncio.run(run(args, db)))


if __name__ == "__main__":
    main()
