"""Four networks at their real block rates, each behind a provider stand-in with lagging nodes, 100,000
watched wallets on each registered through `vip watch --file`, followed by the real indexer: calls/s and
budget units/s per network, lag, rows missing and extra, memory and CPU.

What it does:
  1. Starts four Anvils with the real chain ids (ethereum 1, polygon 137, base 8453, arbitrum 42161)
     mining every 12 s, 2 s, 2 s and 0.25 s (times `--scale`; Anvil takes a fractional --block-time),
     deploys the tokens and the TransferSprayer on each, and puts each behind
     `vip.devstack.provider.ProviderStandIn` with a profile (ethereum and arbitrum: alchemy, polygon:
     infura, base: quicknode), each method weighed in the provider's unit, a plan of 1.25 x the daemon's
     budget per second, and four load-balanced nodes of which three trail the head by 1-3 blocks
     (answering eth_getLogs past their heads with nothing, one block's logs missing on a lagging node;
     `--no-lag` for one node). The daemon's budget per network is BUDGETS (config `provider`,
     `rpc_budget_per_s`).
  2. Registers `--watched` wallets per network through the public path: `vip watch NETWORK --file`
     (their history from the first followed block), as an operator onboards them.
  3. Sends traffic on each: every block interval, one spray transaction from one of eight senders to
     `--tps` x block time recipients, of which `--watched-share` are watched wallets and the rest
     addresses from a pool of 50,000 others (the network's configured tokens, alternating).
  4. Runs the indexer's per-network tasks (`vip.daemon.build_network_tasks`: follower and backfiller, plus
     the balance refresher) in a child process, exactly as `vip index` does, with the shipped
     config/networks.toml settings (poll interval, head margin, watched_fetch, finality refresh; the RPC
     URL, tokens, contract and start block pointed at the local chains), its metrics served.
  5. After `--warmup` seconds, measures for `--seconds`: calls per method per network and units of the
     provider's plan (from the stand-ins), units of the daemon's budget per priority (from its /metrics),
     lag sampled every 0.25 s (blocks: the node's head minus the indexed cursor; seconds: how long the
     oldest block not indexed has existed, from a 20 ms head watcher on each Anvil), the child's
     CPU time and RSS. Then stops the traffic, lets the indexer catch up, and checks the rows: every
     token log of the followed blocks touching a watched wallet stored (missing), none else (extra).

Run (from the repository root; about `--seconds` + 90 s):
    .venv/bin/python bench/four_networks.py                                  # 180 s, real block times
    .venv/bin/python bench/four_networks.py --seconds 60 --watched 10000     # a quick look
    .venv/bin/python bench/four_networks.py --head-margin 0 --json /tmp/four.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg
from benchdb import throwaway_database
from index_throughput import Rpc
from web3 import Web3

from vip.chain.contracts import APPROVAL_TOPIC, TRANSFER_TOPIC
from vip.config import load_settings
from vip.devstack.anvil import AnvilNode, free_port, start_anvil
from vip.devstack.deploy import deploy_local_contracts
from vip.devstack.provider import ProviderStandIn

# name: (chain id, real block time s, stand-in profile)
NETWORKS = {"ethereum": (1, 12.0, "alchemy"), "polygon": (137, 2.0, "infura"),
            "base": (8453, 2.0, "quicknode"), "arbitrum": (42161, 0.25, "alchemy")}
# The daemon's budget per network, in its provider's unit per second (`rpc_budget_per_s`): a plan's
# throughput shared between four networks. The stand-in's plan allows 1.25 times as much.
BUDGETS = {"ethereum": 150.0, "polygon": 1_200.0, "base": 200.0, "arbitrum": 600.0}
PLAN_HEADROOM = 1.25
NODE_LAGS = (0, 1, 2, 3)


@dataclass
class Chain:
    name: str
    chain_id: int
    block_time: float
    profile: str
    node: AnvilNode
    rpc: Rpc
    tokens: dict[str, str]  # symbol -> address (the network's configured tokens only)
    sprayer: str
    disbursement: str
    senders: list[str]
    provider: ProviderStandIn | None = None
    watched: list[str] = field(default_factory=list)
    start_block: int = 0
    first_seen: dict[int, float] = field(default_factory=dict)  # block -> monotonic time first seen
    head: int = 0


def setup_chain(name: str, scale: float, log_dir: Path) -> Chain:
    chain_id, real_block_time, profile = NETWORKS[name]
    block_time = real_block_time * scale
    node = start_anvil(chain_id=chain_id, log_path=log_dir / f"anvil-{name}.log",
                       extra_args=["--block-time", f"{block_time:g}"])
    rpc = Rpc(node.rpc_url)
    # Interval mining would make each set-up transaction wait a block: mine on demand meanwhile.
    mining = threading.Event()
    miner = threading.Thread(target=_mine_until, args=(Rpc(node.rpc_url), mining), daemon=True)
    miner.start()
    try:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 60}))
        accounts = [a.lower() for a in rpc("eth_accounts")]
        contracts = deploy_local_contracts(w3, node.private_keys[0], Web3.to_checksum_address(accounts[1]),
                                           Web3.to_checksum_address(accounts[0]))
        shipped = load_settings().networks[name].tokens
        local = {"USDC": contracts.usdc.lower(), "USDT": contracts.usdt.lower()}
        tokens = {symbol: local[symbol] for symbol in shipped}
        senders = accounts[2:10]
        last = None
        for sender in senders:
            for token in tokens.values():
                rpc.send(accounts[0], token, "mint", ["address", "uint256"], [sender, 10**30], 200_000)
                last = rpc.send(sender, token, "approve", ["address", "uint256"],
                                [contracts.sprayer.lower(), 2**255], 200_000)
        while rpc("eth_getTransactionReceipt", [last]) is None:
            time.sleep(0.05)
    finally:
        mining.set()
        miner.join()
    return Chain(name, chain_id, block_time, profile, node, rpc, tokens, contracts.sprayer.lower(),
                 contracts.disbursement.lower(), senders)


def _mine_until(rpc: Rpc, done: threading.Event) -> None:
    while not done.is_set():
        rpc("anvil_mine", ["0x1"])
        time.sleep(0.05)


def random_addresses(rng: random.Random, count: int) -> list[str]:
    return ["0x" + rng.randbytes(20).hex() for _ in range(count)]


def register(chain: Chain, overlay: Path, database_url: str, tmp: Path) -> float:
    """The wallets through `vip watch NETWORK --file` (one transaction, COPY), their history from the
    first followed block; returns the seconds it took."""
    path = tmp / f"wallets-{chain.name}.txt"
    path.write_text("\n".join(chain.watched) + "\n")
    env = {**os.environ, "DATABASE_URL": database_url, "VIP_CONFIG": str(overlay)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "vip.cli", "watch", chain.name, "--file", str(path),
                           "--start-block", str(chain.start_block)], env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"vip watch failed: {done.stderr}")
    return time.monotonic() - started


def budget_units(metrics_url: str) -> dict[tuple[str, str], float]:
    """`vip_rpc_budget_units_total` of the daemon, by (network, priority)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    units: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "vip_rpc_budget_units":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    units[(sample.labels["network"], sample.labels["priority"])] = sample.value
    return units


def traffic(chain: Chain, others: list[str], tps: float, share: float, stop: threading.Event,
            seed: int) -> None:
    """One spray transaction per block interval (at least 0.25 s apart)."""
    rng = random.Random(seed)
    rpc = Rpc(chain.node.rpc_url)
    interval = max(chain.block_time, 0.25)
    per_tx = max(1, round(tps * interval))
    symbols = list(chain.tokens.values())
    i = 0
    while not stop.is_set():
        started = time.monotonic()
        recipients = [rng.choice(chain.watched) if rng.random() < share else rng.choice(others)
                      for _ in range(per_tx)]
        rpc.send(chain.senders[i % len(chain.senders)], chain.sprayer, "spray",
                 ["address", "address[]", "uint256"], [symbols[i % len(symbols)], recipients, 1],
                 100_000 + 40_000 * per_tx)
        i += 1
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def watch_heads(chains: list[Chain], stop: threading.Event) -> None:
    """When each block was first seen (its age is the lag in seconds of a cursor just below it)."""
    rpcs = {c.name: Rpc(c.node.rpc_url) for c in chains}
    while not stop.is_set():
        for c in chains:
            head = int(rpcs[c.name]("eth_blockNumber"), 16)
            now = time.monotonic()
            for n in range(max(c.head + 1, head - 50), head + 1):
                c.first_seen.setdefault(n, now)
            c.head = max(c.head, head)
        stop.wait(0.02)


def cursors(pg_url: str) -> dict[str, int]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return dict(conn.execute("SELECT network, block_number FROM chain_cursors").fetchall())


def token_logs(chain: Chain, first: int, last: int) -> list[dict]:
    logs = []
    for start in range(first, last + 1, 2000):
        logs += chain.rpc("eth_getLogs", [{"fromBlock": hex(start), "toBlock": hex(min(last, start + 1999)),
                                           "address": list(chain.tokens.values()),
                                           "topics": [[TRANSFER_TOPIC, APPROVAL_TOPIC]]}])
    return logs


def stored_rows(pg_url: str, network: str, first: int, last: int) -> set[tuple[str, int]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = set()
        for table in ("token_transfers", "token_approvals"):
            rows |= {(tx, index) for tx, index in conn.execute(
                f"SELECT tx_hash, log_index FROM {table}"
                " WHERE network = %s AND block_number BETWEEN %s AND %s", (network, first, last))}
        return rows


def write_overlay(path: Path, chains: list[Chain], head_margin: int | None, metrics_port: int) -> None:
    lines = []
    for c in chains:
        assert c.provider is not None
        contract = Web3.to_checksum_address(c.disbursement)
        lines += [f"[networks.{c.name}]", f'rpc_url = "{c.provider.url}"', f"start_block = {c.start_block}",
                  f'disbursement_contract = "{contract}"', f'provider = "{c.profile}"',
                  f"rpc_budget_per_s = {BUDGETS[c.name]:g}"]
        if head_margin is not None:
            lines.append(f"head_margin = {head_margin}")
        for symbol, address in c.tokens.items():
            lines += [f"[networks.{c.name}.tokens.{symbol}]",
                      f'address = "{Web3.to_checksum_address(address)}"']
        lines.append("")
    lines += ["[daemon]", f"metrics_port = {metrics_port}", ""]
    path.write_text("\n".join(lines))


# --- the indexer's process --------------------------------------------------------------------------

async def child(overlay: str, database_url: str) -> None:
    """The per-network tasks of `vip index` (run_daemon's loop for each network), until SIGTERM."""
    from vip.daemon import (
        balance_refresher,
        build_network_tasks,
        network_client,
        start_metrics_server,
        tune_runtime,
    )
    from vip.logging import configure_logging
    from vip.store.engine import create_engine

    configure_logging("console")
    tune_runtime()
    settings = load_settings(extra_files=[Path(overlay)])
    engine = create_engine(database_url)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    runner = await start_metrics_server("127.0.0.1", settings.daemon.metrics_port)
    rpcs, tasks = [], []
    for network in settings.enabled_networks():
        rpc = network_client(settings, network)  # the network's budget, shared by its callers
        rpcs.append(rpc)
        follower, backfiller = build_network_tasks(settings, network, engine, rpc)
        tasks += [asyncio.create_task(follower.run(stop)), asyncio.create_task(backfiller.run(stop)),
                  asyncio.create_task(balance_refresher(settings, network, engine, rpc).run(stop))]
    await stop.wait()
    await runner.cleanup()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for rpc in rpcs:
        await rpc.close()
    await engine.dispose()


# --- figures ----------------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=180.0, help="measured window (default 180)")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before measuring (default 20)")
    parser.add_argument("--scale", type=float, default=1.0, help="block times x this (default 1: real)")
    parser.add_argument("--watched", type=int, default=100_000, help="watched wallets per network")
    parser.add_argument("--tps", type=float, default=20.0, help="token transfers per second per network")
    parser.add_argument("--watched-share", type=float, default=0.05,
                        help="share of transfers to a watched wallet (default 0.05)")
    parser.add_argument("--head-margin", type=int, default=None,
                        help="override every network's head_margin (default: the shipped values)")
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--no-lag", action="store_true", help="one node per provider (no lagging nodes)")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.child, args.database_url))
        return

    rng = random.Random(2026)
    chains: list[Chain] = []
    stop_traffic, stop_watch = threading.Event(), threading.Event()
    proc: subprocess.Popen | None = None
    with throwaway_database(args.database_url, "four-networks", ("shared_buffers",)) as db:
        log_dir = db.tmp
        try:
            print(f"starting {len(args.networks)} networks (block times x {args.scale:g}) ...", flush=True)
            for name in args.networks:
                chain = setup_chain(name, args.scale, log_dir)
                chain.provider = ProviderStandIn(
                    chain.node.rpc_url, chain.profile, node_lags=(0,) if args.no_lag else NODE_LAGS,
                    missing_log_blocks=0 if args.no_lag else 1, units_per_s=BUDGETS[name] * PLAN_HEADROOM,
                    # A lagging node has every block out for three block times.
                    catch_up_s=3 * chain.block_time).__enter__()
                chains.append(chain)
            others = random_addresses(rng, 50_000)
            for chain in chains:
                chain.watched = random_addresses(rng, args.watched)
                chain.start_block = int(chain.rpc("eth_blockNumber"), 16) + 1
            overlay = log_dir / "networks.bench.toml"
            metrics_port = free_port()
            write_overlay(overlay, chains, args.head_margin, metrics_port)
            settings = load_settings(extra_files=[overlay])
            for chain in chains:
                took = register(chain, overlay, db.url, log_dir)
                print(f"{chain.name}: {args.watched:,} wallets registered by `vip watch --file` in "
                      f"{took:.1f} s", flush=True)
            threads = [threading.Thread(target=traffic, args=(c, others, args.tps, args.watched_share,
                                                              stop_traffic, i), daemon=True)
                       for i, c in enumerate(chains)]
            threads.append(threading.Thread(target=watch_heads, args=(chains, stop_watch), daemon=True))
            for t in threads:
                t.start()
            log_file = (log_dir / "indexer.log").open("wb")
            proc = subprocess.Popen([sys.executable, __file__, "--child", str(overlay),
                                     "--database-url", db.url], stdout=log_file, stderr=subprocess.STDOUT)
            child_ps = psutil.Process(proc.pid)
            time.sleep(args.warmup)
            if proc.poll() is not None:
                raise RuntimeError(f"indexer exited: see {log_dir / 'indexer.log'}")

            calls0 = {c.name: Counter(c.provider.calls) for c in chains}  # type: ignore[union-attr]
            units0 = {c.name: c.provider.units for c in chains}  # type: ignore[union-attr]
            metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
            budget0 = budget_units(metrics_url)
            cpu0, t0 = sum(child_ps.cpu_times()[:2]), time.monotonic()
            lag_blocks: dict[str, list[int]] = {c.name: [] for c in chains}
            lag_s: dict[str, list[float]] = {c.name: [] for c in chains}
            rss: list[int] = []
            print(f"measuring for {args.seconds:g} s ...", flush=True)
            while time.monotonic() - t0 < args.seconds:
                indexed = cursors(db.pg_url)
                now = time.monotonic()
                for c in chains:
                    cursor = indexed.get(c.name, c.start_block - 1)
                    lag_blocks[c.name].append(max(0, c.head - cursor))
                    waiting = c.first_seen.get(cursor + 1) if cursor < c.head else None
                    lag_s[c.name].append(now - waiting if waiting is not None else 0.0)
                rss.append(child_ps.memory_info().rss)
                time.sleep(0.25)
            elapsed = time.monotonic() - t0
            cpu = sum(child_ps.cpu_times()[:2]) - cpu0
            calls = {c.name: Counter(c.provider.calls) - calls0[c.name] for c in chains}  # type: ignore[union-attr]
            units = {c.name: c.provider.units - units0[c.name] for c in chains}  # type: ignore[union-attr]
            budget1 = budget_units(metrics_url)
            refusals = {c.name: dict(c.provider.refusals) for c in chains}  # type: ignore[union-attr]
            lagged = {c.name: c.provider.lagged_requests / max(c.provider.http_requests, 1)  # type: ignore[union-attr]
                      for c in chains}

            stop_traffic.set()
            for t in threads[:-1]:
                t.join()
            time.sleep(max(c.block_time for c in chains) * 2 + 3)  # the last traffic mined and indexed
            indexed = cursors(db.pg_url)
        finally:
            stop_traffic.set()
            stop_watch.set()
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            for c in chains:
                if c.provider is not None:
                    c.provider.__exit__(None, None, None)

        results = []
        for c in chains:
            last = indexed[c.name]
            keys = {a[2:] for a in c.watched} | {c.disbursement[2:]}
            expected = {(lg["transactionHash"].lower(), int(lg["logIndex"], 16))
                        for lg in token_logs(c, c.start_block, last)
                        if len(lg["topics"]) == 3
                        and (lg["topics"][1][-40:] in keys or lg["topics"][2][-40:] in keys)}
            all_logs = len(token_logs(c, c.start_block, last))
            stored = stored_rows(db.pg_url, c.name, c.start_block, last)
            network = settings.networks[c.name]
            by_method = {m: n / elapsed for m, n in sorted(calls[c.name].items())}
            total = sum(by_method.values())
            by_priority = {p: round((budget1.get((c.name, p), 0) - budget0.get((c.name, p), 0)) / elapsed, 1)
                           for p in ("follow", "jobs", "background")}
            results.append({
                "network": c.name, "chain_id": c.chain_id, "block_time_s": c.block_time, "profile": c.profile,
                "poll_interval_s": network.poll_interval_s, "head_margin": network.head_margin,
                "watched_fetch": network.watched_fetch, "watched": len(c.watched),
                "calls_per_s": round(total, 2), "calls_per_day": round(total * 86400),
                "calls_by_method_per_s": {m: round(v, 2) for m, v in by_method.items()},
                "budget_per_s": BUDGETS[c.name], "unit": settings.providers[c.profile].unit,
                "units_per_s": round(units[c.name] / elapsed, 1), "units_by_priority_per_s": by_priority,
                "lagged_share": round(lagged[c.name], 2), "refusals": refusals[c.name],
                "lag_blocks_p50": percentile(lag_blocks[c.name], 0.5),
                "lag_blocks_max": max(lag_blocks[c.name]),
                "lag_s_p50": round(percentile(lag_s[c.name], 0.5), 2),
                "lag_s_max": round(max(lag_s[c.name]), 2),
                "blocks_followed": last - c.start_block + 1, "token_logs": all_logs,
                "rows_expected": len(expected), "rows_stored": len(stored),
                "rows_missing": len(expected - stored), "rows_extra": len(stored - expected),
            })
        summary = {"seconds": round(elapsed, 1), "scale": args.scale, "tps": args.tps,
                   "watched_share": args.watched_share, "database": db.source,
                   "calls_per_s_total": round(sum(r["calls_per_s"] for r in results), 2),
                   "cpu_percent_one_core": round(100 * cpu / elapsed, 1),
                   "rss_mb_max": round(max(rss) / 2**20, 1),
                   "rss_mb_p50": round(statistics.median(rss) / 2**20, 1),
                   "networks": results}
        report(summary)
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2))


def report(s: dict) -> None:
    print(f"\n{s['seconds']:g} s measured, block times x {s['scale']:g}, "
          f"{s['tps']:g} transfers/s per network, {100 * s['watched_share']:g}% to watched wallets; "
          f"database: {s['database']}")
    print(f"{'network':<9} {'block s':>7} {'profile':<9} {'poll s':>6} {'margin':>6} {'calls/s':>8} "
          f"{'calls/day':>10} {'lag blk p50/max':>16} {'lag s p50/max':>14} {'rows stored/expected':>21} "
          f"{'missing':>7} {'extra':>5}")
    for r in s["networks"]:
        print(f"{r['network']:<9} {r['block_time_s']:>7g} {r['profile']:<9} {r['poll_interval_s']:>6g} "
              f"{r['head_margin']:>6} {r['calls_per_s']:>8.2f} {r['calls_per_day']:>10,} "
              f"{r['lag_blocks_p50']:>7}/{r['lag_blocks_max']:<8} "
              f"{r['lag_s_p50']:>6.2f}/{r['lag_s_max']:<7.2f} "
              f"{r['rows_stored']:>10,}/{r['rows_expected']:<10,} "
              f"{r['rows_missing']:>7} {r['rows_extra']:>5}")
    for r in s["networks"]:
        methods = ", ".join(f"{m} {v:.2f}" for m, v in r["calls_by_method_per_s"].items())
        print(f"  {r['network']}: {methods}; {r['blocks_followed']} blocks, {r['token_logs']:,} token logs")
    print(f"{'network':<9} {'budget':>18} {'spent/s':>8} {'follow':>7} {'jobs':>6} {'backgr.':>7} "
          f"{'lagged':>7}  refusals")
    for r in s["networks"]:
        p = r["units_by_priority_per_s"]
        verdict = "within" if r["units_per_s"] <= r["budget_per_s"] else "OVER"
        print(f"{r['network']:<9} {r['budget_per_s']:>7g} {r['unit']:<10} {r['units_per_s']:>8.1f} "
              f"{p['follow']:>7.1f} {p['jobs']:>6.1f} {p['background']:>7.1f} {r['lagged_share']:>7.0%}  "
              f"{r['refusals']} ({verdict} budget)")
    total = s["calls_per_s_total"]
    missing = sum(r["rows_missing"] for r in s["networks"])
    extra = sum(r["rows_extra"] for r in s["networks"])
    print(f"total {total:.2f} calls/s, {round(total * 86400):,} calls/day; rows missing {missing}, "
          f"extra {extra}")
    print(f"indexer process: CPU {s['cpu_percent_one_core']}% of one core, RSS p50 {s['rss_mb_p50']} MB, "
          f"max {s['rss_mb_max']} MB")


if __name__ == "__main__":
    main()
